//! Named agents served as MCP tools, driven by the official Python SDK's
//! client (`tests/python/mcp_agent_client.py`) over `wasmclaw mcp`.
//!
//! The configuration serves the agent `helper` as the tool `agent__helper`
//! (`[mcp.server] agents`). Both agents put `echo` under an `ask` rule, so a
//! call of it waits for approval: the client's user is asked through MCP
//! elicitation (an `elicitation/create` request on 2025-11-25, an
//! `input_required` round on 2026-07-28), and a client that offers no
//! elicitation gets `[mcp.server] approve`'s default: denied, saying why.

use std::time::Duration;

use serde_json::{Value, json};
use wasmclaw_tests::fake_model::{FakeModel, Options, Reply, Responder, ToolCallReply};
use wasmclaw_tests::{PluginDir, wasmclaw_bin};

/// The whole client run: a hang fails the test.
const LIMIT: Duration = Duration::from_secs(120);

/// The model: `echo TEXT` calls `echo`; after a tool result it says what
/// the tool said; anything else it answers `done: TEXT`.
async fn model() -> FakeModel {
    let respond = |body: &Value| {
        let messages = body["messages"].as_array().unwrap();
        let last = messages.last().unwrap();
        if last["role"] == "tool" {
            let said = last["content"].as_str().unwrap_or_default();
            return Reply::text(format!("the tool said: {said}"));
        }
        let user = last["content"].as_str().unwrap_or_default();
        match user.strip_prefix("echo ") {
            Some(text) => Reply::ToolCalls {
                text: String::new(),
                calls: vec![ToolCallReply {
                    id: "c1".into(),
                    name: "echo".into(),
                    arguments: json!({ "text": text }),
                }],
            },
            None => Reply::text(format!("done: {user}")),
        }
    };
    let options = Options {
        responder: Some(Responder::new(respond)),
        ..Options::default()
    };
    FakeModel::start_with(options, []).await
}

fn config(fake: &FakeModel) -> String {
    format!(
        r#"[providers.ollama]
base_url = "{}"

[agents.default]
model = "ollama:m"
approvals = {{ rules = [{{ tool = "echo", permission = "ask" }}] }}

[agents.helper]
model = "ollama:m"
approvals = {{ rules = [{{ tool = "echo", permission = "ask" }}] }}

[mcp.server]
agents = ["helper"]
"#,
        fake.openai_base_url()
    )
}

/// Runs the client with `revision` and `answer` against `wasmclaw mcp`.
async fn run(revision: &str, answer: &str) -> (Value, FakeModel) {
    let fake = model().await;
    let dir = PluginDir::new();
    dir.add("echo");
    let home = dir.scratch("home");
    let file = dir.scratch("etc").join("wasmclaw.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, config(&fake)).unwrap();
    let mut args = vec![
        revision.to_string(),
        answer.to_string(),
        wasmclaw_bin().display().to_string(),
    ];
    let plugins = dir.path();
    let flags = [
        "--home",
        home.to_str().unwrap(),
        "--plugins",
        plugins.to_str().unwrap(),
        "--config",
        file.to_str().unwrap(),
        "mcp",
    ];
    args.extend(flags.map(String::from));
    let out = wasmclaw_tests::python::run_script("mcp_agent_client.py", &args, LIMIT).await;
    (out, fake)
}

/// What every run sees, whatever the answer: the tools and the plain task.
fn check_common(out: &Value) {
    let tools: Vec<&str> = (out["tools"].as_array().unwrap().iter())
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"agent__helper") && tools.contains(&"echo"),
        "{tools:?}"
    );
    assert!(
        !tools.contains(&"agent__default"),
        "only the agents named are served: {tools:?}"
    );
    assert_eq!(
        out["agent_schema"],
        json!({
            "type": "object",
            "properties": {"task": {
                "type": "string",
                "description": "What the agent is to do, with everything it needs to know"
            }},
            "required": ["task"],
            "additionalProperties": false
        })
    );
    assert_eq!(
        out["plain"],
        json!({"is_error": false, "text": ["done: say hi"]})
    );
    assert_eq!(
        out["no_task"],
        json!({"is_error": true, "text": ["error (invalid-input): give `task`, a string: what the agent is to do"]})
    );
    assert_eq!(
        out["forged"],
        "unknown requestState: the call it named has ended, or was another tool's"
    );
}

/// The two questions asked, the agent's `echo` then the direct one.
fn check_questions(out: &Value) {
    let asked = out["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(
        asked[0],
        json!({
            "message": "Allow the tool call `echo`? It asks because of: agent 'helper', rule `echo`.\n{\n  \"text\": \"secret-1\"\n}\nAccept to allow it, decline to deny it.",
            "fields": ["scope"]
        })
    );
    assert!(
        asked[1]["message"]
            .as_str()
            .unwrap()
            .contains("\"direct-2\""),
        "{asked:?}"
    );
}

