//! The histories of the sessions held in memory, so that a turn reads its
//! session's history without reading SQLite (and parsing every message) at
//! each turn.
//!
//! A session is *held* while someone keeps a [`HistoryHold`] for it: the
//! scheduler holds every session in its table, so a session's history stays
//! in memory from its first read until the session is let go (see
//! [`crate::scheduler::SchedulerConfig::session_idle`]). An unheld
//! session's history is read from SQLite at every read, as before.
//!
//! The cache is never stale, by construction: every write of a history goes
//! through [`super::Store`], and both the write and the cache's update
//! happen under the store's one connection (the update right after the
//! transaction commits); so does filling the cache from a read. A reader of
//! the cache sees a history before or after a commit, never a mix, and
//! never one that misses a committed turn. Letting an entry go (the
//! session released, or the byte budget exceeded) only means the next read
//! goes to SQLite again.
//!
//! A turn does not copy the history it reads: the cache *lends* it the
//! messages ([`Histories::lend`]) and keeps only where the history stands,
//! and the turn gives them back, with what it added, once its commit is
//! written ([`Loan::give_back`]). While a history is lent, other
//! readers read the table. Whatever else changes the history meanwhile (a
//! compaction, a write that failed, the session let go) voids the loan,
//! and the messages given back are dropped: the next read is the table's. A turn that ends without its answer gives the history back as
//! it was lent. Beside a history the cache keeps its memo (the messages as
//! the model was last sent them, see `llm/memo.rs`), shared with the turn
//! that borrows it.
//!
//! The cache holds at most [`BUDGET`] bytes of messages and memos (about:
//! their texts, plus a fixed amount each message); past it the least
//! recently used histories not lent are dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::compactions::HistoryView;
use crate::llm::{Message, WireMemo};

/// About the most bytes of messages (and their memos) the cache keeps.
pub const BUDGET: usize = 64 << 20;

/// What a message costs besides its texts (its enum, vectors, allocations).
const PER_MESSAGE: usize = 64;

/// The cached histories, shared by a store's clones.
#[derive(Default)]
pub(crate) struct Histories {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    /// The bytes of every loaded history.
    bytes: usize,
    /// Counts uses, so the least recently used entry can be found.
    clock: u64,
    /// Numbers the loans.
    loans: u64,
    budget: Option<usize>,
}

struct Entry {
    /// The holds taken and not yet dropped.
    holds: usize,
    loaded: Option<Loaded>,
    /// The clock at its last use.
    used: u64,
}

struct Loaded {
    /// The history as a turn reads it (a compacted one starts with its
    /// summary); without its messages while they are lent.
    view: HistoryView,
    /// The `idx` the next message gets.
    next_idx: i64,
    bytes: usize,
    /// The loan the messages are out on.
    lent: Option<u64>,
    /// The messages as the model was last sent them (see `llm/memo.rs`):
    /// shared with the turn that borrows them, started again when they
    /// change other than by growing.
    memo: Arc<WireMemo>,
    /// The memo's bytes when last counted in `bytes`.
    memo_bytes: usize,
}

impl Loaded {
    /// How many messages the history has (lent or not).
    fn len(&self) -> usize {
        usize::from(self.view.summarized) + (self.next_idx - self.view.first_idx) as usize
    }
}

/// A session's history lent to a turn ([`Histories::lend`]): dropped
/// without being given back, the loan is void and the cache forgets the
/// history (the next read is the table's).
pub struct Loan {
    histories: Arc<Histories>,
    session: String,
    id: u64,
    memo: Arc<WireMemo>,
}

impl std::fmt::Debug for Loan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loan")
            .field("session", &self.session)
            .field("id", &self.id)
            .finish()
    }
}

impl Loan {
    /// The memo of the history's wire form, shared with the cache.
    pub fn memo(&self) -> Arc<WireMemo> {
        self.memo.clone()
    }

