//! `wasmclaw serve`: the HTTP API on a socket, until SIGINT or SIGTERM.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;
use tokio::signal::unix::{SignalKind, signal};

use crate::config::Config;
use crate::config::overrides::{AgentFlags, ServerFlags};
use crate::config::watch::Loader;
use crate::home::Home;
use crate::server::{self, Api, auth};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The agent of sessions that name none, and its model. Clients name
    /// sessions in the URL, so `serve` takes no `--session`.
    #[command(flatten)]
    pub agent: AgentFlags,
    #[command(flatten)]
    pub server: ServerFlags,
    /// The bearer token clients must send (or the variable `[server]
    /// token_env` names, default WASMCLAW_API_TOKEN); default: the one in
    /// HOME/api-token, made and printed at the first start.
    #[arg(long)]
    pub token: Option<String>,
}

pub async fn serve(
    home: &Home,
    config: &Config,
    loader: Loader,
    args: &ServeArgs,
) -> Result<ExitCode> {
    let var = &config.server.token_env;
    let given = match &args.token {
        Some(token) => Some((token.clone(), "--token".to_string())),
        None => std::env::var(var).ok().map(|token| (token, var.clone())),
    };
    let token = match given {
        Some((token, _)) if !token.trim().is_empty() => token.trim().to_string(),
        Some((_, from)) => bail!("{from} (the API token) is empty"),
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
    let (core, _home) = super::agent::start(home, config, false).await?;
    let _watch = core.watch_plugins()?;
    core.announce_mcp();
    let _reload = crate::config::watch::watch(core.clone(), loader, config.clone())?;
    let listen = &config.server.listen;
    let listener = tokio::net::TcpListener::bind(listen.as_str())
        .await
        .with_context(|| format!("listening on {listen}"))?;
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
    server::serve(listener, Api::new(core, config.server_config(token)), stop).await?;
    Ok(ExitCode::SUCCESS)
}
