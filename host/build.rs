//! The `new-plugin` templates and the WIT are built into the binary
//! (`include_dir!`, `include_str!`); rebuild it when they change.
fn main() {
    println!("cargo:rerun-if-changed=../plugins/lang");
    println!("cargo:rerun-if-changed=../wit");
}
