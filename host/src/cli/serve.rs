//! `wasmclaw serve`: the HTTP API on a socket, until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use tokio::signal::unix::{SignalKind, signal};

use super::agent::AgentArgs;
use crate::home::Home;
use crate::scheduler::{DEFAULT_MAX_PARALLEL, SchedulerConfig};
use crate::server::{self, Api, DEFAULT_LISTEN, ServerConfig, auth};

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub agent: AgentArgs,
    /// The address to listen on. Anything but loopback exposes the API to
    /// the network (the token still guards it).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// The bearer token clients must send; default: the one in
    /// HOME/api-token, made and printed at the first start.
    #[arg(long, env = "WASMCLAW_API_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Turns that run at the same time, across sessions.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_PARALLEL)]
    pub max_parallel: usize,
    /// Largest request body accepted, in KiB.
    #[arg(long, value_name = "KIB", default_value_t = 1024)]
    pub max_body_kib: usize,
    /// At shutdown, how long running turns may take to wind down before
    /// they are stopped.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub shutdown_grace: f64,
}

pub async fn serve(
    home: &Home,
    plugin_dir: &Path,
    load: super::RuntimeLimits,
    args: &ServeArgs,
) -> Result<ExitCode> {
    if args.agent.session.is_some() {
        bail!("--session does not apply to serve: clients name sessions in the URL");
    }
    if !(args.shutdown_grace >= 0.0 && args.shutdown_grace.is_finite()) {
        bail!("--shutdown-grace must be a number of seconds, 0 or more");
    }
    let token = match args.token.as_deref().map(str::trim) {
        Some("") => bail!("--token (or WASMCLAW_API_TOKEN) is empty"),
        Some(token) => token.to_string(),
        None => {
            let path = home.api_token();
            let (token, made) = auth::load_or_create(&path)?;
            if made {
                println!("API token (kept in {}): {token}", path.display());
            }
            token
        }
    };
    // The API answers while plugins load: the watch's first pass loads
    // them and publishes each as `plugin_loaded` or `plugin_failed`; turns
    // wait for it.
    let schedule = SchedulerConfig {
        max_parallel: args.max_parallel,
        ..SchedulerConfig::default()
    };
    let (core, _home) =
        super::agent::start(home, plugin_dir, load, &args.agent, false, schedule).await?;
    let _watch = core.watch_plugins()?;
    let config = ServerConfig {
        max_body_bytes: args.max_body_kib.saturating_mul(1024),
        shutdown_grace: Duration::from_secs_f64(args.shutdown_grace),
        ..ServerConfig::new(token)
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        eprintln!("warning: the API is reachable from the network on {addr}");
    }
    println!("wasmclaw serving on http://{addr}");
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let stop = async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        eprintln!("shutting down: running turns wind down, then the event log is flushed");
    };
    server::serve(listener, Api::new(core, config), stop).await?;
    Ok(ExitCode::SUCCESS)
}
