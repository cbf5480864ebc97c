//! `wasmclaw run` and `wasmclaw chat` as a user runs them, against a fake
//! model on 127.0.0.1.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw_tests::fake_model::{FakeModel, Reply};
use wasmclaw_tests::{PluginDir, json_lines, kinds_but_deltas, run_wasmclaw};

/// Runs the binary with a clean model environment; (exit code, stdout, stderr).
async fn wasmclaw(home: &Path, env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    run_wasmclaw(home, env, args, "").await
}

#[tokio::test(flavor = "multi_thread")]
async fn run_prints_the_answer_and_every_event_and_continues_a_session() {
    let dir = PluginDir::new();
    dir.add("echo");
    let home = dir.scratch("home");
    let fake = FakeModel::start([
        Reply::tool("c1", "add", json!({"a": 2, "b": 3})),
        Reply::text("It is 5."),
    ])
    .await;
    let url = fake.openai_base_url();
    let plugins = dir.path();
    let args = [
        "--plugins",
        plugins.to_str().unwrap(),
        "run",
        "--model",
        "openai:m",
        "--base-url",
        &url,
        "--session",
        "s1",
        "--events",
        "-",
        "-m",
        "2 + 3?",
    ];
    let (code, out, err) = wasmclaw(&home, &[("OPENAI_API_KEY", "sk-test")], &args).await;
    // The cache is cold in a new home: stderr says what was compiled, and
    // nothing else.
    let (compiled, rest) = wasmclaw_tests::split_progress(&err);
    assert_eq!(
        (code, compiled, rest.as_str()),
        (0, vec!["echo.wasm".to_string()], "")
    );

    // With `--events -` stdout holds only the events; the answer is in
    // turn_end.
    let events = json_lines(&out);
    assert_eq!(
        kinds_but_deltas(&events),
        [
            "plugin_loaded",
            "turn_begin",
            "llm_request",
            "llm_response",
            "tool_call_begin",
            "tool_call_end",
            "llm_request",
            "llm_response",
            "turn_end"
        ]
    );
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        events.last().unwrap()["usage"],
        json!({"input_tokens": 20, "output_tokens": 10})
    );
    assert_eq!(events.last().unwrap()["answer"], "It is 5.");
    let auth = fake.requests()[0]
        .headers
        .iter()
        .find(|(k, _)| k == "authorization")
        .map(|(_, v)| v.clone());
    assert_eq!(auth.as_deref(), Some("Bearer sk-test"));

    // A second process continues the session: the model sees the first turn,
    // and event numbers go on from the stored log.
    fake.push(Reply::text("Still 5."));
    let events_file = dir.scratch("out").join("events.jsonl");
    let args = [
        "--plugins",
        plugins.to_str().unwrap(),
        "run",
        "--model",
        "openai:m",
        "--base-url",
        &url,
        "--session",
        "s1",
        "--events",
        events_file.to_str().unwrap(),
        "-m",
        "and again?",
    ];
    let (code, out, err) = wasmclaw(&home, &[], &args).await;
    assert_eq!((code, out.as_str()), (0, "Still 5.\n"), "{err}");
    // `--events FILE`: the events in the file, one JSON line each.
    let written = std::fs::read_to_string(&events_file).unwrap();
    let first_seq: u64 =
        serde_json::from_str::<Value>(written.lines().next().unwrap()).unwrap()["seq"]
            .as_u64()
            .unwrap();
    assert_eq!(first_seq, seqs.len() as u64 + 1);
    let sent = &fake.requests()[2].body["messages"];
    let contents: Vec<String> = sent
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}:{}",
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(
        contents,
        [
            "user:2 + 3?",
            "assistant:-",
            "tool:5",
            "assistant:It is 5.",
            "user:and again?"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn run_without_a_model_says_how_to_configure_one() {
    let dir = PluginDir::new();
    let (code, out, err) = wasmclaw(&dir.scratch("home"), &[], &["run", "-m", "hi"]).await;
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.starts_with(
            "error: no model configured. Pass --model PROVIDER:MODEL or set WASMCLAW_MODEL, e.g.\n"
        ),
        "{err}"
    );
    assert!(
        err.contains("--model openai:gpt-4o-mini")
            && err.contains("ANTHROPIC_API_KEY")
            && err.contains("scripted:FILE.json"),
        "{err}"
    );

    let (code, _, err) = wasmclaw(
        &dir.scratch("home"),
        &[("WASMCLAW_MODEL", "gpt-4o")],
        &["run", "-m", "hi"],
    )
    .await;
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "error: model \"gpt-4o\" is not PROVIDER:MODEL; expected e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5 or scripted:FILE.json\n"
    );

    let (code, _, err) = wasmclaw(
        &dir.scratch("home"),
        &[],
        &["run", "--model", "anthropic:claude-x", "-m", "hi"],
    )
    .await;
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "error: the turn ended error: anthropic:claude-x: ANTHROPIC_API_KEY is not set\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn run_exits_non_zero_when_the_model_refuses() {
    let dir = PluginDir::new();
    let fake = FakeModel::start([Reply::Status {
        code: 401,
        message: "Incorrect API key provided".into(),
        retry_after: None,
    }])
    .await;
    let url = fake.openai_base_url();
    let (code, out, err) = wasmclaw(
        &dir.scratch("home"),
        &[],
        &["run", "--model", "openai:m", "--base-url", &url, "-m", "hi"],
    )
    .await;
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err,
        "error: the turn ended error: openai:m: HTTP 401 Unauthorized: Incorrect API key provided \
         (no key was sent: OPENAI_API_KEY is not set)\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_scripted_demo_model_drives_the_example_plugins() {
    let dir = PluginDir::new();
    for plugin in ["calculator", "files", "text", "time"] {
        dir.add(plugin);
        std::fs::copy(
            wasmclaw_tests::example_src(plugin).join(format!("{plugin}.toml")),
            dir.path().join(format!("{plugin}.toml")),
        )
        .unwrap();
    }
    let workspace = dir.scratch("workspace");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/demo-model.json");
    let model = format!("scripted:{}", script.display());
    let plugins = dir.path();
    let args = [
        "--plugins",
        plugins.to_str().unwrap(),
        "run",
        "--model",
        &model,
        "--events",
        "-",
        "-m",
        "Plan the garden party",
    ];
    let (code, out, err) = wasmclaw(&dir.scratch("home"), &[], &args).await;
    assert_eq!(code, 0, "{err}");
    let events = json_lines(&out);
    assert_eq!(
        events.last().unwrap()["answer"],
        "The garden party is planned for 18 December 2026 with a budget of 75. The plan is saved in party/plan.md and invites Ada, Grace and Linus."
    );
    let mut ends: Vec<(String, bool)> = (events.iter())
        .filter(|e| e["type"] == "tool_call_end")
        .map(|e| {
            (
                e["tool"].as_str().unwrap().to_string(),
                e["ok"].as_bool().unwrap(),
            )
        })
        .collect();
    // Calls of one reply run in parallel, so they may end in either order.

    ends.sort();
    let mut expected: Vec<(String, bool)> = [
        "date_add",
        "calculate",
        "write_file",
        "read_file",
        "search_files",
    ]
    .iter()
    .map(|t| (t.to_string(), true))
    .collect();
    expected.sort();
    assert_eq!(ends, expected, "{err}");
    assert!(
        std::fs::read_to_string(workspace.join("party/plan.md"))
            .unwrap()
            .contains("invite: Ada, Grace, Linus")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_streams_the_answer_and_shows_tool_calls_as_they_run() {
    let dir = PluginDir::new();
    dir.add("echo");
    let fake = FakeModel::start([
        Reply::ToolCalls {
            text: "Adding.".into(),
            calls: vec![wasmclaw_tests::fake_model::ToolCallReply {
                id: "c1".into(),
                name: "add".into(),
                arguments: json!({"a": 2, "b": 3}),
            }],
        },
        Reply::text("It is 5."),
        Reply::Status {
            code: 400,
            message: "context too long".into(),
            retry_after: None,
        },
    ])
    .await;
    let url = fake.openai_base_url();
    let plugins = dir.path();
    let args = [
        "--plugins",
        plugins.to_str().unwrap(),
        "chat",
        "--model",
        "openai:m",
        "--base-url",
        &url,
        "--session",
        "c1",
    ];
    let (code, out, err) = run_wasmclaw(
        &dir.scratch("home"),
        &[],
        &args,
        "add 2 and 3\nmore\n/quit\n",
    )
    .await;
    assert_eq!(code, 0, "{err}");
    // Durations vary: show them as T.
    let shown: Vec<String> = out
        .lines()
        .map(|l| match (l.find(" ("), l.find(" ms)")) {
            (Some(a), Some(b)) if a < b => format!("{} (T ms){}", &l[..a], &l[b + 4..]),
            _ => l.to_string(),
        })
        .collect();
    assert_eq!(
        shown,
        [
            "wasmclaw chat: agent default, model openai:m, session c1 (continue it later with --session c1)",
            "tools: add, context, count, echo, fail, log, subagent, spawn, history_search",
            "Type a message; /help lists the commands; an empty line or /quit ends.",
            "> Adding.",
            "  ⚙ add {\"a\":2,\"b\":3}",
            "  ✓ add (T ms): 5",
            "It is 5.",
            "> [turn error: openai:m: HTTP 400 Bad Request: context too long]",
            "> ",
        ],
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_without_streaming_shows_whole_replies() {
    let dir = PluginDir::new();
    let fake = FakeModel::start([Reply::text("Hello there.")]).await;
    let url = fake.openai_base_url();
    let plugins = dir.path();
    let args = [
        "--plugins",
        plugins.to_str().unwrap(),
        "chat",
        "--no-stream",
        "--model",
        "openai:m",
        "--base-url",
        &url,
        "--session",
        "c2",
    ];
    let (code, out, err) = run_wasmclaw(&dir.scratch("home"), &[], &args, "hello\n").await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().skip(3).collect();
    assert_eq!(lines, ["> Hello there.", "> "], "{out}");
    assert_eq!(fake.requests()[0].body.get("stream"), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn turns_lists_a_session_with_its_sub_agents_under_their_parent() {
    let dir = PluginDir::new();
    dir.add("echo");
    let home = dir.scratch("home");
    let fake = FakeModel::start([
        Reply::tool(
            "c1",
            "subagent",
            json!({"task": "add 2 and 3", "tools": ["add"]}),
        ),
        Reply::tool("c2", "add", json!({"a": 2, "b": 3})),
        Reply::text("5"),
        Reply::text("The helper says 5."),
    ])
    .await;
    let url = fake.openai_base_url();
    let plugins = dir.path();
    let run = [
        "--plugins",
        plugins.to_str().unwrap(),
        "run",
        "--model",
        "openai:m",
        "--base-url",
        &url,
        "--session",
        "tree",
        "-m",
        "delegate",
    ];
    let (code, out, err) = wasmclaw(&home, &[], &run).await;
    assert_eq!((code, out.as_str()), (0, "The helper says 5.\n"), "{err}");

    let (code, out, err) = wasmclaw(&home, &[], &["turns", "--session", "tree"]).await;
    assert_eq!(code, 0, "{err}");
    let shape: Vec<(usize, Vec<&str>)> = out
        .lines()
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            (l.len() - l.trim_start().len(), words[1..3].to_vec())
        })
        .collect();
    assert_eq!(
        shape,
        [
            (0, vec!["completed", "final_answer"]),
            (2, vec!["completed", "final_answer"]),
        ],
        "{out}"
    );
    assert!(out.lines().next().unwrap().ends_with("delegate"), "{out}");
    assert!(
        out.lines().nth(1).unwrap().ends_with("add 2 and 3"),
        "{out}"
    );

    let (code, _, err) = wasmclaw(&home, &[], &["turns", "--session", "nope"]).await;
    assert_eq!(
        (code, err.trim()),
        (1, "error: session 'nope' has no recorded turns")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn base_url_applies_to_anthropic_candidates_and_a_mixed_chain_is_refused() {
    let dir = PluginDir::new();
    let fake = FakeModel::start([Reply::text("From the Anthropic format.")]).await;
    let url = fake.anthropic_base_url();
    let home = dir.scratch("home");
    let env = [("ANTHROPIC_API_KEY", "k")];
    let args = [
        "run",
        "--model",
        "anthropic:c",
        "--base-url",
        &url,
        "-m",
        "hi",
    ];
    let (code, out, err) = wasmclaw(&home, &env, &args).await;
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "From the Anthropic format.\n", "")
    );
    assert_eq!(fake.requests()[0].path, "/v1/messages");

    let mixed = [
        "run",
        "--model",
        "openai:m,anthropic:c",
        "--base-url",
        &url,
        "-m",
        "hi",
    ];
    let (code, out, err) = wasmclaw(&home, &env, &mixed).await;
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err,
        "error: --base-url names one server, but the chain mixes openai: and anthropic: candidates, \
         whose URLs differ (OpenAI's ends with /v1, Anthropic's does not); set OPENAI_BASE_URL and \
         ANTHROPIC_BASE_URL instead\n"
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn max_instances_bounds_the_plugin_calls_in_flight() {
    use wasmclaw_tests::gate::{ToolGates, gate_calls};
    let gates = ToolGates::new();
    let dir = PluginDir::new();
    dir.add("hostile");
    dir.grants("hostile", &gates.grants());
    let home = dir.scratch("home");
    let (_, _, err) = wasmclaw(&home, &[], &["--max-instances", "0", "plugins", "list"]).await;
    assert_eq!(
        err,
        "error: --max-instances: expected 1 to 10000, found 0\n"
    );

    // Two calls at once with room for one: the second cannot start.
    let fake = FakeModel::start([
        gate_calls(&[("c1", "g1"), ("c2", "g2")]),
        Reply::text("done"),
    ])
    .await;
    let child = wasmclaw_tests::serve_bin::wasmclaw_command(&home, &dir.path())
        .args(["--max-instances", "1", "run", "--events", "-"])
        .args(["--model", "openai:m", "--base-url", &fake.openai_base_url()])
        .args(["-m", "two gates"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let limit = Duration::from_secs(30);
    let started = tokio::time::timeout(limit, async {
        while !gates.started("g1") && !gates.started("g2") {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    started.await.expect("one call reaches its gate");
    gates.open("g1");
    gates.open("g2");
    let out = wasmclaw_tests::serve_bin::succeeded(child).await;
    let ends: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "tool_call_end")
        .collect();
    let refused: Vec<&Value> = ends.iter().filter(|e| e["ok"] == false).collect();
    assert_eq!((ends.len(), refused.len()), (2, 1), "{ends:?}");
    assert_eq!(
        refused[0]["output"],
        "error (internal): plugin 'hostile' could not start: the host is running as many plugin instances as it allows; try again shortly"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_shows_hook_decisions_only_with_verbose() {
    let dir = PluginDir::new();
    dir.add("prompt_context");
    dir.grants("prompt_context", "[hooks]\ntimeout_ms = 10000\n");
    let fake = FakeModel::start([Reply::text("One."), Reply::text("Two.")]).await;
    let url = fake.openai_base_url();
    let plugins = dir.path();
    let home = dir.scratch("home");
    let mut shown = Vec::new();
    for verbose in [None, Some("-v")] {
        let args: Vec<&str> = ["--plugins", plugins.to_str().unwrap()]
            .into_iter()
            .chain(verbose)
            .chain(["chat", "--model", "openai:m", "--base-url", &url])
            .collect();
        let (code, out, err) = run_wasmclaw(&home, &[], &args, "hi\n").await;
        assert_eq!(code, 0, "{err}");
        let hooks: Vec<&str> = (out.lines())
            .filter(|l| l.contains("[hook "))
            .map(|l| l.trim_start_matches("> ").trim())
            .collect();
        shown.push(hooks.join("\n"));
    }
    assert_eq!(shown, ["", "[hook 'prompt_context' (before-llm): replace]"]);
}
