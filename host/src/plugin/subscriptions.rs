//! The points a hook plugin hooks, as its `subscriptions` returned them,
//! checked at load.
//!
//! Rules: one subscription per point; a tool filter only on the tool points
//! and an event filter only on `on-event`; tool patterns are tool-name
//! characters and `*`; event kinds are ones the host publishes.

use serde::Serialize;

use super::bindings::wit_hooks as wit;
use crate::protocol::EventKind;

pub use wasmclaw_protocol::HookPoint;

impl From<wit::HookPoint> for HookPoint {
    fn from(p: wit::HookPoint) -> Self {
        match p {
            wit::HookPoint::BeforeLlm => HookPoint::BeforeLlm,
            wit::HookPoint::AfterLlm => HookPoint::AfterLlm,
            wit::HookPoint::BeforeTool => HookPoint::BeforeTool,
            wit::HookPoint::AfterTool => HookPoint::AfterTool,
            wit::HookPoint::OnEvent => HookPoint::OnEvent,
        }
    }
}

/// One point a plugin hooks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Subscription {
    pub point: HookPoint,
    /// Lowest runs first; ties go by plugin name.
    pub priority: i32,
    /// Tool-name patterns (`*` matches any run); empty: every tool.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Event kinds; empty: every kind.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventKind>,
}

impl Subscription {
    pub fn applies_to_tool(&self, tool: &str) -> bool {
        self.tools.is_empty() || self.tools.iter().any(|p| glob_match(p, tool))
    }

    pub fn wants_event(&self, kind: EventKind) -> bool {
        self.events.is_empty() || self.events.contains(&kind)
    }
}

/// `before-tool (priority -100; tools files_*)`.
impl std::fmt::Display for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (priority {}", self.point, self.priority)?;
        if !self.tools.is_empty() {
            write!(f, "; tools {}", self.tools.join(","))?;
        }
        if !self.events.is_empty() {
            let kinds: Vec<&str> = self.events.iter().map(|k| k.as_str()).collect();
            write!(f, "; events {}", kinds.join(","))?;
        }
        f.write_str(")")
    }
}

/// Checks what `subscriptions` returned; `priority` (the operator's)
/// replaces the plugin's own.
pub fn validate_subscriptions(
    listed: Vec<wit::Subscription>,
    priority: Option<i32>,
) -> Result<Vec<Subscription>, String> {
    let mut out: Vec<Subscription> = Vec::with_capacity(listed.len());
    for (i, s) in listed.into_iter().enumerate() {
        let point = HookPoint::from(s.point);
        let at = |msg: String| format!("subscriptions()[{i}] ({point}): {msg}");
        if out.iter().any(|o| o.point == point) {
            return Err(at(format!(
                "the plugin already subscribed to {point}; subscribe once per point"
            )));
        }
        if !s.tools.is_empty() && !point.is_tool() {
            return Err(at(
                "a tool filter applies only to before-tool and after-tool".into(),
            ));
        }
        if !s.events.is_empty() && point != HookPoint::OnEvent {
            return Err(at("an event filter applies only to on-event".into()));
        }
        for pattern in &s.tools {
            let ok = !pattern.is_empty()
                && pattern.len() <= 64
                && pattern
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*'));
            if !ok {
                return Err(at(format!(
                    "tool pattern {pattern:?} is not a tool name (letters, digits, '_', '-', up to 64) with '*' wildcards"
                )));
            }
        }
        let mut events = Vec::with_capacity(s.events.len());
        for kind in &s.events {
            let Some(known) = EventKind::parse(kind) else {
                let kinds: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
                return Err(at(format!(
                    "unknown event kind {kind:?}; the kinds are: {}",
                    kinds.join(", ")
                )));
            };
            events.push(known);
        }
        out.push(Subscription {
            point,
            priority: priority.unwrap_or(s.priority),
            tools: s.tools,
            events,
        });
    }
    Ok(out)
}

/// `*` matches any run of characters (none included); everything else
/// matches itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        // No '*': the whole name.
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(point: wit::HookPoint, tools: &[&str], events: &[&str]) -> wit::Subscription {
        wit::Subscription {
            point,
            priority: 5,
            tools: tools.iter().map(|s| s.to_string()).collect(),
            events: events.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn globs_match_runs_of_characters() {
        for (pattern, name, expected) in [
            ("files_*", "files_read", true),
            ("files_*", "files_", true),
            ("files_*", "file_read", false),
            ("*_read", "files_read", true),
            ("*", "anything", true),
            ("a*b*c", "abc", true),
            ("a*b*c", "a-b-x-c", true),
            ("a*b*c", "a-c", false),
            ("ab*ba", "aba", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
        ] {
            assert_eq!(glob_match(pattern, name), expected, "{pattern} vs {name}");
        }
    }

    #[test]
    fn subscriptions_are_checked_and_named() {
        use wit::HookPoint as P;
        let ok = validate_subscriptions(
            vec![
                sub(P::BeforeTool, &["files_*"], &[]),
                sub(P::OnEvent, &[], &["turn_end"]),
            ],
            None,
        )
        .unwrap();
        assert_eq!(ok[0].priority, 5);
        assert!(ok[0].applies_to_tool("files_write") && !ok[0].applies_to_tool("add"));
        assert!(ok[1].wants_event(EventKind::TurnEnd) && !ok[1].wants_event(EventKind::TurnBegin));
        let overridden = validate_subscriptions(vec![sub(P::AfterTool, &[], &[])], Some(-3));
        assert_eq!(overridden.unwrap()[0].priority, -3);

        let err = |list| validate_subscriptions(list, None).unwrap_err();
        assert_eq!(
            err(vec![
                sub(P::BeforeTool, &[], &[]),
                sub(P::BeforeTool, &[], &[])
            ]),
            "subscriptions()[1] (before-tool): the plugin already subscribed to before-tool; subscribe once per point"
        );
        assert_eq!(
            err(vec![sub(P::BeforeLlm, &["x"], &[])]),
            "subscriptions()[0] (before-llm): a tool filter applies only to before-tool and after-tool"
        );
        assert_eq!(
            err(vec![sub(P::AfterTool, &["bad name"], &[])]),
            "subscriptions()[0] (after-tool): tool pattern \"bad name\" is not a tool name (letters, digits, '_', '-', up to 64) with '*' wildcards"
        );
        assert!(
            err(vec![sub(P::OnEvent, &[], &["tool_end"])])
                .starts_with("subscriptions()[0] (on-event): unknown event kind \"tool_end\"; the kinds are: turn_begin, turn_end,")
        );
    }
}
