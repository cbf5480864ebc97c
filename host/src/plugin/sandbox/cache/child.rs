//! The compiler child of [`super::Compiler::Subprocess`]: the host's side
//! (start it, feed it the component, stop it past its time limit, say why
//! it failed) and the child's own ([`compile_child`]).

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use wasmtime::Engine;

use super::LoadLimits;

/// How often a waiting host looks whether its compiler child has exited.
const CHILD_POLL: Duration = Duration::from_millis(5);

/// Most of the child's stderr kept for the error message.
const CHILD_STDERR: u64 = 16 << 10;

pub(super) fn compile_in_child(
    exe: &Path,
    bytes: &[u8],
    out: &Path,
    limits: &LoadLimits,
) -> Result<()> {
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
    let engine = Engine::new(&crate::plugin::sandbox::engine::compile_config())?;
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
