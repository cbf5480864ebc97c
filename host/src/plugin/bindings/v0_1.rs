//! `wasmclaw:plugin@0.1.0` (`wit/0.1.0/plugin.wit`), released and frozen.
//! [`crate::plugin::compat::v0_1`] answers its imports with the newest
//! version's implementation and converts its types to the newest.

wasmtime::component::bindgen!({
    world: "tool-and-hook-plugin",
    path: "../wit/0.1.0",
    imports: {
        "wasmclaw:plugin/agent.spawn-subturn": async | trappable,
        default: trappable,
    },
    exports: { default: async },
});
