//! `wasmclaw-adapter FILE`: writes the WASI preview1 reactor adapter of the
//! wasmtime the host is built with to FILE, the same bytes as
//! `wasmclaw plugins adapter FILE`. C, Zig and Go plugins are preview1 core
//! modules; `wasm-tools component new core.wasm --adapt
//! wasi_snapshot_preview1=FILE` turns one into a component the host runs.
//!
//! The workspace pins `wasi-preview1-component-adapter-provider` to the
//! host's wasmtime version, so the two cannot drift apart.

use std::path::PathBuf;
use std::process::ExitCode;

use wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER as ADAPTER;

#[allow(clippy::print_stderr)]
fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(file), None) = (args.next(), args.next()) else {
        eprintln!(
            "usage: wasmclaw-adapter FILE (writes the WASI preview1 reactor adapter to FILE)"
        );
        return ExitCode::from(2);
    };
    let file = PathBuf::from(file);
    if let Some(parent) = file.parent().filter(|p| !p.as_os_str().is_empty())
        && let Err(e) = std::fs::create_dir_all(parent)
    {
        eprintln!("wasmclaw-adapter: creating {}: {e}", parent.display());
        return ExitCode::FAILURE;
    }
    // A temporary file beside it, then a rename: a reader never sees half.
    let tmp = file.with_extension("wasm.tmp");
    if let Err(e) = std::fs::write(&tmp, ADAPTER).and_then(|()| std::fs::rename(&tmp, &file)) {
        let _ = std::fs::remove_file(&tmp);
        eprintln!("wasmclaw-adapter: writing {}: {e}", file.display());
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
