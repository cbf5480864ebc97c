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

use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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

/// How often a waiting host looks whether its compiler child has exited.
const CHILD_POLL: Duration = Duration::from_millis(5);

/// Most of the child's stderr kept for the error message.
const CHILD_STDERR: u64 = 16 << 10;

#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: Option<PathBuf>,
    compiler: Compiler,
    limits: LoadLimits,
}

impl CompileCache {
    pub fn new(dir: Option<PathBuf>, compiler: Compiler, limits: LoadLimits) -> Self {
        Self {
            dir,
            compiler,
            limits,
        }
    }

    pub fn limits(&self) -> &LoadLimits {
        &self.limits
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
            Compiler::Subprocess(exe) => compile_in_child(exe, bytes, &tmp, &self.limits)?,
        }
        // Rename is atomic: a concurrent loader sees the whole file or none.
        std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
        Ok((deserialize(engine, &path)?, CacheOutcome::Compiled))
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
    // this code (whole files, renamed into place) from `precompile_component`
    // of an engine with the same compatibility hash, which wasmtime checks
    // again here.
    Ok(unsafe { Component::deserialize_file(engine, path) }?)
}

fn compile_in_child(exe: &Path, bytes: &[u8], out: &Path, limits: &LoadLimits) -> Result<()> {
    let mut child = Command::new(exe)
        .arg("compile-plugin")
        .arg("--out")
        .arg(out)
        .arg("--memory-bytes")
        .arg(limits.compile_memory_bytes.to_string())
        .arg("--max-input-bytes")
        .arg(limits.max_file_bytes.to_string())
        // A backtrace is symbolized in memory the child may not have left.
        .env("RUST_BACKTRACE", "0")
        .env("RUST_LIB_BACKTRACE", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting the compiler process {}", exe.display()))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let stderr = child.stderr.take().expect("piped stderr");
    let (status, stderr) = std::thread::scope(|s| {
        // The child may stop reading (it failed, or it was killed): the
        // write then fails, and the child's status says why.
        s.spawn(move || stdin.write_all(bytes));
        let reader = s.spawn(move || head_of(stderr, CHILD_STDERR));
        let status = wait_until(&mut child, Instant::now() + limits.compile_timeout);
        (status, reader.join().unwrap_or_default())
    });
    match status? {
        Some(status) if status.success() => Ok(()),
        status => {
            let _ = std::fs::remove_file(out);
            Err(child_failure(status, &stderr, limits))
        }
    }
}

/// The child's exit status, or `None` when it was still running at
/// `deadline` and has been killed.
fn wait_until(child: &mut std::process::Child, deadline: Instant) -> Result<Option<ExitStatus>> {
    loop {
        if let Some(status) = child
            .try_wait()
            .context("waiting for the compiler process")?
        {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(CHILD_POLL);
    }
}

/// The first `keep` bytes of `from`, read to its end: a child that writes
/// more than that (and more than a pipe holds) is not left blocked on a
/// full pipe, to be taken for one that ran out of time.
fn head_of(mut from: impl Read, keep: u64) -> String {
    let mut text = Vec::new();
    let _ = from.by_ref().take(keep).read_to_end(&mut text);
    let _ = std::io::copy(&mut from, &mut std::io::sink());
    String::from_utf8_lossy(&text).into_owned()
}

/// Why the child failed, in plain words: a bound it ran into, or what it
/// said.
fn child_failure(status: Option<ExitStatus>, stderr: &str, limits: &LoadLimits) -> anyhow::Error {
    use std::os::unix::process::ExitStatusExt;
    let Some(status) = status else {
        return anyhow::anyhow!(
            "compiling it took longer than the compiler's time limit of {} (--compile-timeout), and the compiler was stopped",
            crate::plugin::units::duration(limits.compile_timeout)
        );
    };
    let said = stderr.trim().trim_start_matches("error: ");
    // An allocation that failed, or a compiler thread that could not start
    // for want of memory.
    let out_of_memory = [
        "memory allocation of",
        "Cannot allocate memory",
        "out of memory",
        "ThreadPoolBuildError",
    ];
    if out_of_memory.iter().any(|m| said.contains(m)) {
        return anyhow::anyhow!(
            "compiling it needed more memory than the compiler's limit of {} (--compile-memory-mib)",
            crate::plugin::units::size(limits.compile_memory_bytes)
        );
    }
    match status.signal() {
        Some(signal) if said.is_empty() => {
            anyhow::anyhow!("the compiler process was killed by signal {signal}")
        }
        _ if said.is_empty() => anyhow::anyhow!("the compiler process failed ({status})"),
        _ => anyhow::anyhow!("{said}"),
    }
}

/// The child's side of [`Compiler::Subprocess`]: bound its own memory to
/// `memory_bytes`, read the component from `input` (at most
/// `max_input_bytes`), compile it with the shared settings and write the
/// result to `out`.
pub fn compile_child(
    input: impl Read,
    out: &Path,
    memory_bytes: u64,
    max_input_bytes: u64,
) -> Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    setrlimit(
        Resource::Data,
        Rlimit {
            current: Some(memory_bytes),
            maximum: Some(memory_bytes),
        },
    )
    .context("limiting the compiler's memory")?;
    let mut bytes = Vec::new();
    input
        .take(max_input_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .context("reading the component from stdin")?;
    if bytes.len() as u64 > max_input_bytes {
        bail!(
            "the component is larger than the plugin file limit of {}",
            crate::plugin::units::size(max_input_bytes)
        );
    }
    compile_to_file(&bytes, out)
}

/// Compiles `bytes` with the shared settings and writes the result to
/// `out`.
fn compile_to_file(bytes: &[u8], out: &Path) -> Result<()> {
    let engine = Engine::new(&super::engine::compile_config())?;
    let code = engine.precompile_component(bytes)?;
    std::fs::write(out, code).with_context(|| format!("writing {}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_stderr_is_kept_in_part_and_read_to_its_end() {
        let mut said = std::io::Cursor::new(vec![b'e'; 100 << 10]);
        let head = head_of(&mut said, CHILD_STDERR);
        assert_eq!(head, "e".repeat(16 << 10));
        assert_eq!(said.position(), 100 << 10);
    }
}
