//! Keeping a server running: start it, report it, and when it fails or
//! stops, report that (with its stderr tail) and start it again after a
//! backoff (0.5 s, doubling to 30 s; back to 0.5 s once it started).

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use wasmclaw_protocol::{EventBody, McpServerFailed, McpServerReady};

use super::connect::connect;
use super::server::{McpServer, Status};
use crate::bus::{EventBus, Scope};

const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Publishes `body` once the server's events may go out, after the one
/// before it (`previous`): held events keep their order, and holding them
/// never stops the supervisor (a front end that never announces the
/// servers still has them restarted).
fn publish(
    server: &Arc<McpServer>,
    bus: &EventBus,
    previous: Option<JoinHandle<()>>,
    body: EventBody,
) -> Option<JoinHandle<()>> {
    let previous = previous.filter(|p| !p.is_finished());
    if previous.is_none() && server.is_announced() {
        bus.publish(&Scope::host(), body);
        return None;
    }
    let (server, bus) = (server.clone(), bus.clone());
    Some(tokio::spawn(async move {
        if let Some(previous) = previous {
            let _ = previous.await;
        }
        server.announced().await;
        bus.publish(&Scope::host(), body);
    }))
}

/// Runs `server` until the host exits.
pub(super) async fn supervise(server: Arc<McpServer>, bus: EventBus) {
    let mut backoff = FIRST_BACKOFF;
    let mut held = None;
    loop {
        server.status.send_replace(Status::Starting);
        let tail = Arc::default();
        let error = match connect(&server, Arc::clone(&tail)).await {
            Ok(conn) => {
                backoff = FIRST_BACKOFF;
                {
                    let mut live = server.live.lock().unwrap_or_else(|e| e.into_inner());
                    live.peer = Some(conn.running.peer().clone());
                    live.error = None;
                    live.stderr = tail.clone();
                }
                let tools = server.set_list(conn.list);
                server.status.send_replace(Status::Ready {
                    protocol: conn.protocol.clone(),
                });
                let ready = EventBody::McpServerReady(McpServerReady {
                    server: server.name.clone(),
                    tools,
                    protocol: conn.protocol,
                });
                held = publish(&server, &bus, held, ready);
                let reason = conn.running.waiting().await;
                if let Some(listener) = conn.listener {
                    listener.abort();
                }
                if let Some(stderr) = conn.stderr {
                    let _ = tokio::time::timeout(Duration::from_secs(1), stderr).await;
                }
                match reason {
                    Ok(reason) => format!("it stopped ({reason:?})"),
                    Err(e) => format!("it stopped: {e}"),
                }
            }
            Err(error) => {
                // Let the stderr reader catch the last lines.
                tokio::time::sleep(Duration::from_millis(100)).await;
                error
            }
        };
        let stderr_tail = (tail.lock().unwrap_or_else(|e| e.into_inner()).iter())
            .cloned()
            .collect::<Vec<_>>()
            .join("\n");
        {
            let mut live = server.live.lock().unwrap_or_else(|e| e.into_inner());
            live.peer = None;
            live.error = Some(error.clone());
        }
        server.status.send_replace(Status::Failed {
            error: error.clone(),
        });
        tracing::warn!(server = %server.name, %error, "MCP server failed; starting it again after {backoff:?}");
        let failed = EventBody::McpServerFailed(McpServerFailed {
            server: server.name.clone(),
            error,
            stderr_tail,
        });
        held = publish(&server, &bus, held, failed);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}
