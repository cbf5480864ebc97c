//! One process owns a home: the lock on `HOME/lock`.
//!
//! Every process that runs turns (`run`, `chat`, `serve`) writes the session
//! store and numbers events from the store's last `seq`; two of them on one
//! home would number from the same `seq`, and the events of one would not be
//! stored. So such a process takes an advisory lock on the home's lock file
//! first, and a second one fails at once, naming the home and the process
//! that holds it. The lock goes with the process (the system releases it on
//! exit, even on a crash), so a stale lock file never blocks a later start.
//! Commands that only read (`turns`, `plugins`) take no lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why the home could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum HomeLockError {
    #[error(
        "the wasmclaw home {} is in use by another wasmclaw process (pid {pid}, holding {}); stop it first, or give this one another home with --home or WASMCLAW_HOME",
        home.display(),
        lock.display()
    )]
    Busy {
        home: PathBuf,
        lock: PathBuf,
        /// As the holder wrote it; `unknown` if it had not yet.
        pid: String,
    },
    #[error("cannot lock the wasmclaw home {}: {}: {source}", home.display(), lock.display())]
    Io {
        home: PathBuf,
        lock: PathBuf,
        source: std::io::Error,
    },
}

/// The lock on a home, held until dropped.
#[derive(Debug)]
pub struct HomeLock {
    _file: File,
}

impl HomeLock {
    /// Takes the lock of the home at `root` (creating the folder), or says
    /// who holds it. The lock file holds the owner's pid.
    pub fn acquire(root: &Path) -> Result<HomeLock, HomeLockError> {
        let lock = root.join("lock");
        let io = |source| HomeLockError::Io {
            home: root.to_path_buf(),
            lock: lock.clone(),
            source,
        };
        std::fs::create_dir_all(root).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                return Err(HomeLockError::Busy {
                    home: root.to_path_buf(),
                    lock: lock.clone(),
                    pid: if pid.is_empty() { "unknown" } else { pid }.to_string(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(HomeLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid_until_it_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let first = HomeLock::acquire(&home).unwrap();
        let err = HomeLock::acquire(&home).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the wasmclaw home {} is in use by another wasmclaw process (pid {}, holding {}/lock); stop it first, or give this one another home with --home or WASMCLAW_HOME",
                home.display(),
                std::process::id(),
                home.display()
            )
        );
        drop(first);
        let _again = HomeLock::acquire(&home).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.join("lock"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