    /// `messages` are the history of the loan's session again, now with
    /// the turn's commit: kept if the loan still stands and they are as
    /// many as the cache counts (nothing but that commit changed the
    /// history), else dropped, and the cache forgets the history.
    pub fn give_back(mut self, mut messages: Vec<Message>) {
        // A turn's vector has room for eight messages more than the
        // history it was lent (in a session's first turn, four times what
        // its two need): the cache keeps none to spare while it holds the
        // session idle.
        messages.shrink_to_fit();
        let id = std::mem::take(&mut self.id);
        self.histories.settle(&self.session, id, Some(messages));
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        // 0 once given back: loans are numbered from 1.
        if self.id != 0 {
            self.histories.settle(&self.session, self.id, None);
        }
    }
}

/// Keeps a session's history in memory once read, until dropped (with every
/// other hold of that session).
pub struct HistoryHold {
    histories: Arc<Histories>,
    session: String,
}

impl std::fmt::Debug for HistoryHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryHold")
            .field("session", &self.session)
            .finish()
    }
}

impl Drop for HistoryHold {
    fn drop(&mut self) {
        self.histories.release(&self.session);
    }
}

/// Where `view` stands, without its messages.
fn standing(view: &HistoryView) -> HistoryView {
    HistoryView {
        messages: Vec::new(),
        summarized: view.summarized,
        first_idx: view.first_idx,
    }
}

/// About what `message` takes in memory.
fn size(message: &Message) -> usize {
    PER_MESSAGE
        + match message {
            Message::System { content } | Message::User { content } => content.len(),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                content.len()
                    + (tool_calls.iter())
                        .map(|c| PER_MESSAGE + c.id.len() + c.name.len() + c.arguments.len())
                        .sum::<usize>()
            }
            Message::Tool {
                tool_call_id,
                name,
                content,
                ..
            } => tool_call_id.len() + name.len() + content.len(),
        }
}

impl Histories {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every critical section leaves the maps consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds `session` (see [`HistoryHold`]).
    pub fn hold(self: &Arc<Self>, session: &str) -> HistoryHold {
        let mut inner = self.lock();
        inner.clock += 1;
        let used = inner.clock;
        inner
            .entries
            .entry(session.to_string())
            .or_insert(Entry {
                holds: 0,
                loaded: None,
                used,
            })
            .holds += 1;
        HistoryHold {
            histories: self.clone(),
            session: session.to_string(),
        }
    }

    fn release(&self, session: &str) {
        let mut inner = self.lock();
        let Some(entry) = inner.entries.get_mut(session) else {
            return;
        };
        entry.holds -= 1;
        if entry.holds == 0 {
            let entry = inner.entries.remove(session).expect("looked up");
            inner.bytes -= entry.loaded.map_or(0, |l| l.bytes);
        }
    }

    /// The history of `session`, if it is held and loaded.
    pub fn get(&self, session: &str) -> Option<HistoryView> {
        let mut inner = self.lock();
        inner.clock += 1;
        let clock = inner.clock;
        let entry = inner.entries.get_mut(session)?;
        let loaded = entry.loaded.as_ref().filter(|l| l.lent.is_none())?;
        entry.used = clock;
        Some(loaded.view.clone())
    }

    /// Lends the history of `session` to a turn, if it is held and loaded
    /// and not lent already: its messages move out of the cache, which
    /// keeps where the history stands (see the module's docs).
    pub fn lend(self: &Arc<Self>, session: &str) -> Option<(HistoryView, Loan)> {
        let mut inner = self.lock();
        inner.clock += 1;
        inner.loans += 1;
        let (clock, id) = (inner.clock, inner.loans);
        let entry = inner.entries.get_mut(session)?;
        let loaded = entry.loaded.as_mut().filter(|l| l.lent.is_none())?;
        entry.used = clock;
        loaded.lent = Some(id);
        let mut view = standing(&loaded.view);
        view.messages = std::mem::take(&mut loaded.view.messages);
        let memo = loaded.memo.clone();
        Some((view, self.loan(session, id, memo)))
    }

