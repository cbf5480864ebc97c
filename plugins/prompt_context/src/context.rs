//! The system message this plugin adds, and where it goes in a request.

use serde_json::{Value, json};

/// The message text: the time, then the operator's notes on a line of their own.
pub fn text(now: &str, notes: Option<&str>) -> String {
    let mut text = format!("Current date and time: {now}.");
    if let Some(notes) = notes {
        text.push('\n');
        text.push_str(notes);
    }
    text
}

/// The operator's `notes` from the config: a non-blank string, or `None`.
/// `Err` when `notes` is there but is not a string.
pub fn notes(config: &Value) -> Result<Option<&str>, String> {
    match config.get("notes") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim())),
        Some(_) => Err("config `notes` must be a string".to_string()),
    }
}

/// Inserts `{"role": "system", "content": text}` into the request's messages
/// right after the system messages they start with (first if there are none),
/// leaving everything else as it is. `Err` when the request has no
/// `messages` list.
pub fn insert(request: &mut Value, text: String) -> Result<(), String> {
    let messages = request
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .ok_or("the request has no `messages` list")?;
    let at = messages
        .iter()
        .take_while(|m| m.get("role").and_then(Value::as_str) == Some("system"))
        .count();
    messages.insert(at, json!({"role": "system", "content": text}));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(roles: &[&str]) -> Value {
        let messages: Vec<Value> = roles
            .iter()
            .map(|r| json!({"role": r, "content": format!("a {r} message")}))
            .collect();
        json!({"model": null, "messages": messages, "tools": ["add"],
               "tool_choice": "auto", "max_tokens": 100, "extra": {"kept": true}})
    }

    fn roles(request: &Value) -> Vec<&str> {
        let messages = request["messages"].as_array().unwrap();
        messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn goes_after_the_leading_system_messages() {
        let mut r = request(&["system", "system", "user", "system", "assistant"]);
        insert(&mut r, "X".into()).unwrap();
        assert_eq!(
            roles(&r),
            ["system", "system", "system", "user", "system", "assistant"]
        );
        assert_eq!(r["messages"][2], json!({"role": "system", "content": "X"}));
    }

    #[test]
    fn goes_first_without_system_messages() {
        let mut r = request(&["user"]);
        insert(&mut r, "X".into()).unwrap();
        assert_eq!(roles(&r), ["system", "user"]);
        let mut r = request(&[]);
        insert(&mut r, "X".into()).unwrap();
        assert_eq!(roles(&r), ["system"]);
    }

    #[test]
    fn changes_nothing_else() {
        let original = request(&["system", "user"]);
        let mut r = original.clone();
        insert(&mut r, "X".into()).unwrap();
        r["messages"].as_array_mut().unwrap().remove(1);
        assert_eq!(r, original);
    }

    #[test]
    fn needs_a_message_list() {
        assert!(insert(&mut json!({"model": "m"}), "X".into()).is_err());
        assert!(insert(&mut json!([1]), "X".into()).is_err());
    }

    #[test]
    fn text_and_notes() {
        assert_eq!(
            text("2026-12-01 05:30 UTC", None),
            "Current date and time: 2026-12-01 05:30 UTC."
        );
        assert_eq!(
            text(
                "2026-12-01 05:30 UTC",
                Some("The user's team is in Lisbon.")
            ),
            "Current date and time: 2026-12-01 05:30 UTC.\nThe user's team is in Lisbon."
        );
        assert_eq!(notes(&json!({"notes": " hi \n"})), Ok(Some("hi")));
        assert_eq!(notes(&json!({"notes": "  "})), Ok(None));
        assert_eq!(notes(&json!({})), Ok(None));
        assert!(notes(&json!({"notes": 3})).is_err());
    }
}
