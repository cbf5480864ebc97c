//! Putting a plugin file and its grants file into a plugin directory so
//! that a host watching it never sees a half-written file, nor the new
//! component without the grants meant for it.
//!
//! Both files are first copied to hidden temporary files in the directory
//! (which the catalog skips), so a failed copy (a full disk, an unreadable
//! source) changes nothing. Then each is renamed into place, the grants
//! first: a rename is atomic, so a reader sees the old file or the new one,
//! whole. A plugin installed without a grants file has none: an old one
//! is removed before the component is replaced, so new code never runs
//! with grants written for the old. Checking that the plugin loads is the
//! caller's part (`plugins install` does it first).

use std::path::{Path, PathBuf};

/// What was put into the plugin directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// `DIR/NAME.wasm`.
    pub wasm: PathBuf,
    /// `DIR/NAME.toml`, when a grants file was installed.
    pub grants: Option<PathBuf>,
    /// Whether a plugin of that name was there and has been replaced.
    pub replaced: bool,
    /// Whether an old grants file was removed (the new plugin has none).
    pub removed_grants: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(
        "{}: a plugin file is NAME.wasm, with a NAME that does not start with '.'",
        file.display()
    )]
    NotAPluginName { file: PathBuf },
    #[error("{} is already installed; pass --force to replace it", path.display())]
    Exists { path: PathBuf },
    #[error("{what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Where `wasm` is installed in `dir`: `DIR/NAME.wasm` and `DIR/NAME.toml`.
pub fn destination(dir: &Path, wasm: &Path) -> Result<(PathBuf, PathBuf), InstallError> {
    let name = wasm
        .file_stem()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty() && !n.starts_with('.'))
        .filter(|_| wasm.extension().is_some_and(|x| x == "wasm"));
    let Some(name) = name else {
        return Err(InstallError::NotAPluginName {
            file: wasm.to_path_buf(),
        });
    };
    Ok((
        dir.join(format!("{name}.wasm")),
        dir.join(format!("{name}.toml")),
    ))
}

/// Refuses, unless `force`, when the plugin `wasm` names is in `dir`
/// already (its component or a grants file of its name).
pub fn refuse_existing(dir: &Path, wasm: &Path, force: bool) -> Result<(), InstallError> {
    let (to_wasm, to_grants) = destination(dir, wasm)?;
    if force {
        return Ok(());
    }
    for path in [to_wasm, to_grants] {
        if std::fs::symlink_metadata(&path).is_ok() {
            return Err(InstallError::Exists { path });
        }
    }
    Ok(())
}

/// Copies `wasm` (and `grants`, as `NAME.toml`) into `dir`, creating it:
/// grants first, each through a temporary file renamed into place. Refuses
/// to replace a plugin of that name unless `force`.
pub fn install_plugin(
    dir: &Path,
    wasm: &Path,
    grants: Option<&Path>,
    force: bool,
) -> Result<Installed, InstallError> {
    refuse_existing(dir, wasm, force)?;
    let (to_wasm, to_grants) = destination(dir, wasm)?;
    std::fs::create_dir_all(dir).map_err(|source| InstallError::Io {
        what: "cannot create the plugin directory",
        path: dir.to_path_buf(),
        source,
    })?;
    let replaced = std::fs::symlink_metadata(&to_wasm).is_ok();

    let staged_grants = grants
        .map(|from| Staged::copy(from, &to_grants))
        .transpose()?;
    let staged_wasm = Staged::copy(wasm, &to_wasm)?;

    let removed_grants = match staged_grants {
        Some(staged) => {
            staged.commit()?;
            false
        }
        None => match std::fs::remove_file(&to_grants) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(source) => {
                return Err(InstallError::Io {
                    what: "cannot remove the old grants file",
                    path: to_grants,
                    source,
                });
            }
        },
    };
    staged_wasm.commit()?;
    Ok(Installed {
        wasm: to_wasm,
        grants: grants.map(|_| to_grants),
        replaced,
        removed_grants,
    })
}

/// A whole copy in a hidden temporary file beside its destination; removed
/// if it is dropped before [`Staged::commit`].
struct Staged {
    tmp: PathBuf,
    to: PathBuf,
    committed: bool,
}

