//! Reload of the configuration file by a running `wasmclaw serve`: a valid
//! edit applies to the turns after it (a new agent, a new prompt), an
//! invalid one is refused and the running configuration stays; both are
//! in the event log (`config_reloaded`, `config_rejected`).

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use wasmclaw::protocol::{ConfigRejected, ConfigReloaded, EventBody};
use wasmclaw::store::Store;
use wasmclaw_tests::fake_model::{Reply, fake_model, roles_and_texts};
use wasmclaw_tests::{PluginDir, wasmclaw_bin};

const LIMIT: Duration = Duration::from_secs(60);
const TOKEN: &str = "reload-token-0123456789";

fn config(base_url: &str, agents: &str) -> String {
    format!(
        "[providers.local]\nkind = \"openai\"\nbase_url = \"{base_url}\"\n\n[agents.default]\nmodel = \"local:m\"\n{agents}"
    )
}

async fn models(client: &reqwest::Client, url: &str) -> Vec<String> {
    let models: Value = client
        .get(format!("{url}/v1/models"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (models["data"].as_array().unwrap().iter())
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

async fn ask(client: &reqwest::Client, url: &str, session: &str, agent: Option<&str>) -> Value {
    client
        .post(format!("{url}/v1/sessions/{session}/messages?wait=true"))
        .bearer_auth(TOKEN)
        .json(&json!({"content": "hi", "agent": agent}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_applies_a_valid_edit_to_later_turns_and_refuses_an_invalid_one() {
    let fake = fake_model(|_, _| Reply::text("ok")).await;
    let dir = PluginDir::new();
    let home = dir.scratch("home");
    std::fs::create_dir_all(&home).unwrap();
    let file = home.join("wasmclaw.toml");
    let base = fake.openai_base_url();
    std::fs::write(&file, config(&base, "system_prompt = \"v1\"\n")).unwrap();
    let mut child = tokio::process::Command::new(wasmclaw_bin())
        .env("WASMCLAW_HOME", &home)
        .env("WASMCLAW_API_TOKEN", TOKEN)
        .env("RUST_LOG", "error")
        .env_remove("WASMCLAW_MODEL")
        .args(["--plugins", dir.path().to_str().unwrap()])
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = loop {
        let line = tokio::time::timeout(LIMIT, lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .expect("the server says where it serves");
        if let Some(url) = line.strip_prefix("wasmclaw serving on ") {
            break url.to_string();
        }
    };
    let client = reqwest::Client::new();
    assert_eq!(models(&client, &url).await, ["wasmclaw", "default"]);
    assert_eq!(ask(&client, &url, "a", None).await["status"], "completed");

    // A valid edit: a new prompt and a new agent, for the turns after it.
    let edited = config(
        &base,
        "system_prompt = \"v2\"\n\n[agents.coder]\nmodel = \"local:m-coder\"\nsystem_prompt = \"coder\"\n",
    );
    std::fs::write(&file, edited).unwrap();
    let deadline = tokio::time::Instant::now() + LIMIT;
    let seen = loop {
        let seen = models(&client, &url).await;
        if seen.len() == 3 || tokio::time::Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(seen, ["wasmclaw", "coder", "default"]);
    assert_eq!(ask(&client, &url, "a", None).await["status"], "completed");
    assert_eq!(
        ask(&client, &url, "c", Some("coder")).await["status"],
        "completed"
    );

    // An invalid edit: refused whole; the running configuration stays.
    std::fs::write(
        &file,
        config(&base, "system_prompt = \"v3\"\nmodle = \"x\"\n"),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        models(&client, &url).await,
        ["wasmclaw", "coder", "default"]
    );
    assert_eq!(ask(&client, &url, "a", None).await["status"], "completed");

    let prompts: Vec<(String, String)> = (fake.requests().iter())
        .map(|r| {
            let system = roles_and_texts(&r.body)[0].1.clone();
            (system, r.body["model"].as_str().unwrap().to_string())
        })
        .collect();
    let expected = [("v1", "m"), ("v2", "m"), ("coder", "m-coder"), ("v2", "m")];
    let expected: Vec<(String, String)> = (expected.iter())
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(prompts, expected);

    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::time::timeout(LIMIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");

    let store = Store::open(&home.join("sessions.db")).unwrap();
    let events = store.events(None, 0, 100_000).await.unwrap();
    let reloads: Vec<&ConfigReloaded> = (events.iter())
        .filter_map(|e| match &e.body {
            EventBody::ConfigReloaded(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(reloads.len(), 1, "{reloads:?}");
    assert_eq!(reloads[0].file, file.display().to_string());
    assert!(
        reloads[0]
            .changed
            .contains(&"agents.default.system_prompt".to_string()),
        "{reloads:?}"
    );
    assert!(
        reloads[0]
            .changed
            .iter()
            .any(|k| k.starts_with("agents.coder")),
        "{reloads:?}"
    );
    assert!(reloads[0].restart_needed.is_empty(), "{reloads:?}");
    let rejected: Vec<&ConfigRejected> = (events.iter())
        .filter_map(|e| match &e.body {
            EventBody::ConfigRejected(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(
        rejected[0].error,
        format!(
            "{}:8:1: agents.default.modle: unknown key; did you mean `model`? (expected one of: model, system_prompt, system_prompt_file, tools, max_iterations, max_refusals, max_tokens, token_budget, session_policy, commands, subturns, compaction, approvals)",
            file.display()
        )
    );
}
