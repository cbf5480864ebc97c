//! Chat commands: each one from the registry (as `chat` and channels use
//! it) and from the HTTP API, what it answers and what it changed, and that
//! none reaches the model; agents as models on the OpenAI endpoint.

use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw::agent::AgentConfig;
use wasmclaw::commands::{Commands, Handled, Outcome};
use wasmclaw::config::ToolFilter;
use wasmclaw::core::Core;
use wasmclaw::protocol::{Accepted, Op, TurnStatus};
use wasmclaw::scheduler::SchedulerConfig;
use wasmclaw::store::Store;
use wasmclaw_tests::PluginDir;
use wasmclaw_tests::agents::{core_of_agents, profile, profiles};
use wasmclaw_tests::fake_model::{FakeModel, Gate, Options, Reply, Responder, roles_and_texts};
use wasmclaw_tests::server::{Setup, TestServer};

const LIMIT: Duration = Duration::from_secs(60);

async fn model(respond: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> FakeModel {
    let options = Options {
        responder: Some(Responder::new(respond)),
        ..Options::default()
    };
    FakeModel::start_with(options, []).await
}

/// `default` (every tool) and `coder` (`add` and `echo`), each with a
/// prompt of its name.
fn two_agents(fake: &FakeModel) -> wasmclaw::agent::profile::Profiles {
    let config = |prompt: &str, allow: &[&str]| AgentConfig {
        system_prompt: Some(prompt.to_string()),
        tools: ToolFilter {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: Vec::new(),
        },
        ..AgentConfig::default()
    };
    let agents = vec![
        profile("default", fake, "m-default", config("default", &["*"])),
        profile("coder", fake, "m-coder", config("coder", &["add", "echo"])),
    ];
    profiles(fake, agents, "default")
}

async fn command(core: &Core, session: &str, text: &str) -> Outcome {
    let handled = Commands::new(core)
        .handle(session, text, || "fresh".to_string())
        .await;
    match handled {
        Handled::Command(outcome) => outcome,
        Handled::Message(text) => panic!("{text:?} was taken for model input"),
    }
}

/// (system prompt, last message, model) of each request `fake` received.
fn asked(fake: &FakeModel) -> Vec<[String; 3]> {
    (fake.requests().iter())
        .map(|r| {
            let texts = roles_and_texts(&r.body);
            let model = r.body["model"].as_str().unwrap().to_string();
            [texts[0].1.clone(), texts.last().unwrap().1.clone(), model]
        })
        .collect()
}

fn done(command: &str, reply: &str) -> Outcome {
    Outcome {
        command: command.into(),
        reply: reply.into(),
        new_session: None,
        failed: false,
    }
}

fn refused(command: &str, reply: &str) -> Outcome {
    Outcome {
        failed: true,
        ..done(command, reply)
    }
}

const HELP: &str = "  /help                  this list
  /new                   start a fresh session (the current one is kept)
  /agent [NAME]          show the session's agent and the others, or switch to NAME
  /model [SPEC|default]  show the session's model, use SPEC (PROVIDER:MODEL) for its next turns, or go back to its agent's
  /tools                 the tools the session's agent offers
  /usage                 tokens the session's turns used
  /compact               summarize the session's older history now (its messages stay in the store)
  /stop                  wind the running turn down: running tools finish, then a last answer
  /abort                 stop the running turn at once
  /session               the session's key, agent, model, policy and what it holds";

#[tokio::test(flavor = "multi_thread")]
async fn each_command_answers_changes_what_it_says_and_never_reaches_the_model() {
    let gate = Gate::default();
    let held = gate.clone();
    let fake = model(move |body| {
        let last = roles_and_texts(body).last().unwrap().1.clone();
        match last.as_str() {
            "wait" => Reply::Gated(held.clone(), Box::new(Reply::text("waited"))),
            _ => Reply::text("ok"),
        }
    })
    .await;
    let dir = PluginDir::new();
    dir.add("echo");
    let (core, _events) = core_of_agents(
        dir.load().await,
        two_agents(&fake),
        Store::open_in_memory().unwrap(),
        SchedulerConfig::default(),
    );
    let c = |text: &'static str| command(&core, "c", text);

    assert_eq!(c("/help").await, done("help", HELP));
    assert_eq!(
        c("/agent").await,
        done("agent", "agent default (agents: coder, default)")
    );
    assert_eq!(
        c("/agent nope").await,
        refused(
            "agent",
            "no agent `nope` in the configuration (agents: coder, default)"
        )
    );
    assert_eq!(
        c("/agent coder").await,
        done("agent", "agent coder from the next turn on")
    );
    assert_eq!(
        c("/agent").await,
        done("agent", "agent coder (agents: coder, default)")
    );
    assert_eq!(c("/tools").await, done("tools", "add, echo"));
    assert_eq!(c("/model").await, done("model", "model of agent coder"));
    assert_eq!(
        c("/model fake:big").await,
        done("model", "model fake:big from the next turn on")
    );
    assert_eq!(
        c("/model nonsense").await,
        refused("model", "model `nonsense`: expected fake:MODEL")
    );
    assert_eq!(
        c("/model").await,
        done("model", "model fake:big (the session's own)")
    );
    let (_, outcome) = core.run(message("c", "hello")).await.unwrap();
    assert_eq!(outcome.unwrap().answer.as_deref(), Some("ok"));
    assert_eq!(
        c("/model default").await,
        done("model", "the agent's model from the next turn on")
    );
    assert_eq!(
        c("/usage").await,
        done(
            "usage",
            "1 turns: 10 tokens in, 5 out; the last: 10 in, 5 out; context: about 107 tokens"
        )
    );
    // The turn's end is published before the scheduler hears of it: wait
    // for the session to be idle as the scheduler sees it.
    let idle = tokio::time::timeout(LIMIT, core.until_idle("c")).await;
    idle.expect("the session goes idle");
    assert_eq!(
        c("/session").await,
        done(
            "session",
            "session c: agent coder, model the agent's, policy steer, idle; 2 messages, 1 turns"
        )
    );
    assert_eq!(
        c("/stop").await,
        refused("stop", "no active turn on session 'c'")
    );

    // A running turn: wound down, then (another one) stopped.
    let Ok(Accepted::Started { turn_id }) = core.submit(message("c", "wait")).await else {
        panic!("not started");
    };
    assert!(wasmclaw_tests::eventually(LIMIT, || fake.requests().len() == 2).await);
    assert_eq!(
        c("/stop").await,
        done("stop", &format!("winding turn {turn_id} down"))
    );
    gate.open();
    let ended = tokio::time::timeout(LIMIT, core.wait_turn(&turn_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ended.status, TurnStatus::Completed);

    assert_eq!(
        c("/new").await,
        Outcome {
            new_session: Some("fresh".into()),
            ..done("new", "new session fresh")
        }
    );
    assert_eq!(
        c("/bogus").await,
        refused(
            "bogus",
            &format!("unknown command /bogus; the commands are:\n{HELP}")
        )
    );
    assert_eq!(
        c("/help me").await,
        refused("help", "/help takes no argument (it was given `me`)")
    );
    assert_eq!(
        Commands::new(&core).handle("c", "//etc", String::new).await,
        Handled::Message("/etc".into())
    );
    assert_eq!(
        Commands::new(&core).handle("c", "plain", String::new).await,
        Handled::Message("plain".into())
    );

    // Only "hello" and "wait" reached the model, "hello" with the session's
    // model, both with coder's prompt.
    assert_eq!(
        asked(&fake),
        [["coder", "hello", "big"], ["coder", "wait", "m-coder"]]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn abort_stops_the_running_turn_at_once() {
    let gate = Gate::default();
    let held = gate.clone();
    let fake = model(move |_| Reply::Gated(held.clone(), Box::new(Reply::text("late")))).await;
    let dir = PluginDir::new();
    let (core, _events) = core_of_agents(
        dir.load().await,
        two_agents(&fake),
        Store::open_in_memory().unwrap(),
        SchedulerConfig::default(),
    );
    let Ok(Accepted::Started { turn_id }) = core.submit(message("a", "go")).await else {
        panic!("not started");
    };
    assert!(wasmclaw_tests::eventually(LIMIT, || fake.requests().len() == 1).await);
    assert_eq!(
        command(&core, "a", "/abort").await,
        done("abort", &format!("stopped turn {turn_id}"))
    );
    let ended = tokio::time::timeout(LIMIT, core.wait_turn(&turn_id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ended.status, TurnStatus::Aborted);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_takes_no_commands_passes_slash_messages_to_the_model() {
    let fake = model(|_| Reply::text("ok")).await;
    let dir = PluginDir::new();
    let config = AgentConfig {
        commands: false,
        ..AgentConfig::default()
    };
    let (core, _events) = core_of_agents(
        dir.load().await,
        profiles(
            &fake,
            vec![profile("default", &fake, "m", config)],
            "default",
        ),
        Store::open_in_memory().unwrap(),
        SchedulerConfig::default(),
    );
    assert_eq!(
        Commands::new(&core).handle("s", "/help", String::new).await,
        Handled::Message("/help".into())
    );
}

fn message(session: &str, content: &str) -> Op {
    Op::UserMessage {
        session: session.into(),
        content: content.into(),
        agent: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_http_api_runs_commands_and_takes_an_agent_with_a_first_message() {
    let fake = model(|_| Reply::text("ok")).await;
    let dir = PluginDir::new();
    dir.add("echo");
    let server =
        TestServer::start_agents(dir.load().await, two_agents(&fake), Setup::default()).await;
    let client = server.client();
    let post = |session: &str, body: Value| {
        client
            .post(server.at(&format!("/v1/sessions/{session}/messages?wait=true")))
            .json(&body)
            .send()
    };
    let ask = async |session: &str, body: Value| -> Value {
        post(session, body).await.unwrap().json().await.unwrap()
    };
    let answer: Value = ask("h", json!({"content": "/agent coder"})).await;
    assert_eq!(
        answer,
        json!({"command": "agent", "reply": "agent coder from the next turn on", "ok": true})
    );
    let answer: Value = ask("h", json!({"content": "/tools"})).await;
    assert_eq!(
        answer,
        json!({"command": "tools", "reply": "add, echo", "ok": true})
    );
    let answer: Value = ask("h", json!({"content": "/nope"})).await;
    assert_eq!(answer["ok"], false);
    assert!(
        answer["reply"]
            .as_str()
            .unwrap()
            .starts_with("unknown command /nope; the commands are:\n")
    );
    let answer: Value = ask("h", json!({"content": "/new"})).await;
    let fresh = answer["new_session"].as_str().unwrap().to_string();
    assert!(fresh.starts_with("s-"), "{answer}");
    assert_eq!(answer["reply"], format!("new session {fresh}"));

    // A first message names its agent; the session keeps it.
    let response = post("k", json!({"content": "hi", "agent": "coder"}))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["status"], "completed", "{answer}");
    let response = post("k", json!({"content": "again", "agent": "default"}))
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(
        error["error"]["message"],
        "session 'k' runs agent 'coder', not 'default': a session keeps its agent until it is \
         switched (/agent default)"
    );
    let session: Value = client
        .get(server.at("/v1/sessions/k"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(session["agent"], "coder");
    let prompts: Vec<String> = (fake.requests().iter())
        .map(|r| roles_and_texts(&r.body)[0].1.clone())
        .collect();
    assert_eq!(prompts, ["coder"], "only `hi` reached the model");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openai_endpoint_lists_the_agents_as_models_and_runs_the_one_named() {
    let fake = model(|_| Reply::text("ok")).await;
    let dir = PluginDir::new();
    let server =
        TestServer::start_agents(dir.load().await, two_agents(&fake), Setup::default()).await;
    let client = server.client();
    let models: Value = client
        .get(server.at("/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = (models["data"].as_array().unwrap().iter())
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["wasmclaw", "coder", "default"]);
    let complete = |model: &str| {
        client
            .post(server.at("/v1/chat/completions"))
            .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
    };
    for model in ["coder", "default", "wasmclaw"] {
        let response = complete(model).await.unwrap();
        assert_eq!(response.status(), 200, "{model}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["model"], model);
        assert_eq!(body["choices"][0]["message"]["content"], "ok");
    }
    let prompts: Vec<String> = (fake.requests().iter())
        .map(|r| roles_and_texts(&r.body)[0].1.clone())
        .collect();
    assert_eq!(prompts, ["coder", "default", "default"]);
    let response = complete("gpt-4o").await.unwrap();
    assert_eq!(response.status(), 404);
    let error: Value = response.json().await.unwrap();
    assert_eq!(
        error["error"],
        json!({
            "type": "model_not_found",
            "message": "the model `gpt-4o` does not exist: the models are this host's agents (wasmclaw, coder, default)"
        })
    );
    assert_eq!(fake.requests().len(), 3, "an unknown model asks no model");
    server.stop().await;
}

/// A home whose wasmclaw.toml has `default` and `coder` on the fake model,
/// coder with an approval rule that asks for `echo`.
fn cli_home(dir: &PluginDir, fake: &FakeModel) -> std::path::PathBuf {
    let home = dir.scratch("home");
    std::fs::create_dir_all(&home).unwrap();
    let file = format!(
        "[providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\n\n[agents.default]\nmodel = \"local:m-default\"\nsystem_prompt = \"default\"\n\n[agents.coder]\nmodel = \"local:m-coder\"\nsystem_prompt = \"coder\"\ntools = {{ allow = [\"add\", \"echo\"] }}\n\n[agents.coder.approvals]\nrules = [{{ tool = \"echo\", permission = \"ask\" }}]\n",
        fake.openai_base_url()
    );
    std::fs::write(home.join("wasmclaw.toml"), file).unwrap();
    home
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_runs_each_command_from_its_input_and_the_model_sees_none() {
    let fake = model(|_| Reply::text("ok")).await;
    let dir = PluginDir::new();
    dir.add("echo");
    let home = cli_home(&dir, &fake);
    let plugins = dir.path().display().to_string();
    let input = "/help\n/agent\n/agent coder\n/tools\nhello\n/usage\n/model local:big\nagain\n/session\n/bogus\n/quit\n";
    let args = ["--plugins", plugins.as_str(), "chat", "--session", "c"];
    let (code, out, err) = wasmclaw_tests::run_wasmclaw(&home, &[], &args, input).await;
    assert_eq!(code, 0, "{err}");
    // Piped input is not echoed: a reply follows the prompt on its line.
    let indented: Vec<&str> = (out.lines())
        .map(|l| l.trim_start_matches("> "))
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| !l.starts_with('/') && !l.starts_with("  ") && !l.starts_with('['))
        .collect();
    assert_eq!(
        indented,
        [
            "agent default (agents: coder, default)",
            "agent coder from the next turn on",
            "add, echo",
            "1 turns: 10 tokens in, 5 out; the last: 10 in, 5 out; context: about 107 tokens",
            "model local:big from the next turn on",
            "session c: agent coder, model local:big, policy steer, idle; 4 messages, 2 turns",
            "unknown command /bogus; the commands are:",
        ],
        "{out}"
    );
    for line in HELP.lines() {
        assert!(out.contains(&format!("  {line}\n")), "{line}: {out}");
    }
    assert_eq!(
        asked(&fake),
        [["coder", "hello", "m-coder"], ["coder", "again", "big"]]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn run_approves_by_its_flag_and_without_a_terminal_denies_saying_why() {
    let fake = model(|body| {
        if wasmclaw_tests::fake_model::after_tool_result(body) {
            let result = roles_and_texts(body).last().unwrap().1.clone();
            Reply::text(format!("tool said: {result}"))
        } else {
            Reply::tool("c1", "echo", json!({"text": "hi"}))
        }
    })
    .await;
    let dir = PluginDir::new();
    dir.add("echo");
    let home = cli_home(&dir, &fake);
    let plugins = dir.path().display().to_string();
    for (approve, answer, note) in [
        (
            "allow",
            "tool said: hi",
            "tool echo: allowed by --approve allow",
        ),
        (
            "deny",
            "tool said: error (denied): tool 'echo' was not approved: it was denied (note: denied by --approve deny)",
            "tool echo: denied by --approve deny",
        ),
        (
            "ask",
            "tool said: error (denied): tool 'echo' was not approved: it was denied (note: no terminal to ask on: run with --approve allow or --approve deny)",
            "tool echo: no terminal to ask on: run with --approve allow or --approve deny",
        ),
    ] {
        let args = [
            "--plugins",
            plugins.as_str(),
            "run",
            "--agent",
            "coder",
            "--approve",
            approve,
            "-m",
            "go",
        ];
        let (code, out, err) = wasmclaw_tests::run_wasmclaw(&home, &[], &args, "").await;
        assert_eq!(code, 0, "{approve}: {err}");
        assert_eq!(out.trim_end(), answer, "{approve}");
        assert!(err.contains(note), "{approve}: {err}");
    }
}

/// Reads `out` until `text` has appeared `times` times in all it read;
/// what it read.
async fn read_until(
    out: &mut (impl tokio::io::AsyncRead + Unpin),
    seen: &mut String,
    text: &str,
    times: usize,
) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    while seen.matches(text).count() < times {
        let n = tokio::time::timeout(LIMIT, out.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("{text:?} did not come; seen:\n{seen}"))
            .unwrap();
        assert!(n > 0, "the output ended before {text:?}; seen:\n{seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_on_a_terminal_asks_about_a_call_and_takes_the_answer() {
    use tokio::io::AsyncWriteExt;
    let fake = model(|body| {
        if wasmclaw_tests::fake_model::after_tool_result(body) {
            let result = roles_and_texts(body).last().unwrap().1.clone();
            Reply::text(format!("tool said: {result}"))
        } else {
            Reply::tool("c1", "echo", json!({"text": "hi"}))
        }
    })
    .await;
    let dir = PluginDir::new();
    dir.add("echo");
    let home = cli_home(&dir, &fake);
    // A real terminal: `script` runs chat on a pty and relays its input.
    let command = format!(
        "{} --plugins {} chat --agent coder --session t",
        wasmclaw_tests::wasmclaw_bin().display(),
        dir.path().display()
    );
    let mut child = tokio::process::Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("WASMCLAW_HOME", &home)
        .env("RUST_LOG", "error")
        .env_remove("WASMCLAW_MODEL")
        .env_remove("WASMCLAW_CONFIG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("script (util-linux) runs");
    let mut stdin = child.stdin.take().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut seen = String::new();
    read_until(&mut out, &mut seen, "> ", 1).await;
    stdin.write_all(b"go\n").await.unwrap();
    read_until(&mut out, &mut seen, "[n] deny: ", 1).await;
    assert!(
        seen.contains("approve tool echo (agent 'coder', rule `echo`; until "),
        "{seen}"
    );
    assert!(seen.contains("\"text\": \"hi\""), "{seen}");
    // Not an answer: asked again; then for the session.
    stdin.write_all(b"maybe\n").await.unwrap();
    read_until(&mut out, &mut seen, "answer y, s, a or n", 1).await;
    stdin.write_all(b"s\n").await.unwrap();
    read_until(&mut out, &mut seen, "tool said: hi", 1).await;
    // The session's decision answers the next call: no question.
    stdin.write_all(b"go again\n").await.unwrap();
    read_until(&mut out, &mut seen, "tool said: hi", 2).await;
    stdin.write_all(b"/quit\n").await.unwrap();
    let status = tokio::time::timeout(LIMIT, child.wait())
        .await
        .unwrap_or_else(|_| panic!("the chat did not end: {seen}"))
        .unwrap();
    assert!(status.success(), "{seen}");
    assert_eq!(seen.matches("approve tool echo").count(), 1, "{seen}");
}
