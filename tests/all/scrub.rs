//! The credential scrub cannot be skipped: an answer to a request that
//! carried a credential reaches the plugin only if its body is the plain
//! bytes the scrub reads. The upstream is a raw HTTP/1.1 server on
//! 127.0.0.1 started here, which writes exactly the header lines each test
//! names (several `Content-Encoding` lines, comma lists, transfer codings)
//! and records each request it gets.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wasmclaw::plugin::policy::secrets::Secrets;
use wasmclaw::plugin::{ErrorKind, PluginStatus, Plugins, Runtime, RuntimeConfig};
use wasmclaw_tests::{PluginDir, ctx, target_dir};

const SECRET: &str = "s3cr3t-value-0123456789";

/// A server that answers `/PATH` with the head `ANSWERS[PATH]` and, as the
/// body, the request's own head (so the injected credential comes back).
struct RawServer {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

fn answer_head(path: &str) -> &'static str {
    match path {
        "/plain" => {
            "HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nTransfer-Encoding: chunked\r\n"
        }
        "/two-lines" => {
            "HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"
        }
        "/list" => {
            "HTTP/1.1 200 OK\r\nContent-Encoding: identity, br\r\nTransfer-Encoding: chunked\r\n"
        }
        "/transfer" => "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n",
        "/partial" => {
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\nTransfer-Encoding: chunked\r\n"
        }
        _ => "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n",
    }
}

async fn raw_server() -> RawServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = requests.clone();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                seen.lock().unwrap().push(head.clone());
                let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                let body = head.as_bytes();
                let mut out = answer_head(&path).as_bytes().to_vec();
                out.extend_from_slice(b"Connection: close\r\n\r\n");
                out.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
                out.extend_from_slice(body);
                out.extend_from_slice(b"\r\n0\r\n\r\n");
                let _ = socket.write_all(&out).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    RawServer { port, requests }
}

async fn netcheck(grants: &str) -> (PluginDir, Arc<Plugins>) {
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(target_dir().join("test-cache")),
        secrets: Arc::new(Secrets::from_pairs([(
            "test_token".to_string(),
            SECRET.to_string(),
        )])),
        max_instances: 50,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let dir = PluginDir::new();
    dir.add("netcheck");
    dir.grants("netcheck", grants);
    let plugins = Plugins::load_dir(runtime, dir.path()).await;
    if let PluginStatus::Failed { error, .. } = &plugins.catalog().plugins[0] {
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

fn grants(port: u16, credential: bool) -> String {
    let mut text = format!("[network]\nallow = [\"http://127.0.0.1:{port}\"]\n");
    if credential {
        text += "[[credentials]]\nsecret = \"test_token\"\nhost = \"127.0.0.1\"\nheader = \"authorization\"\nprefix = \"Bearer \"\n";
    }
    text
}

#[tokio::test(flavor = "multi_thread")]
async fn an_answer_the_scrub_cannot_read_is_refused_when_a_credential_was_added() {
    let s = raw_server().await;
    let (_dir, plugins) = netcheck(&grants(s.port, true)).await;
    let url = |path: &str| format!("http://127.0.0.1:{}{path}", s.port);

    // A plain answer passes, scrubbed; the guest's `TE` never reaches the
    // server.
    let plain = fetch(
        &plugins,
        json!({"url": url("/plain"), "headers": {"te": "gzip"}}),
    )
    .await
    .unwrap();
    let body = plain["body"].as_str().unwrap();
    assert!(
        body.contains("authorization: Bearer [REDACTED]\r\n"),
        "{body}"
    );
    assert!(!plain.to_string().contains(SECRET));
    let sent = s.requests.lock().unwrap()[0].clone();
    assert!(
        sent.contains(&format!("authorization: Bearer {SECRET}\r\n")),
        "{sent}"
    );
    assert!(!sent.to_ascii_lowercase().contains("\r\nte:"), "{sent}");

    for (path, why) in [
        ("/two-lines", "encoded (content-encoding: identity, gzip)"),
        ("/list", "encoded (content-encoding: identity, br)"),
        ("/transfer", "encoded (transfer-encoding: gzip, chunked)"),
        ("/partial", "partial (206 Partial Content)"),
    ] {
        let err = fetch(&plugins, json!({"url": url(path)}))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            (
                ErrorKind::Upstream,
                format!(
                    "the response from http://127.0.0.1:{} is {why}, so the credential could not be removed from it; it was not passed on",
                    s.port
                )
            ),
            "{path}"
        );
    }
    assert_eq!(s.requests.lock().unwrap().len(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_credential_an_encoded_answer_passes_as_it_is() {
    let s = raw_server().await;
    let (_dir, plugins) = netcheck(&grants(s.port, false)).await;
    let answer = fetch(
        &plugins,
        json!({"url": format!("http://127.0.0.1:{}/two-lines", s.port)}),
    )
    .await
    .unwrap();
    assert_eq!(answer["status"], 200);
    let headers: Vec<(String, String)> = serde_json::from_value(answer["headers"].clone()).unwrap();
    let encodings: Vec<&str> = headers
        .iter()
        .filter(|(name, _)| name == "content-encoding")
        .map(|(_, value)| value.as_str())
        .collect();
    assert_eq!(encodings, ["identity", "gzip"]);
}
