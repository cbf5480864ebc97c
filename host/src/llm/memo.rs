//! A conversation's messages as a provider serialized them, kept from one
//! model call to the next.
//!
//! A turn sends its session's whole history with every model call, and
//! the history only grows between compactions: serialized again at each
//! call, the messages were a tenth of a tool turn's work with 50 turns in
//! the session, and grow with it. A [`WireMemo`] keeps the JSON a provider
//! wrote for them, so the next request copies those bytes and serializes
//! only the messages added since.
//!
//! The memo is the conversation's: the turn keeps it, the store keeps it
//! beside the session's history between turns (and forgets it with the
//! history), and a compaction starts a new one. The turn hands it to a
//! request as a [`MemoRef`], which names the messages it stands for: a
//! provider uses the memo only for a request whose messages are that very
//! list (the same `Arc`), so a request whose messages were changed on the
//! way is serialized whole, as before: while a tool result in the history
//! is cut to fit the window (until a compaction), when the largest are
//! left out, at a turn's last call (its note), when a hook rewrites the
//! request.
//!
//! The JSON is kept by item of the format's list: OpenAI's messages are
//! the conversation's one to one; Anthropic's alternate user and
//! assistant, each of one or more of the conversation's (consecutive tool
//! results are one), so its last is not kept: the next message may join
//! it. A format may send the first of the memo's messages as its system
//! prompt (a compaction's summary: Anthropic takes every leading system
//! message, OpenAI the first when the turn gave no prompt); the memo then
//! starts after it. A memo holds one format (and start) at a time, and
//! starts again in another.

use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::types::Message;

/// The JSON of a conversation's messages as a provider's wire format
/// writes them, from the first message after the system prompt: a list of
/// items (OpenAI: one a message; Anthropic: one a turn of the alternating
/// user and assistant messages, which may take several).
#[derive(Default)]
pub struct WireMemo {
    inner: Mutex<Memo>,
}

#[derive(Default)]
struct Memo {
    /// The wire format the JSON is in.
    format: &'static str,
    /// The messages the format's list leaves out first (it sends them as
    /// its system prompt: a compaction's summary, to Anthropic).
    skip: usize,
    /// The items' JSON, separated by commas.
    json: Vec<u8>,
    /// After each item: how many messages the items so far stand for, and
    /// where its JSON ends in `json`.
    ends: Vec<End>,
}

#[derive(Clone, Copy)]
struct End {
    messages: usize,
    json: usize,
}

impl Memo {
    /// Keeps the items that stand for the first `messages` at most.
    fn keep(&mut self, messages: usize) {
        let kept = self.ends.partition_point(|end| end.messages <= messages);
        self.ends.truncate(kept);
        let json = self.ends.last().map_or(0, |end| end.json);
        self.json.truncate(json);
    }
}

impl std::fmt::Debug for WireMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let memo = self.lock();
        f.debug_struct("WireMemo")
            .field("format", &memo.format)
            .field("messages", &memo.ends.len())
            .finish()
    }
}

/// A memo handed to a request: valid for `messages` from position `from`
/// on.
#[derive(Clone)]
pub struct MemoRef {
    pub memo: Arc<WireMemo>,
    /// The list the memo stands for (held, so its identity is never
    /// another list's).
    pub messages: Arc<Vec<Message>>,
    /// Where the memo's first message is in `messages` (after the system
    /// prompt).
    pub from: usize,
}

impl std::fmt::Debug for MemoRef {
    /// Not the messages: the request they go with shows them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoRef")
            .field("memo", &self.memo)
            .field("from", &self.from)
            .finish_non_exhaustive()
    }
}

impl MemoRef {
    /// The memo, if it stands for `messages`, and how many of its messages
    /// a format whose list begins at `start` leaves out (see
    /// [`WireMemo::write`]).
    pub fn of<'a>(
        memo: Option<&'a MemoRef>,
        messages: &Arc<Vec<Message>>,
        start: usize,
    ) -> Option<(&'a WireMemo, usize)> {
        let memo = memo?;
        let skip = start.checked_sub(memo.from)?;
        Arc::ptr_eq(&memo.messages, messages).then_some((&*memo.memo, skip))
    }
}

