//! Finding secrets in text and replacing them with `[REDACTED:<kind>]`.
//!
//! A [`Redactor`] is a list of named regular expressions. Each match becomes a
//! span of text to hide: the whole match or, when the pattern has capture
//! groups, the first group that took part in the match. That is how
//! `password = "hunter2"` keeps `password = "` and loses only `hunter2`.
//!
//! Spans of every pattern are found on the original text first, overlapping
//! spans are merged, and the text is rebuilt once. So a pattern never sees the
//! markers another one wrote, and a secret two patterns both match is hidden
//! once, under the kind of the pattern listed first.
//!
//! Compiling the built-in patterns is most of the cost of a hook call (about
//! 3 ms for all of them), and every call runs in a fresh instance, so nothing
//! compiled outlives it. Each built-in pattern therefore has a [`Prefilter`]:
//! literals, one of which every match contains. A pattern is compiled and run
//! only on text that contains one of its literals; on text without any it
//! could not match anyway. Most tool results hold none, and compile nothing.
//! The operator's patterns are arbitrary, so they are always compiled and run.

use std::cell::OnceCell;

use regex::{Regex, RegexBuilder};
use serde_json::Value;

/// The most memory one compiled pattern may take, so that a hook call (16 MiB
/// by default) cannot be exhausted by an operator's pattern like `a{10000}`.
const SIZE_LIMIT: usize = 1 << 20;

/// The key of a `key = value` or `"key": "value"` assignment: any name that
/// contains one of the words below, in any letter case (`DB_PASSWORD`,
/// `x-api-key`, `clientSecret`).
const ASSIGNED_KEY: &str =
    r"(?i-u:[a-z0-9_.-]*(?:api[_-]?key|secret|token|passw(?:or)?d)[a-z0-9_.-]*)";

/// What may follow such a key: an optional closing quote (plain or escaped,
/// as in JSON inside a JSON string), then `=`, `:`, `:=` or `=>` on the same
/// line. The value is one of four capture groups: a double-quoted string (with
/// `\"` escapes), a single-quoted string, a `\"...\"` string, or a bare word.
const ASSIGNED_VALUE: &str = concat!(
    r#"\\?["']?[ \t]*(?::=|=>|:|=)[ \t]*"#,
    r#"(?:"((?:[^"\\\r\n]|\\.)*)""#,
    r#"|'([^'\r\n]*)'"#,
    r#"|\\"((?:[^"\\\r\n]|\\[^"])*)\\""#,
    r#"|([^\s"'`\\,;&<>(){}\[\]]+))"#,
);

/// The kind the assignment pattern reports; its matches get an extra check
/// (see [`is_plain_value`]).
const ASSIGNMENT_KIND: &str = "secret_value";

/// Which texts the assignment pattern may match: those with one of its key
/// words (see [`ASSIGNED_KEY`]), in any letter case.
const ASSIGNMENT_PREFILTER: Prefilter =
    Prefilter::ignoring_case(&["apikey", "api_key", "api-key", "secret", "token", "passw"]);

/// The built-in patterns as (kind, regex, prefilter), in priority order: when
/// two of them hide the same text, the marker names the earlier one.
/// `(?-u:\b)` is an ASCII word boundary, cheaper than the Unicode one.
const BUILTIN: &[(&str, &str, Prefilter)] = &[
    // A PEM block, up to its END line or, if the text was cut short, to the end.
    (
        "private_key",
        r"-----BEGIN[A-Z ]*PRIVATE KEY-----(?s:.*?)(?:-----END[A-Z ]*PRIVATE KEY-----|\z)",
        Prefilter::exact(&["PRIVATE KEY"]),
    ),
    (
        "aws_access_key_id",
        r"(?-u:\b)(?:AKIA|ASIA)[A-Z0-9]{16}(?-u:\b)",
        Prefilter::exact(&["AKIA", "ASIA"]),
    ),
    (
        "github_token",
        r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        Prefilter::exact(&["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"]),
    ),
    (
        "openai_api_key",
        r"(?-u:\b)sk-[A-Za-z0-9_-]{20,}",
        Prefilter::exact(&["sk-"]),
    ),
    (
        "slack_token",
        r"(?-u:\b)xox[abprs]-[A-Za-z0-9-]{10,}",
        Prefilter::exact(&["xox"]),
    ),
    (
        "jwt",
        r"(?-u:\b)eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+",
        Prefilter::exact(&["eyJ"]),
    ),
    // Only the token is hidden; "Bearer " stays so the text still reads. The
    // prefilter ignores case although the pattern only takes `[Bb]`: it costs
    // nothing and stays right should the pattern ever take any case.
    (
        "bearer_token",
        r"(?-u:\b)[Bb]earer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)",
        Prefilter::ignoring_case(&["earer"]),
    ),
];

