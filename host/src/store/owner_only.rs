//! The store's files are its owner's only (mode 0600), like the API token:
//! they hold every session's history and events.
//!
//! The database file is created owner-only before SQLite opens it; SQLite
//! gives the write-ahead log (`-wal`) and the shared-memory index (`-shm`)
//! the database file's mode when it creates them. Files an older version
//! left readable by others are made owner-only when the store opens.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The mode of every file of the store.
pub const MODE: u32 = 0o600;

/// The database file and the two SQLite keeps beside it.
pub fn files(db: &Path) -> [PathBuf; 3] {
    let with = |suffix: &str| {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    [db.to_path_buf(), with("-wal"), with("-shm")]
}

/// Creates `db` owner-only if it is missing, and makes it and its `-wal`
/// and `-shm` files owner-only where they exist.
pub fn prepare(db: &Path) -> Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(MODE)
        .open(db)
        .with_context(|| format!("creating {}", db.display()))?;
    for file in files(db) {
        match std::fs::metadata(&file) {
            Ok(meta) if meta.permissions().mode() & 0o777 != MODE => {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(MODE))
                    .with_context(|| {
                        format!("making {} readable by its owner only", file.display())
                    })?;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use super::super::tests::delta;
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[tokio::test]
    async fn the_database_and_its_log_files_are_the_owners_only() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sessions.db");
        let store = Store::open(&db).unwrap();
        store.append_events(&[delta(1, Some("s"))]).await.unwrap();
        let modes: Vec<(String, u32)> = files(&db)
            .iter()
            .map(|f| {
                (
                    f.file_name().unwrap().to_string_lossy().into_owned(),
                    mode(f),
                )
            })
            .collect();
        assert_eq!(
            modes,
            [
                ("sessions.db".to_string(), MODE),
                ("sessions.db-wal".to_string(), MODE),
                ("sessions.db-shm".to_string(), MODE),
            ]
        );
        drop(store);

        // Files left readable by others are made owner-only at the next open.
        for file in files(&db).iter().filter(|f| f.exists()) {
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let _store = Store::open(&db).unwrap();
        assert_eq!(mode(&db), MODE);
    }
}
