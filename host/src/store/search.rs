//! Full-text search over a session's stored messages, for the built-in
//! tool `history_search`: what a compaction summary dropped, or a tool
//! result cut for the model's window, is still in `messages` (a compaction
//! never deletes one), and this finds it.
//!
//! # The index
//!
//! `message_search` is an FTS5 table with one row per stored message: its
//! text (the content, and for an assistant message the names and arguments
//! of the tools it called, as the view `message_text` gives it), its
//! session and its `idx`. Messages are never updated or deleted, so
//! neither is the index.
//!
//! A session's messages are indexed when it is first searched after they
//! were stored, all of them in one transaction, never as a turn commits:
//! `search_indexed` keeps, per session, the `idx` its indexing reached.
//! Indexing at each commit made every turn pay for a full-text flush (a
//! new segment, its pages in the write-ahead log) for a search most
//! sessions never make; a search still sees every committed message.
//!
//! The session is an indexed column too: a search matches the session's
//! key as a phrase, so SQLite reads only that session's rows of the index,
//! then checks the key exactly (a phrase of `a:b` also matches `a:b:c`).
//!
//! # Queries
//!
//! A query is words, never FTS5 syntax: each word is quoted as a string
//! (its quotes doubled), so `NEAR`, `-`, `*`, `:` and unbalanced quotes in
//! what a model writes search for themselves or nothing, and can never
//! make an invalid query. A word ending in `*` is a prefix. Every word must
//! match; when no message has them all, messages with any of them are
//! returned, best first (the `rank` of FTS5: bm25).

use anyhow::{Context, Result};
use rusqlite::{Connection, OptionalExtension, params};

use crate::llm::Message;

/// The schema step that adds the index (see `MIGRATIONS` in `store.rs`).
pub const MIGRATION: &str = "
    CREATE VIRTUAL TABLE message_search USING fts5(
        text, session, idx UNINDEXED,
        tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE VIEW message_text (session, idx, text) AS
        SELECT m.session, m.idx,
               coalesce(json_extract(m.json, '$.content'), '')
               || coalesce((SELECT group_concat(
                       char(10) || json_extract(call.value, '$.name') || ' '
                       || json_extract(call.value, '$.arguments'), '')
                   FROM json_each(m.json, '$.tool_calls') AS call), '')
        FROM messages AS m;
    CREATE TRIGGER message_search_insert AFTER INSERT ON messages BEGIN
        INSERT INTO message_search (text, session, idx)
            SELECT text, session, idx FROM message_text
            WHERE session = new.session AND idx = new.idx;
    END;
    INSERT INTO message_search (text, session, idx)
        SELECT text, session, idx FROM message_text;";

/// The schema step that indexes a session's messages when it is searched,
/// not as they are stored: the trigger goes, and every message stored so
/// far was indexed by it.
pub const INDEX_WHEN_SEARCHED: &str = "
    DROP TRIGGER message_search_insert;
    CREATE TABLE search_indexed (
        session  TEXT PRIMARY KEY,
        next_idx INTEGER NOT NULL
    ) STRICT, WITHOUT ROWID;
    INSERT INTO search_indexed (session, next_idx)
        SELECT session, max(idx) + 1 FROM messages GROUP BY session;";

/// The most words a query may have, and its most bytes.
pub const MAX_WORDS: usize = 16;
pub const MAX_QUERY_BYTES: usize = 512;

/// One message a search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// Its place in the session's stored messages.
    pub idx: i64,
    pub turn_id: String,
    /// `user`, `assistant`, `tool` or `system`.
    pub role: String,
    /// A tool result's tool and call id.
    pub tool: Option<(String, String)>,
    /// The matching part, the words found between `[` and `]`.
    pub snippet: String,
    /// The whole text's length in bytes.
    pub bytes: usize,
}

/// Why a query searches nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryError {
    Empty,
    TooLong(usize),
    TooManyWords(usize),
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::Empty => f.write_str("the query has no word to search for"),
            QueryError::TooLong(bytes) => write!(
                f,
                "the query is {bytes} bytes long; at most {MAX_QUERY_BYTES} are searched"
            ),
            QueryError::TooManyWords(words) => write!(
                f,
                "the query has {words} words; at most {MAX_WORDS} are searched"
            ),
        }
    }
}

