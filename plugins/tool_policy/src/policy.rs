//! The operator's tool policy: `deny` and `require` rules read from the
//! `[config]` table of `tool_policy.toml`, and the decision they give for one
//! tool call.
//!
//! ```toml
//! [[config.deny]]      # deny when the tool matches and every listed argument matches
//! tool = "files_*"
//! arguments = { path = '(^|/)\.env$' }
//! reason = "the agent may not read .env files"
//!
//! [[config.require]]   # when the tool matches, every listed argument must match
//! tool = "write_file"
//! arguments = { path = '^notes/' }
//! ```
//!
//! A policy that does not parse is an error, never an empty policy: the
//! caller then denies every call (fails closed).

use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value};

/// The most memory one compiled pattern may take (a hook call has 16 MiB by
/// default).
const SIZE_LIMIT: usize = 1 << 20;

/// The keys a rule may have; anything else is a typo worth reporting.
const RULE_KEYS: [&str; 3] = ["tool", "arguments", "reason"];

/// All the rules, in the order the operator wrote them.
#[derive(Debug)]
pub struct Policy {
    deny: Vec<Rule>,
    require: Vec<Rule>,
}

/// One `[[config.deny]]` or `[[config.require]]` table.
#[derive(Debug)]
struct Rule {
    /// How messages name the rule: `deny rule 1`, `require rule 2` (counted
    /// from 1 in file order).
    label: String,
    /// A glob over tool names: `*` matches any run of characters.
    tool: String,
    /// Every one must match (deny) or hold (require).
    checks: Vec<Check>,
    /// What the model reads when the rule denies a call.
    reason: Option<String>,
}

/// One `field = 'regex'` entry of a rule's `arguments`.
#[derive(Debug)]
struct Check {
    /// A top-level argument name, or a JSON pointer when it starts with `/`.
    field: String,
    regex: Regex,
}

impl Policy {
    /// Reads the rules from the `[config]` table (as JSON). `Err` names the
    /// rule that is wrong and says why.
    pub fn from_config(config: &Value) -> Result<Policy, String> {
        let empty = Map::new();
        let table = match config {
            Value::Null => &empty,
            Value::Object(table) => table,
            _ => return Err("the config is not a table".to_string()),
        };
        if let Some(key) = table.keys().find(|k| *k != "deny" && *k != "require") {
            return Err(format!(
                "unknown config key `{key}` (expected `deny` and `require`)"
            ));
        }
        Ok(Policy {
            deny: rules(table, "deny")?,
            require: rules(table, "require")?,
        })
    }

    /// The reason to deny this call, or `None` to let it through. Deny rules
    /// come first, in order; then require rules, in order.
    pub fn decide(&self, tool: &str, arguments: &Value) -> Option<String> {
        for rule in self.deny.iter().filter(|r| glob_matches(&r.tool, tool)) {
            if rule.checks.iter().all(|c| c.matches(arguments)) {
                return Some(rule.reason.clone().unwrap_or_else(|| {
                    let what = match rule.checks.as_slice() {
                        [] => String::new(),
                        checks => format!("; {}", describe(checks)),
                    };
                    format!(
                        "the operator's tool policy forbids this call of `{tool}` \
                         ({}, tool = \"{}\"{what})",
                        rule.label, rule.tool
                    )
                }));
            }
        }
        for rule in self.require.iter().filter(|r| glob_matches(&r.tool, tool)) {
            if let Some(failed) = rule.checks.iter().find(|c| !c.matches(arguments)) {
                return Some(rule.reason.clone().unwrap_or_else(|| {
                    let missing = match failed.text(arguments) {
                        None => ", and it is missing",
                        Some(_) => "",
                    };
                    format!(
                        "the operator's tool policy forbids this call of `{tool}`: \
                         argument `{}` must match `{}`{missing} ({}, tool = \"{}\")",
                        failed.field,
                        failed.regex.as_str(),
                        rule.label,
                        rule.tool
                    )
                }));
            }
        }
        None
    }
}

impl Check {
    /// Whether the argument exists and its text matches. A missing argument
    /// never matches.
    fn matches(&self, arguments: &Value) -> bool {
        self.text(arguments)
            .is_some_and(|text| self.regex.is_match(&text))
    }

