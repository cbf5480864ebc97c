//! wasmclaw tool plugin `text`: exact counting, regular expressions and JSON
//! pointers over text the model already has, so it does not have to count
//! or pattern-match by eye.

// Rust bindings for the `tool-plugin` world, and the component-ABI glue that
// routes the exported functions to `Text`. The glue is generated unsafe code;
// everything written by hand stays safe. It is exported only when building
// the component, so that host-side unit tests link.
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "tool-plugin",
        path: "../../wit",
    });

    #[cfg(target_arch = "wasm32")]
    use super::Text;
    #[cfg(target_arch = "wasm32")]
    export!(Text);
}

use bindings::exports::wasmclaw::plugin::tool::Guest;
#[cfg(target_arch = "wasm32")]
use bindings::wasmclaw::plugin::log::{Level, log};
use bindings::wasmclaw::plugin::types::{CallContext, ErrorKind, PluginError, ToolSpec};
use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value, json};

struct Text;

/// Compiled-program size limit for patterns: hostile patterns such as
/// `(a{1000}){1000}` fail to compile instead of exhausting memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Default and largest number of matches `regex_find` returns.
const DEFAULT_MATCHES: u64 = 100;
const MAX_MATCHES: u64 = 1000;
/// Matched text longer than this many bytes is cut in the result.
const MAX_MATCH_TEXT: usize = 1000;

const PATTERN_HELP: &str = "Regular expression (Rust regex syntax, like RE2: no \
    look-around or backreferences). Inline flags: (?i) ignore case, (?m) ^ and $ match \
    at line ends, (?s) . matches newline, (?x) verbose.";

impl Guest for Text {
    fn list_tools() -> Vec<ToolSpec> {
        vec![
            tool(
                "word_count",
                "Count the lines, words (whitespace-separated), characters (Unicode \
                 scalar values) and UTF-8 bytes of a text.",
                json!({
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "description": "The text to count."}
                    },
                    "required": ["text"],
                    "additionalProperties": false
                }),
            ),
            tool(
                "regex_find",
                "Find the matches of a regular expression in a text. Returns each match \
                 with its byte offsets (start inclusive, end exclusive), 1-based line \
                 number and capture groups, as JSON.",
                json!({
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "description": "The text to search."},
                        "pattern": {"type": "string", "description": PATTERN_HELP},
                        "max_matches": {
                            "type": "integer",
                            "description": "Stop after this many matches (default 100).",
                            "minimum": 1,
                            "maximum": MAX_MATCHES
                        }
                    },
                    "required": ["text", "pattern"],
                    "additionalProperties": false
                }),
            ),
            tool(
                "regex_replace",
                "Replace the matches of a regular expression in a text and return the new \
                 text with the number of replacements, as JSON.",
                json!({
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "description": "The text to change."},
                        "pattern": {"type": "string", "description": PATTERN_HELP},
                        "replacement": {
                            "type": "string",
                            "description": "Replacement text. $0 is the whole match, $1 or \
                                ${1} a numbered group, ${name} a named group, $$ a literal \
                                dollar sign. Write ${1}x rather than $1x."
                        },
                        "max_replacements": {
                            "type": "integer",
                            "description": "Replace only the first N matches \
                                (default: all).",
                            "minimum": 1
                        }
                    },
                    "required": ["text", "pattern", "replacement"],
                    "additionalProperties": false
                }),
            ),
            tool(
                "json_query",
                "Select a value from a JSON document with an RFC 6901 JSON pointer and \
                 return it as JSON.",
                json!({
                    "type": "object",
                    "properties": {
                        "json": {"type": "string", "description": "The JSON document, as text."},
                        "pointer": {
                            "type": "string",
                            "description": "JSON pointer, e.g. \"/items/0/name\"; \"\" selects \
                                the whole document. In keys, write ~1 for '/' and ~0 for '~'."
                        }
                    },
                    "required": ["json", "pointer"],
                    "additionalProperties": false
                }),
            ),
        ]
    }

    fn call_tool(
        _ctx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<String, PluginError> {
        let args: Value = serde_json::from_str(&arguments)
            .map_err(|e| invalid(format!("arguments are not JSON: {e}")))?;
        debug(&format!("{name}: {} bytes of arguments", arguments.len()));
        match name.as_str() {
            "word_count" => word_count(&args),
            "regex_find" => regex_find(&args),
            "regex_replace" => regex_replace(&args),
            "json_query" => json_query(&args),
            _ => Err(error(
                ErrorKind::NotFound,
                format!("no tool named '{name}'"),
            )),
        }
    }
}

