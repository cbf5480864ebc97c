//! wasmclaw: an LLM agent host whose tools and hooks are sandboxed WebAssembly
//! components.
//!
//! # Layout
//! - [`home`]: where wasmclaw keeps its files (`$WASMCLAW_HOME`, default `~/.wasmclaw`).
//! - [`plugin`]: the plugin runtime: the engine, the compile cache, operator grants,
//!   loading a plugin directory (and watching it), and running every tool call in a
//!   fresh, limited instance.
//! - [`cli`]: the `wasmclaw` command line; `main.rs` only parses and dispatches.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod cli;
pub mod home;
pub mod plugin;
