//! Reaching a server: its transport (a child process over stdio, or
//! streamable HTTP), the handshake and its first tool list.
//!
//! The handshake is rmcp's lifecycle: `server/discover` for the stateless
//! 2026-07-28 revision, `initialize` for 2025-11-25, or (by default) the
//! first falling back to the second ([`lifecycle`]).

use std::collections::VecDeque;
use std::process::Stdio;
use std::str::FromStr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::model::{ClientConfig, ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, NotificationContext, Peer,
    RunningService, Subscription,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient};
use tokio::io::AsyncBufReadExt;
use tokio::task::JoinHandle;

use super::server::{McpServer, STDERR_LINES};
use crate::config::mcp::servers::ProtocolToml;

/// What the client answers the server with: its info (the revision
/// `initialize` asks for) and the `tools/list_changed` refresh.
#[derive(Clone)]
pub(super) struct Handler {
    server: Weak<McpServer>,
    info: ClientConfig,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        tokio::spawn(refresh(self.server.clone(), context.peer));
    }
}

/// Lists the server's tools again and offers the new list.
async fn refresh(server: Weak<McpServer>, peer: Peer<RoleClient>) {
    match peer.list_all_tools().await {
        Ok(list) => {
            if let Some(server) = server.upgrade() {
                tracing::info!(server = %server.name, tools = list.len(), "MCP server's tool list changed");
                server.set_list(list);
            }
        }
        Err(e) => tracing::warn!(error = %e, "listing an MCP server's tools again failed"),
    }
}

/// At 2026-07-28 a change of the server's tools is told only on a
/// `subscriptions/listen` stream the client opened: this opens one for
/// `tools/list_changed` (before the server is offered, so no change is
/// missed) and then refreshes the list on each, until the stream ends.
async fn listen(
    server: &Arc<McpServer>,
    peer: &Peer<RoleClient>,
    wait: Duration,
) -> Option<JoinHandle<()>> {
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let error = match tokio::time::timeout(wait, peer.listen(filter)).await {
        Ok(Ok(subscription)) => {
            let relisting = relist(Arc::downgrade(server), peer.clone(), subscription);
            return Some(tokio::spawn(relisting));
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {} s", wait.as_secs()),
    };
    tracing::warn!(server = %server.name, %error, "MCP server did not open subscriptions/listen; its tool list is not refreshed");
    None
}

/// Refreshes the tool list on each `tools/list_changed` of `subscription`.
async fn relist(server: Weak<McpServer>, peer: Peer<RoleClient>, mut subscription: Subscription) {
    while let Ok(Some(notification)) = subscription.next().await {
        if let ServerNotification::ToolListChangedNotification(_) = notification {
            tokio::spawn(refresh(server.clone(), peer.clone()));
        }
    }
}

/// A running connection.
pub(super) struct Connection {
    pub running: RunningService<RoleClient, Handler>,
    /// Reads the child's stderr into the tail until it closes.
    pub stderr: Option<JoinHandle<()>>,
    /// The `subscriptions/listen` stream of a 2026-07-28 connection.
    pub listener: Option<JoinHandle<()>>,
    pub list: Vec<rmcp::model::Tool>,
    pub protocol: String,
}

/// A handshake's outcome within its wait, `None` past it.
type Handshake = Option<Result<RunningService<RoleClient, Handler>, ClientInitializeError>>;

/// How the handshake goes: the revision pinned by `protocol`, else a
/// `server/discover` probe for 2026-07-28 that falls back to `initialize`
/// at 2025-11-25 when the server refuses the method (or, rmcp's bound,
/// does not answer it within 10 s). A server whose last probe went
/// unanswered (`legacy`) is spoken to with `initialize` at once.
fn lifecycle(protocol: Option<ProtocolToml>, legacy: bool) -> ClientLifecycleMode {
    match (protocol, legacy) {
        (Some(ProtocolToml::V2025_11_25), _) | (None, true) => ClientLifecycleMode::Initialize,
        (Some(ProtocolToml::V2026_07_28), _) => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        (None, false) => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        },
    }
}

