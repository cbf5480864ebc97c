//! One MCP server: its settings, its connection while it runs, its latest
//! tool list and what `wasmclaw mcp list` shows of it.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::Peer;
use tokio::sync::watch;

use super::tools::McpTools;
use crate::agent::registry::{ToolSet, ToolSource};
use crate::config::mcp::McpServerToml;
use crate::plugin::{Catalog, Plugins};

/// The default deadline of a call.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// The default output limit of a call, in KiB.
pub const DEFAULT_OUTPUT_KIB: u64 = 1024;
/// How many lines of a server's stderr are kept for `mcp_server_failed`.
pub const STDERR_LINES: usize = 20;

/// Where a server is.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Starting,
    Ready { protocol: String },
    Failed { error: String },
}

/// An MCP server of `[mcp.servers]`: a tool source.
pub struct McpServer {
    pub name: String,
    pub settings: McpServerToml,
    always_prefix: bool,
    /// The longest wait for the handshake and the first tool list.
    pub startup_wait: Duration,
    /// Its last `server/discover` probe went unanswered: its next
    /// handshake is `initialize` alone (see `connect`).
    pub(super) legacy: AtomicBool,
    plugins: Arc<Plugins>,
    /// Whether its events may be published: held until the host's event
    /// consumers are subscribed ([`McpServer::announce`]).
    announced: watch::Sender<bool>,
    pub(super) live: Mutex<Live>,
    pub(super) status: watch::Sender<Status>,
    /// The snapshot built from a plugin catalog and a tool list.
    built: Mutex<Option<Snapshot>>,
}

struct Snapshot {
    catalog: Arc<Catalog>,
    list: Arc<Vec<rmcp::model::Tool>>,
    tools: Arc<McpTools>,
}

/// What changes while the server runs.
#[derive(Default)]
pub(super) struct Live {
    pub peer: Option<Peer<RoleClient>>,
    /// Its tools, as it lists them.
    pub list: Arc<Vec<rmcp::model::Tool>>,
    /// Why it is not running, when it is not.
    pub error: Option<String>,
    pub stderr: Arc<Mutex<VecDeque<String>>>,
}

impl McpServer {
    pub fn new(
        name: &str,
        settings: McpServerToml,
        always_prefix: bool,
        startup_wait: Duration,
        plugins: Arc<Plugins>,
    ) -> Arc<McpServer> {
        Arc::new(McpServer {
            name: name.to_string(),
            settings,
            always_prefix,
            startup_wait,
            legacy: AtomicBool::new(false),
            plugins,
            announced: watch::channel(false).0,
            live: Mutex::default(),
            status: watch::channel(Status::Starting).0,
            built: Mutex::new(None),
        })
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.settings.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS))
    }

    pub fn output_limit(&self) -> usize {
        (self.settings.output_kib.unwrap_or(DEFAULT_OUTPUT_KIB) * 1024) as usize
    }

    /// Lets its events out, the ones held so far first.
    pub fn announce(&self) {
        self.announced.send_replace(true);
    }

    /// Whether its events may be published now.
    pub(super) fn is_announced(&self) -> bool {
        *self.announced.borrow()
    }

    /// Waits until its events may be published.
    pub(super) async fn announced(&self) {
        let _ = self.announced.subscribe().wait_for(|a| *a).await;
    }

    /// Where the server is now.
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// Waits (at most `wait`) for the server's first answer: ready or failed.
    pub async fn settled(&self, wait: Duration) -> Status {
        let mut rx = self.status.subscribe();
        let _ = tokio::time::timeout(wait, rx.wait_for(|s| *s != Status::Starting)).await;
        self.status()
    }

    /// Its connection, or why there is none. A connection whose transport
    /// closed (the server exited a moment ago) is none, though the
    /// supervisor may not have seen that yet.
    pub(super) fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        match (&live.peer, &live.error) {
            (Some(peer), _) if peer.is_transport_closed() => {
                Err("its connection closed".to_string())
            }
            (Some(peer), _) => Ok(peer.clone()),
            (None, Some(error)) => Err(error.clone()),
            (None, None) => Err("it has not started yet".to_string()),
        }
    }

    /// Its connection; while it is (re)starting, waits (at most `wait`) for
    /// the outcome of the attempt under way or the next one.
    pub(super) async fn wait_peer(&self, wait: Duration) -> Result<Peer<RoleClient>, String> {
        let mut rx = self.status.subscribe();
        if let Ok(peer) = self.peer() {
            return Ok(peer);
        }
        let _ = tokio::time::timeout(wait, async {
            // A failure counts once an attempt began: the one under way, or
            // the next (not the one a closed connection still shows ready).
            let now = rx.borrow_and_update().clone();
            if matches!(now, Status::Ready { .. }) && self.peer().is_ok() {
                return;
            }
            let mut attempted = now == Status::Starting;
            while rx.changed().await.is_ok() {
                match &*rx.borrow_and_update() {
                    Status::Starting => attempted = true,
                    Status::Ready { .. } if self.peer().is_ok() => return,
                    Status::Failed { .. } if attempted => return,
                    _ => {}
                }
            }
        })
        .await;
        self.peer()
    }

    /// Replaces its tool list (after a start or `tools/list_changed`) by
    /// the tools of `list` a model request can carry (see
    /// [`super::tools::acceptable`]); how many those are.
    pub(super) fn set_list(&self, list: Vec<rmcp::model::Tool>) -> usize {
        let list = super::tools::acceptable(&self.name, list);
        let count = list.len();
        self.live.lock().unwrap_or_else(|e| e.into_inner()).list = Arc::new(list);
        count
    }

    /// Whether a plugin or a built-in offers `name`.
    fn taken(catalog: &Catalog, name: &str) -> bool {
        crate::plugin::tools::RESERVED_TOOL_NAMES.contains(&name)
            || Catalog::tool(catalog, name).is_some()
    }

    fn tools(self: &Arc<Self>) -> Arc<McpTools> {
        let catalog = self.plugins.catalog();
        let list = self
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .list
            .clone();
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = &*built
            && Arc::ptr_eq(&s.catalog, &catalog)
            && Arc::ptr_eq(&s.list, &list)
        {
            return s.tools.clone();
        }
        let offered = list.iter().filter(|tool| self.offers(&tool.name));
        let named = offered.filter_map(|tool| {
            let name = if self.always_prefix || Self::taken(&catalog, &tool.name) {
                format!("{}__{}", self.name, tool.name)
            } else {
                tool.name.to_string()
            };
            if !crate::plugin::tools::is_valid_tool_name(&name) {
                tracing::warn!(server = %self.name, tool = %tool.name, "an MCP server's tool is left out: its name {name:?} is longer than model APIs accept (64)");
                return None;
            }
            Some((name, tool))
        });
        let tools = Arc::new(McpTools::new(Arc::downgrade(self), named));
        *built = Some(Snapshot {
            catalog,
            list,
            tools: tools.clone(),
        });
        tools
    }

    /// Whether `allow` and `deny` let the tool `name` be offered.
    fn offers(&self, name: &str) -> bool {
        let matches = |globs: &Option<Vec<String>>| {
            (globs.iter().flatten()).any(|g| crate::config::glob_match(g, name))
        };
        (self.settings.allow.is_none() || matches(&self.settings.allow))
            && !matches(&self.settings.deny)
    }
}

/// The handle the registry holds.
pub struct Source(pub Arc<McpServer>);

impl ToolSource for Source {
    fn label(&self) -> &str {
        &self.0.name
    }

    fn current(&self) -> Arc<dyn ToolSet> {
        self.0.tools()
    }
}
