//! `GET /metrics`: Prometheus (OpenMetrics) text.
//!
//! A task reads every event but `llm_delta` from the core (losslessly: it
//! does little per event) and keeps the counters; a few gauges are read from
//! the core when scraped.

use std::collections::HashMap;
use std::time::Instant;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::Api;
use crate::bus::Filter;
use crate::core::Core;
use crate::protocol::{
    Event, EventBody, HookDecision, HookEffect, HookError, LlmResponse, LlmRetry, ToolCallEnd,
    TurnEnd,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TurnLabels {
    /// `turn` (top-level) or `subturn`.
    kind: &'static str,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
    /// `ok`, or the error kind.
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolName {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    hook: String,
    point: &'static str,
    /// deny, rewrite, answer, replace; or for errors, the effect.
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookName {
    hook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    direction: &'static str,
}

/// The metrics the API serves. Cheap to clone: clones share the values.
#[derive(Clone)]
pub struct Metrics {
    turns: Family<TurnLabels, Counter>,
    turns_running: Gauge,
    turn_seconds: Family<TurnLabels, Histogram, fn() -> Histogram>,
    tool_calls: Family<ToolLabels, Counter>,
    tool_seconds: Family<ToolName, Histogram, fn() -> Histogram>,
    llm_responses: Family<ModelLabels, Counter>,
    llm_seconds: Family<ModelLabels, Histogram, fn() -> Histogram>,
    llm_retries: Family<ModelLabels, Counter>,
    tokens: Family<TokenLabels, Counter>,
    plugin_load_failures: Counter,
    hook_decisions: Family<HookLabels, Counter>,
    hook_errors: Family<HookLabels, Counter>,
    events: Counter,
    pub(super) sse_clients: Gauge,
    pub(super) sse_events: Counter,
}

/// Seconds, from 1 ms to about 9 minutes.
fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            turns: Family::default(),
            turns_running: Gauge::default(),
            turn_seconds: Family::new_with_constructor(seconds),
            tool_calls: Family::default(),
            tool_seconds: Family::new_with_constructor(seconds),
            llm_responses: Family::default(),
            llm_seconds: Family::new_with_constructor(seconds),
            llm_retries: Family::default(),
            tokens: Family::default(),
            plugin_load_failures: Counter::default(),
            hook_decisions: Family::default(),
            hook_errors: Family::default(),
            events: Counter::default(),
            sse_clients: Gauge::default(),
            sse_events: Counter::default(),
        }
    }
}

impl Metrics {
    /// Metrics fed from `core`'s events by a task of their own, from now on.
    pub fn start(core: &Core) -> Metrics {
        let metrics = Metrics::default();
        let filter = Filter {
            session: None,
            no_deltas: true,
            ..Default::default()
        };
        let mut events = core.subscribe(filter, None);
        let feed = metrics.clone();
        tokio::spawn(async move {
            let mut begun = HashMap::new();
            while let Some(event) = events.recv().await {
                feed.count(&event, &mut begun);
            }
        });
        metrics
    }

