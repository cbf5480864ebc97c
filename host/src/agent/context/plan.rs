//! Which messages a compaction may summarize: never the system prompt,
//! the current turn or the last user turns kept verbatim, and never a tool
//! call without its result. Every range ends just before a user or an
//! assistant message, so the calls and results of a round stay together.

use crate::llm::Message;

/// The part of a top-level turn's `messages` to summarize: from `from`
/// (the history's start, an earlier summary included) to the start of the
/// `keep` last user turns of the history, which ends at `turn_start`.
/// None when that leaves nothing but an earlier summary.
pub fn history_range(
    messages: &[Message],
    from: usize,
    turn_start: usize,
    keep: usize,
) -> Option<std::ops::Range<usize>> {
    let mut to = turn_start;
    let mut users = 0;
    if keep > 0 {
        let found = (from..turn_start).rev().find(|&i| {
            if matches!(messages[i], Message::User { .. }) {
                users += 1;
            }
            users == keep
        });
        to = found?;
    }
    worth_it(messages, from..to)
}

/// The part of a SubTurn's `messages` to summarize: after its task (at
/// `from - 1`) up to its latest round of calls, which stays.
pub fn child_range(messages: &[Message], from: usize) -> Option<std::ops::Range<usize>> {
    let last_round = (from..messages.len())
        .rev()
        .find(|&i| matches!(messages[i], Message::Assistant { .. }))?;
    worth_it(messages, from..last_round)
}

/// A range with at least one message that is not a summary already.
fn worth_it(messages: &[Message], range: std::ops::Range<usize>) -> Option<std::ops::Range<usize>> {
    let summary_only = range.len() == 1 && matches!(messages[range.start], Message::System { .. });
    (!range.is_empty() && !summary_only).then_some(range)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;

    fn call(id: &str) -> Message {
        Message::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "echo".into(),
                arguments: "{}".into(),
            }],
        }
    }

    fn result(id: &str) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: "echo".into(),
            content: "out".into(),
            is_error: false,
        }
    }

    #[test]
    fn the_last_user_turns_and_the_current_turn_stay() {
        let messages = vec![
            Message::system("prompt"),
            Message::user("1"),
            call("a"),
            result("a"),
            Message::assistant("one"),
            Message::user("2"),
            Message::assistant("two"),
            Message::user("3"),
            Message::assistant("three"),
            Message::user("current"),
            call("b"),
            result("b"),
        ];
        assert_eq!(history_range(&messages, 1, 9, 2), Some(1..5));
        assert_eq!(history_range(&messages, 1, 9, 0), Some(1..9));
        assert_eq!(history_range(&messages, 1, 9, 3), None);
        // An earlier summary alone is not worth summarizing again.
        let summarized = [&[Message::system("summary")], &messages[5..]].concat();
        assert_eq!(history_range(&summarized, 0, 5, 2), None);
        assert_eq!(history_range(&summarized, 0, 5, 1), Some(0..3));
    }

    #[test]
    fn a_subturn_keeps_its_task_and_its_latest_round() {
        let messages = vec![
            Message::user("task"),
            call("a"),
            result("a"),
            call("b"),
            result("b"),
            call("c"),
            result("c"),
        ];
        assert_eq!(child_range(&messages, 1), Some(1..5));
        assert_eq!(child_range(&messages[..3], 1), None);
    }
}
