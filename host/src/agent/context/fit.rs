//! Shaping a request to the window: long tool results cut, the largest
//! ones left out. Only the request changes; the history keeps them whole.

use super::{estimate, estimate_text};
use crate::agent::history_search::HISTORY_SEARCH;
use crate::llm::Message;

/// `content` in at most about `max` bytes: its start and its end, and in
/// between a marker that says how much was left out, then `why`. Unchanged
/// when it fits.
pub fn truncate(content: &str, max: usize, why: &str) -> String {
    if content.len() <= max {
        return content.to_string();
    }
    let head = floor(content, max * 2 / 3);
    let tail = ceil(content, content.len() - max / 3);
    let left_out = tail - head;
    format!(
        "{}\n[... {left_out} bytes left out here{why} ...]\n{}",
        &content[..head],
        &content[tail..]
    )
}

/// The largest char boundary at or below `at`.
fn floor(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest char boundary at or above `at`.
fn ceil(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// Whether `message` is a tool result longer than `max` bytes.
pub fn too_long(message: &Message, max: usize) -> bool {
    matches!(message, Message::Tool { content, .. } if content.len() > max)
}

/// Cuts every tool result longer than `max` bytes (see [`truncate`]);
/// how many were cut.
pub fn cap_tool_results(messages: &mut [Message], max: usize) -> usize {
    let mut cut = 0;
    for message in messages {
        if too_long(message, max)
            && let Message::Tool {
                content,
                tool_call_id,
                ..
            } = message
        {
            let why = format!(
                " to fit the model's context window; read the whole result with \
                 {HISTORY_SEARCH} {{\"call_id\": {tool_call_id:?}}}"
            );
            *content = truncate(content, max, &why);
            cut += 1;
        }
    }
    cut
}

/// Replaces the largest tool results of `messages` by a marker naming the
/// call and its size (in `whole`, the same messages before any was cut)
/// until about `need` tokens are saved: first those before `recent` (the
/// latest round of calls, which the model is answering now), then, if that
/// is not enough, those after it too. The tokens saved.
pub fn middle_out(messages: &mut [Message], whole: &[Message], recent: usize, need: u64) -> u64 {
    let mut saved = 0;
    for (from, to) in [(0, recent.min(messages.len())), (0, messages.len())] {
        let mut results: Vec<(u64, usize)> = (from..to)
            .filter_map(|i| match &messages[i] {
                Message::Tool { content, .. } if !is_marker(content) => {
                    Some((estimate(&messages[i]), i))
                }
                _ => None,
            })
            .collect();
        results.sort_unstable_by(|a, b| b.cmp(a));
        for (tokens, i) in results {
            if saved >= need {
                return saved;
            }
            let Message::Tool {
                tool_call_id,
                name,
                content,
                ..
            } = &mut messages[i]
            else {
                unreachable!("a tool result")
            };
            let bytes = match whole.get(i) {
                Some(Message::Tool { content, .. }) => content.len(),
                _ => content.len(),
            };
            let marker = format!(
                "{MARKER} {tool_call_id} ({name}), {bytes} bytes; {HISTORY_SEARCH} {{\"call_id\": {tool_call_id:?}}} reads it]"
            );
            let after = estimate_text(&marker);
            *content = marker;
            saved += tokens.saturating_sub(after + 8);
        }
    }
    saved
}

const MARKER: &str = "[left out of this request: tool call";

fn is_marker(content: &str) -> bool {
    content.starts_with(MARKER)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, bytes: usize) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: "echo".into(),
            content: "é".repeat(bytes / 2),
            is_error: false,
        }
    }

    #[test]
    fn a_long_result_keeps_its_start_and_end_around_a_marker() {
        let text = format!("{}{}", "a".repeat(600), "z".repeat(400));
        let cut = truncate(&text, 300, ", because");
        assert!(cut.starts_with(&"a".repeat(200)), "{cut}");
        assert!(cut.ends_with(&format!("\n{}", "z".repeat(100))), "{cut}");
        assert!(cut.contains("\n[... 700 bytes left out here, because ...]\n"));
        assert_eq!(truncate("short", 300, ""), "short");
        // Never inside a character.
        let wide = "é".repeat(500);
        assert!(truncate(&wide, 301, "").contains("bytes left out here"));
    }

    #[test]
    fn the_largest_results_before_the_latest_round_go_first() {
        let mut messages = vec![
            Message::user("q"),
            result("a", 400),
            result("b", 4000),
            result("c", 2000),
            result("d", 8000),
        ];
        // Saving ~500 tokens takes b (the largest before the latest round, d).
        let whole = messages.clone();
        let saved = middle_out(&mut messages, &whole, 4, 500);
        assert!(saved >= 500, "{saved}");
        let texts: Vec<String> = (messages.iter())
            .map(|m| match m {
                Message::Tool { content, .. } => content.chars().take(46).collect(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(texts[2], "[left out of this request: tool call b (echo),");
        assert!(
            texts[1].starts_with('é') && texts[3].starts_with('é') && texts[4].starts_with('é')
        );
        // Needing more than the middle holds takes the latest round too.
        middle_out(&mut messages, &whole, 4, 3000);
        assert!(
            matches!(&messages[4], Message::Tool { content, .. } if content.starts_with(MARKER))
        );
    }
}