/// Literals of a pattern, one of which each of its matches contains. A text
/// with none of them cannot match, so the pattern need not be compiled for it.
#[derive(Clone, Copy)]
struct Prefilter {
    /// Not empty, and none of them empty.
    needles: &'static [&'static str],
    /// Compare ASCII letters in either case (for `(?i-u:...)` patterns; an
    /// ASCII-only case fold is exactly what `-u` makes the regex do).
    ignore_ascii_case: bool,
}

impl Prefilter {
    const fn exact(needles: &'static [&'static str]) -> Self {
        Prefilter {
            needles,
            ignore_ascii_case: false,
        }
    }

    const fn ignoring_case(needles: &'static [&'static str]) -> Self {
        Prefilter {
            needles,
            ignore_ascii_case: true,
        }
    }

    /// Whether `text` contains one of the needles.
    fn passes(&self, text: &str) -> bool {
        self.needles.iter().any(|needle| {
            if self.ignore_ascii_case {
                contains_ignore_ascii_case(text, needle)
            } else {
                text.contains(needle)
            }
        })
    }
}

/// `needle` (not empty) occurs in `text`, ASCII letters compared in either case.
fn contains_ignore_ascii_case(text: &str, needle: &str) -> bool {
    let needle = needle.as_bytes();
    text.as_bytes()
        .windows(needle.len())
        .any(|window| window.eq_ignore_ascii_case(needle))
}

/// One named pattern.
struct Pattern {
    /// Written into the marker: `[REDACTED:<kind>]`.
    kind: String,
    /// The regex as written.
    source: String,
    /// `None`: searched in every text (the operator's patterns).
    prefilter: Option<Prefilter>,
    /// Compiled on first use: the operator's patterns when they are added (so
    /// that a bad one is reported), built-in ones by [`Pattern::regex_for`].
    regex: OnceCell<Regex>,
}

impl Pattern {
    /// The compiled regex to search `text` with, or `None` when its prefilter
    /// says it cannot match there (it then stays uncompiled).
    fn regex_for(&self, text: &str) -> Option<&Regex> {
        if self.prefilter.is_some_and(|p| !p.passes(text)) {
            return None;
        }
        // Only built-in patterns get here uncompiled: constants that the test
        // `every_builtin_compiles` compiles.
        Some(
            self.regex
                .get_or_init(|| compile(&self.source).expect("built-in patterns compile")),
        )
    }
}

/// The result of [`Redactor::redact`] when something was hidden.
#[derive(Debug, PartialEq, Eq)]
pub struct Redacted {
    /// The text with every secret replaced by its marker.
    pub text: String,
    /// How many markers were written.
    pub count: usize,
}

/// A span of the original text to hide, and why.
struct Span {
    start: usize,
    end: usize,
    /// Index of the pattern that found it: lower wins when spans overlap.
    pattern: usize,
}

/// The patterns to look for, built-in ones first.
pub struct Redactor {
    patterns: Vec<Pattern>,
}

impl Redactor {
    /// Only the built-in patterns. None is compiled yet: [`Redactor::redact`]
    /// compiles those that the text it is given may contain.
    pub fn builtin() -> Self {
        let assignment = format!("{ASSIGNED_KEY}{ASSIGNED_VALUE}");
        let builtins = BUILTIN
            .iter()
            .map(|&(kind, regex, prefilter)| (kind, regex.to_string(), prefilter));
        let patterns = builtins
            .chain([(ASSIGNMENT_KIND, assignment, ASSIGNMENT_PREFILTER)])
            .map(|(kind, source, prefilter)| Pattern {
                kind: kind.to_string(),
                source,
                prefilter: Some(prefilter),
                regex: OnceCell::new(),
            })
            .collect();
        Redactor { patterns }
    }

