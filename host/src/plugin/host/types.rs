//! `wasmclaw:plugin/types`: the types every interface shares.

use crate::plugin::bindings::latest::wasmclaw::plugin::types::Host;
use crate::plugin::sandbox::state::PluginState;

/// The shared types interface has no functions; the bindings still ask for
/// its (empty) host trait.
impl Host for PluginState {}
