//! `wasmclaw:plugin@0.2.0` (`wit/plugin.wit`), the newest version: the
//! types the host works in. Its imports are implemented in
//! [`crate::plugin::host`], one file per interface.
//!
//! It is generated for the world that has every export; a plugin has the
//! tool export, the hooks export, or both, and the loader binds each one it
//! finds on its own (see [`crate::plugin::exports`]).

wasmtime::component::bindgen!({
    world: "tool-and-hook-plugin",
    path: "../wit",
    imports: {
        "wasmclaw:plugin/agent.spawn-subturn": async | trappable,
        default: trappable,
    },
    exports: { default: async },
});
