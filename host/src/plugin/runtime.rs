//! What all plugins share: the engine, the linker with every host import,
//! the compile cache, the paths no grant may reach, the operator's secrets,
//! the defaults of every grants file and the descriptors all calls may hold
//! together.

use std::sync::Arc;

use anyhow::Result;
use wasmtime::Engine;
use wasmtime::component::Linker;

use super::host;
use super::policy::grants::PluginDefaults;
use super::policy::protected::Protected;
use super::policy::secrets::Secrets;
use super::sandbox::cache::{CACHE_MAX, CompileCache, CompileProgress, Compiler, LoadLimits};
use super::sandbox::descriptors::DescriptorBudget;
use super::sandbox::engine::{self, EpochTicker, Epochs};
use super::sandbox::state::PluginState;

/// How the runtime is set up.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Where compiled code is cached; `None` compiles every load afresh.
    pub cache_dir: Option<std::path::PathBuf>,
    /// How cache misses are compiled.
    pub compiler: Compiler,
    /// The most the cache's entries may hold together; past it the least
    /// recently used are removed (at start and after each one written).
    pub cache_max_bytes: u64,
    /// Told of each compilation, for a front end to show.
    pub progress: Option<Arc<dyn CompileProgress>>,
    /// Largest plugin file, and the bounds of a compiler child.
    pub load: LoadLimits,
    /// Plugin instances alive at once (all sessions, tools and hooks).
    pub max_instances: u32,
    /// Paths of the host's own that no grant may reach, besides the cache
    /// and each plugin's own directory, which are always protected.
    pub protected: Vec<Protected>,
    /// The operator's secrets, which grants' credentials name.
    pub secrets: Arc<Secrets>,
    /// Descriptors all plugin calls may hold together; `None`: half the
    /// process's open-file limit (see [`super::sandbox::descriptors`]).
    pub max_descriptors: Option<usize>,
    /// Limits and hook settings of plugins whose grants file does not set
    /// them, and the variables no grant may pass.
    pub plugin_defaults: PluginDefaults,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            cache_dir: None,
            compiler: Compiler::InProcess,
            cache_max_bytes: CACHE_MAX,
            progress: None,
            load: LoadLimits::default(),
            max_instances: 1000,
            protected: Vec::new(),
            secrets: Arc::default(),
            max_descriptors: None,
            plugin_defaults: PluginDefaults::default(),
        }
    }
}

/// The engine, the linker and the compile cache, shared by all plugins.
/// Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    linker: Linker<PluginState>,
    cache: CompileCache,
    protected: Vec<Protected>,
    secrets: Arc<Secrets>,
    descriptors: Arc<DescriptorBudget>,
    plugin_defaults: PluginDefaults,
    ticker: EpochTicker,
}

impl Runtime {
    /// The runtime of `config`; the cache folder is pruned to its bound.
    pub fn new(config: RuntimeConfig) -> Result<Self> {
        let engine = engine::new_engine(config.max_instances)?;
        let linker = host::linker(&engine)?;

        let mut protected = config.protected;
        protected.extend(config.cache_dir.as_ref().map(|dir| {
            Protected::new(
                dir,
                "the compile cache",
                "the host runs the code it holds without checking it again",
            )
        }));
        let cache = CompileCache::new(config.cache_dir, config.compiler, config.load)
            .with_max_bytes(config.cache_max_bytes)
            .with_progress(config.progress);
        cache.prune();
        Ok(Self {
            inner: Arc::new(Inner {
                ticker: EpochTicker::start(engine.clone()),
                engine,
                linker,
                cache,
                protected,
                secrets: config.secrets,
                plugin_defaults: config.plugin_defaults,
                descriptors: match config.max_descriptors {
                    Some(n) => DescriptorBudget::new(n),
                    None => DescriptorBudget::for_process(),
                },
            }),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// What a call holds the epoch ticker running with (see
    /// [`engine::EpochTicker`]).
    pub fn epochs(&self) -> &Epochs {
        self.inner.ticker.epochs()
    }

    pub fn linker(&self) -> &Linker<PluginState> {
        &self.inner.linker
    }

    pub fn cache(&self) -> &CompileCache {
        &self.inner.cache
    }

    pub fn secrets(&self) -> &Arc<Secrets> {
        &self.inner.secrets
    }

    /// What a plugin gets where its grants file says nothing.
    pub fn plugin_defaults(&self) -> &PluginDefaults {
        &self.inner.plugin_defaults
    }

    /// Descriptors all plugin calls may hold together.
    pub fn descriptors(&self) -> &Arc<DescriptorBudget> {
        &self.inner.descriptors
    }

    /// Paths no grant may overlap.
    pub fn protected(&self) -> &[Protected] {
        &self.inner.protected
    }
}
