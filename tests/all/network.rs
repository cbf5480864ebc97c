//! `wasi:http` for plugins against HTTP servers on 127.0.0.1 started here:
//! the allow-list, internal addresses, redirects, credentials the guest never
//! sees, and the limits on responses, time and requests. The `netcheck`
//! fixture makes the requests (`fetch`) and shows its environment (`env`).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use futures_util::{StreamExt, stream};
use serde_json::{Value, json};
use wasmclaw::plugin::policy::secrets::Secrets;
use wasmclaw::plugin::{ErrorKind, Plugins, Runtime, RuntimeConfig};
use wasmclaw_tests::{PluginDir, ctx, example_src, target_dir};

const SECRET: &str = "s3cr3t-value-0123456789";

/// A server on 127.0.0.1; it records the `authorization` header of each
/// request it gets.
struct Server {
    port: u16,
    seen_auth: Arc<Mutex<Vec<Option<String>>>>,
}

async fn server() -> Server {
    let seen_auth: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let seen = seen_auth.clone();
    let record = move |headers: &HeaderMap| {
        seen.lock().unwrap().push(
            headers
                .get(header::AUTHORIZATION)
                .map(|v| v.to_str().unwrap().to_string()),
        );
    };
    let (r1, r2, r3) = (record.clone(), record.clone(), record.clone());
    let app = Router::new()
        .route(
            "/hello",
            get(move |headers: HeaderMap| async move {
                r1(&headers);
                "hello"
            }),
        )
        .route(
            "/echo-headers",
            get(move |headers: HeaderMap| async move {
                r2(&headers);
                let all: Vec<(String, String)> = headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
                    .collect();
                let auth = headers
                    .get(header::AUTHORIZATION)
                    .cloned()
                    .unwrap_or(header::HeaderValue::from_static("none"));
                ([("x-echo-authorization", auth)], json!(all).to_string())
            }),
        )
        .route(
            "/repos/{owner}/{repo}",
            get(move |headers: HeaderMap| async move {
                r3(&headers);
                json!({
                    "full_name": "octo/hello", "description": "a repo", "stargazers_count": 7,
                    "forks_count": 1, "open_issues_count": 2, "default_branch": "main",
                    "license": {"spdx_id": "MIT"}, "pushed_at": "2026-11-30T10:00:00Z",
                    "html_url": "https://github.com/octo/hello"
                })
                .to_string()
            }),
        )
        .route(
            "/redirect",
            get(|query: axum::extract::Query<std::collections::HashMap<String, String>>| async move {
                (
                    StatusCode::FOUND,
                    [(header::LOCATION, query.0["to"].clone())],
                )
                    .into_response()
            }),
        )
        .route("/big", get(|| async { "x".repeat(2 << 20) }))
        .route(
            "/big_then_silent",
            get(|| async {
                // 4 MiB, then nothing more and no end.
                let chunks = (0..64).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 64 << 10])));
                Body::from_stream(stream::iter(chunks).chain(stream::pending()))
            }),
        )
        .route(
            "/never",
            get(|| async {
                std::future::pending::<()>().await;
                ""
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Server { port, seen_auth }
}

/// A runtime that knows the test's secret.
fn runtime_with_secret() -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_dir: Some(target_dir().join("test-cache")),
        secrets: Arc::new(Secrets::from_pairs([(
            "test_token".to_string(),
            SECRET.to_string(),
        )])),
        max_instances: 50,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

/// `netcheck` with these grants, loaded in `runtime`.
async fn netcheck(runtime: Runtime, grants: &str) -> (PluginDir, Arc<Plugins>) {
    let dir = PluginDir::new();
    dir.add("netcheck");
    dir.grants("netcheck", grants);
    let plugins = Plugins::load_dir(runtime, dir.path()).await;
    if let wasmclaw::plugin::PluginStatus::Failed { error, .. } = &plugins.catalog().plugins[0] {
        panic!("netcheck did not load: {error}");
    }
    (dir, plugins)
}

async fn fetch(plugins: &Plugins, args: Value) -> Result<Value, (ErrorKind, String)> {
    plugins
        .call(&ctx(), "fetch", &args.to_string())
        .await
        .map(|out| serde_json::from_str(&out).unwrap())
        .map_err(|e| (e.kind, e.message))
}

fn allow(port: u16) -> String {
    format!("[network]\nallow = [\"http://127.0.0.1:{port}\"]\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn only_allowed_origins_are_reached() {
    let (ok, other) = (server().await, server().await);
    let (_dir, plugins) = netcheck(wasmclaw_tests::runtime(), &allow(ok.port)).await;

    let hello = fetch(
        &plugins,
        json!({"url": format!("http://127.0.0.1:{}/hello", ok.port)}),
    )
    .await
    .unwrap();
    assert_eq!(
        (hello["status"].clone(), hello["body"].clone()),
        (json!(200), json!("hello"))
    );

    let refused = |port: u16| {
        format!(
            "plugin 'netcheck' may not reach http://127.0.0.1:{port}: it is not in the plugin's network allow-list"
        )
    };
    let err = fetch(
        &plugins,
        json!({"url": format!("http://127.0.0.1:{}/hello", other.port)}),
    )
    .await
    .unwrap_err();
    assert_eq!(err, (ErrorKind::Upstream, refused(other.port)));
    assert!(
        other.seen_auth.lock().unwrap().is_empty(),
        "nothing reached it"
    );

    // https to the same host and port is another origin.
    let err = fetch(
        &plugins,
        json!({"url": format!("https://127.0.0.1:{}/hello", ok.port)}),
    )
    .await
    .unwrap_err();
    assert!(
        err.1
            .starts_with("plugin 'netcheck' may not reach https://127.0.0.1:"),
        "{err:?}"
    );

    // A name that resolves to loopback is refused: only an origin naming
    // the address itself allows it.
    let (_dir, by_name) = netcheck(
        wasmclaw_tests::runtime(),
        &format!("[network]\nallow = [\"http://localhost:{}\"]\n", ok.port),
    )
    .await;
    let err = fetch(
        &by_name,
        json!({"url": format!("http://localhost:{}/hello", ok.port)}),
    )
    .await
    .unwrap_err();
    // The host names the first address localhost resolves to here
    // (127.0.0.1 or ::1, as /etc/hosts orders them).
    let first = tokio::net::lookup_host(("localhost", ok.port))
        .await
        .unwrap()
        .next()
        .unwrap();
    assert_eq!(
        err.1,
        format!(
            "plugin 'netcheck' may not reach http://localhost:{}: localhost is {}, a loopback address; only an origin that names that address (e.g. \"http://{first}\") allows it",
            ok.port,
            first.ip()
        )
    );

    // No network grant at all.
    let (_dir, none) = netcheck(wasmclaw_tests::runtime(), "").await;
    let err = fetch(
        &none,
        json!({"url": format!("http://127.0.0.1:{}/hello", ok.port)}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.1, refused(ok.port));
    assert_eq!(
        ok.seen_auth.lock().unwrap().len(),
        1,
        "only the allowed call got through"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_to_an_origin_off_the_list_is_refused() {
    let (ok, other) = (server().await, server().await);
    let dir = PluginDir::new();
    dir.add("web_fetch");
    dir.grants("web_fetch", &allow(ok.port));
    let plugins = dir.load().await;
    let target = format!("http://127.0.0.1:{}/hello", other.port);
    let url = format!("http://127.0.0.1:{}/redirect?to={target}", ok.port);
    let err = plugins
        .call(&ctx(), "web_fetch", &json!({ "url": url }).to_string())
        .await
        .unwrap_err();
    assert!(
        err.message.contains(&format!(
            "plugin 'web_fetch' may not reach http://127.0.0.1:{}: it is not in the plugin's network allow-list",
            other.port
        )),
        "{err:?}"
    );
    assert!(other.seen_auth.lock().unwrap().is_empty());

    // A redirect within the allowed origin is followed.
    let url = format!(
        "http://127.0.0.1:{0}/redirect?to=http://127.0.0.1:{0}/hello",
        ok.port
    );
    let text = plugins
        .call(&ctx(), "web_fetch", &json!({ "url": url }).to_string())
        .await
        .unwrap();
    assert!(text.ends_with("hello"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_credential_reaches_the_server_and_never_the_plugin() {
    let s = server().await;
    let grants = format!(
        "{}[[credentials]]\nsecret = \"test_token\"\nhost = \"127.0.0.1\"\nheader = \"authorization\"\nprefix = \"Bearer \"\n",
        allow(s.port)
    );
    let (_dir, plugins) = netcheck(runtime_with_secret(), &grants).await;

    // The server got it; what the plugin read back has it scrubbed, in the
    // body and in the response headers, even when the plugin set the header
    // itself (the host's value wins).
    let echoed = fetch(
        &plugins,
        json!({
            "url": format!("http://127.0.0.1:{}/echo-headers", s.port),
            "headers": {
                "authorization": "Bearer guessed",
                "accept-encoding": "gzip",
                "range": "bytes=0-3"
            }
        }),
    )
    .await
    .unwrap();
    assert_eq!(
        s.seen_auth.lock().unwrap().as_slice(),
        [Some(format!("Bearer {SECRET}"))]
    );
    let text = echoed.to_string();
    assert!(!text.contains(SECRET), "{text}");
    let body: Vec<(String, String)> =
        serde_json::from_str(echoed["body"].as_str().unwrap()).unwrap();
    assert!(
        body.contains(&("authorization".into(), "Bearer [REDACTED]".into())),
        "{body:?}"
    );
    // No compressed or partial answer, in which the value would escape the
    // scrub.
    assert!(
        body.contains(&("accept-encoding".into(), "identity".into())),
        "{body:?}"
    );
    assert!(!body.iter().any(|(name, _)| name == "range"), "{body:?}");
    let headers: Vec<(String, String)> = serde_json::from_value(echoed["headers"].clone()).unwrap();
    assert!(
        headers.contains(&("x-echo-authorization".into(), "Bearer [REDACTED]".into())),
        "{headers:?}"
    );
    // Nor is it in the plugin's environment.
    let env = plugins.call(&ctx(), "env", "{}").await.unwrap();
    assert!(!env.contains(SECRET), "{env}");

    // A grant naming a secret the operator does not have does not load.
    let dir = PluginDir::new();
    dir.add("netcheck");
    dir.grants("netcheck", &grants.replace("test_token", "missing_token"));
    let plugins = dir.load().await;
    let error = wasmclaw_tests::load_error(&plugins, "netcheck");
    assert!(
        error.ends_with("credentials[0].secret: no secret named \"missing_token\"; set WASMCLAW_SECRET_MISSING_TOKEN or add it to secrets.toml in the wasmclaw home"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_github_example_calls_its_api_with_the_operators_token() {
    let s = server().await;
    let shipped =
        std::fs::read_to_string(example_src("github_repo").join("github_repo.toml")).unwrap();
    assert!(shipped.contains("secret = \"github_token\""), "{shipped}");
    // The shipped grants, pointed at the test server.
    let grants = format!(
        "{}[[credentials]]\nsecret = \"test_token\"\nhost = \"127.0.0.1\"\nheader = \"authorization\"\nprefix = \"Bearer \"\n[config]\nbase_url = \"http://127.0.0.1:{}\"\n",
        allow(s.port),
        s.port
    );
    let dir = PluginDir::new();
    dir.add("github_repo");
    dir.grants("github_repo", &grants);
    let plugins = Plugins::load_dir(runtime_with_secret(), dir.path()).await;
    let out = plugins
        .call(&ctx(), "github_repo", r#"{"owner":"octo","repo":"hello"}"#)
        .await
        .unwrap();
    let summary: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["full_name"], "octo/hello");
    assert_eq!(summary["stargazers_count"], 7);
    assert_eq!(
        s.seen_auth.lock().unwrap().as_slice(),
        [Some(format!("Bearer {SECRET}"))]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn limits_end_a_request_with_the_exact_error_and_nothing_else_is_held_up() {
    let s = server().await;
    let grants = format!(
        "{}max_response_kib = 1024\nmax_request_kib = 64\ntimeout_ms = 300\nmax_requests = 3\n",
        allow(s.port)
    );
    let (_dir, plugins) = netcheck(wasmclaw_tests::runtime(), &grants).await;
    let url = |path: &str| format!("http://127.0.0.1:{}/{path}", s.port);

    let err = fetch(&plugins, json!({"url": url("big")}))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        (
            ErrorKind::Upstream,
            format!(
                "the response from http://127.0.0.1:{} is larger than the plugin's limit of 1 MiB (network.max_response_kib)",
                s.port
            )
        )
    );

    let err = fetch(
        &plugins,
        json!({"url": url("hello"), "method": "POST", "body": "x".repeat((64 << 10) + 1)}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.1,
        format!(
            "plugin 'netcheck' sent a request body to http://127.0.0.1:{} larger than its limit of 64 KiB (network.max_request_kib)",
            s.port
        )
    );

    // A server that never answers, while another call goes on and ends
    // first.
    let never = fetch(&plugins, json!({"url": url("never")}));
    tokio::pin!(never);
    let hello = tokio::select! {
        hello = fetch(&plugins, json!({"url": url("hello")})) => hello,
        never = &mut never => panic!("the call to a silent server ended first: {never:?}"),
    };
    let never = never.await;
    assert_eq!(
        never.unwrap_err().1,
        format!(
            "http://127.0.0.1:{} did not answer within 300 ms (network.timeout_ms)",
            s.port
        )
    );
    assert_eq!(hello.unwrap()["body"], "hello");

    let err = fetch(&plugins, json!({"url": url("hello"), "repeat": 4}))
        .await
        .unwrap_err();
    assert_eq!(
        err.1,
        "request 4: plugin 'netcheck' made more than 3 HTTP requests in one call"
    );
    // Each call has its own count.
    let again = fetch(&plugins, json!({"url": url("hello"), "repeat": 3})).await;
    assert_eq!(again.unwrap()["body"], "hello");
}

/// An answer the host holds for the guest counts against the call's memory
/// limit, with the guest's own memory: refused before the guest sees it.
#[tokio::test(flavor = "multi_thread")]
async fn an_answer_that_would_not_fit_the_calls_memory_limit_is_refused() {
    let s = server().await;
    let grants = format!("{}[limits]\nmemory_mib = 3\n", allow(s.port));
    let (_dir, plugins) = netcheck(wasmclaw_tests::runtime(), &grants).await;
    let url = format!("http://127.0.0.1:{}/big", s.port);
    let err = fetch(&plugins, json!({ "url": url })).await.unwrap_err();
    assert_eq!(
        err,
        (
            ErrorKind::Upstream,
            format!(
                "the response from http://127.0.0.1:{} would put plugin 'netcheck' over its memory limit of 3 MiB (its memory and what the host holds for it count together)",
                s.port
            )
        )
    );
    // A small answer fits.
    let hello = fetch(
        &plugins,
        json!({"url": format!("http://127.0.0.1:{}/hello", s.port)}),
    )
    .await;
    assert_eq!(hello.unwrap()["body"], "hello");
}

/// An answer is charged to the call's memory as it arrives: one bigger than
/// the limit is refused once it passes it, not after it has all been read
/// (this one never ends: read whole, it would time out).
#[tokio::test(flavor = "multi_thread")]
async fn an_answer_is_refused_as_it_passes_the_calls_memory_limit_before_it_is_all_read() {
    let s = server().await;
    let grants = format!(
        "{}max_response_kib = 8192\ntimeout_ms = 5000\n[limits]\nmemory_mib = 3\n",
        allow(s.port)
    );
    let (_dir, plugins) = netcheck(wasmclaw_tests::runtime(), &grants).await;
    let url = format!("http://127.0.0.1:{}/big_then_silent", s.port);
    let started = std::time::Instant::now();
    let err = fetch(&plugins, json!({ "url": url })).await.unwrap_err();
    assert_eq!(
        err,
        (
            ErrorKind::Upstream,
            format!(
                "the response from http://127.0.0.1:{} would put plugin 'netcheck' over its memory limit of 3 MiB (its memory and what the host holds for it count together)",
                s.port
            )
        )
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "refused only after {:?}",
        started.elapsed()
    );
}
