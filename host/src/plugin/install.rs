//! Putting a plugin into the plugin directory so that a running host never
//! sees half of it: each file is written to a hidden temporary file in the
//! directory (the catalog skips hidden files) and renamed over its place,
//! the grants first, so the component is never loaded with stale grants
//! for longer than the watcher's debounce.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::policy::grants::Grants;

/// What [`install_plugin`] put where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// `dir/NAME.wasm`.
    pub wasm: PathBuf,
    /// `dir/NAME.toml`, when a grants file was given.
    pub grants: Option<PathBuf>,
    /// Whether a plugin of that name was there before.
    pub replaced: bool,
}

/// Why a plugin could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{0}: a plugin file must be named NAME.wasm")]
    NotWasm(PathBuf),
    #[error("{0} is already installed; pass --force to replace it")]
    Exists(PathBuf),
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Copies `wasm` into `dir` as `NAME.wasm` (NAME is its file stem) and
/// `grants`, if given, as `NAME.toml`, each atomically. Without `force`, a
/// plugin already there is left alone and an error says so. A grants file
/// already in `dir` stays when `grants` is `None`: grants belong to the
/// operator.
pub fn install_plugin(
    dir: &Path,
    wasm: &Path,
    grants: Option<&Path>,
    force: bool,
) -> Result<Installed, InstallError> {
    let name = wasm
        .file_stem()
        .filter(|_| wasm.extension().is_some_and(|e| e == "wasm"))
        .ok_or_else(|| InstallError::NotWasm(wasm.to_path_buf()))?;
    let dest = dir.join(format!("{}.wasm", name.to_string_lossy()));
    let replaced = dest.exists();
    if replaced && !force {
        return Err(InstallError::Exists(dest));
    }
    std::fs::create_dir_all(dir).map_err(|source| InstallError::Io {
        what: "creating the plugin directory",
        path: dir.to_path_buf(),
        source,
    })?;
    let grants = match grants {
        Some(from) => {
            let to = Grants::sidecar_of(&dest);
            copy_atomically(from, &to)?;
            Some(to)
        }
        None => None,
    };
    copy_atomically(wasm, &dest)?;
    Ok(Installed {
        wasm: dest,
        grants,
        replaced,
    })
}

/// `from` copied to `to` through a hidden temporary file beside `to`.
fn copy_atomically(from: &Path, to: &Path) -> Result<(), InstallError> {
    let bytes = std::fs::read(from).map_err(|source| InstallError::Io {
        what: "reading",
        path: from.to_path_buf(),
        source,
    })?;
    let dir = to.parent().unwrap_or(Path::new("."));
    let failed = |source| InstallError::Io {
        what: "writing",
        path: to.to_path_buf(),
        source,
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".install-")
        .tempfile_in(dir)
        .map_err(failed)?;
    // The source's permissions, not the temporary file's owner-only ones.
    let permissions = std::fs::metadata(from).map(|m| m.permissions());
    tmp.write_all(&bytes)
        .and(permissions)
        .and_then(|p| tmp.as_file().set_permissions(p))
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(failed)?;
    tmp.persist(to).map_err(|e| failed(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installs_grants_and_component_and_refuses_to_replace_without_force() {
        let src = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        let wasm = src.path().join("demo.wasm");
        let grants = src.path().join("demo.toml");
        std::fs::write(&wasm, b"v1").unwrap();
        std::fs::write(&grants, b"env = []\n").unwrap();

        let got = install_plugin(&plugins, &wasm, Some(&grants), false).unwrap();
        assert_eq!(
            got,
            Installed {
                wasm: plugins.join("demo.wasm"),
                grants: Some(plugins.join("demo.toml")),
                replaced: false,
            }
        );
        assert_eq!(std::fs::read(plugins.join("demo.wasm")).unwrap(), b"v1");
        assert_eq!(
            std::fs::read(plugins.join("demo.toml")).unwrap(),
            b"env = []\n"
        );

        std::fs::write(&wasm, b"v2").unwrap();
        let err = install_plugin(&plugins, &wasm, None, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{} is already installed; pass --force to replace it",
                plugins.join("demo.wasm").display()
            )
        );
        assert_eq!(std::fs::read(plugins.join("demo.wasm")).unwrap(), b"v1");

        let got = install_plugin(&plugins, &wasm, None, true).unwrap();
        assert!(got.replaced && got.grants.is_none());
        assert_eq!(std::fs::read(plugins.join("demo.wasm")).unwrap(), b"v2");
        // The operator's grants stay; no temporary file is left behind.
        let mut names: Vec<String> = std::fs::read_dir(&plugins)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["demo.toml", "demo.wasm"]);
    }

    #[test]
    fn a_file_not_named_wasm_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = install_plugin(dir.path(), Path::new("demo.txt"), None, true).unwrap_err();
        assert_eq!(
            err.to_string(),
            "demo.txt: a plugin file must be named NAME.wasm"
        );
    }
}