    fn loan(self: &Arc<Self>, session: &str, id: u64, memo: Arc<WireMemo>) -> Loan {
        Loan {
            histories: self.clone(),
            session: session.to_string(),
            id,
            memo,
        }
    }

    /// Ends loan `id` of `session`, with the messages given back (None: the
    /// loan was dropped).
    fn settle(&self, session: &str, id: u64, messages: Option<Vec<Message>>) {
        let mut inner = self.lock();
        let Some(entry) = inner.entries.get_mut(session) else {
            return;
        };
        let Some(loaded) = entry.loaded.as_mut().filter(|l| l.lent == Some(id)) else {
            return;
        };
        match messages {
            Some(messages) if messages.len() == loaded.len() => {
                // The memo may hold more: the messages of a turn that
                // failed, which the history does not.
                loaded.memo.truncate(messages.len());
                loaded.view.messages = messages;
                loaded.lent = None;
                let memo_bytes = loaded.memo.bytes();
                let before = std::mem::replace(&mut loaded.memo_bytes, memo_bytes);
                loaded.bytes = loaded.bytes - before + memo_bytes;
                inner.bytes = inner.bytes - before + memo_bytes;
                inner.trim(session);
            }
            _ => inner.forget(session),
        }
    }

    /// The `idx` of the next message of `session`, if its history is loaded.
    /// Called under the store's connection.
    pub fn next_idx(&self, session: &str) -> Option<i64> {
        let inner = self.lock();
        Some(inner.entries.get(session)?.loaded.as_ref()?.next_idx)
    }

    /// `view`, just read from SQLite, is the history of `session`: kept
    /// if the session is held (and not loaded already). Called under the
    /// store's connection, in the same piece of work as the read.
    pub fn fill(&self, session: &str, view: &HistoryView, next_idx: i64) {
        self.load(session, view, next_idx, false);
    }

    /// [`Histories::fill`] for a turn, which takes `view`'s messages: if
    /// the session is held, the cache keeps where the history stands and
    /// lends the turn the messages it read (no copy is made).
    pub fn fill_lent(
        self: &Arc<Self>,
        session: &str,
        view: &HistoryView,
        next_idx: i64,
    ) -> Option<Loan> {
        let (id, memo) = self.load(session, view, next_idx, true)?;
        Some(self.loan(session, id, memo))
    }

    /// Loads `view` into the held entry of `session` if it has none; lent
    /// (its messages not kept): the loan's id and memo.
    fn load(
        &self,
        session: &str,
        view: &HistoryView,
        next_idx: i64,
        lend: bool,
    ) -> Option<(u64, Arc<WireMemo>)> {
        let mut inner = self.lock();
        inner.clock += 1;
        inner.loans += 1;
        let (clock, id) = (inner.clock, inner.loans);
        let entry = inner.entries.get_mut(session)?;
        if entry.loaded.is_some() {
            return None;
        }
        entry.used = clock;
        let bytes = view.messages.iter().map(size).sum();
        let view = if lend { standing(view) } else { view.clone() };
        let memo = Arc::<WireMemo>::default();
        entry.loaded = Some(Loaded {
            view,
            next_idx,
            bytes,
            lent: lend.then_some(id),
            memo: memo.clone(),
            memo_bytes: 0,
        });
        inner.bytes += bytes;
        inner.trim(session);
        lend.then_some((id, memo))
    }

