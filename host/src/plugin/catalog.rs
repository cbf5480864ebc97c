//! The loaded plugin set: which files loaded, which failed and why, and which
//! plugin owns which tool.
//!
//! Tool names are global: the model sees one flat list. When two plugins offer
//! the same name, the file whose name sorts first (byte order) keeps it and
//! the other is refused as a whole, so the outcome does not depend on which
//! file arrived first. A rescan reloads only files whose contents or grants
//! changed; a call holds its plugin by `Arc`, so calls in flight finish on the
//! version they started with.
//!
//! A set may start empty and be filled by its first scan later
//! ([`Plugins::unscanned`], for `serve`, which answers while plugins load);
//! a turn waits for that first scan ([`Plugins::until_scanned`]), so no turn
//! runs without the tools and hooks of the directory.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use serde::Serialize;

use super::bindings::WitVersion;
use super::call::CallContext;
use super::error::{ErrorKind, ToolError};
use super::loader::{Plugin, PluginInfo, load, load_with_grants, plugin_name};
use super::policy::grants::Grants;
use super::runtime::Runtime;
use super::tools::Tool;

/// One file of the plugin directory.
#[derive(Clone, Debug)]
pub enum PluginStatus {
    Loaded(Arc<Plugin>),
    Failed {
        name: String,
        file: PathBuf,
        error: String,
    },
}

impl PluginStatus {
    pub fn name(&self) -> &str {
        match self {
            PluginStatus::Loaded(p) => &p.name,
            PluginStatus::Failed { name, .. } => name,
        }
    }
}

/// What `plugins list --json` prints per file.
#[derive(Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum StatusInfo<'a> {
    Ok(PluginInfo<'a>),
    Error {
        name: &'a str,
        file: &'a Path,
        error: &'a str,
    },
}

impl PluginStatus {
    /// This file's state as a change: loaded or failed.
    pub fn as_change(&self) -> PluginChange {
        match self {
            PluginStatus::Loaded(p) => PluginChange::Loaded {
                name: p.name.to_string(),
                tools: p.tools.iter().map(|t| t.name.clone()).collect(),
                wit_version: p.wit_version,
            },
            PluginStatus::Failed { name, file, error } => PluginChange::Failed {
                name: name.clone(),
                file: file.clone(),
                error: error.clone(),
            },
        }
    }

    pub fn info(&self) -> StatusInfo<'_> {
        match self {
            PluginStatus::Loaded(p) => StatusInfo::Ok(p.info()),
            PluginStatus::Failed { name, file, error } => StatusInfo::Error { name, file, error },
        }
    }
}

/// A snapshot of the plugin set.
#[derive(Default)]
pub struct Catalog {
    /// Every file, sorted by file name.
    pub plugins: Vec<PluginStatus>,
    tools: HashMap<String, (Arc<Plugin>, usize)>,
}

impl Catalog {
    /// The plugin that offers `tool`, and the tool.
    pub fn tool(&self, tool: &str) -> Option<(&Arc<Plugin>, &Tool)> {
        self.tools.get(tool).map(|(p, i)| (p, &p.tools[*i]))
    }

    /// All offered tools, sorted by name.
    pub fn tools(&self) -> Vec<&Tool> {
        let mut tools: Vec<&Tool> = self.tools.values().map(|(p, i)| &p.tools[*i]).collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }

    /// Resolves tool-name conflicts over the files' load results.
    fn build(results: &BTreeMap<PathBuf, FileEntry>) -> Catalog {
        let mut catalog = Catalog::default();
        let mut owner: HashMap<&str, &Path> = HashMap::new();
        for (path, entry) in results {
            let status = match &entry.result {
                Err(error) => PluginStatus::Failed {
                    name: plugin_name(path),
                    file: path.clone(),
                    error: error.clone(),
                },
                Ok(plugin) => match plugin.tools.iter().find_map(|t| {
                    owner
                        .get(t.name.as_str())
                        .map(|other| (t.name.as_str(), other))
                }) {
                    Some((tool, other)) => PluginStatus::Failed {
                        name: plugin.name.to_string(),
                        file: path.clone(),
                        error: format!(
                            "tool {tool:?} is already offered by {}; when two plugins offer the same tool, the file whose name sorts first keeps it",
                            other.file_name().unwrap_or_default().to_string_lossy()
                        ),
                    },
                    None => {
                        for (i, t) in plugin.tools.iter().enumerate() {
                            owner.insert(&t.name, path);
                            catalog.tools.insert(t.name.clone(), (plugin.clone(), i));
                        }
                        PluginStatus::Loaded(plugin.clone())
                    }
                },
            };
            catalog.plugins.push(status);
        }
        catalog
    }
}

/// What a rescan changed, for the host log and the event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginChange {
    Loaded {
        name: String,
        tools: Vec<String>,
        /// The version of `wasmclaw:plugin` it was built for.
        wit_version: WitVersion,
    },
    Failed {
        name: String,
        file: PathBuf,
        error: String,
    },
    Unloaded {
        name: String,
    },
}

/// A file's identity for change detection: device, inode, size, and the
/// modification and change times (a rename-into-place or a `cp -p` keeps the
/// mtime but not the inode or ctime).
type FileId = (u64, u64, u64, SystemTime, i64, i64);

/// The component's and its grants file's identities.
type Fingerprint = (Option<FileId>, Option<FileId>);

struct FileEntry {
    fingerprint: Fingerprint,
    result: Result<Arc<Plugin>, String>,
}

/// The live plugin set of one directory.
pub struct Plugins {
    runtime: Runtime,
    dir: PathBuf,
    files: tokio::sync::Mutex<BTreeMap<PathBuf, FileEntry>>,
    current: RwLock<Arc<Catalog>>,
    /// Whether the directory has been scanned once.
    scanned: tokio::sync::watch::Sender<bool>,
}

