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
//! The replay, the live part and the refill all come from
//! [`crate::core::Core::subscribe_bounded`]: this route only turns its events
//! into SSE. Each stream is fed by a task of its own, which ends when the
//! client goes away or the host shuts down.

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
use crate::bus::Filter;
use crate::core::Events;

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
    // the stream is open sees all of its events.
    let filter = Filter {
        session: Some(session.clone()),
        no_deltas: !query.deltas,
        ..Default::default()
    };
    let events = api
        .core()
        .subscribe_bounded(filter, after, api.config().sse_buffer);
    let (tx, mut rx) = mpsc::channel(64);
    tokio::spawn(feed(api.clone(), events, tx));
    let stream = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx).map(|e| e.map(Ok)));
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// Feeds one client's stream until the client goes away or the host has
/// stopped (then it sends what is already published, and the stream ends;
/// a client too slow to take it gets 5 s).
async fn feed(api: Api, mut events: Events, tx: mpsc::Sender<SseEvent>) {
    let metrics = &api.inner.metrics;
    metrics.sse_clients.inc();
    let stopped = api.inner.stopped.clone();
    let forward = async {
        loop {
            // Events before the host stopped are all published by then.
            let event = tokio::select! {
                biased;
                event = events.recv() => event,
                _ = stopped.cancelled() => events.try_next().await,
            };
            let Some(event) = event else {
                return;
            };
            let json = serde_json::to_string(&*event).expect("events serialize");
            let sse = SseEvent::default().id(event.seq.to_string()).data(json);
            if tx.send(sse).await.is_err() {
                return;
            }
            metrics.sse_events.inc();
        }
    };
    tokio::select! {
        _ = forward => {}
        _ = tx.closed() => {}
        _ = async {
            stopped.cancelled().await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        } => {}
    }
    metrics.sse_clients.dec();
}
