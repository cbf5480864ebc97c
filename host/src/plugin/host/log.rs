//! `wasmclaw:plugin/log`: the guest's log lines into the host log, within
//! the call's budget of lines (see [`crate::plugin::sandbox::output`]).

use crate::plugin::bindings::latest::wasmclaw::plugin::log::{Host, Level};
use crate::plugin::sandbox::state::PluginState;

impl Host for PluginState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        for line in message.lines() {
            self.log.line(level, line)?;
        }
        Ok(())
    }
}
