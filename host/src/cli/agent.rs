//! What `wasmclaw run` and `wasmclaw chat` share: the agent flags and the
//! core they start.

use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;

use crate::agent::Agent;
use crate::bus::EventBus;
use crate::config::Config;
use crate::config::overrides::AgentFlags;
use crate::core::Core;
use crate::home::{Home, HomeLock};
use crate::plugin::Plugins;
use crate::store::Store;

/// Which agent and model, how its turns run, and the session.
#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    #[command(flatten)]
    pub flags: AgentFlags,
    /// The session to continue; default: a new one.
    #[arg(long, value_name = "KEY")]
    pub session: Option<String>,
}

/// The core with everything it needs: the home locked for this process,
/// store open, the event log writing, plugins loaded (with `scan`; without,
/// they are not: a watch's first pass loads them), turns run by the
/// scheduler `config` sets. Its agent is the one `config` runs (one model
/// chain, one [`crate::agent::AgentConfig`]). The lock is held as long as
/// the returned [`HomeLock`] lives.
pub async fn start(home: &Home, config: &Config, scan: bool) -> Result<(Core, HomeLock)> {
    let profiles = Arc::new(config.clone()).profiles(crate::config::process_env)?;
    let lock = home.lock()?;
    let store = Store::open(&home.sessions_db())?;
    let bus = EventBus::new(store.last_seq().context("reading the event log")?);
    let runtime = super::runtime(home, config)?;
    let dir = &config.plugins.dir;
    let plugins = if scan {
        Plugins::load_dir(runtime, dir).await
    } else {
        Plugins::unscanned(runtime, dir)
    };
    let max_subturns = config.limits.max_subturns;
    let mcp = crate::mcp::client::start(&config.mcp_client, &plugins, &bus);
    // The servers' first answers, so a turn starting now sees their tools.
    let wait = std::time::Duration::from_secs(config.mcp_client.startup_wait_secs);
    futures_util::future::join_all(mcp.iter().map(|server| server.settled(wait))).await;
    let agent = Agent::with_mcp(plugins, profiles, bus, store, max_subturns, mcp);
    Ok((Core::new(Arc::new(agent), config.scheduler_config()), lock))
}

pub(super) fn session_key(args: &AgentArgs, kind: &str) -> String {
    args.session
        .clone()
        .unwrap_or_else(|| format!("{kind}-{}", uuid::Uuid::now_v7().simple()))
}