fn word_count(args: &Value) -> Result<String, PluginError> {
    let text = string(args, "text")?;
    pretty(&json!({
        "lines": text.lines().count(),
        "words": text.split_whitespace().count(),
        "characters": text.chars().count(),
        "bytes": text.len(),
    }))
}

fn regex_find(args: &Value) -> Result<String, PluginError> {
    let text = string(args, "text")?;
    let re = compile(string(args, "pattern")?)?;
    let max = args
        .get("max_matches")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_MATCHES)
        .clamp(1, MAX_MATCHES) as usize;
    let names: Vec<Option<&str>> = re.capture_names().collect();
    let has_names = names.iter().any(Option::is_some);
    let mut matches = Vec::new();
    let mut truncated = false;
    let (mut line, mut scanned) = (1, 0);
    for caps in re.captures_iter(text) {
        if matches.len() == max {
            truncated = true;
            break;
        }
        let whole = caps.get(0).expect("group 0 always participates");
        line += text.as_bytes()[scanned..whole.start()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        scanned = whole.start();
        let mut m = Map::new();
        m.insert("start".into(), json!(whole.start()));
        m.insert("end".into(), json!(whole.end()));
        m.insert("line".into(), json!(line));
        m.insert("text".into(), clip(whole.as_str()));
        if caps.len() > 1 {
            let groups: Vec<Value> = (1..caps.len())
                .map(|i| caps.get(i).map_or(Value::Null, |g| clip(g.as_str())))
                .collect();
            m.insert("groups".into(), Value::Array(groups));
        }
        if has_names {
            let named: Map<String, Value> = names
                .iter()
                .enumerate()
                .filter_map(|(i, n)| {
                    n.map(|n| {
                        (
                            n.to_string(),
                            caps.get(i).map_or(Value::Null, |g| clip(g.as_str())),
                        )
                    })
                })
                .collect();
            m.insert("named".into(), Value::Object(named));
        }
        matches.push(Value::Object(m));
    }
    pretty(&json!({
        "count": matches.len(),
        "truncated": truncated,
        "matches": matches,
    }))
}

fn regex_replace(args: &Value) -> Result<String, PluginError> {
    let text = string(args, "text")?;
    let re = compile(string(args, "pattern")?)?;
    let replacement = string(args, "replacement")?;
    let limit = args
        .get("max_replacements")
        .and_then(Value::as_u64)
        .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let count = re
        .find_iter(text)
        .take(if limit == 0 { usize::MAX } else { limit })
        .count();
    let replaced = re.replacen(text, limit, replacement);
    pretty(&json!({
        "replacements": count,
        "text": replaced,
    }))
}