    /// The built-in patterns plus the operator's, read from the `[config]`
    /// table: `patterns = [{ name = "...", regex = "..." }]`. Entries that are
    /// malformed or do not compile are skipped; each one adds a warning to the
    /// returned list, for the caller to log.
    pub fn from_config(config: &Value) -> (Self, Vec<String>) {
        let mut redactor = Redactor::builtin();
        let mut warnings = Vec::new();
        let entries = match config.get("patterns") {
            None => return (redactor, warnings),
            Some(Value::Array(entries)) => entries,
            Some(_) => {
                warnings.push("config `patterns` is not a list; ignored".to_string());
                return (redactor, warnings);
            }
        };
        for (i, entry) in entries.iter().enumerate() {
            let name = entry.get("name").and_then(Value::as_str).unwrap_or("");
            let Some(regex) = entry.get("regex").and_then(Value::as_str) else {
                warnings.push(format!(
                    "config patterns[{i}] has no `regex` string; skipped"
                ));
                continue;
            };
            if name.is_empty() {
                warnings.push(format!("config patterns[{i}] has no `name`; skipped"));
                continue;
            }
            if let Err(e) = redactor.add(name, regex) {
                warnings.push(format!("config patterns[{i}] ({name}): {e}; skipped"));
            }
        }
        (redactor, warnings)
    }

    /// Adds a pattern after the existing ones, compiled now and searched in
    /// every text; `Err` says why it does not compile.
    pub fn add(&mut self, kind: &str, regex: &str) -> Result<(), String> {
        let compiled = compile(regex)?;
        self.patterns.push(Pattern {
            kind: kind.to_string(),
            source: regex.to_string(),
            prefilter: None,
            regex: OnceCell::from(compiled),
        });
        Ok(())
    }

    /// The kinds of the patterns compiled so far, in priority order: the
    /// operator's, and the built-in ones some text given to
    /// [`Redactor::redact`] may have matched.
    pub fn compiled(&self) -> Vec<&str> {
        self.patterns
            .iter()
            .filter(|p| p.regex.get().is_some())
            .map(|p| p.kind.as_str())
            .collect()
    }

    /// `text` with every secret hidden, or `None` when there was nothing to hide.
    pub fn redact(&self, text: &str) -> Option<Redacted> {
        let spans = merge(self.find_all(text));
        if spans.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut copied = 0; // bytes of `text` already handled
        for span in &spans {
            out.push_str(&text[copied..span.start]);
            out.push_str("[REDACTED:");
            out.push_str(&self.patterns[span.pattern].kind);
            out.push(']');
            copied = span.end;
        }
        out.push_str(&text[copied..]);
        Some(Redacted {
            text: out,
            count: spans.len(),
        })
    }

    /// Every non-empty span any pattern wants hidden, in no particular order.
    fn find_all(&self, text: &str) -> Vec<Span> {
        let mut spans = Vec::new();
        for (index, pattern) in self.patterns.iter().enumerate() {
            let Some(regex) = pattern.regex_for(text) else {
                continue; // its prefilter says it cannot match
            };
            let mut push = |start: usize, end: usize| {
                if start < end {
                    spans.push(Span {
                        start,
                        end,
                        pattern: index,
                    });
                }
            };
            if regex.captures_len() == 1 {
                // No groups: hide whole matches (the fast path).
                for m in regex.find_iter(text) {
                    push(m.start(), m.end());
                }
                continue;
            }
            for caps in regex.captures_iter(text) {
                // The first group that took part in the match.
                let Some(m) = caps.iter().skip(1).flatten().next() else {
                    continue;
                };
                if pattern.kind == ASSIGNMENT_KIND && is_plain_value(m.as_str()) {
                    continue;
                }
                push(m.start(), m.end());
            }
        }
        spans
    }
}

/// Values of a `...token...` key that are surely not secrets: JSON literals
/// and short numbers such as `"max_tokens": 1000`.
fn is_plain_value(value: &str) -> bool {
    matches!(value, "null" | "true" | "false")
        || (value.len() <= 6 && value.bytes().all(|b| b.is_ascii_digit()))
}

/// Sorts spans and merges the ones that overlap, so that no part of any
/// secret stays visible. A merged span keeps the kind of the span that starts
/// first (the longest, then the earliest pattern, among equal starts).
fn merge(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end), s.pattern));
    let mut merged: Vec<Span> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start < last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    merged
}

/// `regex` compiled within the size limits; `Err` says why it does not compile.
fn compile(regex: &str) -> Result<Regex, String> {
    RegexBuilder::new(regex)
        .size_limit(SIZE_LIMIT)
        .dfa_size_limit(2 * SIZE_LIMIT)
        .build()
        .map_err(|e| format!("invalid regex: {}", one_line(&e.to_string())))
}

