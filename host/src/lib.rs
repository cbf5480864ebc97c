//! wasmclaw: an LLM agent host whose tools and hooks are sandboxed WebAssembly
//! components.
//!
//! # Layout
//! - [`protocol`]: the wire types: Ops in, Events out. A crate of its own
//!   (`wasmclaw-protocol`, serde only) re-exported here.
//! - [`core`]: the one seam every front end uses: a [`core::Core`] takes
//!   Ops, gives events (live, or from a seq on, with no gap), waits for
//!   turns, answers what sessions hold, and shuts the host down. The CLI,
//!   the HTTP API and the tests use nothing else.
//! - [`bus`]: the event bus: numbering, fan-out, bounded and lossless delivery.
//! - [`scheduler`]: sessions and their turns: ordering per session, parallel
//!   sessions, steering, follow-ups and interrupts, and the bounded table of
//!   sessions in memory. It hears from turns only through its own queue of
//!   internal ops.
//! - [`agent`]: turns: the one place every turn (SubTurns too) is spawned,
//!   registered and ended ([`agent::task`]), the loop of model calls and tool
//!   calls, and the registry of tools on offer ([`agent::registry`]).
//! - [`config`]: `wasmclaw.toml`, the environment and the flags resolved
//!   into one [`config::Config`]: every value with its source, every fault
//!   with its line, and what the configuration builds (the named agents a
//!   turn runs, [`agent::profile`]).
//! - [`commands`]: chat commands (`/help`, `/agent`, `/model`, ...): one
//!   registry that front ends hand messages starting with `/` to; they
//!   become Ops, never model input.
//! - [`hooks`]: hook plugins at fixed points of every turn: the chain of
//!   `before-*` and `after-*` hooks, and `on-event` observers.
//! - [`llm`]: model providers (OpenAI-compatible, Anthropic, scripted) and the
//!   fallback chain.
//! - [`mcp`]: MCP both ways: the tools of MCP servers in the registry, and
//!   wasmclaw's tools and agents served to MCP clients.
//! - [`store`]: sessions' history, turns and the event log, in SQLite.
//! - [`plugin`]: the plugin runtime: the operator's policy (grants, network,
//!   secrets), the sandbox (engine, compile cache, per-call store and limits),
//!   the WIT imports the host implements, loading a plugin directory (and
//!   watching it), and running every tool or hook call in a fresh, limited
//!   instance.
//! - [`server`]: `wasmclaw serve`, the HTTP API: sessions, an SSE event
//!   stream, OpenAI-compatible chat completions, metrics.
//! - [`tls`]: TLS for outgoing connections, the system's roots read once,
//!   for the first https client only.
//! - [`home`]: where wasmclaw keeps its files (`$WASMCLAW_HOME`, default `~/.wasmclaw`).
//! - [`cli`]: the `wasmclaw` command line; `main.rs` only parses and dispatches.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod agent;
pub mod bus;
pub mod cli;
pub mod commands;
pub mod config;
pub mod core;
pub mod folder_watch;
pub mod home;
pub mod hooks;
pub mod llm;
pub mod mcp;
pub mod plugin;
pub mod scheduler;
pub mod server;
pub mod store;
pub mod tls;

pub use wasmclaw_protocol as protocol;
