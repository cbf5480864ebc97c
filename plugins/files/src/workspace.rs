//! File operations confined to one directory, the workspace.
//!
//! Paths from the model are relative to the workspace. They are checked by
//! hand before any file is touched: absolute paths and `..` that would climb
//! above the workspace are refused. The host's WASI sandbox is the second
//! fence: the plugin can reach nothing but its preopened directories, even
//! through symbolic links.

use crate::bindings::wasmclaw::plugin::types::{ErrorKind, PluginError};
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

pub const DEFAULT_READ: u64 = 64 * 1024;
pub const MAX_READ: u64 = 1024 * 1024;
pub const MAX_LIST: usize = 1000;
pub const DEFAULT_RESULTS: usize = 100;
pub const MAX_RESULTS: usize = 1000;
/// Files larger than this are skipped by `search`.
const MAX_SEARCH_FILE: u64 = 8 * 1024 * 1024;
/// `search` stops after looking at this many files.
const MAX_SEARCH_FILES: usize = 20_000;
/// Matching lines are cut after this many characters.
const MAX_LINE: usize = 300;
/// Recursive walks go at most this many directories deep.
const MAX_DEPTH: usize = 64;
/// Directories that recursive walks show but do not enter.
const NOT_ENTERED: &[&str] = &[".git"];

pub struct Workspace {
    root: PathBuf,
}

/// A path inside the workspace: where it is, and how to name it to the model.
pub struct Resolved {
    pub full: PathBuf,
    /// Relative to the workspace, `/`-separated; `.` for the workspace itself.
    pub rel: String,
}

enum Kind {
    Dir,
    File(u64),
    Symlink,
    Other,
}

struct Entry {
    rel: String,
    full: PathBuf,
    kind: Kind,
}