impl WireMemo {
    fn lock(&self) -> std::sync::MutexGuard<'_, Memo> {
        // Every critical section leaves the memo whole.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bytes it keeps.
    pub fn bytes(&self) -> usize {
        let memo = self.lock();
        memo.json.len() + memo.ends.len() * size_of::<End>()
    }

    /// Keeps what stands for the first `messages` only: the list it stands
    /// for is now that long (a turn that failed gives back the history
    /// without its own messages, which the memo may hold).
    pub fn truncate(&self, messages: usize) {
        let mut memo = self.lock();
        let kept = messages.saturating_sub(memo.skip);
        memo.keep(kept);
    }

    /// Writes the JSON items of `messages` to `out`, separated by commas:
    /// those the memo holds in `format` as it holds them, then the items
    /// `items` makes of the messages after those. `items` gives each item
    /// with how many of those messages the items so far stand for; all are
    /// kept if `last_final`, else all but the last (a later message may
    /// join it). `messages` must be the ones the memo stands for, but the
    /// first `skip` (see [`MemoRef::of`]).
    pub fn write<'m, T: Serialize>(
        &self,
        format: &'static str,
        skip: usize,
        messages: &'m [Message],
        out: &mut Vec<u8>,
        items: impl FnOnce(&'m [Message]) -> Vec<(usize, T)>,
        last_final: bool,
    ) {
        let mut memo = self.lock();
        if (memo.format, memo.skip) != (format, skip) {
            *memo = Memo {
                format,
                skip,
                ..Memo::default()
            };
        }
        memo.keep(messages.len());
        let known = memo.ends.last().map_or(0, |end| end.messages);
        out.extend_from_slice(&memo.json);
        let mut first = memo.json.is_empty();
        let items = items(&messages[known..]);
        let last = items.len().saturating_sub(1);
        for (i, (covered, item)) in items.into_iter().enumerate() {
            if !std::mem::take(&mut first) {
                out.push(b',');
            }
            let start = out.len();
            serde_json::to_writer(&mut *out, &item).expect("a message serializes");
            if last_final || i < last {
                if !memo.json.is_empty() {
                    memo.json.push(b',');
                }
                memo.json.extend_from_slice(&out[start..]);
                let end = End {
                    messages: known + covered,
                    json: memo.json.len(),
                };
                memo.ends.push(end);
            }
        }
    }
}