/// `query`'s words as FTS5 strings, joined by `op` (`AND`, `OR`).
pub fn fts_query(query: &str, op: &str) -> Result<String, QueryError> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(QueryError::TooLong(query.len()));
    }
    let words: Vec<String> = query
        .split_whitespace()
        .filter_map(|word| {
            let (stem, prefix) = match word.strip_suffix('*') {
                Some(stem) => (stem, "*"),
                None => (word, ""),
            };
            // A word with no letter or digit is no token: it would be an
            // empty string, which FTS5 rejects.
            stem.chars()
                .any(char::is_alphanumeric)
                .then(|| format!("\"{}\"{prefix}", stem.replace('"', "\"\"")))
        })
        .collect();
    match words.len() {
        0 => Err(QueryError::Empty),
        n if n > MAX_WORDS => Err(QueryError::TooManyWords(n)),
        _ => Ok(words.join(&format!(" {op} "))),
    }
}

/// The messages of `session` matching `query`, best first, at most `limit`,
/// among those indexed (see [`index_pending`]).
pub fn search(conn: &Connection, session: &str, query: &str, limit: usize) -> Result<Vec<Hit>> {
    for op in ["AND", "OR"] {
        let Ok(words) = fts_query(query, op) else {
            return Ok(Vec::new());
        };
        let hits = matching(conn, session, &words, limit)?;
        if !hits.is_empty() {
            return Ok(hits);
        }
    }
    Ok(Vec::new())
}

/// Indexes the messages of `session` stored since it was last searched,
/// in one transaction; whether there were any (a write). Runs under the
/// store's one connection, so no commit comes between the look and the
/// write.
pub fn index_pending(conn: &mut Connection, session: &str) -> Result<bool> {
    let indexed: i64 = conn
        .prepare_cached("SELECT next_idx FROM search_indexed WHERE session = ?1")?
        .query_row([session], |row| row.get(0))
        .optional()?
        .unwrap_or(0);
    let stored = super::write::stored_next_idx(conn, session)?;
    if stored <= indexed {
        return Ok(false);
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.prepare_cached(
        "INSERT INTO message_search (text, session, idx)
         SELECT text, session, idx FROM message_text
         WHERE session = ?1 AND idx >= ?2 AND idx < ?3",
    )?
    .execute(params![session, indexed, stored])?;
    tx.prepare_cached(
        "INSERT INTO search_indexed (session, next_idx) VALUES (?1, ?2)
         ON CONFLICT (session) DO UPDATE SET next_idx = excluded.next_idx",
    )?
    .execute(params![session, stored])?;
    tx.commit()?;
    Ok(true)
}

fn matching(conn: &Connection, session: &str, words: &str, limit: usize) -> Result<Vec<Hit>> {
    let expression = match session_phrase(session) {
        Some(phrase) => format!("({words}) AND session : {phrase}"),
        None => words.to_string(),
    };
    let mut statement = conn.prepare_cached(
        "SELECT s.idx, m.turn_id, m.json,
                snippet(message_search, 0, '[', ']', '…', 32), length(s.text)
         FROM message_search AS s
         JOIN messages AS m ON m.session = s.session AND m.idx = s.idx
         WHERE message_search MATCH ?1 AND s.session = ?2
         ORDER BY rank
         LIMIT ?3",
    )?;
    let rows = statement.query_map(params![expression, session, limit as i64], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
            row.get::<_, String>(3)?,
            row.get::<_, i64>(4)?,
        ))
    })?;
    let mut hits = Vec::new();
    for row in rows {
        let (idx, turn_id, json, snippet, bytes) = row?;
        let message: Message = serde_json::from_str(&json)
            .with_context(|| format!("message {idx} of session {session} is not valid JSON"))?;
        let (role, tool) = describe(&message);
        hits.push(Hit {
            idx,
            turn_id,
            role: role.to_string(),
            tool,
            snippet,
            bytes: bytes as usize,
        });
    }
    Ok(hits)
}

/// The session key as an FTS5 phrase of the `session` column, or None when
/// it has no token (then only the exact check selects the session).
fn session_phrase(session: &str) -> Option<String> {
    session
        .chars()
        .any(char::is_alphanumeric)
        .then(|| format!("\"{}\"", session.replace('"', "\"\"")))
}

