//! What the turn does with tool calls whose arguments cannot be used.
//!
//! - Arguments that are not a JSON object (not JSON at all, or JSON of
//!   another type) are refused before the tool runs, whatever the tool's
//!   source; the result quotes what the model sent (at most
//!   [`QUOTED_CHARS`] characters) so it can send the call again. The
//!   history keeps such a call with `{}` as its arguments
//!   ([`crate::llm::ToolCall::for_history`]): servers refuse a history whose
//!   arguments do not parse, which would break the session for good.
//! - The calls of a reply cut at the output token limit (`finish_reason:
//!   "length"`, Anthropic's `max_tokens`) are not run: their arguments may
//!   be cut short, and which of them are whole cannot be told for sure (a
//!   call cut before its first argument looks like `{}`), so none is; each
//!   is `tool_call_skipped` with [`CUT_REASON`].

use serde_json::Value;

use crate::llm::FinishReason;
use crate::llm::http::snippet;
use crate::plugin::tools::json_type;
use crate::plugin::{ErrorKind, ToolError};

/// The most characters of refused arguments quoted back to the model.
pub const QUOTED_CHARS: usize = 200;

/// Why the calls of a reply cut at the output token limit were not run.
pub const CUT_REASON: &str = "the reply was cut at the output token limit before the call's arguments were complete; this call was not run";

/// [`CUT_REASON`] when the reply that asked for the calls was cut.
pub fn cut_reason(finish_reason: &FinishReason) -> Option<&'static str> {
    (*finish_reason == FinishReason::Length).then_some(CUT_REASON)
}

/// An `invalid_input` error unless `arguments` are a JSON object.
pub fn check_object(tool: &str, arguments: &str) -> Result<(), ToolError> {
    let problem = match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(_)) => return Ok(()),
        Ok(other) => format!("they are {}", json_type(&other)),
        Err(e) => format!("they are not valid JSON ({e})"),
    };
    Err(ToolError::new(
        ErrorKind::InvalidInput,
        format!(
            "the arguments of tool '{tool}' must be one JSON object, and {problem}; you sent: {}",
            snippet(arguments, QUOTED_CHARS)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_quote_what_was_sent_bounded() {
        assert!(check_object("calc", r#"{"expression": "6*7"}"#).is_ok());
        let cut = check_object("calc", r#"{"expression"#).unwrap_err();
        assert_eq!(cut.kind, ErrorKind::InvalidInput);
        assert_eq!(
            cut.message,
            "the arguments of tool 'calc' must be one JSON object, and they are not valid JSON \
             (EOF while parsing a string at line 1 column 12); you sent: {\"expression"
        );
        assert_eq!(
            check_object("calc", r#""6*7""#).unwrap_err().message,
            "the arguments of tool 'calc' must be one JSON object, and they are a string; you sent: \"6*7\""
        );
        let long = format!("{{\"x\": \"{}", "y".repeat(5000));
        let message = check_object("calc", &long).unwrap_err().message;
        let quoted = message.split_once("you sent: ").unwrap().1;
        assert_eq!(quoted.chars().count(), QUOTED_CHARS + 1, "{quoted}");
        assert!(quoted.ends_with('…'));
    }

    #[test]
    fn only_a_reply_cut_at_the_limit_skips_its_calls() {
        assert_eq!(cut_reason(&FinishReason::Length), Some(CUT_REASON));
        assert_eq!(cut_reason(&FinishReason::ToolCalls), None);
        assert_eq!(cut_reason(&FinishReason::Stop), None);
    }
}
