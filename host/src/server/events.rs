//! `GET /v1/sessions/{key}/events`: a session's events as Server-Sent
//! Events. Each event's `id:` is its `seq` and its `data:` the event's JSON,
//! exactly as `wasmclaw run --events` prints it.
//!
//! - Without `Last-Event-ID` (or `?after=SEQ`) the stream starts with the
//!   next event. With it, the stream first replays every stored event of the
//!   session after that `seq`, then goes on live: a client that reconnects
//!   with the last id it saw loses nothing and sees nothing twice.
//! - `?deltas=false` leaves out `llm_delta` events.
//! - A client that falls more than [`super::ServerConfig::sse_buffer`]
//!   events behind is not dropped from: the stream refills the gap from the
//!   event log, so memory per client stays bounded and the stream stays
//!   whole.
//!
//! Each stream is fed by a task of its own, which ends when the client goes
//! away or the host shuts down.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::sessions::SessionKey;
use super::{Api, ApiError};
use crate::bus::{Delivery, Filter, Received, Subscription};
use crate::protocol::{Event, EventBody};

/// Stored events read per query while replaying.
const PAGE: usize = 512;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Replay from after this `seq` (`Last-Event-ID` wins when both are
    /// given: it is what a reconnecting client sends).
    #[serde(default)]
    pub after: Option<u64>,
    #[serde(default = "yes")]
    pub deltas: bool,
}

fn yes() -> bool {
    true
}

pub async fn stream(
    State(api): State<Api>,
    SessionKey(session): SessionKey,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let Query(query) = query?;
    let after = match headers.get("last-event-id") {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "Last-Event-ID {value:?}: expected the seq of an event (a whole number)"
                    ))
                })?,
        ),
        None => query.after,
    };
    // Subscribed before answering, so a client that sends a message once
    // the stream is open sees all of its events. Everything after `last`
    // reaches `live`; everything up to it is (or will be, once flushed) in
    // the event log.
    let bus = api.scheduler().agent().bus();
    let filter = Filter {
        session: Some(session.clone()),
        no_deltas: !query.deltas,
        ..Default::default()
    };
    let (live, last) = bus.subscribe_after(filter, Delivery::Bounded(api.config().sse_buffer));
    let (tx, mut rx) = mpsc::channel(64);
    let feed = Feed {
        api: api.clone(),
        session,
        deltas: query.deltas,
        tx,
    };
    tokio::spawn(feed.run(live, after.unwrap_or(last), last));
    let stream = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx).map(|e| e.map(Ok)));
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// Feeds one client's stream.
struct Feed {
    api: Api,
    session: String,
    deltas: bool,
    tx: mpsc::Sender<SseEvent>,
}

/// The stream cannot go on: the client went away, or the event log could
/// not be read.
struct Gone;

impl Feed {
    /// Sends the events after `after`: stored ones up to `upto`, then
    /// those from `live`.
    async fn run(self, live: Subscription, after: u64, upto: u64) {
        let metrics = &self.api.inner.metrics;
        metrics.sse_clients.inc();
        let stopped = self.api.inner.stopped.clone();
        tokio::select! {
            _ = self.forward(live, after, upto) => {}
            _ = self.tx.closed() => {}
            // Once the host has stopped, `forward` sends what its
            // subscription holds and ends; a client too slow to take it
            // gets 5 s.
            _ = async {
                stopped.cancelled().await;
                tokio::time::sleep(Duration::from_secs(5)).await;
            } => {}
        }
        metrics.sse_clients.dec();
    }

    async fn forward(&self, mut live: Subscription, after: u64, upto: u64) -> Result<(), Gone> {
        let bus = self.api.scheduler().agent().bus();
        // An id past the last event (from another host's log) starts the
        // stream at the next event rather than skipping any.
        let mut last = if after < upto {
            self.replay(after, upto).await?
        } else {
            upto
        };
        let stopped = &self.api.inner.stopped;
        loop {
            // Events before the host stopped are all in `live` by then.
            let received = tokio::select! {
                biased;
                received = live.recv() => received,
                _ = stopped.cancelled() => live.try_recv(),
            };
            let Some(received) = received else {
                return Ok(());
            };
            match received {
                Received::Event(event) if event.seq > last => {
                    self.send(&event).await?;
                    last = event.seq;
                }
                // Already sent from the event log.
                Received::Event(_) => {}
                Received::Dropped(n) => {
                    tracing::debug!(session = self.session, "SSE client {n} events behind");
                    last = self.replay(last, bus.last_seq()).await?;
                }
            }
        }
    }

    /// Sends the stored events after `after`, once the log holds everything
    /// up to `upto`; the `seq` of the last event sent (or `after`).
    async fn replay(&self, after: u64, upto: u64) -> Result<u64, Gone> {
        self.api.inner.log.flush(upto).await;
        let store = self.api.scheduler().agent().store();
        let mut last = after;
        loop {
            let events = match store.events(Some(&self.session), last, PAGE).await {
                Ok(events) => events,
                Err(e) => {
                    tracing::error!(session = self.session, "SSE replay: {e:#}");
                    return Err(Gone);
                }
            };
            let full = events.len() == PAGE;
            for event in events {
                last = event.seq;
                if self.deltas || !matches!(event.body, EventBody::LlmDelta(_)) {
                    self.send(&event).await?;
                }
            }
            if !full {
                return Ok(last);
            }
        }
    }

    async fn send(&self, event: &Event) -> Result<(), Gone> {
        let json = serde_json::to_string(event).expect("events serialize");
        let sse = SseEvent::default().id(event.seq.to_string()).data(json);
        self.tx.send(sse).await.map_err(|_| Gone)?;
        self.api.inner.metrics.sse_events.inc();
        Ok(())
    }
}
