//! Compiled plugin code on disk.
//!
//! Compiling a component is the slow part of loading it (seconds for a
//! Python or JavaScript guest) and leaves hundreds of MB of compiler memory
//! behind in the process that did it. So compiled code is cached as
//! `<sha256 of the file>-<engine compatibility hash>.cwasm`, never keyed by file
//! name, and the `wasmclaw` binary compiles misses in a child process
//! ([`Compiler::Subprocess`]) and only maps the result.
//!
//! The child is bounded ([`LoadLimits`]): it is stopped past its time
//! limit, it limits its own memory (`RLIMIT_DATA`) before it reads the
//! component, and it refuses input over the plugin file limit. A component
//! built to make the compiler work for minutes or take gigabytes then fails
//! to load with a message naming the bound, and the host is untouched.
//!
//! The cache also keeps, under `schemas/`, a mark for each set of tool
//! schemas found to compile ([`CompileCache::schemas_known`]), so a plugin
//! loaded again has its schemas compiled on first call only (see
//! [`crate::plugin::tools`]).
//!
//! The folder is bounded ([`CompileCache::max_bytes`]): past the bound the
//! least recently used entries are removed ([`prune`]). Each compilation
//! is reported to a [`CompileProgress`], so a front end can show it; a hit
//! is not.

mod child;
mod prune;

pub use child::compile_child;
pub use prune::{Pruned, prune};

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// How a cache miss is compiled.
#[derive(Debug, Clone)]
pub enum Compiler {
    /// In this process.
    InProcess,
    /// By `EXE compile-plugin --out FILE`, reading the component on stdin.
    Subprocess(PathBuf),
}

/// Where a loaded component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheOutcome {
    Hit,
    Compiled,
    Uncached,
}

/// The bounds on loading one plugin file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadLimits {
    /// Largest plugin file: a larger one is refused from its metadata,
    /// before it is read, and the compiler child refuses a larger input.
    pub max_file_bytes: u64,
    /// Wall-clock time of a compiler child; past it the child is killed.
    pub compile_timeout: Duration,
    /// Memory a compiler child may allocate (its data limit,
    /// `RLIMIT_DATA`).
    pub compile_memory_bytes: u64,
}

/// Default [`LoadLimits::max_file_bytes`].
pub const MAX_PLUGIN_FILE: u64 = 128 << 20;
/// Default [`LoadLimits::compile_timeout`].
pub const COMPILE_TIMEOUT: Duration = Duration::from_secs(120);
/// Default [`LoadLimits::compile_memory_bytes`].
pub const COMPILE_MEMORY: u64 = 2 << 30;

impl Default for LoadLimits {
    fn default() -> Self {
        LoadLimits {
            max_file_bytes: MAX_PLUGIN_FILE,
            compile_timeout: COMPILE_TIMEOUT,
            compile_memory_bytes: COMPILE_MEMORY,
        }
    }
}

/// Default [`CompileCache::max_bytes`].
pub const CACHE_MAX: u64 = 512 << 20;

/// Told of each compilation (a cache miss, or any load without a cache),
/// for a front end to show; a hit is not reported.
pub trait CompileProgress: Send + Sync + std::fmt::Debug {
    /// The plugin file `file` (its name) starts compiling.
    fn start(&self, file: &str) -> Box<dyn CompileStep>;
}

/// One compilation under way.
pub trait CompileStep: Send {
    /// It ended after `elapsed`, compiled or (`ok` false) refused.
    fn finish(self: Box<Self>, elapsed: Duration, ok: bool);
}

#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: Option<PathBuf>,
    compiler: Compiler,
    limits: LoadLimits,
    max_bytes: u64,
    progress: Option<Arc<dyn CompileProgress>>,
}

impl CompileCache {
    pub fn new(dir: Option<PathBuf>, compiler: Compiler, limits: LoadLimits) -> Self {
        Self {
            dir,
            compiler,
            limits,
            max_bytes: CACHE_MAX,
            progress: None,
        }
    }

    /// Bounds the folder to `max_bytes` of entries.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Reports each compilation to `progress`.
    pub fn with_progress(mut self, progress: Option<Arc<dyn CompileProgress>>) -> Self {
        self.progress = progress;
        self
    }

    pub fn limits(&self) -> &LoadLimits {
        &self.limits
    }

    /// The most the folder's entries may hold together.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Brings the folder under its bound (the runtime does at start).
    pub fn prune(&self) -> Pruned {
        let Some(dir) = &self.dir else {
            return Pruned::default();
        };
        let pruned = prune(dir, self.max_bytes, None);
        log_pruned(&pruned, self.max_bytes);
        pruned
    }

