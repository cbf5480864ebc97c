//! The floor's plugin: a tool call in a fresh instance of the component,
//! as the host makes one: wasmtime's pooling allocator sized and set as
//! the host's engine is, copy-on-write memory images, an epoch deadline,
//! WASI preview 2 with nothing granted, the `call-tool` export called
//! through the bindings of `wit/plugin.wit`.
//!
//! Left out, because they are the host's own work: the guest threads a
//! call is handed to, the epoch ticker, the call's limits beyond the
//! pool's (memory, output, log lines, host resources), grants, the
//! arguments' check against the tool's schema, and the plugin's imports
//! (`log`, `config`, `agent`), which trap here: the floor's tool does not
//! call them.

use std::path::Path;

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::text;

wasmtime::component::bindgen!({
    world: "tool-plugin",
    path: "../../wit",
    exports: { default: async },
});

use exports::wasmclaw::plugin::tool::CallContext;

/// Instances the pool is sized for, as the host's default
/// (`max_instances`).
const INSTANCES: u32 = 1000;

/// The largest linear memory, as the host's largest grant allows.
const MAX_MEMORY: usize = 1 << 30;

/// Memory kept resident between instances, as the host keeps it.
const KEEP_RESIDENT: usize = 2 << 20;

pub struct Sandbox {
    engine: Engine,
    pre: ToolPluginPre<State>,
}

struct State {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl Sandbox {
    /// The component at `path`, compiled and ready to instantiate.
    pub fn load(path: &Path) -> Result<Sandbox, String> {
        let engine = Engine::new(&config()).map_err(text)?;
        let component = Component::from_file(&engine, path)
            .map_err(|e| format!("{}: {e:#}", path.display()))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(text)?;
        linker
            .define_unknown_imports_as_traps(&component)
            .map_err(text)?;
        let pre = linker.instantiate_pre(&component).map_err(text)?;
        Ok(Sandbox {
            engine,
            pre: ToolPluginPre::new(pre).map_err(text)?,
        })
    }

    /// Runs the tool `name` with `arguments` in a fresh instance.
    pub async fn call(
        &self,
        session: &str,
        turn_id: &str,
        call_id: &str,
        name: &str,
        arguments: &str,
    ) -> Result<String, String> {
        let mut store = Store::new(
            &self.engine,
            State {
                wasi: WasiCtx::builder().build(),
                table: ResourceTable::new(),
            },
        );
        // No ticker runs: the deadline is one the epoch never reaches.
        store.set_epoch_deadline(1);
        let plugin = self.pre.instantiate_async(&mut store).await.map_err(text)?;
        let ctx = CallContext {
            session_key: session.to_string(),
            turn_id: turn_id.to_string(),
            parent_turn_id: None,
            depth: 0,
            call_id: call_id.to_string(),
            deadline_ms: u64::MAX,
        };
        (plugin.wasmclaw_plugin_tool())
            .call_call_tool(&mut store, &ctx, name, &arguments.to_string())
            .await
            .map_err(text)?
            .map_err(|e| e.message)
    }
}

/// The host's engine settings (`plugin/sandbox/engine.rs`).
fn config() -> Config {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(INSTANCES)
        .total_core_instances(INSTANCES * 4)
        .total_memories(INSTANCES * 2)
        .total_tables(INSTANCES * 4)
        .total_stacks(INSTANCES)
        .max_memory_size(MAX_MEMORY)
        .max_core_instances_per_component(64)
        .max_memories_per_component(8)
        .max_tables_per_component(32)
        .table_elements(100_000)
        .pagemap_scan(wasmtime::Enabled::Auto)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .concurrency_support(false)
        .memory_init_cow(true)
        .cranelift_opt_level(wasmtime::OptLevel::Speed)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
}
