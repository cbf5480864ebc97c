//! What one call may reach through the host's own imports, beyond its WASI
//! context: `wasi:http` ([`NetworkAccess`]: the plugin's network grant and
//! what the call has used of it) and `agent.spawn-subturn` ([`SpawnAccess`]:
//! the grant and the turn the call belongs to, as a [`SubTurnSpawner`]). The
//! store holds them; the host implementations ([`crate::plugin::host::http`],
//! [`crate::plugin::host::agent`]) act on them.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::descriptors::DescriptorBudget;
use super::host_memory::CallMemory;
use crate::plugin::error::ToolError;
use crate::plugin::policy::network::NetworkGrant;
use crate::plugin::policy::secrets::Secrets;
use crate::protocol::SubTurnRequest;

/// One call's network access: the plugin's grant and what it has used.
pub struct NetworkAccess {
    pub(in crate::plugin) plugin: Arc<str>,
    pub(in crate::plugin) grant: Arc<NetworkGrant>,
    pub(in crate::plugin) secrets: Arc<Secrets>,
    pub(in crate::plugin) descriptors: Arc<DescriptorBudget>,
    pub(in crate::plugin) memory: Arc<CallMemory>,
    /// Requests sent so far.
    pub(in crate::plugin) sent: u32,
}

impl NetworkAccess {
    pub fn new(
        plugin: Arc<str>,
        grant: Arc<NetworkGrant>,
        secrets: Arc<Secrets>,
        descriptors: Arc<DescriptorBudget>,
        memory: Arc<CallMemory>,
    ) -> Self {
        NetworkAccess {
            plugin,
            grant,
            secrets,
            descriptors,
            memory,
            sent: 0,
        }
    }
}

/// Runs a child of the turn that made a tool call. One is handed to each
/// call, so it can count what that call starts.
pub trait SubTurnSpawner: Send + Sync {
    /// Runs a child for `plugin` and returns its answer.
    fn run(
        &self,
        plugin: &str,
        request: SubTurnRequest,
    ) -> BoxFuture<'static, Result<String, ToolError>>;
}

/// What one call may do with `agent.spawn-subturn`.
#[derive(Default, Clone)]
pub struct SpawnAccess {
    pub plugin: String,
    /// The plugin's grants say `spawn_subturn = true`.
    pub granted: bool,
    /// The turn that made the call (none outside a turn).
    pub spawner: Option<Arc<dyn SubTurnSpawner>>,
}
