//! The host side of every import a plugin may have, one file per interface
//! (as wasmtime-wasi lays out its own): each is an `impl ... for
//! PluginState`, or a wrapper put in the linker in place of wasmtime-wasi's,
//! acting on what the call's store holds (see [`super::sandbox`]).
//!
//! - [`types`], [`config`], [`log`], [`agent`]: the wasmclaw interfaces
//!   (`wasmclaw:plugin/*`): the shared types, the plugin's `[config]`, its
//!   log lines, and `agent.spawn-subturn`.
//! - [`filesystem`]: `wasi:filesystem/types`, with `open-at` counting what
//!   a call holds open.
//! - [`http`]: `wasi:http/outgoing-handler`, behind the plugin's network
//!   grant, with the operator's credentials added by the host.
//! - [`http_types`]: `wasi:http/types`, with what the host holds for the
//!   guest charged to the call's memory limit.
//!
//! The rest of WASI is wasmtime-wasi's own, on the context the store was
//! given.

use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

use super::bindings::ToolAndHookPlugin;
use super::sandbox::state::PluginState;

pub mod agent;
pub mod config;
pub mod filesystem;
pub mod http;
pub mod http_types;
pub mod log;
pub mod types;

/// The linker every plugin is instantiated with: WASI and `wasi:http` as
/// wasmtime-wasi links them, the functions of [`filesystem`] and
/// [`http_types`] in place of theirs, and the wasmclaw interfaces.
pub fn linker(engine: &Engine) -> anyhow::Result<Linker<PluginState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    filesystem::add_to_linker(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    http_types::add_to_linker(&mut linker)?;
    ToolAndHookPlugin::add_to_linker::<_, HasSelf<PluginState>>(&mut linker, |s| s)?;
    Ok(linker)
}
