//! The host's own paths, which no directory grant may reach.
//!
//! A plugin that could read the wasmclaw home would read the operator's
//! secrets, the session database and the API token; one that could write
//! to the plugin directory could grant itself anything. So a granted
//! directory may be none of these paths, nor inside one, nor a parent of
//! one. The home itself is protected as a whole and in each of its parents,
//! while a folder of its own that is none of the protected paths (the
//! example plugins' `workspace`) may be granted: every path the host keeps
//! in the home is on the list, and a new one must be added to it.
//!
//! The check holds whether or not a protected path exists yet: on the first
//! start of a home the cache, the database and the token are made only after
//! the plugins are loaded. A path is compared in two forms: as written (made
//! absolute), and resolved, with its longest existing ancestor canonicalized
//! (symbolic links followed) and the rest appended.

use std::path::{Component, Path, PathBuf};

/// A path of the host's own, with what it is and why no plugin may have it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    pub path: PathBuf,
    /// What it is, for messages: "wasmclaw's home".
    pub what: &'static str,
    /// Why a plugin may not reach it, for messages.
    pub why: &'static str,
    /// Whether a folder inside it may be granted: the home's own folders
    /// (a plugin's workspace, say) may be, while the home itself, its
    /// parents and the protected paths in it may not.
    pub inside_grantable: bool,
}

impl Protected {
    pub fn new(path: impl Into<PathBuf>, what: &'static str, why: &'static str) -> Self {
        Protected {
            path: path.into(),
            what,
            why,
            inside_grantable: false,
        }
    }

    /// A folder that may not be granted, nor any parent of it, but whose
    /// other folders may be: the home, whose own paths are protected each.
    pub fn holder(path: impl Into<PathBuf>, what: &'static str, why: &'static str) -> Self {
        Protected {
            inside_grantable: true,
            ..Protected::new(path, what, why)
        }
    }

    /// The folder a plugin file lies in.
    pub fn plugin_dir(path: impl Into<PathBuf>) -> Self {
        Protected::new(
            path,
            "the plugin directory",
            "a plugin that reaches it could replace plugins and rewrite their grants",
        )
    }

    /// The forms this path is compared in: as written and resolved.
    fn forms(&self) -> Vec<PathBuf> {
        let written = std::path::absolute(&self.path).unwrap_or_else(|_| self.path.clone());
        let resolved = resolve(&written);
        if resolved == written {
            vec![written]
        } else {
            vec![written, resolved]
        }
    }
}

/// The first protected path that `granted` (a canonical directory) overlaps,
/// as a message: `{granted} contains the secrets file ({path}): {why}`.
pub fn overlap(granted: &Path, protected: &[Protected]) -> Option<String> {
    for own in protected {
        for form in own.forms() {
            let relation = if granted == form {
                "is"
            } else if granted.starts_with(&form) {
                if own.inside_grantable {
                    continue;
                }
                "is inside"
            } else if form.starts_with(granted) {
                "contains"
            } else {
                continue;
            };
            return Some(format!(
                "{} {relation} {} ({}): {}",
                granted.display(),
                own.what,
                form.display(),
                own.why
            ));
        }
    }
    None
}

/// `path` (absolute) with symbolic links resolved as far as it exists: its
/// longest existing ancestor canonicalized, the rest appended (`..` in the
/// rest taken lexically).
pub fn resolve(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut base = path;
    loop {
        if let Ok(real) = base.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                match part {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::Normal(name) => out.push(name),
                    _ => {}
                }
            }
            return out;
        }
        let (Some(parent), Some(last)) = (base.parent(), base.components().next_back()) else {
            return path.to_path_buf();
        };
        rest.push(last);
        base = parent;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_path_resolves_through_its_existing_ancestor() {
        let root = tempfile::tempdir().unwrap();
        let real = root.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, root.path().join("link")).unwrap();
        let canonical = real.canonicalize().unwrap();
        assert_eq!(
            resolve(&root.path().join("link/home/cache")),
            canonical.join("home/cache")
        );
        assert_eq!(
            resolve(&root.path().join("link/a/../b")),
            canonical.join("b")
        );
        assert_eq!(resolve(&root.path().join("link")), canonical);
    }

    #[test]
    fn the_grant_may_be_neither_the_path_nor_inside_it_nor_above_it() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(home.join("sub")).unwrap();
        // The secrets file does not exist: it is protected all the same.
        let protected = [Protected::new(
            home.join("secrets.toml"),
            "the secrets file",
            "why",
        )];
        assert_eq!(
            overlap(&home, &protected).unwrap(),
            format!(
                "{} contains the secrets file ({}/secrets.toml): why",
                home.display(),
                home.display()
            )
        );
        assert_eq!(overlap(&home.join("sub"), &protected), None);
        let protected = [Protected::new(&home, "wasmclaw's home", "why")];
        assert!(
            overlap(&home, &protected)
                .unwrap()
                .contains(" is wasmclaw's home ")
        );
        assert!(
            overlap(&home.join("sub"), &protected)
                .unwrap()
                .contains(" is inside wasmclaw's home ")
        );
        assert!(overlap(&root, &protected).unwrap().contains(" contains "));
        // The home's own folders may be granted; the home and its parents not.
        let protected = [Protected::holder(&home, "wasmclaw's home", "why")];
        assert_eq!(overlap(&home.join("sub"), &protected), None);
        assert!(
            overlap(&home, &protected)
                .unwrap()
                .contains(" is wasmclaw's home ")
        );
        assert!(overlap(&root, &protected).unwrap().contains(" contains "));
    }
}