impl Staged {
    fn copy(from: &Path, to: &Path) -> Result<Staged, InstallError> {
        let name = to.file_name().unwrap_or_default().to_string_lossy();
        let tmp = to.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let staged = Staged {
            tmp,
            to: to.to_path_buf(),
            committed: false,
        };
        let io = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| InstallError::Io { what, path, source }
        };
        std::fs::copy(from, &staged.tmp).map_err(io("cannot copy", from))?;
        // On disk before it is renamed into place: a crash leaves the old
        // file or the new one, not an empty one.
        std::fs::File::open(&staged.tmp)
            .and_then(|f| f.sync_all())
            .map_err(io("cannot write", &staged.tmp))?;
        Ok(staged)
    }

    fn commit(mut self) -> Result<(), InstallError> {
        std::fs::rename(&self.tmp, &self.to).map_err(|source| InstallError::Io {
            what: "cannot write",
            path: self.to.clone(),
            source,
        })?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut all: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let name = e.file_name().to_string_lossy().into_owned();
                (name, std::fs::read(e.path()).unwrap())
            })
            .collect();
        all.sort();
        all
    }

    fn pair(src: &Path, wasm: &[u8], grants: &[u8]) -> (PathBuf, PathBuf) {
        let (w, g) = (src.join("calc.wasm"), src.join("calc-grants.toml"));
        std::fs::write(&w, wasm).unwrap();
        std::fs::write(&g, grants).unwrap();
        (w, g)
    }

    #[test]
    fn both_files_go_in_under_the_plugin_name_and_nothing_else() {
        let src = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        let (w, g) = pair(src.path(), b"one", b"env = []\n");
        let done = install_plugin(&plugins, &w, Some(&g), false).unwrap();
        assert_eq!(
            done,
            Installed {
                wasm: plugins.join("calc.wasm"),
                grants: Some(plugins.join("calc.toml")),
                replaced: false,
                removed_grants: false,
            }
        );
        assert_eq!(
            files(&plugins),
            vec![
                ("calc.toml".into(), b"env = []\n".to_vec()),
                ("calc.wasm".into(), b"one".to_vec())
            ]
        );
    }

    #[test]
    fn an_existing_plugin_is_replaced_only_with_force() {
        let src = tempfile::tempdir().unwrap();
        let plugins = tempfile::tempdir().unwrap();
        let (w, g) = pair(src.path(), b"one", b"# old\n");
        install_plugin(plugins.path(), &w, Some(&g), false).unwrap();
        std::fs::write(&w, b"two").unwrap();

        let err = install_plugin(plugins.path(), &w, None, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{} is already installed; pass --force to replace it",
                plugins.path().join("calc.wasm").display()
            )
        );
        assert_eq!(files(plugins.path())[1].1, b"one");

        // Replaced without a grants file: the old one goes too.
        let done = install_plugin(plugins.path(), &w, None, true).unwrap();
        assert!(done.replaced && done.removed_grants);
        assert_eq!(
            files(plugins.path()),
            vec![("calc.wasm".into(), b"two".to_vec())]
        );
    }

    #[test]
    fn a_failed_copy_changes_nothing() {
        let src = tempfile::tempdir().unwrap();
        let plugins = tempfile::tempdir().unwrap();
        let (w, g) = pair(src.path(), b"one", b"# old\n");
        install_plugin(plugins.path(), &w, Some(&g), false).unwrap();
        let before = files(plugins.path());

        let missing = src.path().join("gone.toml");
        let err = install_plugin(plugins.path(), &w, Some(&missing), true).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("cannot copy {}: ", missing.display())),
            "{err}"
        );
        assert_eq!(files(plugins.path()), before);
    }

    #[test]
    fn a_file_that_is_not_name_wasm_is_refused() {
        let plugins = tempfile::tempdir().unwrap();
        for bad in ["calc.txt", ".calc.wasm", "calc"] {
            let err = install_plugin(plugins.path(), Path::new(bad), None, false).unwrap_err();
            assert!(
                matches!(err, InstallError::NotAPluginName { .. }),
                "{bad}: {err}"
            );
        }
        assert_eq!(files(plugins.path()), vec![]);
    }
}
