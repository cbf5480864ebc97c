//! A bad plugin file is reported with its name and the reason in plain words,
//! and every other plugin keeps working. (A file of a WIT version this host
//! does not load: `wit_versions.rs`.)

use wasmclaw::plugin::PluginStatus;
use wasmclaw_tests::{PluginDir, ctx, load_error};

#[tokio::test(flavor = "multi_thread")]
async fn each_broken_file_has_its_own_reason_and_the_good_plugin_still_works() {
    let dir = PluginDir::new();
    dir.add("echo");
    dir.write("notes.wasm", b"just some text, not wasm");
    // The smallest valid core module: magic and version 1.
    dir.write("core.wasm", b"\0asm\x01\0\0\0");
    for broken in [
        "changed_sig",
        "list_traps",
        "bad_schema",
        "bad_name",
        "dup_within",
        "bad_json_schema",
        "extra_import",
    ] {
        dir.add(broken);
    }
    let plugins = dir.load().await;

    assert_eq!(
        load_error(&plugins, "notes"),
        r"not a WebAssembly file (it does not start with the \0asm magic bytes)"
    );
    assert_eq!(
        load_error(&plugins, "core"),
        "a core WebAssembly module, not a component: build it as a component (e.g. for the wasm32-wasip2 target) or wrap it with `wasm-tools component new`"
    );
    assert_eq!(
        load_error(&plugins, "changed_sig"),
        "function `call-tool` of wasmclaw:plugin/tool@0.1.0 does not have this host's signature (was the component built against a changed copy of the WIT?): type mismatch with parameters: expected 3-tuple, found 2-tuple"
    );
    let traps = load_error(&plugins, "list_traps");
    assert!(
        traps.starts_with(
            "list-tools failed: plugin 'list_traps' crashed (wasm `unreachable` instruction executed); its stderr ended with: "
        ),
        "{traps}"
    );
    assert!(traps.contains("list-tools exploded"), "{traps}");
    assert_eq!(
        load_error(&plugins, "bad_schema"),
        "tool \"bad_schema_tool\": input-schema must be a JSON object (a JSON Schema), found an array"
    );
    assert_eq!(
        load_error(&plugins, "bad_name"),
        "tool name \"has space\" is not accepted by model APIs: use 1 to 64 of a-z, A-Z, 0-9, '_' and '-'"
    );
    assert_eq!(
        load_error(&plugins, "dup_within"),
        "tool name \"twice\" is listed twice"
    );
    assert_eq!(
        load_error(&plugins, "bad_json_schema"),
        "tool \"bad_json_tool\": input-schema is not valid JSON: key must be a string at line 1 column 2"
    );
    assert_eq!(
        load_error(&plugins, "extra_import"),
        "it imports wasmclaw:plugin/secrets@0.1.0, which this host does not provide; it provides WASI 0.2, wasmclaw:plugin/log@0.1.0, wasmclaw:plugin/config@0.1.0 and wasmclaw:plugin/agent@0.1.0"
    );

    // Exactly one plugin loaded, and it works.
    let catalog = plugins.catalog();
    let loaded: Vec<&str> = catalog
        .plugins
        .iter()
        .filter(|s| matches!(s, PluginStatus::Loaded(_)))
        .map(|s| s.name())
        .collect();
    assert_eq!(loaded, ["echo"]);
    assert_eq!(catalog.plugins.len(), 10);
    let out = plugins
        .call(&ctx(), "echo", r#"{"text":"still here"}"#)
        .await;
    assert_eq!(out.unwrap(), "still here");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_name_belongs_to_the_file_that_sorts_first() {
    let dir = PluginDir::new();
    dir.add("echo");
    dir.add_as("dup_other", "zz_dup");
    let plugins = dir.load().await;
    assert_eq!(
        load_error(&plugins, "zz_dup"),
        "tool \"echo\" is already offered by echo.wasm; when two plugins offer the same tool, the file whose name sorts first keeps it"
    );
    assert_eq!(
        plugins
            .call(&ctx(), "echo", r#"{"text":"a"}"#)
            .await
            .unwrap(),
        "a"
    );

    // The same two components, the other way round by name.
    let dir = PluginDir::new();
    dir.add("echo");
    dir.add_as("dup_other", "aa_dup");
    let plugins = dir.load().await;
    assert!(
        load_error(&plugins, "echo").starts_with("tool \"echo\" is already offered by aa_dup.wasm")
    );
    assert_eq!(
        plugins.call(&ctx(), "echo", "{}").await.unwrap(),
        "dup_other"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_grants_file_names_the_file_and_the_field() {
    let dir = PluginDir::new();
    dir.add("echo");
    dir.grants("echo", "[limits]\nmemory = 5\n");
    let plugins = dir.load().await;
    let err = load_error(&plugins, "echo");
    let sidecar = dir.path().join("echo.toml");
    assert!(
        err.starts_with(&format!(
            "{}: unknown field `memory`, expected one of",
            sidecar.display()
        )),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_plugin_directory_is_an_empty_set() {
    let dir = PluginDir::new();
    let plugins = wasmclaw::plugin::Plugins::load_dir(
        wasmclaw_tests::runtime(),
        dir.path().join("does-not-exist"),
    )
    .await;
    assert!(plugins.catalog().plugins.is_empty());
    let err = plugins.call(&ctx(), "echo", "{}").await.unwrap_err();
    assert_eq!(err.message, "unknown tool \"echo\"; available tools: none");
}

#[tokio::test(flavor = "multi_thread")]
async fn schemas_are_compiled_when_first_seen_and_later_only_on_first_call() {
    use wasmclaw::plugin::sandbox::cache::Compiler;
    use wasmclaw::plugin::{Plugins, Runtime, RuntimeConfig};
    let cache = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        compiler: Compiler::InProcess,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let dir = PluginDir::new();
    dir.add("echo");
    let compiled = |plugins: &Plugins| -> Vec<(String, bool)> {
        let catalog = plugins.catalog();
        let tools = catalog.tools();
        tools
            .iter()
            .map(|t| (t.name.clone(), t.is_compiled()))
            .collect()
    };
    // New schemas: each is compiled (and checked) at load.
    let first = Plugins::load_dir(runtime.clone(), dir.path()).await;
    let tools = compiled(&first);
    assert!(tools.len() > 1, "{tools:?}");
    assert!(tools.iter().all(|(_, c)| *c), "{tools:?}");
    // Seen before: none is, until called.
    let again = Plugins::load_dir(runtime.clone(), dir.path()).await;
    assert!(compiled(&again).iter().all(|(_, c)| !*c));
    assert_eq!(
        again
            .call(&ctx(), "add", r#"{"a":40,"b":2}"#)
            .await
            .unwrap(),
        "42"
    );
    let err = again.call(&ctx(), "add", r#"{"a":"x"}"#).await.unwrap_err();
    assert!(
        err.message.starts_with("invalid arguments for add"),
        "{}",
        err.message
    );
    let now: Vec<(String, bool)> = compiled(&again).into_iter().filter(|(_, c)| *c).collect();
    assert_eq!(now, [("add".to_string(), true)]);
}
