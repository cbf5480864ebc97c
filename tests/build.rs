//! Builds the guest plugins the tests load: the fixtures in `fixtures/` and
//! the example plugins in `../plugins/`, each a cargo workspace of its own,
//! for `wasm32-wasip2`, into `target/guests` (a target folder of their own,
//! so the nested cargo does not wait on the outer one's lock).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = here.parent().unwrap().to_path_buf();
    let target = root.join("target").join("guests");

    check_target_installed();
    for workspace in [here.join("fixtures"), root.join("plugins")] {
        watch_workspace(&workspace);
        build(&workspace, &target);
    }
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    println!(
        "cargo:rustc-env=WASMCLAW_GUESTS={}",
        target.join("wasm32-wasip2").join("release").display()
    );
    println!(
        "cargo:rustc-env=WASMCLAW_PLUGINS_SRC={}",
        root.join("plugins").display()
    );
}

fn check_target_installed() {
    let out = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output();
    if let Ok(out) = out
        && !String::from_utf8_lossy(&out.stdout).contains("wasm32-wasip2")
    {
        panic!(
            "the wasm32-wasip2 target is not installed; run `rustup target add wasm32-wasip2` (the README's commands do this)"
        );
    }
}

/// Rebuild when a member's sources, manifest or WIT copy change; never scan
/// target folders.
fn watch_workspace(workspace: &Path) {
    println!(
        "cargo:rerun-if-changed={}",
        workspace.join("Cargo.toml").display()
    );
    let Ok(entries) = std::fs::read_dir(workspace) else {
        return;
    };
    for entry in entries.flatten() {
        let member = entry.path();
        if !member.join("Cargo.toml").exists() {
            // Shared sources (e.g. fixtures/filler), never a target folder.
            if member.is_dir() && entry.file_name() != "target" {
                println!("cargo:rerun-if-changed={}", member.display());
            }
            continue;
        }
        for part in ["Cargo.toml", "src", "wit"] {
            let p = member.join(part);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
}

fn build(workspace: &Path, target: &Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "--target",
        "wasm32-wasip2",
        "--manifest-path",
    ])
    .arg(workspace.join("Cargo.toml"))
    .arg("--target-dir")
    .arg(target);
    // Settings of the outer build must not leak into the guests' build.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_PROFILE_RELEASE_DEBUG",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().expect("running cargo for the guest plugins");
    if !status.success() {
        panic!(
            "building the guest plugins in {} failed",
            workspace.display()
        );
    }
}