    /// The argument as text: a string as it is, anything else as its JSON
    /// (`42`, `true`, `["a"]`).
    fn text(&self, arguments: &Value) -> Option<String> {
        let value = if self.field.starts_with('/') {
            arguments.pointer(&self.field)
        } else {
            arguments.get(&self.field)
        }?;
        Some(match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }
}

/// "argument `path` matches `...`, argument `mode` matches `...`".
fn describe(checks: &[Check]) -> String {
    let parts: Vec<String> = checks
        .iter()
        .map(|c| format!("argument `{}` matches `{}`", c.field, c.regex.as_str()))
        .collect();
    parts.join(", ")
}

/// The rules listed under `key` (`deny` or `require`).
fn rules(table: &Map<String, Value>, key: &str) -> Result<Vec<Rule>, String> {
    let list = match table.get(key) {
        None => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(_) => {
            return Err(format!(
                "`{key}` must be a list of tables ([[config.{key}]])"
            ));
        }
    };
    let mut rules = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let label = format!("{key} rule {}", i + 1);
        let rule = rule(label.clone(), entry).map_err(|e| format!("{label}: {e}"))?;
        if key == "require" && rule.checks.is_empty() {
            return Err(format!(
                "{label}: has no `arguments`, so it would never require anything"
            ));
        }
        rules.push(rule);
    }
    Ok(rules)
}

/// One rule; `Err` says what is wrong with it.
fn rule(label: String, entry: &Value) -> Result<Rule, String> {
    let Value::Object(entry) = entry else {
        return Err("is not a table".to_string());
    };
    if let Some(key) = entry.keys().find(|k| !RULE_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "unknown key `{key}` (expected `tool`, `arguments` and `reason`)"
        ));
    }
    let tool = match entry.get("tool") {
        Some(Value::String(tool)) if !tool.is_empty() => tool.clone(),
        _ => return Err("needs `tool`, a tool name or glob such as \"files_*\"".to_string()),
    };
    let reason = match entry.get("reason") {
        None => None,
        Some(Value::String(reason)) => Some(reason.clone()),
        Some(_) => return Err("`reason` must be a string".to_string()),
    };
    let mut checks = Vec::new();
    match entry.get("arguments") {
        None => {}
        Some(Value::Object(arguments)) => {
            for (field, pattern) in arguments {
                let Value::String(pattern) = pattern else {
                    return Err(format!("argument `{field}`: the pattern must be a string"));
                };
                let regex = RegexBuilder::new(pattern)
                    .size_limit(SIZE_LIMIT)
                    .dfa_size_limit(2 * SIZE_LIMIT)
                    .build()
                    .map_err(|e| {
                        format!(
                            "argument `{field}`: invalid regex: {}",
                            one_line(&e.to_string())
                        )
                    })?;
                checks.push(Check {
                    field: field.clone(),
                    regex,
                });
            }
        }
        Some(_) => return Err("`arguments` must be a table of field = 'regex'".to_string()),
    }
    Ok(Rule {
        label,
        tool,
        checks,
        reason,
    })
}

