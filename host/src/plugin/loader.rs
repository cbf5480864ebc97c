//! Loading one plugin file: from bytes to a [`Plugin`] that is ready to run
//! calls, or to a reason in plain words.
//!
//! The checks, in order: it is a component (not text, not a core module);
//! its grants file parses; it compiles (through the cache); it was built for
//! one version of `wasmclaw:plugin` that this host loads (read from the
//! names it imports and exports, see [`WitVersion::of_names`]); it exports
//! the tool interface, the hooks interface or both, of that version; its
//! imports are all provided; its exports have that version's signatures;
//! `list-tools` and `subscriptions` run, with no capabilities, and return
//! tools that follow [`super::tools`]'s rules and subscriptions that follow
//! [`super::subscriptions`]'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use wasmtime::component::{Component, InstancePre};

use super::bindings::{WIT_PACKAGE, WitVersion, supported_versions};
use super::error::wasm_error_chain;
use super::exports::{HooksExport, ToolExport};
use super::policy::grants::Grants;
use super::policy::protected::Protected;
use super::runtime::Runtime;
use super::sandbox::cache::CacheOutcome;
use super::sandbox::deadline::Deadline;
use super::sandbox::failure::describe_failure;
use super::sandbox::pool;
use super::sandbox::state::PluginState;
use super::subscriptions::{Subscription, validate_subscriptions};
use super::tools::{SchemaCheck, Tool, schemas_digest, validate_specs};
use super::units::size;

/// The most time instantiation plus `list-tools` may take at load, whatever
/// the plugin's own limit: one slow plugin must not hold up the others.
const LIST_TOOLS_TIME: Duration = Duration::from_secs(10);

/// A loaded plugin: compiled, pre-instantiated, its tools and hooks listed.
pub struct Plugin {
    /// The file stem: `calc` for `calc.wasm`.
    pub name: Arc<str>,
    pub path: PathBuf,
    /// `tool-plugin`, `hook-plugin` or `tool-and-hook-plugin`.
    pub world: &'static str,
    /// The version of `wasmclaw:plugin` it was built for.
    pub wit_version: WitVersion,
    pub tools: Vec<Tool>,
    /// The points it hooks, the grants' priority applied.
    pub subscriptions: Vec<Subscription>,
    pub grants: Grants,
    pub cache: CacheOutcome,
    /// Keeps the engine and its epoch ticker alive while the plugin is.
    pub(super) runtime: Runtime,
    pub(super) pre: InstancePre<PluginState>,
    /// Where its exports are, in the bindings of its version; `None` for
    /// an interface it does not export.
    pub(super) tool_export: Option<ToolExport>,
    pub(super) hooks_export: Option<HooksExport>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("wit_version", &self.wit_version)
            .field("tools", &self.tools)
            .finish()
    }
}

/// What `plugins list --json` shows of a loaded plugin.
#[derive(Serialize)]
pub struct PluginInfo<'a> {
    pub name: &'a str,
    pub file: &'a Path,
    pub world: &'a str,
    /// The version of `wasmclaw:plugin` it was built for.
    pub wit_version: WitVersion,
    pub tools: &'a [Tool],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub hooks: &'a [Subscription],
    pub grants: &'a Grants,
}

impl Plugin {
    pub fn info(&self) -> PluginInfo<'_> {
        PluginInfo {
            name: &self.name,
            file: &self.path,
            world: self.world,
            wit_version: self.wit_version,
            tools: &self.tools,
            hooks: &self.subscriptions,
            grants: &self.grants,
        }
    }
}

/// The plugin name of a file: its stem.
pub fn plugin_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A plugin is one regular file (or a link to one): a directory or a
/// device named `x.wasm` is refused before anything reads it.
fn check_file_type(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read the file: {e}"))?;
    if meta.is_dir() {
        return Err(
            "a directory, not a component file: a plugin is one NAME.wasm file; move the directory out of the plugin directory or rename it"
                .into(),
        );
    }
    if !meta.is_file() {
        return Err("not a regular file: a plugin is one NAME.wasm file".into());
    }
    Ok(())
}

/// Loads `path`; the error is the reason, without the file name (the caller
/// reports both).
pub async fn load(runtime: &Runtime, path: &Path) -> Result<Plugin, String> {
    load_granted(runtime, path, None).await
}

/// Loads `path` with `grants` instead of its grants file's (`plugins
/// install` checks a plugin with the grants it is to have in the plugin
/// directory).
pub async fn load_with_grants(
    runtime: &Runtime,
    path: &Path,
    grants: Grants,
) -> Result<Plugin, String> {
    load_granted(runtime, path, Some(grants)).await
}

