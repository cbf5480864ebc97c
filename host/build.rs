//! The `new-plugin` templates and the WIT are built into the binary
//! (`include_dir!`, `include_str!`); rebuild it when they change.
//!
//! On Linux the binary's relative relocations are packed (`DT_RELR`): the
//! dynamic loader then reads a few kilobytes at start instead of 2 MB of
//! relocation entries, which a one-shot `wasmclaw run` paid in time and
//! resident memory. It needs binutils 2.38 to link (an older linker ignores
//! the flag), and a binary so linked needs glibc 2.36 where it runs (an
//! older one refuses to start it, naming `GLIBC_ABI_DT_RELR`).
fn main() {
    println!("cargo:rerun-if-changed=../plugins/lang");
    println!("cargo:rerun-if-changed=../wit");
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.ends_with("-linux-gnu") {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    link_order(&target);
}

/// An optimised build for x86-64 Linux, where rustc links with LLD, lays
/// out the functions named in `link-order.txt` first and together: the ones
/// a one-shot `run` and `serve`'s turns execute (4.6 MB of the 34 MB of
/// code; `make link-order` writes the list). The kernel maps a binary's
/// code in runs of pages around each page touched: scattered over the whole
/// text, those functions made 20 MB of it resident in a `run`; together,
/// 5 MB. Names the build no longer defines are skipped quietly, so a stale
/// list costs only some of the gain.
///
/// The flag is LLD's: a build told to link otherwise (a linker or
/// `-fuse-ld` in its flags, `linker-features`), or with
/// `WASMCLAW_LINK_ORDER=0`, goes without it.
fn link_order(target: &str) {
    println!("cargo:rerun-if-env-changed=WASMCLAW_LINK_ORDER");
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("link-order.txt");
    if !file.exists() {
        return;
    }
    println!("cargo:rerun-if-changed={}", file.display());
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let optimised = env("PROFILE") == "release";
    let flags = env("CARGO_ENCODED_RUSTFLAGS");
    let other_linker =
        !env("RUSTC_LINKER").is_empty() || ["linker", "fuse-ld"].iter().any(|f| flags.contains(f));
    let wanted = env("WASMCLAW_LINK_ORDER") != "0";
    if optimised && target == "x86_64-unknown-linux-gnu" && !other_linker && wanted {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            named_by_content(&file).display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// A copy of `file` in the build's output folder, named by its content: a
/// new list is a new link argument, so cargo links the binary again (the
/// same argument would leave the binary linked with the old list).
fn named_by_content(file: &std::path::Path) -> std::path::PathBuf {
    use std::hash::{Hash, Hasher};
    let text = std::fs::read(file).expect("reading link-order.txt");
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    let copy = std::path::Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join(format!("link-order-{:016x}.txt", hasher.finish()));
    std::fs::write(&copy, text).expect("writing the link order's copy");
    copy
}
