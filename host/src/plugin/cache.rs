//! Compiled plugin code on disk.
//!
//! Compiling a component is the slow part of loading it (seconds for a
//! Python or JavaScript guest) and leaves hundreds of MB of compiler memory
//! behind in the process that did it. So compiled code is cached as
//! `<sha256 of the file>-<engine compatibility hash>.cwasm`, never keyed by file
//! name, and the `wasmclaw` binary compiles misses in a child process
//! ([`Compiler::Subprocess`]) and only maps the result.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
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

#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: Option<PathBuf>,
    compiler: Compiler,
}

impl CompileCache {
    pub fn new(dir: Option<PathBuf>, compiler: Compiler) -> Self {
        Self { dir, compiler }
    }

    /// The component for `bytes`, from the cache when it is there.
    pub fn load(&self, engine: &Engine, bytes: &[u8]) -> Result<(Component, CacheOutcome)> {
        let Some(dir) = &self.dir else {
            return Ok((Component::new(engine, bytes)?, CacheOutcome::Uncached));
        };
        let path = dir.join(format!("{}.cwasm", cache_key(engine, bytes)));
        if path.exists() {
            match deserialize(engine, &path) {
                Ok(c) => return Ok((c, CacheOutcome::Hit)),
                Err(e) => {
                    tracing::warn!(file = %path.display(), "discarding unusable cache entry: {e:#}");
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the cache folder {}", dir.display()))?;
        let tmp = dir.join(format!(".{}-{}.tmp", std::process::id(), unique()));
        match &self.compiler {
            Compiler::InProcess => {
                let code = engine.precompile_component(bytes)?;
                std::fs::write(&tmp, code).with_context(|| format!("writing {}", tmp.display()))?;
            }
            Compiler::Subprocess(exe) => compile_in_child(exe, bytes, &tmp)?,
        }
        // Rename is atomic: a concurrent loader sees the whole file or none.
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
        Ok((deserialize(engine, &path)?, CacheOutcome::Compiled))
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
    // this code (whole files, renamed into place) from `precompile_component`
    // of an engine with the same compatibility hash, which wasmtime checks
    // again here.
    Ok(unsafe { Component::deserialize_file(engine, path) }?)
}

fn compile_in_child(exe: &Path, bytes: &[u8], out: &Path) -> Result<()> {
    let mut child = Command::new(exe)
        .arg("compile-plugin")
        .arg("--out")
        .arg(out)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting the compiler process {}", exe.display()))?;
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(bytes)
        .context("sending the component to the compiler process")?;
    let output = child.wait_with_output()?;
    if !output.status.success() {
        let _ = std::fs::remove_file(out);
        bail!(
            "{}",
            String::from_utf8_lossy(&output.stderr)
                .trim()
                .trim_start_matches("error: ")
        );
    }
    Ok(())
}

/// The child's side of [`Compiler::Subprocess`]: compile `bytes` with the
/// shared settings and write the result to `out`.
pub fn compile_to_file(bytes: &[u8], out: &Path) -> Result<()> {
    let engine = Engine::new(&super::engine::compile_config())?;
    let code = engine.precompile_component(bytes)?;
    std::fs::write(out, code).with_context(|| format!("writing {}", out.display()))
}