async fn load_granted(
    runtime: &Runtime,
    path: &Path,
    given: Option<Grants>,
) -> Result<Plugin, String> {
    let name: Arc<str> = plugin_name(path).into();
    // Reading, the grants file and compiling block: off the async runtime.
    let (rt, file) = (runtime.clone(), path.to_path_buf());
    let (grants, component, cache) = tokio::task::spawn_blocking(move || {
        check_file_type(&file)?;
        let bytes = read_component(&file, rt.cache().limits().max_file_bytes)?;
        let grants = match given {
            Some(grants) => grants,
            None => {
                let mut protected = rt.protected().to_vec();
                protected.extend(file.parent().map(Protected::plugin_dir));
                Grants::for_plugin(&file, &protected, rt.secrets(), rt.plugin_defaults())?
            }
        };
        let file_name = file.file_name().unwrap_or_default().to_string_lossy();
        let (component, cache) = rt
            .cache()
            .load(rt.engine(), &bytes, &file_name)
            .map_err(|e| format!("cannot be compiled: {}", error_chain(&e)))?;
        Ok::<_, String>((grants, component, cache))
    })
    .await
    .map_err(|e| format!("loading failed: {e}"))??;

    let version = check_version(runtime, &component, &name)?;
    let exports = check_exports(runtime, &component, version)?;
    check_imports(runtime, &component, version)?;
    let pre = runtime
        .linker()
        .instantiate_pre(&component)
        .map_err(|e| link_error(&e))?;
    let missing = |export: &str, e: wasmtime::Error| {
        format!(
            "cannot find the functions of its {export} export: {}",
            wasm_error_chain(&e)
        )
    };
    let tool_export = exports
        .tools
        .then(|| ToolExport::new(version, &pre).map_err(|e| missing(version.tool_export(), e)))
        .transpose()?;
    let hooks_export = exports
        .hooks
        .then(|| HooksExport::new(version, &pre).map_err(|e| missing(version.hooks_export(), e)))
        .transpose()?;

    let (specs, subscriptions) = {
        let deadline = Deadline::new(grants.limits.timeout.min(LIST_TOOLS_TIME), None);
        let mut store = PluginState::builder(&name, &grants.limits, deadline)
            .config(grants.config_json.clone())
            .build(runtime.engine(), runtime.epochs())
            .map_err(|e| format!("cannot create a store: {e:#}"))?;
        let failed = |store: &wasmtime::Store<_>, what: &str, e: wasmtime::Error| {
            format!(
                "{what} failed: {}",
                describe_failure(&name, store.data(), &grants.limits, &e)
            )
        };
        let on_pool = pre.clone();
        let (back, instance) = pool::call_guest(
            store,
            Box::new(move |store| Box::pin(async move { on_pool.instantiate_async(store).await })),
        )
        .await;
        store = back;
        let instance = match instance {
            Ok(instance) => instance,
            Err(e) => return Err(failed(&store, "instantiation", e)),
        };
        let mut specs = Vec::new();
        if let Some(export) = &tool_export {
            export.check_signatures(&component, &instance, &mut store)?;
            let tool = export
                .load(&mut store, &instance)
                .map_err(|e| format!("cannot bind its exports: {}", wasm_error_chain(&e)))?;
            let (back, listed) = pool::call_guest(
                store,
                Box::new(move |store| Box::pin(async move { tool.list_tools(store).await })),
            )
            .await;
            store = back;
            specs = listed.map_err(|e| failed(&store, "list-tools", e))?;
        }
        let mut subscriptions = Vec::new();
        if let Some(export) = &hooks_export {
            let hooks = export.load(&mut store, &instance).map_err(|e| {
                format!(
                    "a function of its {} export does not have this host's signature (was the component built against a changed copy of the WIT?): {}",
                    version.hooks_export(),
                    wasm_error_chain(&e)
                )
            })?;
            let (back, listed) = pool::call_guest(
                store,
                Box::new(move |store| Box::pin(async move { hooks.subscriptions(store).await })),
            )
            .await;
            store = back;
            subscriptions = listed.map_err(|e| failed(&store, "subscriptions", e))?;
        }
        (specs, subscriptions)
    };
    // Schemas seen before are compiled on first call only.
    let digest = schemas_digest(&specs);
    let known = runtime.cache().schemas_known(&digest);
    let check = match known {
        true => SchemaCheck::OnFirstCall,
        false => SchemaCheck::Now,
    };
    let tools = validate_specs(specs, check)?;
    if !known {
        runtime.cache().mark_schemas(&digest);
    }
    let subscriptions = validate_subscriptions(subscriptions, grants.hooks.priority)?;

    Ok(Plugin {
        name,
        path: path.to_path_buf(),
        world: exports.world(),
        wit_version: version,
        tools,
        subscriptions,
        grants,
        cache,
        runtime: runtime.clone(),
        pre,
        tool_export,
        hooks_export,
    })
}

/// Which of the plugin interfaces a component exports.
struct Exports {
    tools: bool,
    hooks: bool,
}

impl Exports {
    fn world(&self) -> &'static str {
        match (self.tools, self.hooks) {
            (true, true) => "tool-and-hook-plugin",
            (false, true) => "hook-plugin",
            _ => "tool-plugin",
        }
    }
}

