//! Keeping the cache folder under its bound.
//!
//! Each entry's modification time is when it was last used: a hit sets it
//! ([`touch`]), so removing the oldest first removes the least recently
//! used. The folder is pruned when the runtime starts and after each entry
//! written. Pruning only unlinks: a host that has an entry mapped keeps
//! its pages, and one that finds an entry gone compiles it again. Temporary
//! files that a stopped host left behind are removed once they are stale.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A temporary file older than this is a stopped writer's leftover (a live
/// one renames its file into place right after writing it).
const STALE_TEMPORARY: Duration = Duration::from_secs(3600);

/// What one pass removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// The entries removed, oldest first.
    pub removed: Vec<PathBuf>,
    /// Their size together.
    pub bytes: u64,
    /// The folder's entries' size after the pass.
    pub kept_bytes: u64,
}

/// Removes the least recently used entries (`*.cwasm`) of `dir` until the
/// rest hold at most `max_bytes`; `keep` (the entry just written) is never
/// removed, even when it alone is over the bound. A missing folder holds
/// nothing.
pub fn prune(dir: &Path, max_bytes: u64, keep: Option<&Path>) -> Pruned {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Pruned::default();
    };
    let now = SystemTime::now();
    let mut entries = Vec::new();
    for entry in read.filter_map(|e| e.ok()) {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        if is_temporary(&path) {
            if now
                .duration_since(used)
                .is_ok_and(|age| age > STALE_TEMPORARY)
            {
                let _ = std::fs::remove_file(&path);
            }
            continue;
        }
        if meta.is_file() && path.extension().is_some_and(|x| x == "cwasm") {
            entries.push((used, path, meta.len()));
        }
    }
    // Oldest first; the name breaks ties, so the order does not depend on
    // the folder's listing.
    entries.sort();
    let mut total: u64 = entries.iter().map(|(_, _, len)| len).sum();
    let mut pruned = Pruned::default();
    for (_, path, len) in entries {
        if total <= max_bytes {
            break;
        }
        if Some(path.as_path()) == keep {
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            // Another host pruned it first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(file = %path.display(), "cannot remove a cache entry: {e}");
                continue;
            }
        }
        total -= len;
        pruned.bytes += len;
        pruned.removed.push(path);
    }
    pruned.kept_bytes = total;
    pruned
}

/// Marks `entry` as used now. Failing to is harmless (it is then pruned
/// as if it had not been used), so an error is ignored.
pub fn touch(entry: &Path) {
    if let Ok(file) = std::fs::File::options().write(true).open(entry) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// `.PID-N.tmp`, as [`super::CompileCache`] writes them.
fn is_temporary(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.') && n.ends_with(".tmp"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(dir: &Path, name: &str, len: usize, age_secs: u64) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, vec![0u8; len]).unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(age_secs))
            .unwrap();
        path
    }

    #[test]
    fn the_least_recently_used_go_first_until_the_rest_fit() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let oldest = entry(d, "a.cwasm", 400, 300);
        let old = entry(d, "b.cwasm", 400, 200);
        let touched = entry(d, "c.cwasm", 400, 400);
        let newest = entry(d, "d.cwasm", 400, 100);
        let other = entry(d, "notes.txt", 5000, 500);
        touch(&touched);

        let pruned = prune(d, 1000, None);
        assert_eq!(pruned.removed, vec![oldest.clone(), old.clone()]);
        assert_eq!((pruned.bytes, pruned.kept_bytes), (800, 800));
        assert!(!oldest.exists() && !old.exists());
        assert!(touched.exists() && newest.exists() && other.exists());

        // Under the bound, nothing goes.
        assert_eq!(prune(d, 1000, None).removed, Vec::<PathBuf>::new());
    }

    #[test]
    fn the_entry_just_written_stays_even_over_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = entry(d, "a.cwasm", 600, 100);
        let new = entry(d, "b.cwasm", 600, 200);
        let pruned = prune(d, 500, Some(&new));
        assert_eq!(pruned.removed, vec![old]);
        assert_eq!(pruned.kept_bytes, 600);
        assert!(new.exists());
    }

    #[test]
    fn stale_temporary_files_are_removed_and_fresh_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let stale = entry(d, ".12-0.tmp", 10, 2 * 3600);
        let fresh = entry(d, ".12-1.tmp", 10, 10);
        prune(d, 1 << 20, None);
        assert!(!stale.exists());
        assert!(fresh.exists());
    }
}