impl Workspace {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Workspace { root: root.into() }
    }

    /// Checks a path from the model and places it inside the workspace.
    pub fn resolve(&self, path: &str) -> Result<Resolved, PluginError> {
        if path.contains('\0') {
            return Err(invalid("the path contains a NUL character"));
        }
        let b = path.as_bytes();
        let windows_drive = b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':';
        if path.starts_with(['/', '\\']) || windows_drive {
            return Err(denied(format!(
                "'{path}' is an absolute path; paths are relative to the workspace \
                 (e.g. 'notes/todo.md', or '.' for the workspace itself)"
            )));
        }
        let mut parts: Vec<&str> = Vec::new();
        for part in path.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if parts.pop().is_none() {
                        return Err(denied(format!(
                            "'{path}' leads outside the workspace; paths are relative to \
                             the workspace and cannot go above it"
                        )));
                    }
                }
                p => parts.push(p),
            }
        }
        if fs::metadata(&self.root).is_err() {
            return Err(denied(
                "no workspace directory is granted to this plugin (see files.toml)",
            ));
        }
        let mut full = self.root.clone();
        full.extend(&parts);
        let rel = if parts.is_empty() {
            ".".to_string()
        } else {
            parts.join("/")
        };
        Ok(Resolved { full, rel })
    }

    /// One line per entry: `dir/`, `file (N bytes)`, `link@`.
    pub fn list(&self, path: &str, recursive: bool) -> Result<String, PluginError> {
        let at = self.resolve(path)?;
        let meta = fs::metadata(&at.full).map_err(|e| io_error(e, &at.rel, "listing"))?;
        if !meta.is_dir() {
            return Ok(describe(&Entry {
                rel: at.rel,
                full: at.full,
                kind: Kind::File(meta.len()),
            }));
        }
        let mut out = String::new();
        let mut count = 0;
        let complete = walk(&at, recursive, &mut |e| {
            if count == MAX_LIST {
                return false;
            }
            count += 1;
            out.push_str(&describe(e));
            out.push('\n');
            true
        })?;
        if count == 0 {
            return Ok(format!("'{}' is an empty directory", at.rel));
        }
        if !complete {
            let _ = write!(
                out,
                "[listing stopped after {MAX_LIST} entries; list a subdirectory to see more]"
            );
        }
        Ok(out.trim_end().to_string())
    }

    /// Up to `limit` bytes from `offset`, as text; binary files are described
    /// instead of shown.
    pub fn read(&self, path: &str, offset: u64, limit: u64) -> Result<String, PluginError> {
        let at = self.resolve(path)?;
        let meta = fs::metadata(&at.full).map_err(|e| io_error(e, &at.rel, "reading"))?;
        if meta.is_dir() {
            return Err(invalid(format!(
                "'{}' is a directory; use list_files to see what is in it",
                at.rel
            )));
        }
        let size = meta.len();
        if size == 0 {
            return Ok(format!("['{}' is an empty file]", at.rel));
        }
        if offset >= size {
            return Err(invalid(format!(
                "offset {offset} is past the end of '{}' ({})",
                at.rel,
                count(size, "byte")
            )));
        }
        let limit = limit.clamp(1, MAX_READ);
        let mut file = File::open(&at.full).map_err(|e| io_error(e, &at.rel, "reading"))?;
        let mut head = [0u8; 16];
        let head_len =
            read_up_to(&mut file, &mut head).map_err(|e| io_error(e, &at.rel, "reading"))?;
        let head = &head[..head_len];
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| io_error(e, &at.rel, "reading"))?;
        let mut buf = Vec::new();
        file.take(limit)
            .read_to_end(&mut buf)
            .map_err(|e| io_error(e, &at.rel, "reading"))?;
        // Start and end on character boundaries: an offset may fall inside a
        // multi-byte character, and so may the end of the range.
        let skip = if offset > 0 {
            buf.iter()
                .take(3)
                .take_while(|&&b| b & 0xC0 == 0x80)
                .count()
        } else {
            0
        };
        let start = offset + skip as u64;
        let text = match std::str::from_utf8(&buf[skip..]) {
            Ok(t) if !t.contains('\0') => t,
            Err(e) if e.error_len().is_none() && !buf[skip..].contains(&0) => {
                // Only the last character is cut off: a clean end.
                std::str::from_utf8(&buf[skip..skip + e.valid_up_to()]).unwrap_or_default()
            }
            _ => {
                let hex: Vec<String> = head.iter().map(|b| format!("{b:02x}")).collect();
                return Ok(format!(
                    "['{}' is a binary file ({}, starting with {}); \
                     its bytes are not shown]",
                    at.rel,
                    count(size, "byte"),
                    hex.join(" ")
                ));
            }
        };
        // A read that stops early ends after its last whole line, if it has one.
        let text = match text.rfind('\n') {
            Some(nl) if start + (text.len() as u64) < size => &text[..=nl],
            _ => text,
        };
        let end = start + text.len() as u64;
        if start == 0 && end == size {
            return Ok(text.to_string());
        }
        let mut out = text.to_string();
        if !out.ends_with('\n') {
            out.push('\n');
        }
        let _ = write!(out, "[bytes {start}..{end} of {size} in '{}'", at.rel);
        if end < size {
            let _ = write!(out, "; to read on, call read_file with offset {end}");
        }
        out.push(']');
        Ok(out)
    }

    /// Writes (or appends) `content`, creating missing parent directories.
    pub fn write(&self, path: &str, content: &str, append: bool) -> Result<String, PluginError> {
        let at = self.resolve(path)?;
        if at.rel == "." {
            return Err(invalid(
                "the path names the workspace itself; give a file name",
            ));
        }
        if let Some(parent) = at.full.parent() {
            fs::create_dir_all(parent).map_err(|e| io_error(e, &at.rel, "writing"))?;
        }
        if fs::metadata(&at.full).is_ok_and(|m| m.is_dir()) {
            return Err(invalid(format!("'{}' is a directory", at.rel)));
        }
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .append(append)
            .truncate(!append)
            .open(&at.full)
            .map_err(|e| io_error(e, &at.rel, "writing"))?;
        file.write_all(content.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|e| io_error(e, &at.rel, "writing"))?;
        let size = file
            .metadata()
            .map(|m| m.len())
            .unwrap_or(content.len() as u64);
        let verb = if append { "appended" } else { "wrote" };
        Ok(format!(
            "{verb} {} to '{}' (now {})",
            count(content.len() as u64, "byte"),
            at.rel,
            count(size, "byte")
        ))
    }

    /// `path:line: text` for each line containing `pattern`.
    pub fn search(&self, pattern: &str, path: &str, max: usize) -> Result<String, PluginError> {
        if pattern.is_empty() {
            return Err(invalid("the pattern is empty"));
        }
        let at = self.resolve(path)?;
        let meta = fs::metadata(&at.full).map_err(|e| io_error(e, &at.rel, "searching"))?;
        let max = max.clamp(1, MAX_RESULTS);
        let mut out = String::new();
        let (mut results, mut files, mut skipped) = (0, 0, 0);
        let mut more = false;
        let mut search_file = |rel: &str, full: &PathBuf, size: u64| -> bool {
            files += 1;
            if size > MAX_SEARCH_FILE {
                skipped += 1;
                return true;
            }
            let Ok(bytes) = fs::read(full) else {
                skipped += 1;
                return true;
            };
            if bytes[..bytes.len().min(8192)].contains(&0) {
                return true; // binary
            }
            let text = String::from_utf8_lossy(&bytes);
            if !text.contains(pattern) {
                return true;
            }
            for (i, line) in text.lines().enumerate() {
                if line.contains(pattern) {
                    if results == max {
                        more = true;
                        return false;
                    }
                    results += 1;
                    let _ = writeln!(out, "{rel}:{}: {}", i + 1, clip_line(line));
                }
            }
            files < MAX_SEARCH_FILES
        };
        let mut complete = true;
        if meta.is_dir() {
            complete = walk(&at, true, &mut |e| match e.kind {
                Kind::File(size) => search_file(&e.rel, &e.full, size),
                _ => true,
            })?;
        } else {
            search_file(&at.rel, &at.full, meta.len());
        }
        if results == 0 {
            out = format!(
                "no matches for '{pattern}' in '{}' ({} searched)",
                at.rel,
                count(files as u64, "file")
            );
        }
        if more {
            let _ = write!(
                out,
                "[stopped after {}; narrow the path or raise max_results \
                 (at most {MAX_RESULTS})]",
                count(max as u64, "matching line")
            );
        } else if !complete {
            let _ = write!(
                out,
                "[stopped after {MAX_SEARCH_FILES} files; narrow the path]"
            );
        }
        if skipped > 0 {
            let _ = write!(
                out,
                "\n[{} skipped: unreadable or larger than {} MiB]",
                count(skipped as u64, "file"),
                MAX_SEARCH_FILE >> 20
            );
        }
        Ok(out.trim_end().to_string())
    }
}

