//! Hook plugins in real turns: each decision at each point, the order of a
//! chain, hooks that fail, observers that fall behind, and hooks under
//! concurrent sessions. The hooks are copies of the `hooktest` fixture, each
//! told what to do by the `[config]` of its grants file.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::agent::Agent;
use wasmclaw::bus::Subscription;
use wasmclaw::plugin::{ErrorKind, HookPoint};
use wasmclaw::protocol::{
    Event, EventBody, HookDecision, HookEffect, HookError, HookVerdict, ToolCallEnd, TurnStatus,
};
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{agent, drain, kinds, openai};
use wasmclaw_tests::fake_model::{FakeModel, Reply, fake_model};

const LIMIT: Duration = Duration::from_secs(30);

/// Adds a copy of the hook fixture as `name`, with these grants.
fn hook(dir: &PluginDir, name: &str, grants: &str) {
    dir.add_as("hooktest", name);
    dir.grants(name, grants);
}

/// [`grants`] with 10 s for each hook call, for tests of what a hook
/// decides: a busy machine must not turn a decision into a timeout.
fn patient(point: &str, priority: i32, behaviour: &str) -> String {
    format!(
        "[hooks]\ntimeout_ms = 10000\n\n{}",
        grants(point, priority, behaviour)
    )
}

/// Grants of a hook at `point` (priority `priority`) that does `behaviour`
/// (a TOML inline table) there, with the default time limit of 50 ms.
fn grants(point: &str, priority: i32, behaviour: &str) -> String {
    let key = point.replace('-', "_");
    format!(
        "[config]\nsubscriptions = [{{ point = \"{point}\", priority = {priority} }}]\n{key} = {behaviour}\n"
    )
}

/// An agent over `dir` and `fake`, with a lossless subscription.
async fn agent_over(dir: &PluginDir, fake: &FakeModel) -> (Arc<Agent>, Subscription) {
    let plugins = dir.load().await;
    for status in &plugins.catalog().plugins {
        if let wasmclaw::plugin::PluginStatus::Failed { name, error, .. } = status {
            panic!("{name} did not load: {error}");
        }
    }
    agent(
        plugins,
        vec![openai(fake, "fake-gpt", false)],
        Store::open_in_memory().unwrap(),
    )
}

/// The model asks for `add(40, 2)`, then answers "done".
async fn adding_model() -> FakeModel {
    FakeModel::start([
        Reply::tool("call_1", "add", json!({"a": 40, "b": 2})),
        Reply::text("done"),
    ])
    .await
}

fn bodies<'a>(events: &'a [Arc<Event>], kind: &str) -> Vec<&'a EventBody> {
    events
        .iter()
        .filter(|e| e.body.kind().as_str() == kind)
        .map(|e| &e.body)
        .collect()
}

/// The tool result the model was sent in its second request.
fn tool_result_sent(fake: &FakeModel) -> Value {
    let requests = fake.requests();
    let messages = requests[1].body["messages"].as_array().unwrap().clone();
    messages
        .into_iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool result")["content"]
        .clone()
}

/// `tool_call_end`'s (ok, output, error kind).
fn tool_end(events: &[Arc<Event>]) -> (bool, String, Option<ErrorKind>) {
    match bodies(events, "tool_call_end")[..] {
        [
            EventBody::ToolCallEnd(ToolCallEnd {
                ok,
                output,
                error_kind,
                ..
            }),
        ] => (*ok, output.clone(), *error_kind),
        ref other => panic!("expected one tool_call_end, got {other:?}"),
    }
}

