//! The plugin runtime.
//!
//! A plugin is a WebAssembly component in the plugin directory (`NAME.wasm`),
//! optionally with an operator-owned grants file beside it (`NAME.toml`). The
//! runtime compiles each component once (through a disk cache), pre-instantiates
//! it once, and runs every tool call in a fresh `Store` with its own limits and
//! only the capabilities the grants name.
//!
//! The folders, from the bottom up (each depends only on those above it,
//! and on the contract files at the top level):
//!
//! - [`policy`]: the operator's grants (`NAME.toml`): directories,
//!   environment, limits, hook settings, network allow-lists, secrets, the
//!   host's protected paths. Plain data and its checks.
//! - [`sandbox`]: where guest code runs and what bounds it: the engine, the
//!   compile cache, the per-call store ([`sandbox::state::PluginState`]) with
//!   its limits and deadline, the pool of guest threads, descriptors and host
//!   memory counted per call, and why a call stopped.
//! - [`host`]: the host side of each import, one file per interface
//!   (`wasmclaw:plugin/*`, `wasi:filesystem/types`, `wasi:http`), acting on
//!   the store the sandbox made.
//!
//! At the top level, the contract, which all of the folders may use:
//!
//! - [`bindings`]: the host side of the WIT contract, generated once per
//!   version it loads, and which version a component was built for.
//! - [`compat`]: each older version in the newest version's terms.
//! - [`exports`]: a plugin's exports bound with its version's bindings and
//!   called in the newest types.
//! - [`error`]: [`ToolError`], the failure a tool call gives the model.
//! - [`units`]: sizes and durations in words, for every message.
//! - [`tools`]: tool specs: name rules, schemas, argument validation.
//! - [`subscriptions`]: the points a hook plugin hooks.
//!
//! and what puts the folders together, which nothing in them uses:
//!
//! - [`runtime`]: what all plugins share: engine, linker, compile cache.
//! - [`loader`]: turning one file into a [`loader::Plugin`], or a plain-words error.
//! - [`catalog`]: the loaded plugin set and which plugin owns which tool.
//! - [`call`]: one tool call, from arguments to result or [`ToolError`].
//! - [`hook_call`]: one hook call in a fresh instance.
//! - [`hook_view`]: what a hook is shown: its input cut to fit its budget.
//! - [`watch`]: picking up files added, replaced or removed while running.
//! - [`install`]: copying a plugin and its grants into a plugin directory,
//!   atomically.

pub mod bindings;
pub mod call;
pub mod catalog;
pub mod compat;
pub mod error;
pub mod exports;
pub mod hook_call;
pub mod hook_view;
pub mod host;
pub mod install;
pub mod loader;
pub mod policy;
pub mod runtime;
pub mod sandbox;
pub mod subscriptions;
pub mod tools;
pub mod units;
pub mod watch;

pub use bindings::WitVersion;
pub use call::CallContext;
pub use catalog::{Catalog, PluginStatus, Plugins};
pub use error::{ErrorKind, ToolError};
pub use policy::grants::{Grants, Limits};
pub use runtime::{Runtime, RuntimeConfig};
pub use subscriptions::{HookPoint, Subscription};