/// Visits the entries under `dir` in name order, each directory followed by
/// its contents when `recursive`. Symbolic links are shown, never followed.
/// Returns false when `visit` asked to stop.
fn walk(
    dir: &Resolved,
    recursive: bool,
    visit: &mut dyn FnMut(&Entry) -> bool,
) -> Result<bool, PluginError> {
    let entries = read_sorted(&dir.full, &dir.rel).map_err(|e| io_error(e, &dir.rel, "listing"))?;
    Ok(visit_all(entries, recursive, visit, 1))
}

fn visit_all(
    entries: Vec<Entry>,
    recursive: bool,
    visit: &mut dyn FnMut(&Entry) -> bool,
    depth: usize,
) -> bool {
    for e in entries {
        if !visit(&e) {
            return false;
        }
        let name = e.rel.rsplit('/').next().unwrap_or_default();
        if recursive
            && matches!(e.kind, Kind::Dir)
            && !NOT_ENTERED.contains(&name)
            && depth < MAX_DEPTH
        {
            // An unreadable subdirectory is skipped, not an error.
            if let Ok(inner) = read_sorted(&e.full, &e.rel)
                && !visit_all(inner, recursive, visit, depth + 1)
            {
                return false;
            }
        }
    }
    true
}

fn read_sorted(full: &Path, rel: &str) -> io::Result<Vec<Entry>> {
    let mut entries: Vec<Entry> = fs::read_dir(full)?
        .filter_map(Result::ok)
        .map(|d| {
            let name = d.file_name().to_string_lossy().into_owned();
            let kind = match d.file_type() {
                Ok(t) if t.is_symlink() => Kind::Symlink,
                Ok(t) if t.is_dir() => Kind::Dir,
                Ok(t) if t.is_file() => Kind::File(d.metadata().map(|m| m.len()).unwrap_or(0)),
                _ => Kind::Other,
            };
            let rel = if rel == "." {
                name
            } else {
                format!("{rel}/{name}")
            };
            Entry {
                rel,
                full: d.path(),
                kind,
            }
        })
        .collect();
    entries.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(entries)
}