fn decision(hook: &str, point: HookPoint, verdict: HookVerdict) -> EventBody {
    let tool_point = matches!(point, HookPoint::BeforeTool | HookPoint::AfterTool);
    EventBody::HookDecision(HookDecision {
        hook: hook.into(),
        point,
        decision: verdict,
        call_id: tool_point.then(|| "call_1".into()),
        tool: tool_point.then(|| "add".into()),
        reason: None,
        arguments: None,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn each_before_tool_decision_does_what_it_says() {
    let cases = [
        ("{ action = \"proceed\" }", None, (true, "42", None)),
        (
            "{ action = \"deny\", reason = \"no adding today\" }",
            Some(HookVerdict::Deny),
            (
                false,
                "error (denied): denied by hook 'gate': no adding today",
                Some(ErrorKind::Denied),
            ),
        ),
        (
            "{ action = \"rewrite\", arguments = { a = 1, b = 2 } }",
            Some(HookVerdict::Rewrite),
            (true, "3", None),
        ),
        (
            "{ action = \"answer\", text = \"forty-two, from the hook\" }",
            Some(HookVerdict::Answer),
            (true, "forty-two, from the hook", None),
        ),
    ];
    for (behaviour, verdict, (ok, output, kind)) in cases {
        let dir = PluginDir::new();
        dir.add("echo");
        hook(&dir, "gate", &patient("before-tool", 0, behaviour));
        let fake = adding_model().await;
        let (agent, mut sub) = agent_over(&dir, &fake).await;
        let outcome = agent.run_turn("s", "add 40 and 2").await;
        assert_eq!(outcome.status, TurnStatus::Completed, "{behaviour}");
        let events = drain(&mut sub);

        let mut expected_kinds = vec![
            "turn_begin",
            "llm_request",
            "llm_response",
            "tool_call_begin",
        ];
        if verdict.is_some() {
            expected_kinds.push("hook_decision");
        }
        expected_kinds.extend(["tool_call_end", "llm_request", "llm_response", "turn_end"]);
        assert_eq!(kinds(&events), expected_kinds, "{behaviour}");
        if let Some(verdict) = verdict {
            let mut expected = decision("gate", HookPoint::BeforeTool, verdict);
            if let EventBody::HookDecision(HookDecision {
                reason, arguments, ..
            }) = &mut expected
            {
                match verdict {
                    HookVerdict::Deny => *reason = Some("no adding today".into()),
                    HookVerdict::Rewrite => *arguments = Some(r#"{"a":1,"b":2}"#.into()),
                    _ => {}
                }
            }
            assert_eq!(bodies(&events, "hook_decision"), [&expected]);
        }
        assert_eq!(tool_end(&events), (ok, output.to_string(), kind));
        // What the model read is what the event says.
        assert_eq!(tool_result_sent(&fake), json!(output), "{behaviour}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn chains_run_by_priority_then_name_and_stop_at_the_first_deny() {
    let dir = PluginDir::new();
    dir.add("echo");
    // By priority: c_rewrite (-5), then a_deny and b_deny (0, by name).
    hook(
        &dir,
        "c_rewrite",
        &grants(
            "before-tool",
            -5,
            "{ action = \"rewrite\", arguments = { a = 2, b = 3 } }",
        ),
    );
    hook(
        &dir,
        "b_deny",
        &patient("before-tool", 0, "{ action = \"deny\", reason = \"b\" }"),
    );
    hook(
        &dir,
        "a_deny",
        &patient("before-tool", 0, "{ action = \"deny\", reason = \"a\" }"),
    );
    let fake = adding_model().await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    agent.run_turn("s", "add").await;
    let events = drain(&mut sub);
    let hooks: Vec<(&str, Option<&str>)> = bodies(&events, "hook_decision")
        .into_iter()
        .map(|b| match b {
            EventBody::HookDecision(HookDecision { hook, reason, .. }) => {
                (hook.as_str(), reason.as_deref())
            }
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(hooks, [("c_rewrite", None), ("a_deny", Some("a"))]);
    assert_eq!(
        tool_end(&events).1,
        "error (denied): denied by hook 'a_deny': a"
    );

    // after-tool: every hook runs, each on what the one before left; the
    // operator's priority in [hooks] wins over the plugin's own.
    let dir = PluginDir::new();
    dir.add("echo");
    hook(
        &dir,
        "first",
        &(grants(
            "after-tool",
            0,
            "{ action = \"replace\", text = \"from first\" }",
        ) + "[hooks]\npriority = 10\n"),
    );
    hook(
        &dir,
        "second",
        &grants(
            "after-tool",
            20,
            "{ action = \"replace_error\", text = \"from second\", if_contains = \"from first\" }",
        ),
    );
    hook(
        &dir,
        "early",
        &grants(
            "after-tool",
            5,
            "{ action = \"replace\", text = \"never seen\", if_contains = \"nothing like this\" }",
        ),
    );
    let fake = adding_model().await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    agent.run_turn("s", "add").await;
    let events = drain(&mut sub);
    assert_eq!(
        bodies(&events, "hook_decision"),
        [
            &decision("first", HookPoint::AfterTool, HookVerdict::Replace),
            &decision("second", HookPoint::AfterTool, HookVerdict::Replace),
        ]
    );
    assert_eq!(
        tool_end(&events),
        (
            false,
            "error (denied): from second".into(),
            Some(ErrorKind::Denied)
        )
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn llm_hooks_change_the_request_and_the_response_or_end_the_turn() {
    let dir = PluginDir::new();
    hook(
        &dir,
        "context",
        &grants(
            "before-llm",
            0,
            "{ action = \"replace\", text = \"The operator says: be brief.\" }",
        ),
    );
    hook(
        &dir,
        "censor",
        &grants(
            "after-llm",
            0,
            "{ action = \"replace\", text = \"[answer withheld]\" }",
        ),
    );
    let fake = FakeModel::start([Reply::text("the secret is 42")]).await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    let outcome = agent.run_turn("s", "what is the secret?").await;
    assert_eq!(outcome.answer.as_deref(), Some("[answer withheld]"));
    let sent = &fake.requests()[0].body["messages"];
    assert_eq!(
        sent,
        &json!([
            {"role": "user", "content": "what is the secret?"},
            {"role": "system", "content": "The operator says: be brief."},
        ])
    );
    let events = drain(&mut sub);
    assert_eq!(
        kinds(&events),
        [
            "turn_begin",
            "hook_decision",
            "llm_request",
            "llm_response",
            "hook_decision",
            "turn_end"
        ]
    );
    // The history holds the question (not the hook's addition) and the
    // answer as replaced.
    let history = agent.store().history("s").await.unwrap();
    assert_eq!(
        serde_json::to_value(&history).unwrap(),
        json!([
            {"role": "user", "content": "what is the secret?"},
            {"role": "assistant", "content": "[answer withheld]"},
        ])
    );

    // A deny before the request: no request is made, the turn ends in error.
    let dir = PluginDir::new();
    hook(
        &dir,
        "guard",
        &grants(
            "before-llm",
            0,
            "{ action = \"deny\", reason = \"the message names a customer\", if_contains = \"ACME\" }",
        ),
    );
    let fake = FakeModel::start([Reply::text("never asked")]).await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    let outcome = agent.run_turn("s", "tell me about ACME").await;
    assert_eq!(outcome.status, TurnStatus::Error);
    assert_eq!(
        outcome.reason,
        "hook 'guard' denied the model request: the message names a customer"
    );
    assert!(fake.requests().is_empty());
    assert_eq!(
        kinds(&drain(&mut sub)),
        ["turn_begin", "hook_decision", "turn_end"]
    );
    assert!(agent.store().history("s").await.unwrap().is_empty());
}

/// One turn with `add` guarded by a hook at `point` doing `behaviour`.
async fn turn_with_failing_hook(point: &str, behaviour: &str, extra: &str) -> Vec<Arc<Event>> {
    let dir = PluginDir::new();
    dir.add("echo");
    hook(&dir, "bad", &(grants(point, 0, behaviour) + extra));
    let fake = adding_model().await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    let outcome = tokio::time::timeout(LIMIT, agent.run_turn("s", "add"))
        .await
        .expect("the turn ends");
    let events = drain(&mut sub);
    assert_eq!(
        events.last().unwrap().body.kind().as_str(),
        "turn_end",
        "{outcome:?}"
    );
    events
}

fn hook_error(events: &[Arc<Event>]) -> (HookPoint, String, HookEffect) {
    match bodies(events, "hook_error")[..] {
        [
            EventBody::HookError(HookError {
                hook,
                point,
                error,
                effect,
                ..
            }),
        ] => {
            assert_eq!(hook, "bad");
            (*point, error.clone(), *effect)
        }
        ref other => panic!("expected one hook_error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_before_tool_hook_fails_closed_and_an_after_tool_hook_in_isolation() {
    let spin = "{ action = \"loop\" }";
    let trap = "{ action = \"trap\" }";
    let slow = "{ action = \"sleep\", ms = 2000 }";
    let hog = "{ action = \"alloc\", mib = 64 }";
    let timed_out = "plugin 'bad' did not finish within its time limit of 50 ms and was stopped";
    let over_memory = "plugin 'bad' exceeded its memory limit of 16 MiB and was stopped";
    for (behaviour, error) in [
        (spin, timed_out),
        (slow, timed_out),
        (hog, over_memory),
        (trap, "plugin 'bad' crashed"),
    ] {
        // before-tool: the call is denied, with the hook's failure as the
        // reason; the tool never runs.
        let events = turn_with_failing_hook("before-tool", behaviour, "").await;
        let (point, text, effect) = hook_error(&events);
        assert_eq!((point, effect), (HookPoint::BeforeTool, HookEffect::Denied));
        assert!(text.starts_with(error), "{behaviour}: {text}");
        let (ok, output, kind) = tool_end(&events);
        assert_eq!((ok, kind), (false, Some(ErrorKind::Denied)));
        assert_eq!(
            output,
            format!(
                "error (denied): hook 'bad' failed, and the call is denied (the hook fails closed): {text}"
            )
        );

        // after-tool: passed over; the tool's result stands.
        let events = turn_with_failing_hook("after-tool", behaviour, "").await;
        let (point, text, effect) = hook_error(&events);
        assert_eq!((point, effect), (HookPoint::AfterTool, HookEffect::Ignored));
        assert!(text.starts_with(error), "{behaviour}: {text}");
        assert_eq!(tool_end(&events), (true, "42".into(), None));
    }

    // A trap says what the guest printed.
    let events = turn_with_failing_hook("before-tool", trap, "").await;
    let text = hook_error(&events).1;
    assert!(
        text.contains("hooktest: trap requested"),
        "the panic message is in the error: {text}"
    );

    // Failing open, the call goes on as if the hook had said proceed.
    let events = turn_with_failing_hook("before-tool", spin, "[hooks]\nfail = \"open\"\n").await;
    assert_eq!(hook_error(&events).2, HookEffect::Ignored);
    assert_eq!(tool_end(&events), (true, "42".into(), None));

    // An after-tool hook that fails closed (a redactor) withholds the result.
    let events = turn_with_failing_hook("after-tool", trap, "[hooks]\nfail = \"closed\"\n").await;
    let (_, text, effect) = hook_error(&events);
    assert_eq!(effect, HookEffect::Withheld);
    assert_eq!(
        tool_end(&events),
        (
            false,
            format!(
                "error (denied): hook 'bad' failed, and the result is withheld (the hook fails closed): {text}"
            ),
            Some(ErrorKind::Denied)
        )
    );

    // A budget of its own: 200 ms lets a 100 ms hook finish.
    let events = turn_with_failing_hook(
        "before-tool",
        "{ action = \"sleep\", ms = 100 }",
        "[hooks]\ntimeout_ms = 200\n",
    )
    .await;
    assert!(bodies(&events, "hook_error").is_empty());
    assert_eq!(tool_end(&events), (true, "42".into(), None));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_before_llm_hook_ends_the_turn_naming_it() {
    let dir = PluginDir::new();
    hook(
        &dir,
        "bad",
        &grants("before-llm", 0, "{ action = \"loop\" }"),
    );
    let fake = FakeModel::start([Reply::text("never asked")]).await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    let outcome = agent.run_turn("s", "hello").await;
    assert_eq!(outcome.status, TurnStatus::Error);
    assert_eq!(
        outcome.reason,
        "hook 'bad' failed before the model request, and it fails closed: plugin 'bad' did not finish within its time limit of 50 ms and was stopped"
    );
    assert!(fake.requests().is_empty());
    let events = drain(&mut sub);
    assert_eq!(
        hook_error(&events),
        (
            HookPoint::BeforeLlm,
            "plugin 'bad' did not finish within its time limit of 50 ms and was stopped".into(),
            HookEffect::TurnFailed
        )
    );

    // after-llm fails in isolation: the model's answer stands.
    let dir = PluginDir::new();
    hook(
        &dir,
        "bad",
        &grants("after-llm", 0, "{ action = \"trap\" }"),
    );
    let fake = FakeModel::start([Reply::text("the answer")]).await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    let outcome = agent.run_turn("s", "hello").await;
    assert_eq!(outcome.answer.as_deref(), Some("the answer"));
    let (point, _, effect) = hook_error(&drain(&mut sub));
    assert_eq!((point, effect), (HookPoint::AfterLlm, HookEffect::Ignored));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rewrite_that_breaks_the_schema_is_refused() {
    let events = turn_with_failing_hook(
        "before-tool",
        "{ action = \"rewrite\", arguments = { a = \"forty\", b = 2 } }",
        "",
    )
    .await;
    let (_, text, effect) = hook_error(&events);
    assert_eq!(effect, HookEffect::Denied);
    assert!(
        text.starts_with("its rewritten arguments were refused: invalid arguments for add: "),
        "{text}"
    );
    assert!(bodies(&events, "hook_decision").is_empty());
    let (ok, output, _) = tool_end(&events);
    assert!(!ok);
    assert!(
        output.starts_with("error (denied): hook 'bad' failed, and the call is denied"),
        "{output}"
    );

    // Not an object at all.
    let events = turn_with_failing_hook(
        "before-tool",
        "{ action = \"rewrite\", arguments = [1, 2] }",
        "",
    )
    .await;
    assert_eq!(
        hook_error(&events).1,
        "its rewritten arguments were refused: expected a JSON object"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn observers_see_every_event_in_order_and_a_slow_one_drops_and_counts() {
    let dir = PluginDir::new();
    dir.add("echo");
    let out = dir.scratch("out");
    // 10 s for each event: the recorder must see every one, however busy
    // the machine (a call past its time limit loses that event).
    let record = |file: &str| {
        format!(
            "[config]\nsubscriptions = [{{ point = \"on-event\", priority = 0 }}]\non_event = {{ action = \"record\", file = \"/out/{file}\" }}\n[[dirs]]\nhost = {:?}\nguest = \"/out\"\nmode = \"read-write\"\n[hooks]\nqueue = 10000\ntimeout_ms = 10000\n",
            out
        )
    };
    hook(&dir, "recorder", &record("all.jsonl"));
    // A slow observer with a small queue, only for tool events.
    hook(
        &dir,
        "slow",
        "[config]\nsubscriptions = [{ point = \"on-event\", priority = 0, events = [\"tool_call_begin\", \"tool_call_end\"] }]\non_event = { action = \"sleep\", ms = 30 }\n[hooks]\nqueue = 2\ntimeout_ms = 5000\n",
    );
    let fake = fake_model(|_, after_tool| {
        if after_tool {
            Reply::text("done")
        } else {
            Reply::ToolCalls {
                text: String::new(),
                calls: (0..10)
                    .map(|i| wasmclaw_tests::fake_model::ToolCallReply {
                        id: format!("c{i}"),
                        name: "add".into(),
                        arguments: json!({"a": i, "b": 1}),
                    })
                    .collect(),
            }
        }
    })
    .await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    for n in 0..3 {
        let outcome = agent.run_turn(&format!("s{n}"), "add").await;
        assert_eq!(outcome.status, TurnStatus::Completed);
    }
    let published = drain(&mut sub);
    let tool_events = published
        .iter()
        .filter(|e| e.body.kind().as_str().starts_with("tool_call_"))
        .count() as u64;
    assert_eq!(tool_events, 60);

    // Closing lets each observer take in what is queued for it, then stops
    // it: nothing is left unaccounted for.
    tokio::time::timeout(LIMIT, agent.close_observers())
        .await
        .expect("closing ends");
    let stats = agent.observer_stats();
    let slow = stats.iter().find(|s| s.hook == "slow").unwrap();
    // Everything the slow observer was sent was delivered or counted as
    // dropped, and it did drop.
    assert_eq!(slow.delivered + slow.dropped, tool_events, "{slow:?}");
    assert!(
        slow.dropped > 0 && slow.delivered >= 2 && slow.failed == 0,
        "{slow:?}"
    );

    // The recorder saw every event, in order, exactly as published.
    let lines: Vec<Value> = std::fs::read_to_string(out.join("all.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let expected: Vec<Value> = published
        .iter()
        .map(|e| serde_json::to_value(&**e).unwrap())
        .collect();
    assert_eq!(lines, expected);
    let recorder = stats.iter().find(|s| s.hook == "recorder").unwrap();
    assert_eq!(
        (recorder.delivered, recorder.dropped),
        (published.len() as u64, 0)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn with_fifty_concurrent_sessions_a_hook_decides_exactly_the_calls_it_matched() {
    let dir = PluginDir::new();
    dir.add("echo");
    // 10 s for each hook call: this test is about which calls the hook
    // decides, and 50 sessions at once on a busy machine may not meet the
    // default 50 ms.
    hook(
        &dir,
        "gate",
        "[hooks]\ntimeout_ms = 10000\n\n[config]\nsubscriptions = [{ point = \"before-tool\", priority = 0, tools = [\"ec*\"] }]\nbefore_tool = { action = \"deny\", reason = \"marked\", if_contains = \"deny-me\" }\n",
    );
    // Each session's message is its own text, echoed by the tool.
    let fake = fake_model(|last_user, after_tool| {
        if after_tool {
            Reply::text("done")
        } else {
            Reply::tool("call_1", "echo", json!({ "text": last_user }))
        }
    })
    .await;
    let (agent, mut sub) = agent_over(&dir, &fake).await;
    let turns = (0..50).map(|n| {
        let agent = agent.clone();
        async move {
            let text = if n % 3 == 0 {
                format!("deny-me {n}")
            } else {
                format!("fine {n}")
            };
            agent.run_turn(&format!("s{n}"), &text).await
        }
    });
    let outcomes = tokio::time::timeout(LIMIT, futures_util::future::join_all(turns))
        .await
        .expect("the turns end");
    assert!(outcomes.iter().all(|o| o.status == TurnStatus::Completed));
    let events = drain(&mut sub);
    for n in 0..50 {
        let session = format!("s{n}");
        let mine: Vec<Arc<Event>> = events
            .iter()
            .filter(|e| e.session.as_deref() == Some(&session))
            .cloned()
            .collect();
        let denied = n % 3 == 0;
        let decisions = bodies(&mine, "hook_decision");
        let (ok, output, _) = tool_end(&mine);
        if denied {
            assert_eq!(decisions.len(), 1, "{session}");
            assert_eq!(
                (ok, output.as_str()),
                (false, "error (denied): denied by hook 'gate': marked")
            );
        } else {
            assert!(decisions.is_empty(), "{session}");
            assert_eq!((ok, output), (true, format!("fine {n}")));
        }
    }
    let all_decisions = bodies(&events, "hook_decision").len();
    assert_eq!(all_decisions, (0..50).filter(|n| n % 3 == 0).count());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hook_plugin_loads_with_its_subscriptions_and_a_bad_one_is_named() {
    let dir = PluginDir::new();
    hook(
        &dir,
        "ok",
        "[config]\nsubscriptions = [{ point = \"before-tool\", priority = 3, tools = [\"files_*\"] }, { point = \"on-event\", priority = 0, events = [\"turn_end\"] }]\n[hooks]\npriority = -1\n",
    );
    hook(
        &dir,
        "typo",
        "[config]\nsubscriptions = [{ point = \"on-event\", priority = 0, events = [\"tool_end\"] }]\n",
    );
    let plugins = dir.load().await;
    let catalog = plugins.catalog();
    let info: Vec<Value> = catalog
        .plugins
        .iter()
        .map(|s| serde_json::to_value(s.info()).unwrap())
        .collect();
    assert_eq!(info[0]["status"], "ok");
    assert_eq!(info[0]["world"], "hook-plugin");
    assert_eq!(
        info[0]["hooks"],
        json!([
            {"point": "before-tool", "priority": -1, "tools": ["files_*"]},
            {"point": "on-event", "priority": -1, "events": ["turn_end"]},
        ])
    );
    assert_eq!(info[0]["grants"]["hooks"]["timeout_ms"], 50);
    let error = wasmclaw_tests::load_error(&plugins, "typo");
    assert!(
        error.starts_with(
            "subscriptions()[0] (on-event): unknown event kind \"tool_end\"; the kinds are: turn_begin,"
        ),
        "{error}"
    );
}
