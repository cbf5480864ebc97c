//! `on-event` hooks. Each runs on a task of its own on the plugin pool
//! ([`crate::plugin::sandbox::pool`]), fed by a bounded bus subscription of its own
//! (`[hooks] queue`, 256 events by default): a slow or busy observer never
//! stalls a turn or takes CPU from one; the events that do not fit its queue
//! are dropped, and counted at the moment they are dropped (the observer
//! learns of the gap when it reaches it).
//!
//! Events are delivered one at a time, in order, each in a fresh instance.
//! When the host stops, each observer is given a grace period to take in
//! what is already in its queue ([`Observers::close`]), so an audit log
//! records a command's last events.
//! A failed call is reported as `hook_error` (`effect: ignored`) and the
//! observer goes on with the next event. Observers are not shown the
//! `hook_error`s of `on-event` hooks: an observer that fails on every event
//! would otherwise feed on its own errors.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::bus::{Delivery, EventBus, Filter, Received, Scope, Subscription};
use crate::plugin::catalog::{Catalog, PluginStatus};
use crate::plugin::hook_call::HookInput;
use crate::plugin::loader::Plugin;
use crate::plugin::{CallContext, HookPoint};
use crate::protocol::{Event, EventBody, HookEffect, HookError};

/// What one observer did since the host started (across reloads).
#[derive(Debug, Default)]
struct Counts {
    delivered: AtomicU64,
    /// Counted by the bus as each event is dropped.
    dropped: Arc<AtomicU64>,
    failed: AtomicU64,
}

/// An observer's counts, for metrics and tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObserverStats {
    pub hook: String,
    /// Events its hook was called with and returned from.
    pub delivered: u64,
    /// Events that did not fit its queue.
    pub dropped: u64,
    /// Calls that failed.
    pub failed: u64,
}

/// A running observer.
struct Running {
    plugin: Arc<Plugin>,
    /// Asks it to take in what is queued, then stop.
    closing: CancellationToken,
    task: AbortOnDropHandle<()>,
}

/// The `on-event` hooks of the current plugin set.
pub struct Observers {
    bus: EventBus,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    running: HashMap<String, Running>,
    counts: HashMap<String, Arc<Counts>>,
}

impl Observers {
    pub fn new(bus: EventBus) -> Observers {
        Observers {
            bus,
            inner: Mutex::default(),
        }
    }

    /// Starts the observers of plugins new to `catalog` (or reloaded), and
    /// stops those of plugins no longer in it. Without a tokio runtime
    /// nothing starts (a command that runs no turns).
    pub fn refresh(&self, catalog: &Catalog) {
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let wanted: HashMap<&str, &Arc<Plugin>> = catalog
            .plugins
            .iter()
            .filter_map(|status| match status {
                PluginStatus::Loaded(p) => Some(p),
                PluginStatus::Failed { .. } => None,
            })
            .filter(|p| {
                p.subscriptions
                    .iter()
                    .any(|s| s.point == HookPoint::OnEvent)
            })
            .map(|p| (&*p.name, p))
            .collect();
        inner.running.retain(|name, running| {
            wanted
                .get(name.as_str())
                .is_some_and(|p| Arc::ptr_eq(p, &running.plugin))
        });
        for (name, plugin) in wanted {
            if inner.running.contains_key(name) {
                continue;
            }
            let subscription = plugin
                .subscriptions
                .iter()
                .find(|s| s.point == HookPoint::OnEvent)
                .expect("filtered on it");
            let counts = inner.counts.entry(name.to_string()).or_default().clone();
            let events = self.bus.subscribe_counted(
                Filter {
                    kinds: subscription.events.clone(),
                    ..Filter::default()
                },
                Delivery::Bounded(plugin.grants.hooks.queue),
                counts.dropped.clone(),
            );
            let closing = CancellationToken::new();
            let observer = Observer {
                plugin: plugin.clone(),
                counts,
                bus: self.bus.clone(),
            };
            let task = crate::plugin::sandbox::pool::spawn(observer.run(events, closing.clone()));
            inner.running.insert(
                name.to_string(),
                Running {
                    plugin: plugin.clone(),
                    closing,
                    task: AbortOnDropHandle::new(task),
                },
            );
        }
    }

    /// Stops every observer once it has taken in the events already queued
    /// for it, or after `grace`, whichever is first.
    pub async fn close(&self, grace: std::time::Duration) {
        let running: Vec<Running> = {
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            inner.running.drain().map(|(_, r)| r).collect()
        };
        for r in &running {
            r.closing.cancel();
        }
        let all = futures_util::future::join_all(running.into_iter().map(|r| r.task));
        if tokio::time::timeout(grace, all).await.is_err() {
            tracing::warn!("on-event hooks still busy after {grace:?} were stopped");
        }
    }

    /// Every observer that ran since the host started, by name.
    pub fn stats(&self) -> Vec<ObserverStats> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut stats: Vec<ObserverStats> = inner
            .counts
            .iter()
            .map(|(hook, c)| ObserverStats {
                hook: hook.clone(),
                delivered: c.delivered.load(Ordering::Relaxed),
                dropped: c.dropped.load(Ordering::Relaxed),
                failed: c.failed.load(Ordering::Relaxed),
            })
            .collect();
        stats.sort_by(|a, b| a.hook.cmp(&b.hook));
        stats
    }
}

/// One `on-event` hook at work.
struct Observer {
    plugin: Arc<Plugin>,
    counts: Arc<Counts>,
    bus: EventBus,
}

impl Observer {
    /// Takes events from `events` until the bus is gone, or, once `closing`
    /// fires, until the queue is empty.
    async fn run(self, mut events: Subscription, closing: CancellationToken) {
        loop {
            let received = tokio::select! {
                biased;
                received = events.recv() => received,
                _ = closing.cancelled() => events.try_recv(),
            };
            match received {
                Some(Received::Event(event)) => self.deliver(&event).await,
                Some(Received::Dropped(n)) => {
                    // Already counted, when they were dropped.
                    tracing::warn!(hook = %self.plugin.name, "on-event hook fell behind: {n} events dropped");
                }
                None => break,
            }
        }
    }

    async fn deliver(&self, event: &Event) {
        if matches!(
            event.body,
            EventBody::HookError(HookError {
                point: HookPoint::OnEvent,
                ..
            })
        ) {
            return;
        }
        let json = serde_json::to_string(event).expect("an event serializes");
        let plugin = &self.plugin;
        match plugin
            .call_hook(&context_of(event), HookInput::OnEvent(&json))
            .await
        {
            Ok(_) => {
                self.counts.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                self.counts.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(hook = %plugin.name, "on-event hook failed: {error}");
                self.bus.publish(
                    &scope_of(event),
                    EventBody::HookError(HookError {
                        hook: plugin.name.to_string(),
                        point: HookPoint::OnEvent,
                        error,
                        effect: HookEffect::Ignored,
                        call_id: None,
                        tool: None,
                    }),
                );
            }
        }
    }
}

/// The hook's `call-context`: the event's session and turn.
fn context_of(event: &Event) -> CallContext {
    CallContext {
        session_key: event.session.clone().unwrap_or_default(),
        turn_id: event.turn_id.clone().unwrap_or_default(),
        parent_turn_id: event.parent_turn_id.clone(),
        ..CallContext::default()
    }
}

fn scope_of(event: &Event) -> Scope {
    Scope {
        session: event.session.clone(),
        turn_id: event.turn_id.clone(),
        parent_turn_id: event.parent_turn_id.clone(),
    }
}