/// Starts (or reaches) the server, shakes hands and lists its tools.
///
/// The handshake takes at most the startup wait. A server that neither
/// answers nor refuses the `server/discover` probe by then cannot be told
/// from one still starting, so it is not cut short: it fails, and its
/// next start (the supervisor's, after the backoff) speaks `initialize`
/// alone. Once that works its restarts skip the probe; if that fails too,
/// the next start probes again.
pub(super) async fn connect(
    server: &Arc<McpServer>,
    tail: Arc<Mutex<VecDeque<String>>>,
) -> Result<Connection, String> {
    let wait = server.startup_wait;
    let legacy = server.legacy.load(Relaxed);
    let mode = lifecycle(server.settings.protocol, legacy);
    let probing = matches!(mode, ClientLifecycleMode::Auto { .. });
    let (running, stderr) = handshake(server, &tail, mode, wait).await?;
    if legacy && !matches!(running, Some(Ok(_))) {
        server.legacy.store(false, Relaxed);
    }
    let running = match running {
        None if probing => {
            server.legacy.store(true, Relaxed);
            return Err(format!(
                "no answer to server/discover within {} s; the next start tries initialize alone",
                wait.as_secs()
            ));
        }
        None => {
            return Err(format!(
                "no answer to the handshake within {} s",
                wait.as_secs()
            ));
        }
        Some(Err(e)) => return Err(format!("the handshake failed: {e}")),
        Some(Ok(running)) => running,
    };
    let version = (running.peer().peer_info()).map(|info| info.protocol_version.clone());
    let protocol = version.as_ref().map(|v| v.to_string()).unwrap_or_default();
    let list = match tokio::time::timeout(wait, running.peer().list_all_tools()).await {
        Err(_) => {
            return Err(format!(
                "no answer to tools/list within {} s",
                wait.as_secs()
            ));
        }
        Ok(Err(e)) => return Err(format!("tools/list failed: {e}")),
        Ok(Ok(list)) => list,
    };
    let listener = match version.is_some_and(|v| !v.has_initialize()) {
        true => listen(server, running.peer(), wait).await,
        false => None,
    };
    Ok(Connection {
        running,
        stderr,
        listener,
        list,
        protocol,
    })
}

/// Opens the server's transport and shakes hands the way of `mode`, for
/// at most `wait` (a child that timed out is killed as its transport drops).
async fn handshake(
    server: &Arc<McpServer>,
    tail: &Arc<Mutex<VecDeque<String>>>,
    mode: ClientLifecycleMode,
    wait: Duration,
) -> Result<(Handshake, Option<JoinHandle<()>>), String> {
    let settings = &server.settings;
    let mut info = ClientConfig::default();
    // What `initialize` asks for; `server/discover` names its own revision.
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    let handler = Handler {
        server: Arc::downgrade(server),
        info,
    };
    match (&settings.command, &settings.url) {
        (Some(command), None) => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(settings.args.iter().flatten());
            cmd.envs(settings.env.iter().flatten());
            if let Some(cwd) = &settings.cwd {
                cmd.current_dir(cwd);
            }
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("could not start {command:?}: {e}"))?;
            let stderr = stderr.map(|stderr| tokio::spawn(read_stderr(stderr, tail.clone())));
            let running = handler.serve_with_lifecycle(transport, mode);
            Ok((tokio::time::timeout(wait, running).await.ok(), stderr))
        }
        (None, Some(url)) => {
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            for (header, var) in settings.headers_env.iter().flatten() {
                let value = std::env::var(var)
                    .map_err(|_| format!("header {header:?}: the variable {var} is not set"))?;
                let name = reqwest::header::HeaderName::from_str(header)
                    .map_err(|e| format!("header {header:?}: {e}"))?;
                let value = reqwest::header::HeaderValue::from_str(&value)
                    .map_err(|e| format!("header {header:?} (from {var}): {e}"))?;
                config.custom_headers.insert(name, value);
            }
            let transport = StreamableHttpClientTransport::from_config(config);
            let running = handler.serve_with_lifecycle(transport, mode);
            Ok((tokio::time::timeout(wait, running).await.ok(), None))
        }
        _ => Err("expected exactly one of `command` (stdio) and `url` (streamable HTTP)".into()),
    }
}

/// Keeps the last lines of the child's stderr.
async fn read_stderr(stderr: tokio::process::ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
        if tail.len() == STDERR_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_picks_the_handshake() {
        let modern = || vec![ProtocolVersion::V_2026_07_28];
        assert_eq!(
            lifecycle(None, false),
            ClientLifecycleMode::Auto {
                preferred_versions: modern(),
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            }
        );
        assert_eq!(lifecycle(None, true), ClientLifecycleMode::Initialize);
        let legacy = Some(ProtocolToml::V2025_11_25);
        assert_eq!(lifecycle(legacy, false), ClientLifecycleMode::Initialize);
        let pinned = Some(ProtocolToml::V2026_07_28);
        let discover = ClientLifecycleMode::Discover {
            preferred_versions: modern(),
        };
        assert_eq!(lifecycle(pinned, true), discover);
    }
}