fn describe(e: &Entry) -> String {
    match e.kind {
        Kind::Dir => format!("{}/", e.rel),
        Kind::File(size) => format!("{} ({})", e.rel, count(size, "byte")),
        Kind::Symlink => format!("{}@", e.rel),
        Kind::Other => e.rel.clone(),
    }
}

/// "1 byte", "2 bytes".
fn count(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn read_up_to(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn clip_line(line: &str) -> String {
    let line = line.trim_end();
    match line.char_indices().nth(MAX_LINE) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line.to_string(),
    }
}

fn io_error(e: io::Error, rel: &str, action: &str) -> PluginError {
    match e.kind() {
        io::ErrorKind::NotFound => not_found(format!("'{rel}' does not exist")),
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => denied(format!(
            "permission denied {action} '{rel}'{}",
            if action == "writing" {
                " (the workspace may be granted read-only)"
            } else {
                ""
            }
        )),
        io::ErrorKind::IsADirectory => invalid(format!("'{rel}' is a directory")),
        io::ErrorKind::NotADirectory | io::ErrorKind::AlreadyExists => {
            invalid(format!("a parent of '{rel}' is a file, not a directory"))
        }
        _ => error(ErrorKind::Internal, format!("{action} '{rel}' failed: {e}")),
    }
}

fn error(kind: ErrorKind, message: impl Into<String>) -> PluginError {
    PluginError {
        kind,
        message: message.into(),
        retryable: false,
    }
}

pub fn invalid(message: impl Into<String>) -> PluginError {
    error(ErrorKind::InvalidInput, message)
}

fn not_found(message: impl Into<String>) -> PluginError {
    error(ErrorKind::NotFound, message)
}

fn denied(message: impl Into<String>) -> PluginError {
    error(ErrorKind::Denied, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let dir =
                std::env::temp_dir().join(format!("wasmclaw-files-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn kind(r: Result<String, PluginError>) -> ErrorKind {
        r.unwrap_err().kind
    }

    #[test]
    fn paths_stay_inside() {
        let tmp = TempDir::new("paths");
        let ws = Workspace::new(&tmp.0);
        assert_eq!(ws.resolve("").unwrap().rel, ".");
        assert_eq!(ws.resolve("./a//b/../c").unwrap().rel, "a/c");
        assert_eq!(ws.resolve("a/..").unwrap().rel, ".");
        assert_eq!(ws.resolve("a/b").unwrap().full, tmp.0.join("a").join("b"));
        for bad in ["/etc/passwd", "..", "../x", "a/../../x", "\\x", "C:/x"] {
            let e = ws.resolve(bad).err().unwrap();
            assert!(matches!(e.kind, ErrorKind::Denied), "{bad}");
            assert!(e.message.contains("relative to the workspace"), "{bad}");
        }
        let gone = Workspace::new(tmp.0.join("missing"));
        assert!(matches!(
            gone.resolve(".").err().unwrap().kind,
            ErrorKind::Denied
        ));
    }

    #[test]
    fn write_read_list_search() {
        let tmp = TempDir::new("rw");
        let ws = Workspace::new(&tmp.0);
        assert_eq!(ws.list(".", false).unwrap(), "'.' is an empty directory");
        assert_eq!(
            ws.write("notes/todo.md", "alpha\nbeta\n", false).unwrap(),
            "wrote 11 bytes to 'notes/todo.md' (now 11 bytes)"
        );
        assert_eq!(
            ws.write("notes/todo.md", "gamma beta\n", true).unwrap(),
            "appended 11 bytes to 'notes/todo.md' (now 22 bytes)"
        );
        ws.write("a.txt", "héllo", false).unwrap();
        fs::create_dir_all(tmp.0.join(".git")).unwrap();
        fs::write(tmp.0.join(".git/beta"), "beta").unwrap();
        fs::write(tmp.0.join("bin.dat"), b"\x89PNG\0\0beta").unwrap();
        fs::write(tmp.0.join("z.txt"), "z").unwrap();

        assert_eq!(
            ws.list(".", false).unwrap(),
            ".git/\na.txt (6 bytes)\nbin.dat (10 bytes)\nnotes/\nz.txt (1 byte)"
        );
        assert_eq!(
            ws.list("", true).unwrap(),
            ".git/\na.txt (6 bytes)\nbin.dat (10 bytes)\nnotes/\nnotes/todo.md (22 bytes)\nz.txt (1 byte)"
        );
        assert_eq!(ws.list("a.txt", true).unwrap(), "a.txt (6 bytes)");
        assert!(matches!(kind(ws.list("nope", false)), ErrorKind::NotFound));

        assert_eq!(
            ws.read("notes/todo.md", 0, DEFAULT_READ).unwrap(),
            "alpha\nbeta\ngamma beta\n"
        );
        assert_eq!(
            ws.read("notes/todo.md", 0, 14).unwrap(),
            "alpha\nbeta\n[bytes 0..11 of 22 in 'notes/todo.md'; to read on, call read_file with offset 11]"
        );
        assert_eq!(
            ws.read("notes/todo.md", 6, 5).unwrap(),
            "beta\n[bytes 6..11 of 22 in 'notes/todo.md'; to read on, call read_file with offset 11]"
        );
        // Offsets inside a multi-byte character move to the next boundary.
        assert_eq!(
            ws.read("a.txt", 2, 100).unwrap(),
            "llo\n[bytes 3..6 of 6 in 'a.txt']"
        );
        assert_eq!(
            ws.read("a.txt", 0, 2).unwrap(),
            "h\n[bytes 0..1 of 6 in 'a.txt'; to read on, call read_file with offset 1]"
        );
        assert!(
            ws.read("bin.dat", 0, 100)
                .unwrap()
                .contains("binary file (10 bytes, starting with 89 50 4e 47 00")
        );
        assert!(matches!(
            kind(ws.read("a.txt", 6, 10)),
            ErrorKind::InvalidInput
        ));
        assert!(matches!(
            kind(ws.read("notes", 0, 10)),
            ErrorKind::InvalidInput
        ));
        assert!(matches!(
            kind(ws.read("missing.txt", 0, 10)),
            ErrorKind::NotFound
        ));
        assert!(matches!(kind(ws.read("../x", 0, 10)), ErrorKind::Denied));

        assert_eq!(
            ws.search("beta", ".", 10).unwrap(),
            "notes/todo.md:2: beta\nnotes/todo.md:3: gamma beta"
        );
        assert_eq!(
            ws.search("beta", "notes", 1).unwrap(),
            "notes/todo.md:2: beta\n[stopped after 1 matching line; narrow the path or raise max_results (at most 1000)]"
        );
        assert_eq!(
            ws.search("zeta", ".", 10).unwrap(),
            "no matches for 'zeta' in '.' (4 files searched)"
        );
        assert!(matches!(
            kind(ws.search("", ".", 10)),
            ErrorKind::InvalidInput
        ));
        assert!(matches!(
            kind(ws.write("notes", "x", false)),
            ErrorKind::InvalidInput
        ));
        assert!(matches!(
            kind(ws.write(".", "x", false)),
            ErrorKind::InvalidInput
        ));
        assert!(matches!(
            kind(ws.write("a.txt/x", "x", false)),
            ErrorKind::InvalidInput
        ));
    }
}
