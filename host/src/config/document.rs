//! Reading `wasmclaw.toml`: its text parsed once into a spanned tree (so
//! every later error can name the line and column of the key or value at
//! fault) and deserialized into [`ConfigToml`] through
//! `serde_path_to_error` (so a type error names its key path). Parse
//! errors stop at the first; the message is rewritten to say what was
//! expected in the file's words (`a whole number`, `a table`), with the
//! nearest valid key for an unknown one.

use std::path::{Path, PathBuf};

use serde_path_to_error::Segment;
use toml::de::{DeTable, DeValue};

use super::error::{ConfigError, Place, Position, unknown};
use super::file::ConfigToml;

/// The file, parsed.
pub struct Document<'a> {
    pub path: PathBuf,
    text: &'a str,
    root: DeTable<'a>,
}

/// One step of a key path: a key, or an element of an array.
#[derive(Debug, Clone, Copy)]
pub enum Step<'k> {
    Key(&'k str),
    Index(usize),
}

impl<'a> Document<'a> {
    /// Parses `text` (read from `path`); the first fault is the error.
    pub fn parse(path: &Path, text: &'a str) -> Result<(Document<'a>, ConfigToml), ConfigError> {
        let root = DeTable::parse(text).map_err(|e| {
            let message = format!("invalid TOML: {}", e.message().trim());
            match e.span() {
                Some(span) => ConfigError {
                    place: Place::At(Position::of(path, text, span.start)),
                    key: None,
                    message,
                },
                None => ConfigError {
                    place: Place::File(path.to_path_buf()),
                    key: None,
                    message,
                },
            }
        })?;
        let deserializer = toml::Deserializer::from(root.clone());
        let toml: ConfigToml = serde_path_to_error::deserialize(deserializer)
            .map_err(|e| serde_error(path, text, e))?;
        let document = Document {
            path: path.to_path_buf(),
            text,
            root: root.into_inner(),
        };
        Ok((document, toml))
    }

