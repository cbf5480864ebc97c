//! The sandbox: where guest code runs, and everything that bounds it.
//!
//! Every call (a tool call, a hook call, `list-tools` at load) runs in a
//! fresh store of the one engine, on the plugin pool's threads, with only
//! what its grants name and within its limits. Nothing here knows about
//! turns or tools; it reads the operator's policy ([`super::policy`]), and
//! the host implementations ([`super::host`]) act on the store it makes.
//!
//! - [`engine`]: the one wasmtime engine (pooling allocator, epoch ticker).
//! - [`cache`]: compiled code on disk, keyed by content and engine hashes,
//!   bounded and pruned least recently used; misses compiled in a child.
//! - [`state`]: one call's store, [`state::PluginState`], and its builder.
//! - [`deadline`]: when a call is stopped; its clock stops while the guest
//!   waits for a sub-agent.
//! - [`limits`]: the memory limiter, the resource table's size, and which
//!   limit stopped a call.
//! - [`failure`]: why a call stopped, in plain words.
//! - [`access`]: what a call may reach through the host's own imports
//!   (`wasi:http`, `agent.spawn-subturn`).
//! - [`output`]: the guest's stdout and stderr (and log lines) into the host
//!   log, line-budgeted.
//! - [`descriptors`]: host descriptors held for calls, bounded per call and
//!   host-wide.
//! - [`host_memory`]: what the host holds for a call (HTTP objects), counted
//!   against its memory limit.
//! - [`pool`]: the threads guest code runs on, apart from the host's runtime.

pub mod access;
pub mod cache;
pub mod deadline;
pub mod descriptors;
pub mod engine;
pub mod failure;
pub mod host_memory;
pub mod limits;
pub mod output;
pub mod pool;
pub mod state;
