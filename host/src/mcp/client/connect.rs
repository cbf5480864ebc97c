//! Reaching a server: its transport (a child process over stdio, or
//! streamable HTTP), the handshake and its first tool list.

use std::collections::VecDeque;
use std::process::Stdio;
use std::str::FromStr;
use std::sync::{Arc, Mutex, Weak};

use rmcp::model::{ClientConfig, ProtocolVersion};
use rmcp::service::{NotificationContext, Peer, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::AsyncBufReadExt;
use tokio::task::JoinHandle;

use super::server::{McpServer, STDERR_LINES};

/// What the client answers the server with: its info (the protocol
/// revision asked for) and the `tools/list_changed` refresh.
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

/// A running connection.
pub(super) struct Connection {
    pub running: RunningService<RoleClient, Handler>,
    /// Reads the child's stderr into the tail until it closes.
    pub stderr: Option<JoinHandle<()>>,
    pub list: Vec<rmcp::model::Tool>,
    pub protocol: String,
}

/// Starts (or reaches) the server, shakes hands and lists its tools.
pub(super) async fn connect(
    server: &Arc<McpServer>,
    tail: Arc<Mutex<VecDeque<String>>>,
) -> Result<Connection, String> {
    let settings = &server.settings;
    let mut info = ClientConfig::default();
    if let Some(protocol) = &settings.protocol {
        info.protocol_version = serde_json::from_value::<ProtocolVersion>(protocol.clone().into())
            .map_err(|e| format!("protocol {protocol:?}: {e}"))?;
    }
    let handler = Handler {
        server: Arc::downgrade(server),
        info,
    };
    let wait = server.startup_wait;
    let (running, stderr) = match (&settings.command, &settings.url) {
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
            let stderr = stderr.map(|stderr| tokio::spawn(read_stderr(stderr, tail)));
            let running = tokio::time::timeout(wait, handler.serve(transport)).await;
            (running, stderr)
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
            (
                tokio::time::timeout(wait, handler.serve(transport)).await,
                None,
            )
        }
        _ => {
            return Err(
                "expected exactly one of `command` (stdio) and `url` (streamable HTTP)".into(),
            );
        }
    };
    let running = match running {
        Err(_) => {
            return Err(format!(
                "no answer to the handshake within {} s",
                wait.as_secs()
            ));
        }
        Ok(Err(e)) => return Err(format!("the handshake failed: {e}")),
        Ok(Ok(running)) => running,
    };
    let protocol = (running.peer().peer_info())
        .map(|info| info.protocol_version.to_string())
        .unwrap_or_default();
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
    Ok(Connection {
        running,
        stderr,
        list,
        protocol,
    })
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
