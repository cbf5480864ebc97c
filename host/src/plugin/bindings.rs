//! Rust bindings for the WIT contract in `wit/`, generated once, here.
//!
//! They are generated for the world that has every export; a plugin has
//! the tool export, the hooks export, or both, and the loader binds each
//! one it finds on its own (see [`super::loader`]).

wasmtime::component::bindgen!({
    world: "tool-and-hook-plugin",
    path: "../wit",
    imports: {
        "wasmclaw:plugin/agent.spawn-subturn": async | trappable,
        default: trappable,
    },
    exports: { default: async },
});

pub use exports::wasmclaw::plugin::hooks as wit_hooks;
pub use exports::wasmclaw::plugin::tool as wit_tool;

/// The WIT package version this host implements; components built against
/// any `0.1.x` load.
pub const WIT_PACKAGE: &str = "wasmclaw:plugin";
pub const WIT_VERSION: &str = "0.1.0";
/// The export of tool plugins.
pub const TOOL_EXPORT: &str = "wasmclaw:plugin/tool@0.1.0";
/// The export of hook plugins.
pub const HOOKS_EXPORT: &str = "wasmclaw:plugin/hooks@0.1.0";
