//! The example plugins in `plugins/`, loaded with the grants files they ship
//! with: listing, good calls, bad arguments and their grants' limits.

use std::sync::Arc;

use serde_json::{Value, json};
use wasmclaw::plugin::{ErrorKind, Plugins};
use wasmclaw_tests::{PluginDir, ctx, example_src};

const EXAMPLES: [&str; 4] = ["calculator", "files", "text", "time"];

/// All four examples with their shipped grants; `../workspace` exists.
async fn examples() -> (PluginDir, Arc<Plugins>) {
    let dir = PluginDir::new();
    dir.scratch("workspace");
    for name in EXAMPLES {
        dir.add(name);
        let grants =
            std::fs::read_to_string(example_src(name).join(format!("{name}.toml"))).unwrap();
        dir.grants(name, &grants);
    }
    let plugins = dir.load().await;
    (dir, plugins)
}

async fn call(plugins: &Plugins, tool: &str, args: Value) -> Result<String, (ErrorKind, String)> {
    plugins
        .call(&ctx(), tool, &args.to_string())
        .await
        .map_err(|e| (e.kind, e.message))
}

#[tokio::test(flavor = "multi_thread")]
async fn every_example_loads_with_its_tools() {
    let (_dir, plugins) = examples().await;
    let catalog = plugins.catalog();
    let names: Vec<&str> = catalog.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "calculate",
            "date_add",
            "date_diff",
            "json_query",
            "list_files",
            "now",
            "read_file",
            "regex_find",
            "regex_replace",
            "search_files",
            "word_count",
            "write_file"
        ]
    );
    for tool in catalog.tools() {
        assert!(
            !tool.description.is_empty(),
            "{} has no description",
            tool.name
        );
        assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn calculator() {
    let (_dir, p) = examples().await;
    assert_eq!(
        call(&p, "calculate", json!({"expression": "2 + 3 * (4 - 1)"})).await,
        Ok("11".into())
    );
    assert_eq!(
        call(&p, "calculate", json!({"expression": "1/0"})).await,
        Err((
            ErrorKind::InvalidInput,
            "division by zero at column 2".into()
        ))
    );
    assert_eq!(
        call(&p, "calculate", json!({"expression": "2 * (3"})).await,
        Err((
            ErrorKind::InvalidInput,
            "missing ')' for the '(' at column 5".into()
        ))
    );
    let err = call(&p, "calculate", json!({"expr": "1"}))
        .await
        .unwrap_err();
    assert_eq!(err.0, ErrorKind::InvalidInput);
    assert!(
        err.1.starts_with("invalid arguments for calculate: "),
        "{}",
        err.1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn files_stay_inside_the_granted_workspace() {
    let (dir, p) = examples().await;
    assert_eq!(
        call(
            &p,
            "write_file",
            json!({"path": "notes/a.txt", "content": "alpha\nbeta\n"})
        )
        .await,
        Ok("wrote 11 bytes to 'notes/a.txt' (now 11 bytes)".into())
    );
    assert_eq!(
        std::fs::read_to_string(dir.scratch("workspace").join("notes/a.txt")).unwrap(),
        "alpha\nbeta\n"
    );
    assert_eq!(
        call(&p, "read_file", json!({"path": "notes/a.txt"})).await,
        Ok("alpha\nbeta\n".into())
    );
    assert_eq!(
        call(&p, "list_files", json!({"recursive": true})).await,
        Ok("notes/\nnotes/a.txt (11 bytes)".into())
    );
    assert_eq!(
        call(&p, "search_files", json!({"pattern": "beta"})).await,
        Ok("notes/a.txt:2: beta".into())
    );
    assert_eq!(
        call(&p, "read_file", json!({"path": "../etc/passwd"})).await,
        Err((
            ErrorKind::Denied,
            "'../etc/passwd' leads outside the workspace; paths are relative to the workspace and cannot go above it".into()
        ))
    );
    assert_eq!(
        call(&p, "read_file", json!({"path": "nope.txt"})).await,
        Err((ErrorKind::NotFound, "'nope.txt' does not exist".into()))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn text() {
    let (_dir, p) = examples().await;
    let counts: Value = serde_json::from_str(
        &call(&p, "word_count", json!({"text": "one two\nthree"}))
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        counts,
        json!({"bytes": 13, "characters": 13, "lines": 2, "words": 3})
    );
    let replaced: Value = serde_json::from_str(
        &call(
            &p,
            "regex_replace",
            json!({"text": "a1b22", "pattern": "[0-9]+", "replacement": "#"}),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    assert_eq!(replaced, json!({"replacements": 2, "text": "a#b#"}));
    assert_eq!(
        call(
            &p,
            "json_query",
            json!({"json": r#"{"items":[{"name":"x"}]}"#, "pointer": "/items/0/name"})
        )
        .await,
        Ok("\"x\"".into())
    );
    let err = call(&p, "regex_find", json!({"text": "x", "pattern": "("}))
        .await
        .unwrap_err();
    assert_eq!(err.0, ErrorKind::InvalidInput);
    assert!(err.1.contains("unclosed group"), "{}", err.1);
}

#[tokio::test(flavor = "multi_thread")]
async fn time() {
    let (_dir, p) = examples().await;
    let diff: Value = serde_json::from_str(
        &call(
            &p,
            "date_diff",
            json!({"from": "2024-01-01", "to": "2024-03-01"}),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    assert_eq!(diff["total_days"], 60);
    assert_eq!(diff["calendar"], "2 months");
    let added: Value = serde_json::from_str(
        &call(
            &p,
            "date_add",
            json!({"date": "2024-01-31", "duration": "1 month"}),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        added,
        json!({"result": "2024-02-29", "unix_seconds": 1709164800, "weekday": "Thursday"})
    );
    let now: Value = serde_json::from_str(&call(&p, "now", json!({})).await.unwrap()).unwrap();
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        (now["unix_seconds"].as_i64().unwrap() - unix).abs() <= 5,
        "{now}"
    );
}