impl Plugins {
    /// Loads every plugin in `dir`. A missing directory is an empty set.
    /// Each file that fails is logged as a warning, each loaded at info.
    pub async fn load_dir(runtime: Runtime, dir: impl Into<PathBuf>) -> Arc<Plugins> {
        let plugins = Plugins::unscanned(runtime, dir);
        for change in plugins.rescan().await {
            match change {
                PluginChange::Loaded {
                    name,
                    tools,
                    wit_version,
                } => {
                    tracing::info!(plugin = %name, tools = %tools.join(", "), %wit_version, "plugin loaded")
                }
                PluginChange::Failed { file, error, .. } => {
                    tracing::warn!("plugin {} not loaded: {error}", file.display())
                }
                PluginChange::Unloaded { .. } => {}
            }
        }
        plugins
    }

    /// The set of `dir`, empty until its first [`Plugins::rescan`] (which
    /// the first pass of [`Plugins::watch`] makes).
    pub fn unscanned(runtime: Runtime, dir: impl Into<PathBuf>) -> Arc<Plugins> {
        Arc::new(Plugins {
            runtime,
            dir: dir.into(),
            files: Default::default(),
            current: Default::default(),
            scanned: tokio::sync::watch::Sender::new(false),
        })
    }

    /// Whether the directory has been scanned once.
    pub fn is_scanned(&self) -> bool {
        *self.scanned.borrow()
    }

    /// Returns once the directory has been scanned once.
    pub async fn until_scanned(&self) {
        let mut scanned = self.scanned.subscribe();
        // The sender lives as long as `self`.
        let _ = scanned.wait_for(|s| *s).await;
    }

    /// Loads exactly one file, for `plugins check` and `plugins call FILE`.
    pub async fn load_file(runtime: &Runtime, path: &Path) -> Result<Plugin, String> {
        load(runtime, path).await
    }

    /// Loads exactly one file with `grants` rather than its grants file's.
    pub async fn load_file_with_grants(
        runtime: &Runtime,
        path: &Path,
        grants: Grants,
    ) -> Result<Plugin, String> {
        load_with_grants(runtime, path, grants).await
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The current snapshot.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.current.read().unwrap().clone()
    }

    /// Validates `arguments` against the tool's schema and runs the call in a
    /// fresh instance of the plugin that offers `tool`.
    pub async fn call(
        &self,
        ctx: &CallContext,
        tool: &str,
        arguments: &str,
    ) -> Result<String, ToolError> {
        let catalog = self.catalog();
        let Some((plugin, spec)) = catalog.tool(tool) else {
            let known: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
            return Err(ToolError::new(
                ErrorKind::NotFound,
                format!(
                    "unknown tool {tool:?}; available tools: {}",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        };
        spec.check_arguments(arguments)?;
        let plugin = plugin.clone();
        drop(catalog);
        plugin.call(ctx, tool, arguments).await
    }

    /// Brings the set up to date with the directory; returns what changed
    /// (its callers log it: [`Plugins::load_dir`], [`Plugins::watch`]).
    pub async fn rescan(&self) -> Vec<PluginChange> {
        let mut files = self.files.lock().await;
        let before = self.catalog();
        let on_disk = list_wasm_files(&self.dir);

        files.retain(|path, _| on_disk.contains(path));
        for path in &on_disk {
            let fingerprint = fingerprint(path);
            if files
                .get(path)
                // A failure is retried: its cause (a directory the grants
                // name, a full disk) may be gone without the file changing.
                .is_some_and(|e| e.fingerprint == fingerprint && e.result.is_ok())
            {
                continue;
            }
            let result = load(&self.runtime, path).await.map(Arc::new);
            files.insert(
                path.clone(),
                FileEntry {
                    fingerprint,
                    result,
                },
            );
        }

        let catalog = Arc::new(Catalog::build(&files));
        let changes = diff(&before, &catalog);
        *self.current.write().unwrap() = catalog;
        self.scanned.send_replace(true);
        changes
    }
}

/// `*.wasm` entries directly in `dir`, sorted; hidden files are skipped
/// (editors and copy tools write temporary files there). Entries that are
/// not files (a directory named `x.wasm`) are listed too: loading them
/// fails with the reason, like any other bad file.
fn list_wasm_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "wasm")
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    files
}

fn fingerprint(wasm: &Path) -> Fingerprint {
    use std::os::unix::fs::MetadataExt;
    let stat = |p: &Path| {
        std::fs::metadata(p).ok().map(|m| {
            (
                m.dev(),
                m.ino(),
                m.len(),
                m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                m.ctime(),
                m.ctime_nsec(),
            )
        })
    };
    (stat(wasm), stat(&Grants::sidecar_of(wasm)))
}

fn diff(before: &Catalog, after: &Catalog) -> Vec<PluginChange> {
    let old: HashMap<&str, &PluginStatus> = before.plugins.iter().map(|s| (s.name(), s)).collect();
    let mut changes = Vec::new();
    for status in &after.plugins {
        let same = match (old.get(status.name()), status) {
            (Some(PluginStatus::Loaded(a)), PluginStatus::Loaded(b)) => Arc::ptr_eq(a, b),
            (
                Some(PluginStatus::Failed { error: a, .. }),
                PluginStatus::Failed { error: b, .. },
            ) => a == b,
            _ => false,
        };
        if same {
            continue;
        }
        changes.push(status.as_change());
    }
    let now: std::collections::HashSet<&str> = after.plugins.iter().map(|s| s.name()).collect();
    for status in &before.plugins {
        if !now.contains(status.name()) {
            changes.push(PluginChange::Unloaded {
                name: status.name().to_string(),
            });
        }
    }
    changes
}