fn json_query(args: &Value) -> Result<String, PluginError> {
    let doc: Value = serde_json::from_str(string(args, "json")?)
        .map_err(|e| invalid(format!("'json' is not valid JSON: {e}")))?;
    let pointer = string(args, "pointer")?;
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(invalid(format!(
            "invalid JSON pointer '{pointer}': it must be empty or start with '/', \
             e.g. \"/items/0/name\""
        )));
    }
    let mut current = &doc;
    let mut path = String::new();
    for raw in pointer.split('/').skip(1) {
        let key = raw.replace("~1", "/").replace("~0", "~");
        let here = if path.is_empty() {
            "the document root".to_string()
        } else {
            format!("'{path}'")
        };
        current = match current {
            Value::Object(map) => map.get(&key).ok_or_else(|| {
                let mut keys: Vec<&str> = map.keys().map(String::as_str).take(20).collect();
                if map.len() > keys.len() {
                    keys.push("...");
                }
                not_found(format!(
                    "no key '{key}' in the object at {here} (keys: {})",
                    keys.join(", ")
                ))
            })?,
            Value::Array(items) => {
                let valid = key == "0" || (!key.starts_with('0') && !key.is_empty());
                let index = key
                    .parse::<usize>()
                    .ok()
                    .filter(|_| valid && key.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| {
                        invalid(format!(
                            "'{key}' is not an array index at {here} (use 0, 1, 2, ...)"
                        ))
                    })?;
                items.get(index).ok_or_else(|| {
                    not_found(format!(
                        "index {index} is out of range at {here} (array of {} items)",
                        items.len()
                    ))
                })?
            }
            other => {
                return Err(not_found(format!(
                    "the value at {here} is {}, which has no member '{key}'",
                    kind_of(other)
                )));
            }
        };
        path.push('/');
        path.push_str(raw);
    }
    pretty(current)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn compile(pattern: &str) -> Result<Regex, PluginError> {
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(2 * REGEX_SIZE_LIMIT)
        .nest_limit(100)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => invalid(
                "the pattern is too large once compiled (large repetition counts like \
                 {1000} multiply its size); simplify it",
            ),
            e => invalid(format!("invalid regex: {e}")),
        })
}

/// A matched string for the result, cut after `MAX_MATCH_TEXT` bytes.
fn clip(s: &str) -> Value {
    if s.len() <= MAX_MATCH_TEXT {
        return json!(s);
    }
    let mut end = MAX_MATCH_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    json!(format!("{}... ({} bytes in all)", &s[..end], s.len()))
}

fn string<'a>(args: &'a Value, key: &str) -> Result<&'a str, PluginError> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("'{key}' (a string) is required")))
}

fn pretty(v: &Value) -> Result<String, PluginError> {
    serde_json::to_string_pretty(v).map_err(|e| {
        error(
            ErrorKind::Internal,
            format!("could not encode the result: {e}"),
        )
    })
}

fn tool(name: &str, description: &str, schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        input_schema: schema.to_string(),
    }
}

fn error(kind: ErrorKind, message: impl Into<String>) -> PluginError {
    PluginError {
        kind,
        message: message.into(),
        retryable: false,
    }
}

fn invalid(message: impl Into<String>) -> PluginError {
    error(ErrorKind::InvalidInput, message)
}

fn not_found(message: impl Into<String>) -> PluginError {
    error(ErrorKind::NotFound, message)
}