    /// The folder relative paths of the file are taken from.
    pub fn folder(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// Where the value at `path` is written (or, failing that, the closest
    /// table above it that is).
    pub fn value_at(&self, path: &[Step]) -> Position {
        self.locate(path, false)
    }

    /// Where the key `path` is written.
    pub fn key_at(&self, path: &[Step]) -> Position {
        self.locate(path, true)
    }

    /// Whether the value at `path` is an array.
    pub fn is_array(&self, path: &[Step]) -> bool {
        matches!(self.find(path, false), (_, Some(DeValue::Array(_))))
    }

    fn locate(&self, path: &[Step], key: bool) -> Position {
        let (offset, _) = self.find(path, key);
        Position::of(&self.path, self.text, offset)
    }

    /// The offset of the key or value at `path` (of the deepest part of it
    /// that is written), and the value when all of it is.
    fn find(&self, path: &[Step], key: bool) -> (usize, Option<&DeValue<'a>>) {
        let mut offset = 0;
        let mut value: Option<&DeValue<'a>> = None;
        for (depth, step) in path.iter().enumerate() {
            let found = match (step, value) {
                (Step::Key(name), None) if depth == 0 => self.root.get_key_value(*name),
                (Step::Key(name), Some(DeValue::Table(t))) => t.get_key_value(*name),
                (Step::Index(i), Some(DeValue::Array(a))) => match a.get(*i) {
                    Some(v) => {
                        offset = v.span().start;
                        value = Some(v.get_ref());
                        continue;
                    }
                    None => return (offset, None),
                },
                _ => None,
            };
            let Some((k, v)) = found else {
                return (offset, None);
            };
            offset = if key { k.span().start } else { v.span().start };
            value = Some(v.get_ref());
        }
        (offset, value)
    }
}

/// A key path as written in the file: `agents.coder.model`,
/// `providers.local.models."qwen2.5"`.
pub fn key_path(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Key(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&quoted(name));
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// A key, quoted when it is not a bare TOML key.
pub fn quoted(name: &str) -> String {
    let bare = !name.is_empty()
        && (name.bytes()).all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        name.to_string()
    } else {
        format!("{name:?}")
    }
}

fn serde_error(
    path: &Path,
    text: &str,
    error: serde_path_to_error::Error<toml::de::Error>,
) -> ConfigError {
    let mut keys: Vec<String> = Vec::new();
    for segment in error.path().iter() {
        match segment {
            Segment::Map { key } => keys.push(quoted(key)),
            Segment::Seq { index } => match keys.last_mut() {
                Some(last) => last.push_str(&format!("[{index}]")),
                None => keys.push(format!("[{index}]")),
            },
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    let inner = error.inner();
    let message = inner.message().trim();
    let message = if let Some((field, expected)) = unknown_name(message, "unknown field `") {
        if keys.last().map(String::as_str) != Some(quoted(&field).as_str()) {
            keys.push(quoted(&field));
        }
        unknown("key", None, &field, &expected)
    } else if let Some((variant, expected)) = unknown_name(message, "unknown variant `") {
        unknown("value", Some(&variant), &variant, &expected)
    } else if let Some(rest) = message.strip_prefix("invalid type: ") {
        format!("wrong type: {}", expected_found(rest))
    } else if let Some(rest) = message.strip_prefix("invalid value: ") {
        expected_found(rest)
    } else {
        message.to_string()
    };
    let place = match inner.span() {
        Some(span) => Place::At(Position::of(path, text, span.start)),
        None => Place::File(path.to_path_buf()),
    };
    ConfigError {
        place,
        key: (!keys.is_empty()).then(|| keys.join(".")),
        message,
    }
}

/// serde's `unknown field `x`, expected one of `a`, `b`` (or `expected `a`
/// or `b``, or `there are no fields`): the name found and the names
/// expected.
fn unknown_name(message: &str, prefix: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix(prefix)?;
    let (found, rest) = rest.split_once('`')?;
    let expected = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((found.to_string(), expected))
}

/// serde's `FOUND, expected EXPECTED` as `expected ..., found ...`, in the
/// file's words.
fn expected_found(rest: &str) -> String {
    match rest.rsplit_once(", expected ") {
        Some((found, expected)) => format!(
            "expected {}, found {}",
            expected_words(expected),
            found_words(found)
        ),
        None => rest.to_string(),
    }
}

/// serde's name of a type, in the file's words.
fn expected_words(expected: &str) -> String {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number, 0 or more".into(),
        "i8" | "i16" | "i32" | "i64" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "an array".into(),
        "a map" => "a table".into(),
        s if s.starts_with("struct ") => "a table".into(),
        s if s.starts_with("enum ") => "one of its names, as a string".into(),
        s => s.into(),
    }
}

/// serde's description of what was found, in the file's words.
fn found_words(found: &str) -> String {
    match found {
        "map" => "a table".into(),
        "sequence" => "an array".into(),
        s => s.replace("floating point", "number"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_names_are_read() {
        assert_eq!(
            unknown_name(
                "unknown field `modle`, expected one of `model`, `tools`",
                "unknown field `"
            ),
            Some(("modle".into(), vec!["model".into(), "tools".into()]))
        );
        assert_eq!(
            unknown_name(
                "unknown variant `stear`, expected `steer` or `follow-up`",
                "unknown variant `"
            ),
            Some(("stear".into(), vec!["steer".into(), "follow-up".into()]))
        );
        assert_eq!(
            unknown_name("unknown field `x`, there are no fields", "unknown field `"),
            Some(("x".into(), vec![]))
        );
    }

    #[test]
    fn key_paths_quote_what_is_not_bare() {
        let steps = [
            Step::Key("providers"),
            Step::Key("local"),
            Step::Key("models"),
            Step::Key("qwen2.5"),
        ];
        assert_eq!(key_path(&steps), "providers.local.models.\"qwen2.5\"");
        let steps = [Step::Key("agents"), Step::Key("a"), Step::Key("model")];
        assert_eq!(
            key_path(&[&steps[..], &[Step::Index(1)]].concat()),
            "agents.a.model[1]"
        );
    }
}
