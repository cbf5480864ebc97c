//! The built-in tool `history_search`: the model searches its session's
//! stored messages (every one the session committed, compacted or not) and
//! reads any of them whole, so a detail a compaction summary dropped, or a
//! tool result cut to fit the window, is never out of reach.
//!
//! One of three requests:
//! - `{"query": "words", "limit": 5}`: the best matching messages, each
//!   with its `idx`, who wrote it and the matching part;
//! - `{"message": 12, "offset": 0, "bytes": 4096}`: message 12, a page of
//!   `bytes` (default [`PAGE_BYTES`], at most [`MAX_PAGE_BYTES`]) from
//!   `offset`: a page longer than the model's share of its window for one
//!   tool result would reach it cut, so the model may ask for less;
//! - `{"call_id": "c7", "offset": 0}`: the whole result of tool call `c7`,
//!   paged the same way (also a call of the running turn, from the event
//!   log, once it is written there: within a second).
//!
//! The search itself is in `store/search.rs`.

use std::fmt::Write;

use serde::Deserialize;
use serde_json::json;

use super::subturn::Parent;
use crate::llm::Message;
use crate::plugin::tools::Tool;
use crate::plugin::{ErrorKind, ToolError};
use crate::store::search::{Hit, MAX_QUERY_BYTES};

pub const HISTORY_SEARCH: &str = "history_search";

/// The bytes one read returns, unless asked for another number, and the
/// bounds of that number.
pub const PAGE_BYTES: usize = 4096;
pub const MIN_PAGE_BYTES: usize = 256;
pub const MAX_PAGE_BYTES: usize = 16384;

/// The most messages a search returns, and the default.
const MAX_LIMIT: usize = 20;
const DEFAULT_LIMIT: usize = 5;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    query: Option<String>,
    limit: Option<usize>,
    message: Option<i64>,
    call_id: Option<String>,
    #[serde(default)]
    offset: usize,
    bytes: Option<usize>,
}

pub fn definition() -> Tool {
    Tool::builtin(
        HISTORY_SEARCH,
        "Searches this conversation's earlier messages and tool results, including those \
         summarized away or cut to fit the context window. Give `query` (words; all must match, \
         else any; `word*` matches a prefix) to find messages, then `message` (an idx from the \
         results) or `call_id` (a tool call's id) to read one whole, a page at a time from `offset`.",
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "maxLength": MAX_QUERY_BYTES, "description": "Words to search for."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "How many messages to return (default 5)."},
                "message": {"type": "integer", "minimum": 0, "description": "Read the message with this idx."},
                "call_id": {"type": "string", "maxLength": 256, "description": "Read the whole result of this tool call."},
                "offset": {"type": "integer", "minimum": 0, "description": "Where to start reading, in bytes."},
                "bytes": {"type": "integer", "minimum": MIN_PAGE_BYTES, "maximum": MAX_PAGE_BYTES, "description": "How many bytes to read (default 4096)."}
            },
            "additionalProperties": false
        }),
    )
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::new(ErrorKind::InvalidInput, message)
}

fn internal(error: anyhow::Error) -> ToolError {
    ToolError::new(ErrorKind::Internal, format!("{error:#}"))
}

/// Runs one call of `history_search` for the turn `parent`.
pub async fn run(parent: &Parent, arguments: &str) -> Result<String, ToolError> {
    let request: Request = serde_json::from_str(arguments)
        .map_err(|e| invalid(format!("arguments of '{HISTORY_SEARCH}': {e}")))?;
    let store = &parent.agent.store;
    let bytes = (request.bytes.unwrap_or(PAGE_BYTES)).clamp(MIN_PAGE_BYTES, MAX_PAGE_BYTES);
    let session = parent.control.session.as_str();
    match (&request.query, request.message, &request.call_id) {
        (Some(query), None, None) => {
            let limit = request.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
            crate::store::search::fts_query(query, "AND")
                .map_err(|e| invalid(format!("query: {e}")))?;
            let hits = store
                .search_history(session, query, limit)
                .await
                .map_err(internal)?;
            Ok(found(query, &hits))
        }
        (None, Some(idx), None) => {
            let message = store
                .stored_message(session, idx)
                .await
                .map_err(internal)?
                .ok_or_else(|| {
                    ToolError::new(
                        ErrorKind::NotFound,
                        format!("this conversation has no stored message {idx}"),
                    )
                })?;
            let what = format!("message {idx} ({})", author(&message));
            page(
                &what,
                &text(&message),
                request.offset,
                bytes,
                &format!("\"message\": {idx}"),
            )
        }
        (None, None, Some(call_id)) => {
            let output = store
                .tool_output(session, call_id)
                .await
                .map_err(internal)?
                .ok_or_else(|| {
                    ToolError::new(
                        ErrorKind::NotFound,
                        format!(
                            "no result of tool call {call_id:?} is stored in this conversation"
                        ),
                    )
                })?;
            let what = format!("the result of tool call {call_id}");
            page(
                &what,
                &output,
                request.offset,
                bytes,
                &format!("\"call_id\": {call_id:?}"),
            )
        }
        _ => Err(invalid(
            "give exactly one of `query`, `message` and `call_id`",
        )),
    }
}