/// Logs one line through the host's `log` import. Host-side unit tests have
/// no host to log to, so there it does nothing.
fn debug(message: &str) {
    #[cfg(target_arch = "wasm32")]
    log(Level::Debug, message);
    #[cfg(not(target_arch = "wasm32"))]
    let _ = message;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: Value) -> Result<Value, PluginError> {
        let ctx = CallContext {
            session_key: "s".into(),
            turn_id: "t".into(),
            parent_turn_id: None,
            depth: 0,
            call_id: "c".into(),
            deadline_ms: 0,
        };
        Text::call_tool(ctx, name.into(), arguments.to_string())
            .map(|s| serde_json::from_str(&s).unwrap())
    }

    #[test]
    fn schemas_are_closed_objects() {
        for t in Text::list_tools() {
            let schema: Value = serde_json::from_str(&t.input_schema).unwrap();
            assert_eq!(schema["type"], "object", "{}", t.name);
            assert_eq!(schema["additionalProperties"], false, "{}", t.name);
            for key in schema["required"].as_array().unwrap() {
                assert!(schema["properties"].get(key.as_str().unwrap()).is_some());
            }
        }
    }

    #[test]
    fn counts() {
        let v = call("word_count", json!({"text": "héllo world\nsecond  line\n"})).unwrap();
        assert_eq!(
            v,
            json!({"lines": 2, "words": 4, "characters": 25, "bytes": 26})
        );
        let v = call("word_count", json!({"text": ""})).unwrap();
        assert_eq!(
            v,
            json!({"lines": 0, "words": 0, "characters": 0, "bytes": 0})
        );
    }

    #[test]
    fn finds() {
        let v = call(
            "regex_find",
            json!({"text": "a=1\nbé=22\nc=333", "pattern": r"(?P<key>\w+)=(\d+)", "max_matches": 2}),
        )
        .unwrap();
        assert_eq!(v["count"], 2);
        assert_eq!(v["truncated"], true);
        assert_eq!(
            v["matches"][1],
            json!({"start": 4, "end": 10, "line": 2, "text": "bé=22",
                   "groups": ["bé", "22"], "named": {"key": "bé"}})
        );
        let v = call("regex_find", json!({"text": "abc", "pattern": "x|(y)"})).unwrap();
        assert_eq!(v, json!({"count": 0, "truncated": false, "matches": []}));
        let v = call("regex_find", json!({"text": "ab", "pattern": "(x)?b"})).unwrap();
        assert_eq!(v["matches"][0]["groups"], json!([null]));
    }

    #[test]
    fn bad_patterns_fail_cleanly() {
        let e = call("regex_find", json!({"text": "", "pattern": "(unclosed"})).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::InvalidInput));
        assert!(e.message.starts_with("invalid regex"), "{}", e.message);
        let e = call(
            "regex_find",
            json!({"text": "", "pattern": r"(\w{1000}){1000}"}),
        )
        .unwrap_err();
        assert!(e.message.contains("too large"), "{}", e.message);
        let e = call("regex_find", json!({"text": "", "pattern": "(?=x)"})).unwrap_err();
        assert!(e.message.contains("look-around"), "{}", e.message);
    }

    #[test]
    fn replaces() {
        let v = call(
            "regex_replace",
            json!({"text": "2024-05-01 and 2023-01-31", "pattern": r"(\d+)-(\d+)-(\d+)",
                   "replacement": "$3.$2.$1"}),
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"replacements": 2, "text": "01.05.2024 and 31.01.2023"})
        );
        let v = call(
            "regex_replace",
            json!({"text": "a a a", "pattern": "a", "replacement": "${0}b", "max_replacements": 2}),
        )
        .unwrap();
        assert_eq!(v, json!({"replacements": 2, "text": "ab ab a"}));
    }

    #[test]
    fn queries() {
        let doc = r#"{"items": [{"name": "x"}, {"name": "y"}], "a/b": {"~": 1}}"#;
        let q = |p: &str| call("json_query", json!({"json": doc, "pointer": p}));
        assert_eq!(q("/items/1/name").unwrap(), json!("y"));
        assert_eq!(q("/a~1b/~0").unwrap(), json!(1));
        assert_eq!(q("").unwrap()["items"][0]["name"], "x");
        let e = q("/items/2").unwrap_err();
        assert!(matches!(e.kind, ErrorKind::NotFound));
        assert_eq!(
            e.message,
            "index 2 is out of range at '/items' (array of 2 items)"
        );
        let e = q("/nope").unwrap_err();
        assert_eq!(
            e.message,
            "no key 'nope' in the object at the document root (keys: a/b, items)"
        );
        assert!(matches!(
            q("/items/01").unwrap_err().kind,
            ErrorKind::InvalidInput
        ));
        assert!(matches!(
            q("/items/0/name/x").unwrap_err().kind,
            ErrorKind::NotFound
        ));
        assert!(matches!(
            q("items").unwrap_err().kind,
            ErrorKind::InvalidInput
        ));
        let e = call("json_query", json!({"json": "{", "pointer": ""})).unwrap_err();
        assert!(e.message.starts_with("'json' is not valid JSON"));
    }
}