/// The body `make` writes with `memo` (a format's memo and what it
/// skips). Every debug build (the tests) checks it against the body made
/// without: the memo must give the body that serializing the whole request
/// gives.
pub fn body_with<M: Copy>(memo: Option<M>, make: impl Fn(Option<M>) -> Vec<u8>) -> Vec<u8> {
    let body = make(memo);
    #[cfg(debug_assertions)]
    if memo.is_some() {
        let whole = make(None);
        assert!(
            body == whole,
            "the memo of the conversation is stale:\n{}\n{}",
            String::from_utf8_lossy(&body),
            String::from_utf8_lossy(&whole)
        );
    }
    body
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn joined(messages: &[Message]) -> String {
        let json: Vec<String> = messages
            .iter()
            .map(|m| serde_json::to_string(m).unwrap())
            .collect();
        json.join(",")
    }

    #[test]
    fn each_message_is_serialized_once_then_copied() {
        let memo = WireMemo::default();
        let serialized = Cell::new(0);
        // One item a message, counted as made.
        let write = |messages: &[Message]| -> Vec<(usize, Message)> {
            serialized.set(serialized.get() + messages.len());
            messages
                .iter()
                .cloned()
                .enumerate()
                .map(|(i, m)| (i + 1, m))
                .collect()
        };
        let mut messages = vec![Message::user("a \"quoted\""), Message::assistant("b")];
        let mut out = b"[".to_vec();
        memo.write("openai", 0, &messages, &mut out, write, true);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("[{}", joined(&messages))
        );
        assert_eq!(serialized.get(), 2);

        messages.push(Message::user("c"));
        let mut out = Vec::new();
        memo.write("openai", 0, &messages, &mut out, write, true);
        assert_eq!(String::from_utf8(out).unwrap(), joined(&messages));
        assert_eq!(serialized.get(), 3);

        // Another format: every message is serialized again, and kept.
        let mut out = Vec::new();
        memo.write("anthropic", 0, &messages, &mut out, write, true);
        assert_eq!(serialized.get(), 6);
        // Fewer messages than it holds (not for a list it stands for, but
        // kept right): the first ones.
        let mut out = Vec::new();
        memo.write("anthropic", 0, &messages[..1], &mut out, write, true);
        assert_eq!(String::from_utf8(out).unwrap(), joined(&messages[..1]));
        assert_eq!(serialized.get(), 6);
        assert!(memo.bytes() >= joined(&messages[..1]).len());

        // Cut to a shorter list (a history given back without a failed
        // turn's messages): what follows is serialized again.
        memo.write("openai", 0, &messages, &mut Vec::new(), write, true);
        assert_eq!(serialized.get(), 9);
        memo.truncate(1);
        messages[1] = Message::assistant("another b");
        let mut out = Vec::new();
        memo.write("openai", 0, &messages, &mut out, write, true);
        assert_eq!(String::from_utf8(out).unwrap(), joined(&messages));
        assert_eq!(serialized.get(), 11);
    }

    #[test]
    fn an_item_of_several_messages_is_kept_once_final_and_written_again_till_then() {
        let memo = WireMemo::default();
        // Items of two messages each; the last one not final.
        let pairs = |messages: &[Message]| -> Vec<(usize, String)> {
            (messages.chunks(2).enumerate())
                .map(|(i, pair)| ((2 * i + 2).min(messages.len()), format!("{pair:?}")))
                .collect()
        };
        let messages: Vec<Message> = (0..5).map(|i| Message::user(format!("m{i}"))).collect();
        let whole = |messages: &[Message]| {
            let items: Vec<String> = pairs(messages).into_iter().map(|(_, item)| item).collect();
            serde_json::to_string(&items).unwrap()
        };
        for n in [1, 2, 3, 5, 4, 5] {
            let mut out = b"[".to_vec();
            memo.write("test", 0, &messages[..n], &mut out, pairs, false);
            out.push(b']');
            assert_eq!(
                String::from_utf8(out).unwrap(),
                whole(&messages[..n]),
                "{n} messages"
            );
        }
        // Of 5 messages: the items of 0-1 and 2-3 are final, kept.
        let kept = memo
            .lock()
            .ends
            .iter()
            .map(|end| end.messages)
            .collect::<Vec<_>>();
        assert_eq!(kept, [2, 4]);
        memo.truncate(3);
        assert_eq!(
            memo.lock()
                .ends
                .iter()
                .map(|end| end.messages)
                .collect::<Vec<_>>(),
            [2]
        );
    }

    #[test]
    fn a_memo_serves_only_the_list_it_stands_for_from_where_it_starts() {
        let messages = Arc::new(vec![Message::system("be brief"), Message::user("hi")]);
        let memo = MemoRef {
            memo: Arc::default(),
            messages: messages.clone(),
            from: 1,
        };
        let skip = |start| MemoRef::of(Some(&memo), &messages, start).map(|(_, skip)| skip);
        assert_eq!(skip(1), Some(0));
        // A format that sends a compaction's summary as its system prompt
        // leaves the memo's first message out; one whose list begins
        // before the memo cannot use it.
        assert_eq!(skip(2), Some(1));
        assert_eq!(skip(0), None);
        // A copy that says the same is another list: it may have been
        // changed, so it is serialized whole.
        let copy = Arc::new((*messages).clone());
        assert!(MemoRef::of(Some(&memo), &copy, 1).is_none());
        assert!(MemoRef::of(None, &messages, 1).is_none());
    }
}
