//! The plugin runtime.
//!
//! A plugin is a WebAssembly component in the plugin directory (`NAME.wasm`),
//! optionally with an operator-owned grants file beside it (`NAME.toml`). The
//! runtime compiles each component once (through a disk cache), pre-instantiates
//! it once, and runs every tool call in a fresh `Store` with its own limits and
//! only the capabilities the grants name.
//!
//! - [`bindings`]: the host side of the WIT contract, generated once.
//! - [`error`]: [`ToolError`], the failure a tool call gives the model.
//! - [`units`]: sizes and durations in words, for every message.
//! - [`policy`]: the operator's grants (`NAME.toml`): directories,
//!   environment, limits, hook settings, network, secrets, protected paths.
//! - [`engine`]: the one wasmtime engine (pooling allocator, epoch ticker).
//! - [`cache`]: compiled code on disk, keyed by content and engine hashes.
//! - [`sandbox`]: the per-call store: WASI context, limits, breach tracking.
//! - [`descriptors`]: host descriptors held for calls, bounded per call and host-wide.
//! - [`host_memory`]: what the host holds for a call (HTTP objects), counted against its memory limit.
//! - [`pool`]: the threads guest code runs on, apart from the host's runtime.
//! - [`output`]: the guest's log, stdout and stderr, into the host log, line-budgeted.
//! - [`loader`]: turning one file into a [`loader::Plugin`], or a plain-words error.
//! - [`tools`]: tool specs: name rules, schemas, argument validation.
//! - [`catalog`]: the loaded plugin set and which plugin owns which tool.
//! - [`call`]: one tool call, from arguments to result or [`ToolError`].
//! - [`subscriptions`]: the points a hook plugin hooks.
//! - [`hook_call`]: one hook call in a fresh instance.
//! - [`hook_view`]: what a hook is shown: its input cut to fit its budget.
//! - [`http`]: `wasi:http` behind each plugin's allow-list, with the
//!   operator's credentials added by the host.
//! - [`spawn`]: `agent.spawn-subturn`, a plugin's way to start a sub-agent.
//! - [`watch`]: picking up files added, replaced or removed while running.

pub mod bindings;
pub mod call;
pub mod catalog;
pub mod error;
pub mod hook_call;
pub mod host {
    pub mod agent;
    pub mod http;
}
pub mod hook_view;
pub mod loader;
pub mod policy;
pub mod sandbox {
    pub mod cache;
    pub mod descriptors;
    pub mod engine;
    pub mod host_memory;
    pub mod output;
    pub mod pool;
    pub mod state;
}
pub mod subscriptions;
pub mod tools;
pub mod units;
pub mod watch;

pub use call::CallContext;
pub use catalog::{Catalog, PluginStatus, Plugins};
pub use error::{ErrorKind, ToolError};
pub use policy::grants::{Grants, Limits};
pub use sandbox::engine::{Runtime, RuntimeConfig};
pub use subscriptions::{HookPoint, Subscription};
