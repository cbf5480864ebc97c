//! The `new-plugin` templates and the WIT are built into the binary
//! (`include_dir!`, `include_str!`); rebuild it when they change.
//!
//! On Linux the binary's relative relocations are packed (`DT_RELR`,
//! glibc 2.36 and binutils 2.38 or later; an older linker ignores the
//! flag): the dynamic loader then reads a few kilobytes at start instead
//! of 2 MB of relocation entries, which a one-shot `wasmclaw run` paid in
//! time and resident memory.
fn main() {
    println!("cargo:rerun-if-changed=../plugins/lang");
    println!("cargo:rerun-if-changed=../wit");
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.ends_with("-linux-gnu") {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
