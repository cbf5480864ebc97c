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
}
