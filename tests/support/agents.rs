//! Agents for tests: plugins from a [`crate::PluginDir`], candidates pointing
//! at a [`crate::fake_model::FakeModel`], and the events a turn published;
//! and the [`Core`] over such an agent ([`core_with`]).

use std::sync::Arc;
use std::time::Duration;

use wasmclaw::agent::profile::{Profile, Profiles};
use wasmclaw::agent::{Agent, AgentConfig};
use wasmclaw::bus::{Delivery, EventBus, Filter, Received, Subscription};
use wasmclaw::core::Core;
use wasmclaw::llm::{Chain, Provider, ProviderConfig, ProviderKind, RetryPolicy};
use wasmclaw::plugin::Plugins;
use wasmclaw::protocol::{Event, EventBody, LlmDelta, ToolCallEnd};
use wasmclaw::scheduler::SchedulerConfig;
use wasmclaw::store::Store;

use crate::fake_model::FakeModel;

/// A candidate speaking the OpenAI format to `fake`.
pub fn openai(fake: &FakeModel, model: &str, stream: bool) -> ProviderConfig {
    candidate(ProviderKind::OpenAi, fake.openai_base_url(), model, stream)
}

/// A candidate speaking the Anthropic format to `fake`.
pub fn anthropic(fake: &FakeModel, model: &str, stream: bool) -> ProviderConfig {
    candidate(
        ProviderKind::Anthropic,
        fake.anthropic_base_url(),
        model,
        stream,
    )
}

/// A candidate of `kind` at `base_url` (a fake model in another process).
pub fn candidate(
    kind: ProviderKind,
    base_url: String,
    model: &str,
    stream: bool,
) -> ProviderConfig {
    ProviderConfig {
        kind,
        model: model.to_string(),
        base_url,
        api_key: Some("test-key".to_string()),
        api_key_env: kind.key_var().map(String::from),
        headers: Default::default(),
        stream,
        timeout: Duration::from_secs(10),
        limits: Default::default(),
    }
}

/// Retries that do not slow the tests down: 3 tries, 10 ms then 20 ms.
pub fn quick_retries() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        cooldown: Duration::from_secs(60),
        max_retry_after: Duration::from_secs(5),
        jitter: 0.0,
    }
}

/// An agent over `plugins` and `candidates`, and a lossless subscription to
/// everything it publishes.
pub fn agent(
    plugins: Arc<Plugins>,
    candidates: Vec<ProviderConfig>,
    store: Store,
) -> (Arc<Agent>, Subscription) {
    agent_with(plugins, candidates, store, AgentConfig::default())
}

/// [`agent`] with a `config` of its own.
pub fn agent_with(
    plugins: Arc<Plugins>,
    candidates: Vec<ProviderConfig>,
    store: Store,
    config: AgentConfig,
) -> (Arc<Agent>, Subscription) {
    let chain = chain(candidates);
    let bus = EventBus::new(store.last_seq().unwrap());
    let events = bus.subscribe(Filter::default(), Delivery::Lossless);
    let agent = Agent::new(plugins, Arc::new(chain), bus, store, config);
    (Arc::new(agent), events)
}

/// The chain of `candidates`, retried quickly.
pub fn chain(candidates: Vec<ProviderConfig>) -> Chain {
    let client = wasmclaw::llm::http_client();
    let providers = candidates
        .into_iter()
        .map(|c| Provider::new(c, client.clone()).expect("candidate"))
        .collect();
    Chain::new(providers, quick_retries())
}

/// The named agent `name`: `config`, and the OpenAI-format model `model`
/// of `fake`.
pub fn profile(name: &str, fake: &FakeModel, model: &str, config: AgentConfig) -> Profile {
    Profile {
        name: name.to_string(),
        chain: Arc::new(chain(vec![openai(fake, model, true)])),
        config,
    }
}