/// The search's answer to the model.
fn found(query: &str, hits: &[Hit]) -> String {
    if hits.is_empty() {
        return format!("No earlier message of this conversation matches {query:?}.");
    }
    let mut out = match hits.len() {
        1 => format!("1 earlier message matches {query:?}:\n"),
        n => format!("{n} earlier messages match {query:?}, best first:\n"),
    };
    for hit in hits {
        let who = match &hit.tool {
            Some((tool, call)) => format!("result of {tool} (call_id {call})"),
            None => hit.role.clone(),
        };
        let snippet = hit.snippet.replace('\n', " ");
        let _ = writeln!(
            out,
            "- message {} ({who}, {} bytes): {snippet}",
            hit.idx, hit.bytes
        );
    }
    out.push_str("Read one whole with {\"message\": IDX}.");
    out
}

/// Who wrote `message`, for a read's heading.
fn author(message: &Message) -> String {
    match message {
        Message::System { .. } => "system".into(),
        Message::User { .. } => "user".into(),
        Message::Assistant { .. } => "assistant".into(),
        Message::Tool {
            name, tool_call_id, ..
        } => format!("result of {name}, call_id {tool_call_id}"),
    }
}

/// A message's text as a read shows it: its content, then the tool calls
/// an assistant message made.
fn text(message: &Message) -> String {
    match message {
        Message::System { content } | Message::User { content } => content.clone(),
        Message::Tool { content, .. } => content.clone(),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut text = content.clone();
            for call in tool_calls {
                let _ = write!(
                    text,
                    "\n[called {} (call_id {}) with {}]",
                    call.name, call.id, call.arguments
                );
            }
            text
        }
    }
}

/// At most `bytes` of `whole` from `offset` (moved back to a char
/// boundary), with a heading and, when more follows, how to read it.
fn page(
    what: &str,
    whole: &str,
    offset: usize,
    bytes: usize,
    again: &str,
) -> Result<String, ToolError> {
    if offset > whole.len() {
        return Err(invalid(format!(
            "offset {offset} is past the end of {what} ({} bytes)",
            whole.len()
        )));
    }
    let start = floor(whole, offset);
    let end = floor(whole, (start + bytes).min(whole.len()));
    let mut out = format!(
        "{what}, bytes {start}..{end} of {}:\n{}",
        whole.len(),
        &whole[start..end]
    );
    if end < whole.len() {
        let _ = write!(
            out,
            "\n[{} more bytes: read on with {{{again}, \"offset\": {end}}}]",
            whole.len() - end
        );
    }
    Ok(out)
}

fn floor(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_stops_on_a_char_boundary_and_says_how_to_read_on() {
        let whole = "é".repeat(PAGE_BYTES); // 2 bytes each
        let third = page("m", &whole, 0, 1001, "\"message\": 1").unwrap();
        assert!(third.starts_with("m, bytes 0..1000 of"), "{third}");
        let first = page("m", &whole, 0, PAGE_BYTES, "\"message\": 1").unwrap();
        assert!(first.starts_with(&format!("m, bytes 0..{PAGE_BYTES} of {}:\n", whole.len())));
        assert!(first.ends_with(&format!(
            "[{PAGE_BYTES} more bytes: read on with {{\"message\": 1, \"offset\": {PAGE_BYTES}}}]"
        )));
        // An offset inside a char starts at its beginning.
        let odd = page("m", &whole, 3, PAGE_BYTES, "\"message\": 1").unwrap();
        assert!(odd.starts_with("m, bytes 2.."), "{odd}");
        let last = page("m", &whole, whole.len() - 2, PAGE_BYTES, "\"message\": 1").unwrap();
        assert!(last.ends_with(":\né"), "{last}");
        let past = page("m", "abc", 4, PAGE_BYTES, "x").unwrap_err();
        assert_eq!(past.message, "offset 4 is past the end of m (3 bytes)");
    }

    #[test]
    fn its_schema_compiles_and_holds_the_model_to_it() {
        let tool = definition();
        tool.check_arguments(r#"{"query": "fact"}"#).unwrap();
        let err = tool.check_arguments(r#"{"limit": 50}"#).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput);
        assert!(tool.check_arguments(r#"{"quary": "x"}"#).is_err());
    }
}