const NOT_APPROVED: &str = "error (denied): tool 'echo' was not approved: it was denied";

async fn accepted(revision: &str) {
    let (out, _fake) = run(revision, "accept").await;
    check_common(&out);
    check_questions(&out);
    assert_eq!(
        out["with_tool"],
        json!({"is_error": false, "text": ["the tool said: secret-1"]})
    );
    assert_eq!(
        out["direct"],
        json!({"is_error": false, "text": ["direct-2"]})
    );
    let rounds = if revision == "modern" { 2 } else { 0 };
    assert_eq!(out["rounds"], rounds, "input_required rounds");
}

async fn declined(revision: &str) {
    let (out, _fake) = run(revision, "decline").await;
    check_common(&out);
    check_questions(&out);
    let denied = format!("{NOT_APPROVED} (note: declined by the MCP client's user)");
    assert_eq!(
        out["with_tool"],
        json!({"is_error": false, "text": [format!("the tool said: {denied}")]})
    );
    assert_eq!(out["direct"], json!({"is_error": true, "text": [denied]}));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_served_as_a_tool_asks_its_approvals_by_elicitation_request() {
    accepted("handshake").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_served_as_a_tool_asks_its_approvals_in_input_required_rounds() {
    accepted("modern").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_declined_approval_denies_the_call_on_both_revisions() {
    declined("handshake").await;
    declined("modern").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_without_elicitation_is_not_asked_and_the_call_is_denied_saying_why() {
    let (out, _fake) = run("handshake", "none").await;
    check_common(&out);
    assert_eq!(out["asked"], json!([]));
    let denied = format!(
        "{NOT_APPROVED} (note: the MCP client cannot be asked (it offers no elicitation); \
         [mcp.server] approve = \"allow\" or \"deny\" decides without asking)"
    );
    assert_eq!(
        out["with_tool"],
        json!({"is_error": false, "text": [format!("the tool said: {denied}")]})
    );
    assert_eq!(out["direct"], json!({"is_error": true, "text": [denied]}));
}

/// rmcp's own client (over `/mcp` on `serve`) hands the default agent a
/// task whose model call never answers, then cancels the call: the turn is
/// interrupted and ends `aborted`, and the next task runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_agent_call_interrupts_its_turn() {
    use rmcp::ServiceExt;
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use wasmclaw::bus::Filter;
    use wasmclaw::protocol::{EventBody, EventKind, TurnStatus};
    use wasmclaw_tests::agents::openai;
    use wasmclaw_tests::fake_model::Gate;
    use wasmclaw_tests::server::{Setup, TOKEN, TestServer};

    let never = Gate::default();
    let replies = [
        Reply::Gated(never.clone(), Box::new(Reply::text("too late"))),
        Reply::text("the second task is done"),
    ];
    let fake = FakeModel::start(replies).await;
    let dir = PluginDir::new();
    dir.add("echo");
    let mut setup = Setup::default();
    setup.server.mcp.agents = vec!["default".into()];
    let server = TestServer::start(dir.load().await, vec![openai(&fake, "m", true)], setup).await;
    let filter = Filter {
        session: None,
        no_deltas: true,
        kinds: vec![EventKind::TurnBegin, EventKind::TurnEnd],
    };
    let mut events = server.core.subscribe(filter, None);
    let config =
        StreamableHttpClientTransportConfig::with_uri(server.at("/mcp")).auth_header(TOKEN);
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    let task = |text: &str| {
        let arguments = json!({ "task": text }).as_object().unwrap().clone();
        CallToolRequestParams::new("agent__default").with_arguments(arguments)
    };
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(task("wait forever")));
    let handle = (client.peer())
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .unwrap();
    let begun = tokio::time::timeout(LIMIT, events.recv())
        .await
        .expect("the turn begins")
        .unwrap();
    assert!(matches!(begun.body, EventBody::TurnBegin(_)), "{begun:?}");
    // `notifications/cancelled` for the call.
    handle
        .cancel(Some("the user changed their mind".into()))
        .await
        .unwrap();
    let event = tokio::time::timeout(LIMIT, events.recv())
        .await
        .expect("the cancelled turn ends")
        .unwrap();
    let EventBody::TurnEnd(end) = &event.body else {
        panic!("{event:?}");
    };
    assert_eq!(
        (end.status, end.reason.as_str()),
        (TurnStatus::Aborted, "interrupted")
    );
    assert_eq!(event.turn_id, begun.turn_id);
    assert!(
        event.session.as_deref().unwrap().starts_with("mcp:"),
        "{event:?}"
    );

    let answer = client.call_tool(task("then this")).await.unwrap();
    let text: Vec<String> = (answer.content.iter())
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    assert_eq!(
        (answer.is_error, text),
        (Some(false), vec!["the second task is done".to_string()])
    );
    client.cancel().await.unwrap();
    never.open();
    server.stop().await;
}
