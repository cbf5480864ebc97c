//! Plugins written in Python, JavaScript, C, Zig and Go go through the same
//! checks as the Rust examples: they load with their tools listed, a good
//! call gives the exact result, a bad argument gives the plugin's own
//! `invalid-input` error, and a call that breaks the memory limit is stopped
//! with the exact error while the next call works. Then the hook written in
//! Python in a real turn, and `wasmclaw new-plugin` for every language: the
//! folder it makes builds with its own script and loads with the grants
//! file it wrote; its hook templates (Rust, Python) load as hooks and act in
//! a turn.
//!
//! The plugins are built by `make lang-plugins` (the README's test command
//! runs it) into `target/guests/lang`.

use serde_json::{Value, json};
use wasmclaw::plugin::loader::Plugin;
use wasmclaw::plugin::policy::grants::Grants;
use wasmclaw::plugin::{ErrorKind, PluginStatus, ToolError};
use wasmclaw::protocol::{EventBody, HookDecision, HookVerdict};
use wasmclaw_tests::agents::{agent, drain, openai, tool_outputs};
use wasmclaw_tests::fake_model::{FakeModel, Reply};
use wasmclaw_tests::{PluginDir, ctx, run_wasmclaw};

/// One plugin and what to check of it.
struct Case {
    plugin: &'static str,
    /// Every tool it lists, in order.
    tools: &'static [&'static str],
    /// (tool, arguments, the exact result).
    good: (&'static str, Value, &'static str),
    /// (tool, arguments that fit the schema but not the tool, the exact message).
    bad: (&'static str, Value, &'static str),
    /// Enough linear memory to start and answer `good`.
    memory_mib: u64,
    /// (tool, arguments): a call whose input fits the schema but not
    /// `memory_mib`.
    big: (&'static str, String),
}

/// `head`, then `unit` repeated up to `bytes` in all.
fn text_of(head: &str, unit: &str, bytes: usize) -> String {
    head.to_string() + &unit.repeat((bytes - head.len()) / unit.len())
}

/// A result short enough for an assertion message.
fn short(result: &Result<String, ToolError>) -> String {
    let text = format!("{result:?}");
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
        None => text,
    }
}

