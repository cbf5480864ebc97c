//! What is wrong with a configuration, one line per fault:
//!
//! ```text
//! wasmclaw.toml:7:1: agents.coder.modle: unknown key; did you mean `model`? (expected one of: model, system_prompt, ...)
//! ```
//!
//! A fault in the file names the file, the line and column (1-based, of
//! the key or the value at fault), the key path and what was expected. A
//! fault in a flag or an environment variable names the flag or variable
//! in its message. The lines are stable: tests and scripts match them.

use std::fmt;
use std::path::{Path, PathBuf};

/// One fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub place: Place,
    /// The key path (`agents.coder.model`), when the fault has one.
    pub key: Option<String>,
    pub message: String,
}

/// Where a fault is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// At a position of the file.
    At(Position),
    /// The file as a whole (it cannot be read).
    File(PathBuf),
    /// A flag or an environment variable, which the message names.
    Elsewhere,
}

/// A position in the file, 1-based.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
}

impl Position {
    /// The position of byte `offset` of `text` (columns count characters).
    pub fn of(file: &Path, text: &str, offset: usize) -> Position {
        let offset = offset.min(text.len());
        let before = &text[..text.floor_char_boundary(offset)];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Position {
            file: file.to_path_buf(),
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

impl ConfigError {
    /// A fault at `position` of the file.
    pub fn at(position: Position, key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            place: Place::At(position),
            key: Some(key.into()),
            message: message.into(),
        }
    }

    /// A fault of a flag or a variable: `message` names it.
    pub fn elsewhere(message: impl Into<String>) -> Self {
        ConfigError {
            place: Place::Elsewhere,
            key: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.place {
            Place::At(position) => write!(f, "{position}: ")?,
            Place::File(path) => write!(f, "{}: ", path.display())?,
            Place::Elsewhere => {}
        }
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Every fault found: a configuration that has one is not used at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigError> for ConfigErrors {
    fn from(error: ConfigError) -> Self {
        ConfigErrors(vec![error])
    }
}

/// `unknown key; did you mean `model`? (expected one of: model, ...)`, or
/// with no suggestion when no valid name is close; `shown` is the name
/// found, when the key path does not already say it (an unknown value).
pub fn unknown(what: &str, shown: Option<&str>, found: &str, expected: &[String]) -> String {
    let mut message = match shown {
        Some(name) => format!("unknown {what} `{name}`"),
        None => format!("unknown {what}"),
    };
    if expected.is_empty() {
        message.push_str("; this table takes no keys yet");
        return message;
    }
    if let Some(near) = nearest(found, expected) {
        message.push_str(&format!("; did you mean `{near}`?"));
    }
    message.push_str(&format!(" (expected one of: {})", expected.join(", ")));
    message
}

/// The valid name closest to `found`, if it is close: at most a third of
/// its letters differ (a typo, a swapped pair, a missing letter), so a
/// far-off name gets no suggestion.
pub fn nearest<'a>(found: &str, valid: &'a [String]) -> Option<&'a str> {
    let limit = (found.chars().count() / 3).max(1);
    valid
        .iter()
        .map(|name| (strsim::damerau_levenshtein(found, name), name))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let text = "a = 1\n[é]\nbé = 2\n";
        let file = Path::new("f.toml");
        assert_eq!(Position::of(file, text, 0).to_string(), "f.toml:1:1");
        let b = text.find("bé").unwrap();
        assert_eq!(Position::of(file, text, b).to_string(), "f.toml:3:1");
        let two = text.find('2').unwrap();
        assert_eq!(Position::of(file, text, two).to_string(), "f.toml:3:6");
    }

    #[test]
    fn a_near_key_is_suggested_and_a_far_one_is_not() {
        let valid = names(&["model", "system_prompt", "max_tokens"]);
        assert_eq!(nearest("modle", &valid), Some("model"));
        assert_eq!(nearest("max_token", &valid), Some("max_tokens"));
        assert_eq!(nearest("temperature", &valid), None);
        assert_eq!(nearest("x", &valid), None);
        assert_eq!(
            unknown("key", None, "colour", &names(&["color"])),
            "unknown key; did you mean `color`? (expected one of: color)"
        );
        assert_eq!(
            unknown("key", None, "x", &[]),
            "unknown key; this table takes no keys yet"
        );
        assert_eq!(
            unknown(
                "value",
                Some("stear"),
                "stear",
                &names(&["steer", "follow-up"])
            ),
            "unknown value `stear`; did you mean `steer`? (expected one of: steer, follow-up)"
        );
    }
}