    /// The component for `bytes` (the plugin file `file`), from the cache
    /// when it is there.
    pub fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
        file: &str,
    ) -> Result<(Component, CacheOutcome)> {
        let Some(dir) = &self.dir else {
            let component = self.reported(file, || Ok(Component::new(engine, bytes)?))?;
            return Ok((component, CacheOutcome::Uncached));
        };
        let path = dir.join(format!("{}.cwasm", cache_key(engine, bytes)));
        match deserialize(engine, &path) {
            Ok(c) => {
                prune::touch(&path);
                return Ok((c, CacheOutcome::Hit));
            }
            // Not there, or pruned since it was looked for: a miss.
            Err(_) if !path.exists() => {}
            Err(e) => {
                tracing::warn!(file = %path.display(), "discarding unusable cache entry: {e:#}");
                let _ = std::fs::remove_file(&path);
            }
        }
        let component = self.reported(file, || {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating the cache folder {}", dir.display()))?;
            let tmp = dir.join(format!(".{}-{}.tmp", std::process::id(), unique()));
            let written = match &self.compiler {
                Compiler::InProcess => engine
                    .precompile_component(bytes)
                    .map_err(anyhow::Error::from)
                    .and_then(|code| {
                        std::fs::write(&tmp, code)
                            .with_context(|| format!("writing {}", tmp.display()))
                    }),
                Compiler::Subprocess(exe) => {
                    child::compile_in_child(exe, bytes, &tmp, &self.limits)
                }
            };
            // Mapped before it is renamed into place: a pruner may remove
            // it from the folder at once, and the mapping stays.
            let component = written.and_then(|()| deserialize(engine, &tmp));
            if component.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            let component = component?;
            // Rename is atomic: a concurrent loader sees the whole file or none.
            std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
            Ok(component)
        })?;
        log_pruned(&prune(dir, self.max_bytes, Some(&path)), self.max_bytes);
        Ok((component, CacheOutcome::Compiled))
    }

    /// Runs `compile`, reported to the progress observer.
    fn reported<T>(&self, file: &str, compile: impl FnOnce() -> Result<T>) -> Result<T> {
        let step = self.progress.as_ref().map(|p| p.start(file));
        let started = Instant::now();
        let result = compile();
        if let Some(step) = step {
            step.finish(started.elapsed(), result.is_ok());
        }
        result
    }
}

fn log_pruned(pruned: &Pruned, max_bytes: u64) {
    if !pruned.removed.is_empty() {
        tracing::info!(
            "compile cache over its bound of {}: removed the {} least recently used entries ({}), {} kept",
            crate::plugin::units::size(max_bytes),
            pruned.removed.len(),
            crate::plugin::units::size(pruned.bytes),
            crate::plugin::units::size(pruned.kept_bytes),
        );
    }
}

impl CompileCache {
    /// Whether the tool schemas of `digest` (see
    /// [`crate::plugin::tools::schemas_digest`]) were found to compile
    /// before; always false without a cache folder.
    pub fn schemas_known(&self, digest: &str) -> bool {
        self.schemas_mark(digest).is_some_and(|mark| mark.exists())
    }

    /// Keeps a mark that the schemas of `digest` compile. A mark that
    /// cannot be written only means they are compiled again next time.
    pub fn mark_schemas(&self, digest: &str) {
        let Some(mark) = self.schemas_mark(digest) else {
            return;
        };
        let written = mark
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&mark, b""));
        if let Err(e) = written {
            tracing::debug!(file = %mark.display(), "could not keep the schemas' mark: {e}");
        }
    }

    fn schemas_mark(&self, digest: &str) -> Option<PathBuf> {
        Some(self.dir.as_ref()?.join("schemas").join(digest))
    }
}

/// `sha256(file)-hash(engine settings)`.
pub fn cache_key(engine: &Engine, bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    let mut key = String::with_capacity(64 + 17);
    for b in digest {
        key.push_str(&format!("{b:02x}"));
    }
    key.push_str(&format!("-{:016x}", h.finish()));
    key
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[allow(unsafe_code)]
fn deserialize(engine: &Engine, path: &Path) -> Result<Component> {
    // SAFETY: the cache folder is the host's own; entries are written only by
    // this code (whole files, mapped here before they are renamed into
    // place, then mapped only under their final name) from `precompile_component`
    // of an engine with the same compatibility hash, which wasmtime checks
    // again here.
    Ok(unsafe { Component::deserialize_file(engine, path) }?)
}
