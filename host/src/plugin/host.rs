//! The host side of every import a plugin may have, one file per interface
//! (as wasmtime-wasi lays out its own): each is an `impl ... for
//! PluginState`, or a wrapper put in the linker in place of wasmtime-wasi's,
//! acting on what the call's store holds (see [`super::sandbox`]).
//!
//! - [`types`], [`config`], [`log`], [`agent`]: the wasmclaw interfaces
//!   (`wasmclaw:plugin/*`) of the newest version: the shared types, the
//!   plugin's `[config]`, its log lines, and `agent.spawn-subturn`. Older
//!   versions' are answered by these, through [`super::compat`].
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

use super::bindings::latest::ToolAndHookPlugin;
use super::compat;
use super::sandbox::state::PluginState;

pub mod agent;
pub mod config;
pub mod filesystem;
pub mod http;
pub mod http_types;
pub mod log;
pub mod types;

/// The linker every plugin is instantiated with, built once: WASI and
/// `wasi:http` as wasmtime-wasi links them, the functions of [`filesystem`]
/// and [`http_types`] in place of theirs, and the wasmclaw interfaces of
/// every version this host loads (each version's names are its own:
/// `wasmclaw:plugin/log@0.1.0` beside `wasmclaw:plugin/log@0.2.0`).
pub fn linker(engine: &Engine) -> anyhow::Result<Linker<PluginState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    filesystem::add_to_linker(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    http_types::add_to_linker(&mut linker)?;
    ToolAndHookPlugin::add_to_linker::<_, HasSelf<PluginState>>(&mut linker, |s| s)?;
    compat::v0_1::add_to_linker(&mut linker)?;
    Ok(linker)
}