    /// `messages` were just committed as the history of `session` from
    /// `idx` on. Called under the store's connection, right after the
    /// commit.
    pub fn append(&self, session: &str, idx: i64, messages: &[Message]) {
        let mut inner = self.lock();
        let Some(entry) = inner.entries.get_mut(session) else {
            return;
        };
        let Some(loaded) = entry.loaded.as_mut() else {
            return;
        };
        if loaded.next_idx != idx {
            // Cannot happen while every write goes through the store; if it
            // did, the entry is dropped rather than served wrong.
            tracing::error!(
                session,
                "the cached history ends at {} but a turn was written at {idx}; reading it again",
                loaded.next_idx
            );
            inner.forget(session);
            return;
        }
        let bytes: usize = messages.iter().map(size).sum();
        if loaded.lent.is_none() {
            // Lent, they are added by the turn that gives them back.
            loaded.view.messages.extend_from_slice(messages);
        }
        loaded.next_idx += messages.len() as i64;
        loaded.bytes += bytes;
        inner.bytes += bytes;
        inner.trim(session);
    }

    /// A compaction of `session` up to `upto_idx` was just committed: its
    /// cached history becomes `summary` and the messages after that idx.
    /// Called under the store's connection, right after the commit.
    pub fn compacted(&self, session: &str, upto_idx: i64, summary: Message) {
        let mut inner = self.lock();
        let Some(loaded) = (inner.entries.get_mut(session)).and_then(|e| e.loaded.as_mut()) else {
            return;
        };
        if loaded.lent.is_some() {
            // The turn that holds the messages compacted them itself, or
            // they changed under it: either way the loan is void.
            inner.forget(session);
            return;
        }
        let view = &mut loaded.view;
        let covered = upto_idx + 1 - view.first_idx;
        let drop = usize::from(view.summarized) + usize::try_from(covered).unwrap_or(usize::MAX);
        if covered < 0 || drop > view.messages.len() {
            // Cannot happen while every write goes through the store.
            tracing::error!(
                session,
                "a compaction does not fit the cached history; reading it again"
            );
            inner.forget(session);
            return;
        }
        view.messages.drain(..drop);
        view.messages.insert(0, summary);
        view.summarized = true;
        view.first_idx = upto_idx + 1;
        // The messages changed: their wire form is made again.
        loaded.memo = Arc::default();
        loaded.memo_bytes = 0;
        let bytes: usize = view.messages.iter().map(size).sum();
        let before = std::mem::replace(&mut loaded.bytes, bytes);
        inner.bytes = inner.bytes - before + bytes;
        inner.trim(session);
    }

    /// Drops the loaded history of `session` (it stays held): the next read
    /// goes to the table. After a commit of it failed, in case the cache
    /// was the cause.
    pub fn unload(&self, session: &str) {
        self.lock().forget(session);
    }

    /// Sets the byte budget (tests).
    #[cfg(test)]
    pub fn set_budget(&self, bytes: usize) {
        self.lock().budget = Some(bytes);
    }

    /// Bytes of the loaded histories, and how many there are.
    #[cfg(test)]
    pub fn usage(&self) -> (usize, usize) {
        let inner = self.lock();
        let loaded = inner
            .entries
            .values()
            .filter(|e| e.loaded.is_some())
            .count();
        (inner.bytes, loaded)
    }
}

impl Inner {
    /// Drops the loaded history of `session`: the next read is the table's.
    fn forget(&mut self, session: &str) {
        let bytes = (self.entries.get_mut(session))
            .and_then(|e| e.loaded.take())
            .map_or(0, |l| l.bytes);
        self.bytes -= bytes;
    }

    /// Over the budget: drops the least recently used histories (other than
    /// `keep`'s, just used, and those lent: their turns hold them) until a
    /// quarter of the budget is free again.
    fn trim(&mut self, keep: &str) {
        let budget = self.budget.unwrap_or(BUDGET);
        if self.bytes <= budget {
            return;
        }
        let mut loaded: Vec<(u64, String)> = (self.entries.iter())
            .filter(|(key, e)| {
                e.loaded.as_ref().is_some_and(|l| l.lent.is_none()) && key.as_str() != keep
            })
            .map(|(key, e)| (e.used, key.clone()))
            .collect();
        loaded.sort_unstable();
        for (_, key) in loaded {
            if self.bytes <= budget / 4 * 3 {
                break;
            }
            self.forget(&key);
        }
    }
}