fn describe(message: &Message) -> (&'static str, Option<(String, String)>) {
    match message {
        Message::System { .. } => ("system", None),
        Message::User { .. } => ("user", None),
        Message::Assistant { .. } => ("assistant", None),
        Message::Tool {
            name, tool_call_id, ..
        } => ("tool", Some((name.clone(), tool_call_id.clone()))),
    }
}

/// Message `idx` of `session`, as stored.
pub fn message(conn: &Connection, session: &str, idx: i64) -> Result<Option<Message>> {
    let json: Option<String> = conn
        .prepare_cached("SELECT json FROM messages WHERE session = ?1 AND idx = ?2")?
        .query_row(params![session, idx], |row| row.get(0))
        .optional()?;
    json.map(|json| {
        serde_json::from_str(&json)
            .with_context(|| format!("message {idx} of session {session} is not valid JSON"))
    })
    .transpose()
}

/// The whole output of tool call `call_id` of `session`: from its stored
/// result, else (a call of a turn not yet committed) from the event log's
/// `tool_call_end`.
pub fn tool_output(conn: &Connection, session: &str, call_id: &str) -> Result<Option<String>> {
    let stored: Option<String> = conn
        .prepare_cached(
            "SELECT json_extract(json, '$.content') FROM messages
             WHERE session = ?1 AND json_extract(json, '$.role') = 'tool'
               AND json_extract(json, '$.tool_call_id') = ?2
             ORDER BY idx DESC LIMIT 1",
        )?
        .query_row(params![session, call_id], |row| row.get(0))
        .optional()?;
    if stored.is_some() {
        return Ok(stored);
    }
    Ok(conn
        .prepare_cached(
            "SELECT json_extract(json, '$.output') FROM events
             WHERE session = ?1 AND type = 'tool_call_end'
               AND json_extract(json, '$.call_id') = ?2
             ORDER BY seq DESC LIMIT 1",
        )?
        .query_row(params![session, call_id], |row| row.get(0))
        .optional()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;
    use crate::protocol::{EventBody, ToolCallEnd, TurnStatus};
    use crate::store::Store;
    use crate::store::tests::{event, turn};

    /// One turn of `session`: the user's `text`, a call of `echo` with it,
    /// its result, and an answer.
    async fn commit(store: &Store, session: &str, n: u32, text: &str) {
        let id = format!("{session}-t{n}");
        let record = turn(
            session,
            &id,
            TurnStatus::Completed,
            "2026-11-30T18:00:00.000Z",
        );
        let call_id = format!("{id}-c");
        let messages = [
            Message::user(text),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: call_id.clone(),
                    name: "echo".into(),
                    arguments: serde_json::json!({ "text": text }).to_string(),
                }],
            },
            Message::Tool {
                tool_call_id: call_id,
                name: "echo".into(),
                content: format!("echoed: {text}"),
                is_error: false,
            },
            Message::assistant("noted"),
        ];
        store.commit_turn(&record, &messages).await.unwrap();
    }

    fn idxs(hits: &[Hit]) -> Vec<i64> {
        let mut idxs: Vec<i64> = hits.iter().map(|h| h.idx).collect();
        idxs.sort();
        idxs
    }

    #[tokio::test]
    async fn a_search_finds_every_message_with_the_words_in_its_own_session_only() {
        let store = Store::open_in_memory().unwrap();
        commit(&store, "a:b", 1, "the launch code is zebra-42").await;
        commit(&store, "a:b", 2, "nothing to see").await;
        // Keys whose phrase matches `a:b` too, and one with no token.
        commit(&store, "a:b:c", 1, "zebra-42 elsewhere").await;
        commit(&store, "b a", 1, "zebra-42 elsewhere").await;
        commit(&store, "::", 1, "zebra-42 in a key of no word").await;
        let hits = store.search_history("a:b", "zebra-42", 10).await.unwrap();
        // The user message, the call's arguments, the result.
        assert_eq!(idxs(&hits), [0, 1, 2]);
        let result = hits.iter().find(|h| h.idx == 2).unwrap();
        assert_eq!(result.role, "tool");
        assert_eq!(result.tool, Some(("echo".into(), "a:b-t1-c".into())));
        assert_eq!(result.turn_id, "a:b-t1");
        assert_eq!(result.snippet, "echoed: the launch code is [zebra-42]");
        assert_eq!(result.bytes, "echoed: the launch code is zebra-42".len());
        let other = store.search_history("::", "zebra", 10).await.unwrap();
        assert_eq!(idxs(&other), [0, 1, 2]);
        assert!(other.iter().all(|h| h.turn_id == "::-t1"));
        // The limit, and the words in any order, any case, accents folded.
        assert_eq!(
            store.search_history("a:b", "zebra", 1).await.unwrap().len(),
            1
        );
        let folded = store
            .search_history("a:b", "LAUNCH códe", 10)
            .await
            .unwrap();
        assert_eq!(idxs(&folded), [0, 1, 2]);
    }

    #[tokio::test]
    async fn all_words_first_then_any_and_a_prefix() {
        let store = Store::open_in_memory().unwrap();
        commit(&store, "s", 1, "apples and pears").await;
        commit(&store, "s", 2, "pears only").await;
        let both = store.search_history("s", "apples pears", 10).await.unwrap();
        assert_eq!(idxs(&both), [0, 1, 2]);
        let any = store.search_history("s", "apples kiwis", 10).await.unwrap();
        assert_eq!(idxs(&any), [0, 1, 2]);
        let prefix = store.search_history("s", "app*", 10).await.unwrap();
        assert_eq!(idxs(&prefix), [0, 1, 2]);
        let none = store.search_history("s", "kiwis", 10).await.unwrap();
        assert!(none.is_empty());
    }

    /// What a model may write is searched for, never run as FTS5 syntax:
    /// no query is an error of the store.
    #[tokio::test]
    async fn hostile_queries_search_for_themselves_or_nothing() {
        let store = Store::open_in_memory().unwrap();
        commit(
            &store,
            "s",
            1,
            "NEAR the \"quoted\" OR AND col:value -minus",
        )
        .await;
        let queries = [
            "\"",
            "\"\"\"",
            "NEAR(",
            "NEAR(a b, 3)",
            "a OR",
            "AND",
            "NOT x",
            "-minus",
            "col:value",
            "session:s",
            "text : x",
            "*",
            "**",
            "a**",
            "^start",
            "(unbalanced",
            "x) OR (y",
            "{text session}: x",
            "+",
            "'; DROP TABLE messages; --",
            "\u{0}",
            "\u{202e}reversed",
            "🦀 crab",
        ];
        for query in queries {
            let result = store.search_history("s", query, 5).await;
            assert!(result.is_ok(), "{query:?}: {result:?}");
        }
        let quoted = store.search_history("s", "\"quoted\"", 5).await.unwrap();
        assert_eq!(idxs(&quoted), [0, 1, 2]);
        let near = store.search_history("s", "NEAR(", 5).await.unwrap();
        assert_eq!(idxs(&near), [0, 1, 2]);
        // The table is still there.
        assert_eq!(store.original_messages("s").await.unwrap().len(), 4);
    }

    #[test]
    fn a_query_is_words_within_bounds() {
        assert_eq!(
            fts_query("a \"b\" c*", "AND").unwrap(),
            r#""a" AND """b""" AND "c"*"#
        );
        assert_eq!(fts_query(" - * () ", "AND"), Err(QueryError::Empty));
        let long = "w ".repeat(MAX_QUERY_BYTES);
        assert_eq!(
            fts_query(&long, "AND"),
            Err(QueryError::TooLong(long.len()))
        );
        let many = "w ".repeat(MAX_WORDS + 1);
        assert_eq!(
            fts_query(&many, "AND"),
            Err(QueryError::TooManyWords(MAX_WORDS + 1))
        );
        assert_eq!(
            QueryError::TooManyWords(17).to_string(),
            "the query has 17 words; at most 16 are searched"
        );
    }

    #[tokio::test]
    async fn a_message_and_a_tool_output_read_whole() {
        let store = Store::open_in_memory().unwrap();
        commit(&store, "s", 1, "hello").await;
        assert_eq!(
            store.stored_message("s", 0).await.unwrap(),
            Some(Message::user("hello"))
        );
        assert_eq!(store.stored_message("s", 4).await.unwrap(), None);
        assert_eq!(store.stored_message("t", 0).await.unwrap(), None);
        assert_eq!(
            store.tool_output("s", "s-t1-c").await.unwrap().as_deref(),
            Some("echoed: hello")
        );
        assert_eq!(store.tool_output("t", "s-t1-c").await.unwrap(), None);
        // A call of a turn not yet committed: from the event log.
        let end = EventBody::ToolCallEnd(ToolCallEnd {
            call_id: "live".into(),
            tool: "echo".into(),
            ok: true,
            output: "from the log".into(),
            error_kind: None,
            duration_ms: 1.0,
        });
        store
            .append_events(&[event(1, Some("s"), end)])
            .await
            .unwrap();
        assert_eq!(
            store.tool_output("s", "live").await.unwrap().as_deref(),
            Some("from the log")
        );
        assert_eq!(store.tool_output("t", "live").await.unwrap(), None);
    }

    /// Messages indexed by the trigger of migration 9 are found after
    /// migration 10, and those stored after it are indexed once, when
    /// their session is searched.
    #[test]
    fn messages_stored_before_and_after_the_lazy_index_are_found_once() {
        let mut conn = Connection::open_in_memory().unwrap();
        let migrations = &super::super::MIGRATIONS;
        assert_eq!(migrations[8], MIGRATION);
        assert_eq!(migrations[9], INDEX_WHEN_SEARCHED);
        for sql in &migrations[..8] {
            conn.execute_batch(sql).unwrap();
        }
        let message = |idx: i64, text: &str| {
            format!(
                "INSERT INTO messages VALUES ('s', {idx}, 't', '{{\"role\":\"user\",\"content\":\"{text}\"}}');"
            )
        };
        conn.execute_batch(&format!(
            "INSERT INTO sessions (key, created_at, updated_at) VALUES ('s', 'x', 'x');
             INSERT INTO turns VALUES ('t', 's', NULL, 'i', 'completed', 'r', 1, 0, 0, 'x', 'x');
             {}",
            message(0, "old zebra")
        ))
        .unwrap();
        conn.execute_batch(MIGRATION).unwrap();
        conn.execute_batch(&message(1, "zebra under the trigger"))
            .unwrap();
        conn.execute_batch(INDEX_WHEN_SEARCHED).unwrap();
        conn.execute_batch(&message(2, "zebra after it")).unwrap();
        let rows = |conn: &Connection| -> i64 {
            conn.query_row("SELECT count(*) FROM message_search", [], |row| row.get(0))
                .unwrap()
        };
        // A message stored now is not indexed until it is searched.
        assert_eq!(rows(&conn), 2);
        assert!(index_pending(&mut conn, "s").unwrap());
        let hits = search(&conn, "s", "zebra", 5).unwrap();
        assert_eq!(idxs(&hits), [0, 1, 2]);
        assert_eq!(rows(&conn), 3);
        let first = hits.iter().find(|h| h.idx == 0).unwrap();
        assert_eq!(first.snippet, "old [zebra]");
        // Searched again, nothing is indexed twice; a new message is found.
        conn.execute_batch(&message(3, "zebra at last")).unwrap();
        assert!(index_pending(&mut conn, "s").unwrap());
        let hits = search(&conn, "s", "zebra", 5).unwrap();
        assert_eq!(idxs(&hits), [0, 1, 2, 3]);
        assert_eq!(rows(&conn), 4);
        assert!(!index_pending(&mut conn, "s").unwrap());
        assert_eq!(rows(&conn), 4);
    }

    /// A turn's commit leaves the full-text index alone.
    #[tokio::test]
    async fn a_commit_does_not_index_its_messages() {
        let store = Store::open_in_memory().unwrap();
        commit(&store, "s", 1, "hello").await;
        let rows = store
            .with_conn(|conn| {
                Ok(
                    conn.query_row("SELECT count(*) FROM message_search", [], |row| {
                        row.get::<_, i64>(0)
                    })?,
                )
            })
            .await
            .unwrap();
        assert_eq!(rows, 0);
        let before = store.write_transactions();
        let hits = store.search_history("s", "hello", 10).await.unwrap();
        assert_eq!(idxs(&hits), [0, 1, 2]);
        // Indexing is a write of its own; a search with nothing new is not.
        assert_eq!(store.write_transactions(), before + 1);
        store.search_history("s", "hello", 10).await.unwrap();
        assert_eq!(store.write_transactions(), before + 1);
    }
}