async fn check(case: Case) {
    let dir = PluginDir::new();
    dir.add_lang(case.plugin);
    dir.grants(
        case.plugin,
        &format!("[limits]\nmemory_mib = {}\n", case.memory_mib),
    );
    let plugins = dir.load().await;

    let catalog = plugins.catalog();
    let loaded = match &catalog.plugins[..] {
        [PluginStatus::Loaded(p)] => p,
        other => panic!("{}: expected one loaded plugin, got {other:?}", case.plugin),
    };
    let tools: Vec<&str> = loaded.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, case.tools, "{}: the tools listed", case.plugin);

    let (tool, args, want) = &case.good;
    let got = plugins.call(&ctx(), tool, &args.to_string()).await;
    assert_eq!(got.as_deref(), Ok(*want), "{}: {tool} {args}", case.plugin);

    let (tool, args, message) = &case.bad;
    let got = plugins.call(&ctx(), tool, &args.to_string()).await;
    assert_eq!(
        got,
        Err(ToolError {
            kind: ErrorKind::InvalidInput,
            message: message.to_string(),
            retryable: false,
        }),
        "{}: {tool} {args}",
        case.plugin
    );

    let (tool, args) = &case.big;
    let got = plugins.call(&ctx(), tool, args).await;
    let want = Err(ToolError {
        kind: ErrorKind::Internal,
        message: format!(
            "plugin '{}' exceeded its memory limit of {} MiB and was stopped",
            case.plugin, case.memory_mib
        ),
        retryable: false,
    });
    assert!(
        got == want,
        "{}: {tool} with {} bytes: {}",
        case.plugin,
        args.len(),
        short(&got)
    );

    // The next call, in a fresh instance, is as good as the first.
    let (tool, args, want) = &case.good;
    let got = plugins.call(&ctx(), tool, &args.to_string()).await;
    assert_eq!(
        got.as_deref(),
        Ok(*want),
        "{}: after the breach",
        case.plugin
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn python_csv_stats() {
    check(Case {
        plugin: "csv_stats",
        tools: &["csv_summary", "csv_query"],
        good: (
            "csv_query",
            json!({
                "csv": "name,age\nAnn,34\nBob,29\nCid,NA\n",
                "where": [{"column": "age", "op": ">=", "value": 30}],
                "select": ["name"]
            }),
            "name\nAnn\n# 1 of 3 row(s) matched",
        ),
        bad: (
            "csv_query",
            json!({
                "csv": "name,age\nAnn,34\n",
                "where": [{"column": "agee", "op": "=", "value": 1}]
            }),
            "where: no column named 'agee'; the columns are: name, age",
        ),
        memory_mib: 16,
        big: (
            "csv_summary",
            json!({"csv": text_of("a,b,c,d,e,f\n", "12,3.5,x,y,7,zz\n", 1 << 20)}).to_string(),
        ),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn js_html_text() {
    check(Case {
        plugin: "html_text",
        tools: &["html_to_text", "markdown_to_text"],
        good: (
            "html_to_text",
            json!({
                "html": "<h1>Title</h1><p>Hello <b>world</b> &amp; <a href=\"/docs\">docs</a>.</p><ul><li>one</li><li>two</li></ul>",
                "base_url": "https://example.com/"
            }),
            "Title\n\nHello world & docs (https://example.com/docs).\n\n- one\n- two",
        ),
        bad: (
            "html_to_text",
            json!({"html": "<a href=\"/x\">x</a>", "base_url": "not a url"}),
            "base_url: expected an absolute http or https address such as \"https://example.com/docs/\", got \"not a url\"",
        ),
        memory_mib: 16,
        big: (
            "html_to_text",
            json!({"html": text_of("<html><body>", "<p>Some <b>bold</b> text.</p>\n", 2 << 20)})
                .to_string(),
        ),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c_checksum() {
    check(Case {
        plugin: "checksum",
        tools: &["checksum", "checksum_verify"],
        good: (
            "checksum",
            json!({"text": "abc", "algorithm": "sha256"}),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ),
        bad: (
            "checksum_verify",
            json!({"text": "abc", "expected": "sha256:ba7816bf"}),
            "argument `expected` has 8 hex digits; a sha256 digest has 64",
        ),
        memory_mib: 1,
        big: (
            "checksum",
            json!({"text": text_of("", "0123456789abcdef", 2 << 20), "algorithm": "crc32"})
                .to_string(),
        ),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn zig_semver() {
    // A thousand versions to sort: more than 1 MiB of Zig heap.
    let versions: Vec<String> = (0..1000)
        .map(|i| format!("{}.{}.{}", i % 7, (i * 31) % 101, (i * 17) % 997))
        .collect();
    check(Case {
        plugin: "semver",
        tools: &["semver_compare", "semver_satisfies", "semver_sort"],
        good: (
            "semver_satisfies",
            json!({"version": "1.4.2", "range": "^1.2.0"}),
            r#"{"satisfies":true,"range":">=1.2.0 <2.0.0-0"}"#,
        ),
        bad: (
            "semver_compare",
            json!({"a": "1.2", "b": "1.0.0"}),
            "argument `a` \"1.2\" must be MAJOR.MINOR.PATCH, like 1.4.2",
        ),
        memory_mib: 1,
        big: ("semver_sort", json!({ "versions": versions }).to_string()),
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn go_when() {
    // A thousand holidays over 109 years: more than 5 MiB of Go heap.
    let holidays: Vec<String> = (0..1000)
        .map(|i| {
            format!(
                "{:04}-{:02}-{:02}",
                2000 + i / (12 * 28),
                i / 28 % 12 + 1,
                i % 28 + 1
            )
        })
        .collect();
    check(Case {
        plugin: "when",
        tools: &["datetime_add", "datetime_diff", "timezone_convert", "business_days"],
        good: (
            "timezone_convert",
            json!({"datetime": "2024-03-10T14:30:00Z", "to": "Asia/Tokyo"}),
            "{\n  \"result\": \"2024-03-10T23:30:00+09:00\",\n  \"timezone\": \"Asia/Tokyo\",\n  \"abbreviation\": \"JST\",\n  \"utc_offset\": \"+09:00\",\n  \"dst\": false,\n  \"weekday\": \"Sunday\",\n  \"utc\": \"2024-03-10T14:30:00Z\",\n  \"unix_seconds\": 1710081000\n}",
        ),
        bad: (
            "timezone_convert",
            json!({"datetime": "2024-01-01T00:00:00Z", "to": "Mars/Olympus"}),
            "argument \"to\": unknown time zone \"Mars/Olympus\"; expected an IANA time zone name such as \"Europe/Paris\", \"America/New_York\" or \"UTC\" (case-sensitive), or a fixed offset like \"+05:30\"",
        ),
        memory_mib: 5,
        big: (
            "business_days",
            json!({"start": "2000-01-01", "end": "2109-01-01", "holidays": holidays}).to_string(),
        ),
    })
    .await;
}

/// The Python hook `pii_guard`, with the grants file it ships with, hides
/// personal data in a tool's result before the model reads it, and leaves a
/// result without any alone.
#[tokio::test(flavor = "multi_thread")]
async fn python_pii_guard_hides_personal_data_in_results() {
    let dir = PluginDir::new();
    dir.add("echo");
    dir.add_lang("pii_guard");
    let plugins = dir.load().await;
    for status in &plugins.catalog().plugins {
        if let PluginStatus::Failed { name, error, .. } = status {
            panic!("{name} did not load: {error}");
        }
    }
    let personal = "Ann <ann@example.com>, +49 30 1234567, card 4111 1111 1111 1111";
    let events = echo_turn(plugins, [personal, "nothing personal"]).await;
    let outputs = tool_outputs(&events);
    assert_eq!(
        outputs,
        ["Ann <[email]>, [phone], card [card]", "nothing personal"]
    );
    let decisions: Vec<(&str, HookVerdict, Option<&str>)> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::HookDecision(HookDecision {
                hook,
                decision,
                call_id,
                ..
            }) => Some((hook.as_str(), *decision, call_id.as_deref())),
            _ => None,
        })
        .collect();
    assert_eq!(decisions, [("pii_guard", HookVerdict::Replace, Some("c1"))]);
}

/// A turn in which the model calls `echo` with each text in turn, then
/// answers; every event it published.
async fn echo_turn(
    plugins: std::sync::Arc<wasmclaw::plugin::Plugins>,
    texts: [&str; 2],
) -> Vec<std::sync::Arc<wasmclaw::protocol::Event>> {
    let fake = FakeModel::start([
        Reply::tool("c1", "echo", json!({ "text": texts[0] })),
        Reply::tool("c2", "echo", json!({ "text": texts[1] })),
        Reply::text("done"),
    ])
    .await;
    let (agent, mut sub) = agent(
        plugins,
        vec![openai(&fake, "fake-gpt", false)],
        wasmclaw::store::Store::open_in_memory().unwrap(),
    );
    agent.run_turn("s", "echo").await;
    drain(&mut sub)
}

/// `wasmclaw new-plugin --lang LANG` makes a folder whose `build.sh` builds
/// a component that loads with the grants file written beside it, as it is
/// (it grants nothing: the defaults, read from that file), and whose one
/// tool `NAME_words` counts lines, words, characters and bytes.
fn scaffold(lang: &str) {
    let parent = tempfile::tempdir().unwrap();
    let wasm = wasmclaw_tests::scaffold::build(lang, parent.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let dir = PluginDir::new();
        let installed = install_with_grants(&dir, &wasm);
        let plugins = dir.load().await;
        let loaded = only_loaded(&plugins, lang);
        assert_eq!(
            loaded.grants,
            Grants {
                source: Some(installed.with_extension("toml")),
                ..Grants::default()
            },
            "{lang}: the grants of the scaffold"
        );
        let tool = format!("my_{lang}_tool_words");
        let got = plugins
            .call(
                &ctx(),
                &tool,
                &json!({"text": "one two\nthree é"}).to_string(),
            )
            .await
            .unwrap_or_else(|e| panic!("{lang}: {tool}: {e:?}"));
        let got: Value = serde_json::from_str(&got).unwrap();
        let want = json!({"lines": 2, "words": 4, "characters": 15, "bytes": 16});
        assert_eq!(got, want, "{lang}");
    });
}

/// Copies `wasm` and the `NAME.toml` beside it into `dir`; returns where
/// the component went.
fn install_with_grants(dir: &PluginDir, wasm: &std::path::Path) -> std::path::PathBuf {
    let name = wasm.file_name().unwrap().to_str().unwrap();
    let grants = std::fs::read(wasm.with_extension("toml")).expect("new-plugin writes NAME.toml");
    dir.write(&name.replace(".wasm", ".toml"), &grants);
    dir.write(name, &std::fs::read(wasm).unwrap())
}

fn only_loaded(plugins: &wasmclaw::plugin::Plugins, what: &str) -> std::sync::Arc<Plugin> {
    match &plugins.catalog().plugins[..] {
        [PluginStatus::Loaded(p)] => p.clone(),
        other => panic!("{what}: expected one loaded plugin, got {other:?}"),
    }
}

/// `wasmclaw new-plugin --lang LANG --kind hook` makes a hook plugin that
/// loads with its grants file as it is: `plugins list` shows its one
/// subscription, and in a turn it denies the tool call whose arguments
/// mention "rm -rf" (its default) and lets the other through.
fn hook_scaffold(lang: &str, denied: &str) {
    let parent = tempfile::tempdir().unwrap();
    let wasm = wasmclaw_tests::scaffold::build_kind(lang, "hook", parent.path());
    let name = format!("my_{lang}_hook");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join("plugins");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&wasm, dir.join(format!("{name}.wasm"))).unwrap();
        std::fs::copy(wasm.with_extension("toml"), dir.join(format!("{name}.toml"))).unwrap();
        let (code, out, err) = run_wasmclaw(home.path(), &[], &["plugins", "list"], "").await;
        assert_eq!(code, 0, "{lang}: {err}");
        assert_eq!(
            out,
            format!(
                "{name}.wasm  ok  hook-plugin@{}  grants: none  hook budget: 16 MiB memory, 50 ms per call\n    hook before-tool (priority 50)\n",
                wasmclaw::plugin::bindings::WitVersion::LATEST
            ),
            "{lang}: plugins list"
        );

        let plugins = PluginDir::new();
        plugins.add("echo");
        let grants = install_with_grants(&plugins, &wasm).with_extension("toml");
        // The turn checks the hook's decisions, not its speed: on a loaded
        // machine an interpreted hook can take more than the default 50 ms.
        let mut text = std::fs::read_to_string(&grants).unwrap();
        text.push_str("\n[hooks]\ntimeout_ms = 5000\n");
        std::fs::write(&grants, text).unwrap();
        let outputs = tool_outputs(&echo_turn(plugins.load().await, ["rm -rf /", "ls"]).await);
        assert_eq!(
            outputs,
            [
                format!("error (denied): denied by hook '{name}': its arguments mention {denied}"),
                "ls".to_string()
            ],
            "{lang}"
        );
    });
}

#[test]
fn new_plugin_rust_hook() {
    hook_scaffold("rust", "\"rm -rf\"");
}

#[test]
fn new_plugin_python_hook() {
    hook_scaffold("python", "'rm -rf'");
}

#[test]
fn new_plugin_rust() {
    scaffold("rust");
}

#[test]
fn new_plugin_python() {
    scaffold("python");
}

#[test]
fn new_plugin_go() {
    scaffold("go");
}

#[test]
fn new_plugin_js() {
    scaffold("js");
}

#[test]
fn new_plugin_c() {
    scaffold("c");
}

#[test]
fn new_plugin_zig() {
    scaffold("zig");
}

/// A Python plugin whose tool raises: the error names the exception, with
/// its traceback, not only the runtime's "unexpected exception"; the next
/// call, in a fresh instance, works.
#[test]
fn a_python_exception_is_named_in_the_tool_error() {
    let parent = tempfile::tempdir().unwrap();
    let folder = wasmclaw_tests::scaffold::create("python", "tool", "raises", parent.path());
    let app = folder.join("app.py");
    let source = std::fs::read_to_string(&app).unwrap();
    let line = "        text = json.loads(arguments)[\"text\"]\n";
    assert!(source.contains(line), "the template changed: {source}");
    let raising = format!("{line}        if text == \"boom\":\n            raise KeyError('x')\n");
    std::fs::write(&app, source.replacen(line, &raising, 1)).unwrap();
    let wasm = wasmclaw_tests::scaffold::rebuild("python", &folder);

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let dir = PluginDir::new();
        dir.write("raises.wasm", &std::fs::read(&wasm).unwrap());
        let plugins = dir.load().await;
        let boom = json!({"text": "boom"}).to_string();
        let err = plugins.call(&ctx(), "raises_words", &boom).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Internal);
        assert!(
            err.message.starts_with(
                "plugin 'raises' crashed: Python raised KeyError: 'x'; its stderr ended with: Traceback (most recent call last): / File "
            ),
            "{}",
            err.message
        );
        assert!(
            err.message.contains(" / KeyError: 'x' / "),
            "{}",
            err.message
        );
        let fine = json!({"text": "a b"}).to_string();
        let words: Value =
            serde_json::from_str(&plugins.call(&ctx(), "raises_words", &fine).await.unwrap())
                .unwrap();
        assert_eq!(words["words"], 2);
    });
}