/// The file's bytes: its size checked against `max` from its metadata and
/// its header read first, so a huge or foreign file is refused without
/// being read whole.
fn read_component(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let unreadable = |e: std::io::Error| format!("cannot read the file: {e}");
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let len = file.metadata().map_err(unreadable)?.len();
    let too_large = |len: u64| {
        format!(
            "the file is {}, over the limit of {} for a plugin file (--max-plugin-mib)",
            size(len),
            size(max)
        )
    };
    if len > max {
        return Err(too_large(len));
    }
    let mut file = file.take(max.saturating_add(1));
    let mut header = [0u8; 8];
    let mut got = 0;
    while got < header.len() {
        match file.read(&mut header[got..]).map_err(unreadable)? {
            0 => break,
            n => got += n,
        }
    }
    check_header(&header[..got])?;
    let mut bytes = Vec::with_capacity(len as usize);
    bytes.extend_from_slice(&header[..got]);
    file.read_to_end(&mut bytes).map_err(unreadable)?;
    // It may have grown since its size was read.
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

fn check_header(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(
            "not a WebAssembly file (it does not start with the \\0asm magic bytes)".into(),
        );
    }
    match &bytes[4..8] {
        [0x0d, 0x00, 0x01, 0x00] => Ok(()),
        [0x01, 0x00, 0x00, 0x00] => Err(
            "a core WebAssembly module, not a component: build it as a component \
             (e.g. for the wasm32-wasip2 target) or wrap it with `wasm-tools component new`"
                .into(),
        ),
        v => Err(format!(
            "an unsupported WebAssembly binary version {v:02x?}; expected a component (version 0d 00, layer 01 00)"
        )),
    }
}

/// The one version of `wasmclaw:plugin` the component's imports and exports
/// name; one that names none is taken for the newest (and then refused for
/// exporting neither interface).
fn check_version(
    runtime: &Runtime,
    component: &Component,
    plugin: &str,
) -> Result<WitVersion, String> {
    let ty = component.component_type();
    let engine = runtime.engine();
    WitVersion::of_names(
        ty.imports(engine).map(|(name, _)| name),
        ty.exports(engine).map(|(name, _)| name),
    )
    .map(|found| found.unwrap_or(WitVersion::LATEST))
    .map_err(|e| e.describe(plugin))
}

/// The tool interface, the hooks interface or both must be exported, at
/// the component's version.
fn check_exports(
    runtime: &Runtime,
    component: &Component,
    version: WitVersion,
) -> Result<Exports, String> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(runtime.engine())
        .map(|(name, _)| name.to_string())
        .collect();
    let found = Exports {
        tools: exports.iter().any(|e| e == version.tool_export()),
        hooks: exports.iter().any(|e| e == version.hooks_export()),
    };
    if found.tools || found.hooks {
        return Ok(found);
    }
    let listed = if exports.is_empty() {
        "nothing".to_string()
    } else {
        exports.join(", ")
    };
    Err(format!(
        "exports neither {WIT_PACKAGE}/tool nor {WIT_PACKAGE}/hooks (of any version this host loads: {}), so it offers no tools and no hooks; it exports: {listed}",
        supported_versions()
    ))
}

/// Names the imports this host does not provide (WASI 0.2 and the plugin
/// package's own interfaces are provided).
fn check_imports(
    runtime: &Runtime,
    component: &Component,
    version: WitVersion,
) -> Result<(), String> {
    let ours = format!("{WIT_PACKAGE}/");
    let provided = |name: &str| {
        (name.starts_with("wasi:") && name.contains("@0.2."))
            || name
                .strip_prefix(&ours)
                .and_then(|rest| rest.split_once('@'))
                .is_some_and(|(iface, at)| {
                    matches!(iface, "types" | "log" | "config" | "agent") && at == version.as_str()
                })
    };
    let missing: Vec<String> = component
        .component_type()
        .imports(runtime.engine())
        .map(|(name, _)| name.to_string())
        .filter(|name| !provided(name))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let hint = if missing.iter().any(|m| m.contains("@0.3")) {
        " (WASI 0.3 is not supported yet; build against WASI 0.2)"
    } else {
        ""
    };
    Err(format!(
        "it imports {}, which this host does not provide{hint}; it provides WASI 0.2, {WIT_PACKAGE}/log@{version}, {WIT_PACKAGE}/config@{version} and {WIT_PACKAGE}/agent@{version}",
        missing.join(", ")
    ))
}

/// Linking failed although every import is provided: one of them has
/// another type than the host's.
fn link_error(e: &wasmtime::Error) -> String {
    format!(
        "an import does not match what this host provides (was it built against a changed copy of the WIT?): {}",
        wasm_error_chain(e)
    )
}

fn error_chain(e: &anyhow::Error) -> String {
    e.chain()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}