    /// Counts one event; `begun` holds when each running turn began.
    fn count(&self, event: &Event, begun: &mut HashMap<String, Instant>) {
        self.events.inc();
        let kind = if event.parent_turn_id.is_some() {
            "subturn"
        } else {
            "turn"
        };
        match &event.body {
            EventBody::TurnBegin(_) => {
                self.turns_running.inc();
                if let Some(id) = &event.turn_id {
                    begun.insert(id.clone(), Instant::now());
                }
            }
            EventBody::TurnEnd(TurnEnd { status, .. }) => {
                let labels = TurnLabels {
                    kind,
                    status: status.as_str(),
                };
                self.turns.get_or_create(&labels).inc();
                // A queued turn dropped before it ran never began.
                if let Some(at) = event.turn_id.as_ref().and_then(|id| begun.remove(id)) {
                    self.turns_running.dec();
                    let took = at.elapsed().as_secs_f64();
                    self.turn_seconds.get_or_create(&labels).observe(took);
                }
            }
            EventBody::ToolCallEnd(ToolCallEnd {
                tool,
                ok,
                error_kind,
                duration_ms,
                ..
            }) => {
                let outcome = match (ok, error_kind) {
                    (true, _) => "ok",
                    (false, Some(kind)) => kind.as_str(),
                    (false, None) => "error",
                };
                let labels = ToolLabels {
                    tool: tool.clone(),
                    outcome,
                };
                self.tool_calls.get_or_create(&labels).inc();
                let tool = ToolName { tool: tool.clone() };
                self.tool_seconds
                    .get_or_create(&tool)
                    .observe(duration_ms / 1000.0);
            }
            EventBody::LlmResponse(LlmResponse {
                model,
                usage,
                duration_ms,
                ..
            }) => {
                let labels = ModelLabels {
                    model: model.clone(),
                };
                self.llm_responses.get_or_create(&labels).inc();
                self.llm_seconds
                    .get_or_create(&labels)
                    .observe(duration_ms / 1000.0);
                let input = TokenLabels { direction: "input" };
                self.tokens.get_or_create(&input).inc_by(usage.input_tokens);
                let output = TokenLabels {
                    direction: "output",
                };
                self.tokens
                    .get_or_create(&output)
                    .inc_by(usage.output_tokens);
            }
            EventBody::LlmRetry(LlmRetry { model, .. }) => {
                let labels = ModelLabels {
                    model: model.clone(),
                };
                self.llm_retries.get_or_create(&labels).inc();
            }
            EventBody::PluginFailed(_) => {
                self.plugin_load_failures.inc();
            }
            EventBody::HookDecision(HookDecision {
                hook,
                point,
                decision,
                ..
            }) => {
                let labels = HookLabels {
                    hook: hook.clone(),
                    point: point.as_str(),
                    outcome: decision.as_str(),
                };
                self.hook_decisions.get_or_create(&labels).inc();
            }
            EventBody::HookError(HookError {
                hook,
                point,
                effect,
                ..
            }) => {
                let labels = HookLabels {
                    hook: hook.clone(),
                    point: point.as_str(),
                    outcome: match effect {
                        HookEffect::Denied => "denied",
                        HookEffect::Withheld => "withheld",
                        HookEffect::TurnFailed => "turn_failed",
                        HookEffect::Ignored => "ignored",
                    },
                };
                self.hook_errors.get_or_create(&labels).inc();
            }
            _ => {}
        }
    }

    /// The text a scrape reads, with the gauges read now.
    fn render(&self, api: &Api) -> String {
        let mut registry = Registry::with_prefix("wasmclaw");
        let m = self.clone();
        registry.register("turns", "Turns ended, by kind and status", m.turns);
        registry.register("turns_running", "Turns running now", m.turns_running);
        registry.register(
            "turn_duration_seconds",
            "How long turns took",
            m.turn_seconds,
        );
        registry.register(
            "tool_calls",
            "Tool calls ended, by tool and outcome (ok or the error kind)",
            m.tool_calls,
        );
        registry.register(
            "tool_call_duration_seconds",
            "How long tool calls took, by tool",
            m.tool_seconds,
        );
        registry.register(
            "llm_responses",
            "Model replies, by the model that answered",
            m.llm_responses,
        );
        registry.register(
            "llm_response_duration_seconds",
            "How long model replies took",
            m.llm_seconds,
        );
        registry.register("llm_retries", "Failed model calls retried", m.llm_retries);
        registry.register("llm_tokens", "Tokens the providers reported", m.tokens);
        registry.register(
            "plugin_load_failures",
            "Plugin files that failed to load",
            m.plugin_load_failures,
        );
        registry.register("events", "Events published (but llm_delta)", m.events);
        registry.register("sse_clients", "Event streams open now", m.sse_clients);
        registry.register("sse_events", "Events sent on event streams", m.sse_events);
        let dropped = Counter::<u64>::default();
        dropped.inc_by(api.core().events_dropped());
        registry.register(
            "events_dropped",
            "Events dropped for bounded subscribers that fell behind",
            dropped,
        );
        registry.register(
            "hook_decisions",
            "Hook decisions that changed something, by hook, point and decision",
            m.hook_decisions,
        );
        registry.register(
            "hook_errors",
            "Hook calls that failed, by hook, point and what the host did",
            m.hook_errors,
        );
        let observed = Family::<HookName, Counter>::default();
        let missed = Family::<HookName, Counter>::default();
        for stats in api.core().observer_stats() {
            let labels = HookName { hook: stats.hook };
            observed.get_or_create(&labels).inc_by(stats.delivered);
            missed.get_or_create(&labels).inc_by(stats.dropped);
        }
        registry.register(
            "hook_events_observed",
            "Events on-event hooks were called with, by hook",
            observed,
        );
        registry.register(
            "hook_events_dropped",
            "Events dropped for on-event hooks that fell behind, by hook",
            missed,
        );
        let busy = Gauge::<i64>::default();
        busy.set(api.core().busy_sessions() as i64);
        registry.register(
            "sessions_busy",
            "Sessions with a turn or SubTurn running or waiting",
            busy,
        );
        let mut text = String::new();
        encode(&mut text, &registry).expect("writing to a String does not fail");
        text
    }
}

pub async fn render(State(api): State<Api>) -> impl IntoResponse {
    let text = api.inner.metrics.render(&api);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
}