/// `agents`, `default` the default one; a session's model override
/// `MODEL` is the model of that name of `fake`.
pub fn profiles(fake: &FakeModel, agents: Vec<Profile>, default: &str) -> Profiles {
    let base_url = fake.openai_base_url();
    let chains = move |spec: &str, _: &Profile| {
        let model = spec.strip_prefix("fake:").ok_or("expected fake:MODEL")?;
        let candidate = candidate(ProviderKind::OpenAi, base_url.clone(), model, true);
        Ok(chain(vec![candidate]))
    };
    Profiles::new(agents, default, Some(Box::new(chains)))
}

/// A [`Core`] over the named agents `profiles` and `plugins`, and a
/// lossless subscription to everything it publishes.
pub fn core_of_agents(
    plugins: Arc<Plugins>,
    profiles: Profiles,
    store: Store,
    schedule: SchedulerConfig,
) -> (Core, Subscription) {
    let bus = EventBus::new(store.last_seq().unwrap());
    let events = bus.subscribe(Filter::default(), Delivery::Lossless);
    let agent = Agent::with_profiles(plugins, profiles, bus, store, 64);
    (Core::new(Arc::new(agent), schedule), events)
}

/// A [`Core`] over an agent of `plugins` and `candidates` (as
/// [`agent_with`] builds it) whose sessions run by `schedule`, and a
/// lossless subscription to everything it publishes.
pub fn core_with(
    plugins: Arc<Plugins>,
    candidates: Vec<ProviderConfig>,
    store: Store,
    config: AgentConfig,
    schedule: SchedulerConfig,
) -> (Core, Subscription) {
    let (agent, events) = agent_with(plugins, candidates, store, config);
    (Core::new(agent, schedule), events)
}

/// Every event already published to `sub`.
pub fn drain(sub: &mut Subscription) -> Vec<Arc<Event>> {
    let mut events = Vec::new();
    while let Some(received) = sub.try_recv() {
        match received {
            Received::Event(event) => events.push(event),
            Received::Dropped(n) => panic!("a lossless subscription dropped {n} events"),
        }
    }
    events
}

/// The outputs of the tool calls among `events`, in order.
pub fn tool_outputs(events: &[Arc<Event>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::ToolCallEnd(ToolCallEnd { output, .. }) => Some(output.clone()),
            _ => None,
        })
        .collect()
}

/// Events from `sub` up to and including the first that `stop` accepts.
/// Panics after `limit`, or if the subscription drops events.
pub async fn until(
    sub: &mut Subscription,
    limit: Duration,
    mut stop: impl FnMut(&Event) -> bool,
) -> Vec<Arc<Event>> {
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let received = tokio::time::timeout_at(deadline, sub.recv())
            .await
            .unwrap_or_else(|_| {
                let seen: Vec<_> = events
                    .iter()
                    .map(|e: &Arc<Event>| e.body.kind().as_str())
                    .collect();
                panic!("the awaited event did not come within {limit:?}; seen: {seen:?}")
            })
            .expect("the bus is open");
        match received {
            Received::Event(event) => {
                let done = stop(&event);
                events.push(event);
                if done {
                    return events;
                }
            }
            Received::Dropped(n) => panic!("a lossless subscription dropped {n} events"),
        }
    }
}

/// The `type` of each event, with each run of `llm_delta` shown once.
pub fn kinds(events: &[Arc<Event>]) -> Vec<&'static str> {
    let mut kinds: Vec<&'static str> = Vec::new();
    for event in events {
        let kind = event.body.kind().as_str();
        if !(kind == "llm_delta" && kinds.last() == Some(&"llm_delta")) {
            kinds.push(kind);
        }
    }
    kinds
}

/// The text streamed in `llm_delta` events of `iteration`.
pub fn streamed_text(events: &[Arc<Event>], iteration: u32) -> String {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::LlmDelta(LlmDelta { iteration: i, text }) if *i == iteration => {
                Some(text.as_str())
            }
            _ => None,
        })
        .collect()
}
