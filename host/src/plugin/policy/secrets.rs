//! The operator's secrets: values that grants name and the host adds to a
//! plugin's HTTP requests, so the plugin never holds them.
//!
//! A secret `NAME` is read from the environment variable
//! `WASMCLAW_SECRET_NAME` (upper case), or else from `secrets.toml` in the
//! wasmclaw home (`name = "value"` lines), which must be readable by its
//! owner only.

use std::collections::HashMap;
use std::path::Path;

/// Secret values by name.
#[derive(Default, Clone)]
pub struct Secrets {
    from_file: HashMap<String, String>,
    /// Where `from_file` came from, for messages.
    file: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only; values never reach a log.
        let mut names: Vec<&String> = self.from_file.keys().collect();
        names.sort();
        f.debug_struct("Secrets")
            .field("file", &self.file)
            .field("names", &names)
            .finish()
    }
}

/// What the environment variables of secrets start with.
pub const ENV_PREFIX: &str = "WASMCLAW_SECRET_";

/// The environment variable that holds secret `name`.
pub fn env_var(name: &str) -> String {
    format!("{ENV_PREFIX}{}", name.to_ascii_uppercase())
}

impl Secrets {
    /// Reads `file` if it exists. A file that others may read is refused:
    /// the error names it and says how to fix it.
    pub fn load(file: &Path) -> Result<Secrets, String> {
        use std::os::unix::fs::PermissionsExt;
        let meta = match std::fs::metadata(file) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Secrets::default()),
            Err(e) => return Err(format!("{}: cannot read: {e}", file.display())),
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "{}: readable by others (mode {mode:03o}); secrets must be readable by their owner only: chmod 600 {}",
                file.display(),
                file.display()
            ));
        }
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("{}: cannot read: {e}", file.display()))?;
        // The parser's message may quote the offending value, a secret:
        // name only the line.
        let from_file: HashMap<String, String> = toml::from_str(&text).map_err(|e| {
            let line = e
                .span()
                .map(|span| text[..span.start].lines().count().max(1));
            format!(
                "{}: expected lines of name = \"value\" (a string){}",
                file.display(),
                line.map(|l| format!("; line {l} is not"))
                    .unwrap_or_default()
            )
        })?;
        Ok(Secrets {
            from_file,
            file: Some(file.to_path_buf()),
        })
    }

    /// Secrets given directly (tests).
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Secrets {
        Secrets {
            from_file: pairs.into_iter().collect(),
            file: None,
        }
    }

    /// The value of `name`: the environment first, then the file.
    pub fn get(&self, name: &str) -> Option<String> {
        std::env::var(env_var(name))
            .ok()
            .or_else(|| self.from_file.get(name).cloned())
    }

    /// Where the operator can put secret `name`, for messages.
    pub fn where_to_put(&self, name: &str) -> String {
        match &self.file {
            Some(file) => format!("set {} or add it to {}", env_var(name), file.display()),
            None => format!(
                "set {} or add it to secrets.toml in the wasmclaw home",
                env_var(name)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_secrets_file_must_be_the_owners_alone() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secrets.toml");
        std::fs::write(&file, "github_token = \"ghp_x\"\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Secrets::load(&file).unwrap_err();
        assert_eq!(
            err,
            format!(
                "{}: readable by others (mode 644); secrets must be readable by their owner only: chmod 600 {}",
                file.display(),
                file.display()
            )
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let secrets = Secrets::load(&file).unwrap();
        assert_eq!(secrets.get("github_token").as_deref(), Some("ghp_x"));
        assert_eq!(secrets.get("other"), None);
        // Debug output names secrets, never their values.
        assert!(!format!("{secrets:?}").contains("ghp_x"));
        assert!(Secrets::load(&dir.path().join("none.toml")).is_ok());
    }
}