/// A regex error on one line: the crate's messages span several (the pattern,
/// a caret under the fault, the reason), which reads badly in a log line or a
/// reason shown to the model.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The text after redaction with the built-in patterns only.
    fn redact(text: &str) -> String {
        match Redactor::builtin().redact(text) {
            Some(r) => r.text,
            None => text.to_string(),
        }
    }

    #[test]
    fn clean_text_is_left_alone() {
        let r = Redactor::builtin();
        for text in [
            "",
            "total 4\n-rw-r--r-- 1 me me 12 notes.md",
            r#"{"max_tokens": 1000, "token_count": 12, "password": null}"#,
            "the bearer of this letter",
            "task-force meeting at 10",
            "AKIA1234", // too short to be a key id
        ] {
            assert_eq!(r.redact(text), None, "{text}");
        }
    }

    #[test]
    fn well_known_token_formats() {
        let cases = [
            (
                "id AKIAIOSFODNN7EXAMPLE here",
                "id [REDACTED:aws_access_key_id] here",
            ),
            ("ASIAABCDEFGHIJKLMNOP", "[REDACTED:aws_access_key_id]"),
            (
                "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "[REDACTED:github_token]",
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "[REDACTED:github_token]",
            ),
            (
                "key sk-proj-abcDEF1234567890abcdef.",
                "key [REDACTED:openai_api_key].",
            ),
            ("xoxb-1234567890-abcdefghij", "[REDACTED:slack_token]"),
            (
                "t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl end",
                "t=[REDACTED:jwt] end",
            ),
            (
                "Authorization: Bearer abcdefghijklmnop1234",
                "Authorization: Bearer [REDACTED:bearer_token]",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(redact(text), want, "{text}");
        }
    }

    #[test]
    fn private_key_blocks_whole_or_cut_short() {
        let pem = "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\nb";
        assert_eq!(redact(pem), "a\n[REDACTED:private_key]\nb");
        let cut = "x -----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN";
        assert_eq!(redact(cut), "x [REDACTED:private_key]");
    }

    #[test]
    fn assignments_keep_the_key() {
        let cases = [
            ("DB_PASSWORD=hunter2", "DB_PASSWORD=[REDACTED:secret_value]"),
            ("api_key: abc123xyz", "api_key: [REDACTED:secret_value]"),
            (
                r#"{"client_secret": "s3cr\"et", "user": "bob"}"#,
                r#"{"client_secret": "[REDACTED:secret_value]", "user": "bob"}"#,
            ),
            ("password = 'pa ss'", "password = '[REDACTED:secret_value]'"),
            (
                r#""{\"apiKey\": \"abc\"}""#,
                r#""{\"apiKey\": \"[REDACTED:secret_value]\"}""#,
            ),
            (
                "https://x.test/?access_token=abc&page=2",
                "https://x.test/?access_token=[REDACTED:secret_value]&page=2",
            ),
            ("passwd := 987654321", "passwd := [REDACTED:secret_value]"),
        ];
        for (text, want) in cases {
            assert_eq!(redact(text), want, "{text}");
        }
    }

    #[test]
    fn specific_kind_wins_over_assignment() {
        assert_eq!(
            redact("OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx"),
            "OPENAI_API_KEY=[REDACTED:openai_api_key]"
        );
        assert_eq!(
            redact("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln"),
            "Bearer [REDACTED:jwt]"
        );
    }

    #[test]
    fn counts_markers() {
        let r = Redactor::builtin()
            .redact("AKIAIOSFODNN7EXAMPLE and token=abc")
            .unwrap();
        assert_eq!(r.count, 2);
    }

    #[test]
    fn overlapping_spans_merge() {
        let mut r = Redactor {
            patterns: Vec::new(),
        };
        r.add("a", "abcd").unwrap();
        r.add("b", "cdef").unwrap();
        assert_eq!(r.redact("xabcdefy").unwrap().text, "x[REDACTED:a]y");
    }

    #[test]
    fn operator_patterns_from_config() {
        let config = json!({"patterns": [
            {"name": "employee_id", "regex": r"\bEMP-\d{6}\b"},
            {"name": "pin", "regex": r"PIN (\d{4})"},
            {"name": "broken", "regex": "(unclosed"},
            {"regex": "x"},
        ]});
        let (r, warnings) = Redactor::from_config(&config);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("broken"), "{}", warnings[0]);
        assert!(!warnings[0].contains('\n'), "one line: {}", warnings[0]);
        assert_eq!(
            r.redact("EMP-123456, PIN 1234").unwrap().text,
            "[REDACTED:employee_id], PIN [REDACTED:pin]"
        );
    }

    #[test]
    fn config_without_patterns_or_with_wrong_type() {
        let (_, warnings) = Redactor::from_config(&json!({}));
        assert!(warnings.is_empty());
        let (_, warnings) = Redactor::from_config(&json!({"patterns": "x"}));
        assert_eq!(warnings.len(), 1);
    }

    /// With every pattern searched in every text, as before prefilters.
    fn unfiltered() -> Redactor {
        let mut r = Redactor::builtin();
        for pattern in &mut r.patterns {
            pattern.prefilter = None;
        }
        r
    }

    #[test]
    fn every_builtin_compiles() {
        let r = unfiltered();
        assert_eq!(r.redact(""), None);
        assert_eq!(r.compiled().len(), BUILTIN.len() + 1);
    }

    #[test]
    fn clean_text_compiles_nothing() {
        let listing = "total 4\n-rw-r--r-- 1 me staff 1204 Dec  1 05:40 notes.md\n";
        for text in [
            "",
            listing,
            r#"{"sum": 42, "files": ["a.txt", "b.txt"], "truncated": false}"#,
            "Paris is the capital of France. 2 + 2 = 4; see https://example.com/docs?page=2",
            "Café, naïve, 東京: non-ASCII text",
        ] {
            let r = Redactor::builtin();
            assert_eq!(r.redact(text), None, "{text}");
            assert_eq!(r.compiled(), Vec::<&str>::new(), "{text}");
        }
        // The operator's patterns are compiled, and searched, whatever the text.
        let config = json!({"patterns": [{"name": "employee_id", "regex": r"\bEMP-\d{6}\b"}]});
        let (r, _) = Redactor::from_config(&config);
        assert_eq!(r.compiled(), ["employee_id"]);
        assert_eq!(r.redact(listing), None);
        assert_eq!(r.compiled(), ["employee_id"]);
    }

    #[test]
    fn each_kind_is_found_compiling_only_its_pattern() {
        let cases = [
            (
                "-----BEGIN EC PRIVATE KEY-----\nMHcC\n-----END EC PRIVATE KEY-----",
                "private_key",
            ),
            ("id AKIAIOSFODNN7EXAMPLE", "aws_access_key_id"),
            ("id ASIAABCDEFGHIJKLMNOP", "aws_access_key_id"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"),
            ("gho_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"),
            ("ghu_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"),
            ("ghs_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"),
            ("ghr_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "github_token",
            ),
            ("key sk-proj-abcDEF1234567890abcdef", "openai_api_key"),
            ("xoxa-1234567890-abcdefghij", "slack_token"),
            ("xoxp-1234567890-abcdefghij", "slack_token"),
            ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "jwt"),
            ("Authorization: Bearer abcdefghijklmnop1234", "bearer_token"),
            ("authorization: bearer abcdefghijklmnop1234", "bearer_token"),
            ("DB_PASSWORD=hunter2", "secret_value"),
            ("passwd: hunter2", "secret_value"),
            ("X-API-KEY: abc123", "secret_value"),
            ("ApiKey = abc123", "secret_value"),
            ("api_key=abc123", "secret_value"),
            (r#"{"clientSecret": "abc"}"#, "secret_value"),
            ("?access_TOKEN=abc&page=2", "secret_value"),
        ];
        for (text, kind) in cases {
            let r = Redactor::builtin();
            let hidden = r.redact(text).map(|r| r.text).unwrap_or_default();
            assert!(
                hidden.contains(&format!("[REDACTED:{kind}]")),
                "{text}: {hidden}"
            );
            assert_eq!(r.compiled(), [kind], "{text}");
        }
    }

    #[test]
    fn prefilters_change_no_result() {
        let texts = [
            "",
            "nothing here",
            "the bearer of this letter",
            "BEARER abcdefghijklmnop1234", // the pattern takes only B or b
            "AKIA1234",
            "akiaiosfodnn7example",
            "ghp_short",
            "GHP_abcdefghijklmnopqrstuvwxyz0123456789",
            "task-force sk-short",
            "xoxo, xoxz-1234567890-abcdefghij",
            "eyJhbGciOiJIUzI1NiJ9 alone",
            "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl",
            r#"{"max_tokens": 1000, "token_count": 12, "password": null}"#,
            "TOKEN=abc PassWord='x y' SECRET_KEY: \"z\" Api-Key => w",
            "pass_word=abc api.key=abc keys=abc", // near misses of the key words
            "AKIAIOSFODNN7EXAMPLE ghp_abcdefghijklmnopqrstuvwxyz0123456789 token=abc \
             Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln xoxb-1234567890-abcdefghij \
             sk-abcdefghijklmnopqrstuvwx",
        ];
        for text in texts {
            assert_eq!(
                Redactor::builtin().redact(text),
                unfiltered().redact(text),
                "{text}"
            );
        }
    }

    #[test]
    fn oversized_operator_pattern_is_refused() {
        let mut r = Redactor::builtin();
        assert!(r.add("big", r"\w{1000}{1000}").is_err());
    }
}