/// Whether `name` matches `pattern`, where `*` stands for any run of
/// characters (possibly none) and everything else for itself. The whole name
/// must match.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    // After a `*`: where the pattern resumes, and the name position the `*`
    // has swallowed up to. On a mismatch the `*` swallows one byte more.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            pi += 1;
            star = Some((pi, ni));
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((resume, swallowed)) = star {
            pi = resume;
            ni = swallowed + 1;
            star = Some((resume, ni));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
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

    fn policy(config: Value) -> Policy {
        Policy::from_config(&config).unwrap()
    }

    fn example() -> Policy {
        policy(json!({
            "deny": [
                {"tool": "files_*", "arguments": {"path": r"(^|/)\.env$"},
                 "reason": "the agent may not read .env files"},
                {"tool": "shell", "arguments": {"/options/sudo": "^true$"}},
                {"tool": "rm_*"},
            ],
            "require": [
                {"tool": "write_file", "arguments": {"path": "^notes/"}},
                {"tool": "fetch", "arguments": {"url": "^https://"},
                 "reason": "only https"},
            ],
        }))
    }

    #[test]
    fn globs() {
        assert!(glob_matches("files_*", "files_read"));
        assert!(glob_matches("files_*", "files_"));
        assert!(!glob_matches("files_*", "file_read"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("*_file", "read_file"));
        assert!(glob_matches("a*b*c", "axxbyybc"));
        assert!(!glob_matches("a*b*c", "axxbyyb"));
        assert!(glob_matches("read_file", "read_file"));
        assert!(!glob_matches("read_file", "read_files"));
    }

    #[test]
    fn deny_with_reason() {
        let p = example();
        let d = p.decide("files_read", &json!({"path": "app/.env"}));
        assert_eq!(d.as_deref(), Some("the agent may not read .env files"));
        assert_eq!(p.decide("files_read", &json!({"path": "app/.envrc"})), None);
    }

    #[test]
    fn missing_argument_never_matches_a_deny_rule() {
        assert_eq!(example().decide("files_read", &json!({})), None);
    }

    #[test]
    fn json_pointer_and_non_string_values() {
        let p = example();
        let d = p
            .decide("shell", &json!({"options": {"sudo": true}}))
            .unwrap();
        assert!(d.contains("deny rule 2"), "{d}");
        assert!(d.contains("`/options/sudo`"), "{d}");
        assert!(d.contains("`shell`"), "{d}");
        assert_eq!(
            p.decide("shell", &json!({"options": {"sudo": false}})),
            None
        );
    }

    #[test]
    fn deny_rule_without_arguments_denies_the_tool() {
        let d = example().decide("rm_rf", &json!({})).unwrap();
        assert!(d.contains("deny rule 3") && d.contains("`rm_rf`"), "{d}");
    }

    #[test]
    fn require_rules() {
        let p = example();
        assert_eq!(p.decide("write_file", &json!({"path": "notes/a.md"})), None);
        let d = p
            .decide("write_file", &json!({"path": "src/a.rs"}))
            .unwrap();
        assert!(d.contains("`path` must match `^notes/`"), "{d}");
        assert!(d.contains("require rule 1"), "{d}");
        let d = p.decide("write_file", &json!({})).unwrap();
        assert!(d.contains("missing"), "{d}");
        let d = p.decide("fetch", &json!({"url": "http://x"}));
        assert_eq!(d.as_deref(), Some("only https"));
        assert_eq!(p.decide("other", &json!({})), None);
    }

    #[test]
    fn deny_rules_come_before_require_rules() {
        let p = policy(json!({
            "require": [{"tool": "*", "arguments": {"x": "^ok$"}, "reason": "require"}],
            "deny": [{"tool": "*", "arguments": {"x": "o"}, "reason": "deny"}],
        }));
        assert_eq!(p.decide("t", &json!({"x": "ok"})).as_deref(), Some("deny"));
        assert_eq!(p.decide("t", &json!({"x": "no"})).as_deref(), Some("deny"));
        assert_eq!(
            p.decide("t", &json!({"x": "yes"})).as_deref(),
            Some("require")
        );
    }

    #[test]
    fn empty_config_allows_everything() {
        assert_eq!(policy(json!({})).decide("t", &json!({})), None);
        assert_eq!(policy(Value::Null).decide("t", &json!({})), None);
    }

    #[test]
    fn bad_configs_name_the_rule() {
        let bad = [
            (
                json!({"deny": [{"arguments": {"a": "x"}}]}),
                "deny rule 1: needs `tool`",
            ),
            (
                json!({"deny": [{"tool": "a"}, {"tool": "b", "arguments": {"p": "("}}]}),
                "deny rule 2: argument `p`: invalid regex",
            ),
            (
                json!({"require": [{"tool": "a"}]}),
                "require rule 1: has no `arguments`",
            ),
            (
                json!({"require": [{"tool": "a", "argumets": {}}]}),
                "unknown key `argumets`",
            ),
            (json!({"deny": {"tool": "a"}}), "`deny` must be a list"),
            (json!({"denied": []}), "unknown config key `denied`"),
            (
                json!({"deny": [{"tool": "a", "arguments": {"p": 1}}]}),
                "must be a string",
            ),
        ];
        for (config, want) in bad {
            let e = Policy::from_config(&config).unwrap_err();
            assert!(e.contains(want), "{e} (wanted {want})");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }
}
