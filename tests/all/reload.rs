//! Files added, replaced or removed while the host runs are picked up, and
//! calls in flight finish on the version they started with.

use std::time::Duration;

use tokio::sync::mpsc;
use wasmclaw::plugin::WitVersion;
use wasmclaw::plugin::catalog::PluginChange;
use wasmclaw_tests::gate::{ToolGates, gate_output};
use wasmclaw_tests::{PluginDir, ctx, guest};

const WAIT: Duration = Duration::from_secs(20);

async fn next_changes(rx: &mut mpsc::UnboundedReceiver<Vec<PluginChange>>) -> Vec<PluginChange> {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("the watcher reported a change in time")
        .expect("the watcher is running")
}

#[tokio::test(flavor = "multi_thread")]
async fn add_replace_and_remove_while_running() {
    let dir = PluginDir::new();
    let gates = ToolGates::new();
    dir.add("hostile");
    dir.grants(
        "hostile",
        &format!("{}[limits]\ntimeout_ms = 60000\n", gates.grants()),
    );
    let plugins = dir.load().await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _watch = plugins.watch(Some(tx)).unwrap();

    // Added.
    dir.add("echo");
    let changes = next_changes(&mut rx).await;
    assert_eq!(
        changes,
        [PluginChange::Loaded {
            name: "echo".into(),
            tools: ["echo", "context", "add", "fail", "log", "count"]
                .map(String::from)
                .to_vec(),
            wit_version: WitVersion::V0_2,
        }]
    );
    assert_eq!(
        plugins.call(&ctx(), "add", r#"{"a":1,"b":1}"#).await,
        Ok("2".into())
    );

    // Replaced while a call runs: the call finishes on the old version.
    // The call is inside the old version, and stays there until the gate
    // opens, after the reload.
    let in_flight = {
        let plugins = plugins.clone();
        tokio::spawn(async move {
            plugins
                .call(&ctx(), "wait_gate", r#"{"name":"reload"}"#)
                .await
        })
    };
    gates.wait_started("reload", WAIT).await;
    // Write the new version beside and rename it in, as an installer would.
    let tmp = dir.path().join(".hostile.wasm.part");
    std::fs::copy(guest("dup_other"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.path().join("hostile.wasm")).unwrap();
    let changes = next_changes(&mut rx).await;
    // dup_other offers `echo`, which echo.wasm (sorting first) keeps.
    assert!(
        matches!(&changes[..], [PluginChange::Failed { name, error, .. }]
            if name == "hostile" && error.starts_with("tool \"echo\" is already offered by echo.wasm")),
        "{changes:?}"
    );
    assert!(plugins.catalog().tool("wait_gate").is_none());
    assert!(
        !in_flight.is_finished(),
        "the call ended before its gate opened"
    );
    gates.open("reload");
    let outcome = tokio::time::timeout(WAIT, in_flight)
        .await
        .expect("the call ended once its gate opened");
    assert_eq!(outcome.unwrap(), Ok(gate_output("reload")));

    // Removed.
    std::fs::remove_file(dir.path().join("echo.wasm")).unwrap();
    let changes = next_changes(&mut rx).await;
    // Without echo.wasm the replaced hostile.wasm now keeps `echo`.
    assert!(
        changes.contains(&PluginChange::Unloaded {
            name: "echo".into()
        }),
        "{changes:?}"
    );
    assert!(
        changes.contains(&PluginChange::Loaded {
            name: "hostile".into(),
            tools: vec!["echo".into()],
            wit_version: WitVersion::V0_2,
        }),
        "{changes:?}"
    );
    assert_eq!(
        plugins.call(&ctx(), "echo", "{}").await,
        Ok("dup_other".into())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_file_dropped_in_is_reported_and_the_rest_keeps_working() {
    let dir = PluginDir::new();
    dir.add("echo");
    let plugins = dir.load().await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _watch = plugins.watch(Some(tx)).unwrap();

    dir.write("broken.wasm", b"\0asm\x01\0\0\0");
    let changes = next_changes(&mut rx).await;
    assert_eq!(
        changes,
        [PluginChange::Failed {
            name: "broken".into(),
            file: dir.path().join("broken.wasm"),
            error: "a core WebAssembly module, not a component: build it as a component (e.g. for the wasm32-wasip2 target) or wrap it with `wasm-tools component new`".into(),
        }]
    );
    assert_eq!(
        plugins.call(&ctx(), "echo", r#"{"text":"x"}"#).await,
        Ok("x".into())
    );

    // A grants change alone reloads the plugin with the new limits.
    dir.grants("echo", "[limits]\noutput_kib = 1\n");
    let changes = next_changes(&mut rx).await;
    assert!(
        matches!(&changes[..], [PluginChange::Loaded { name, .. }] if name == "echo"),
        "{changes:?}"
    );
    let long = "y".repeat(2000);
    let err = plugins
        .call(
            &ctx(),
            "echo",
            &serde_json::json!({ "text": long }).to_string(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "plugin 'echo' returned 2000 bytes, over its output limit of 1 KiB"
    );
}
