//! Rust bindings for the WIT contract in `wit/`, generated once, here.

wasmtime::component::bindgen!({
    world: "tool-plugin",
    path: "../wit",
    imports: {
        "wasmclaw:plugin/agent.spawn-subturn": async | trappable,
        default: trappable,
    },
    exports: { default: async },
});

/// The WIT package version this host implements; components built against
/// any `0.1.x` load.
pub const WIT_PACKAGE: &str = "wasmclaw:plugin";
pub const WIT_VERSION: &str = "0.1.0";
/// The export every tool plugin must have.
pub const TOOL_EXPORT: &str = "wasmclaw:plugin/tool@0.1.0";
