//! `wasmclaw:plugin/config`: the plugin's `[config]` table, as JSON.

use crate::plugin::bindings::latest::wasmclaw::plugin::config::Host;
use crate::plugin::sandbox::state::PluginState;

impl Host for PluginState {
    fn get(&mut self) -> wasmtime::Result<String> {
        Ok(self.config.to_string())
    }
}
