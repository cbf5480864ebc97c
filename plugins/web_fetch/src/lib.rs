//! wasmclaw tool plugin `web_fetch`: GETs a web page over `wasi:http` and
//! returns it as readable text.
//!
//! The host sends the requests, and only to the origins of the `[network]`
//! allow-list in `web_fetch.toml`; it does not follow redirects, so this
//! plugin follows them itself (up to 5), each hop checked by the host again.

pub mod text;
pub mod url;

// Rust bindings for the `tool-plugin` world, and the component-ABI glue that
// routes the exported functions to `WebFetch`. The glue is generated unsafe
// code; everything written by hand stays safe. It is exported only when
// building the component, so that host-side unit tests link.
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "tool-plugin",
        path: "../../wit",
    });

    #[cfg(target_arch = "wasm32")]
    use super::WebFetch;
    #[cfg(target_arch = "wasm32")]
    export!(WebFetch);
}

use bindings::exports::wasmclaw::plugin::tool::Guest;
use bindings::wasmclaw::plugin::log::{Level, log};
use bindings::wasmclaw::plugin::types::{CallContext, ErrorKind, PluginError, ToolSpec};
use http_client::{Failure, Request, Response};
use serde_json::{Value, json};
use text::Kind;
use url::Url;

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 5;
pub const DEFAULT_MAX_CHARS: u64 = 20_000;
pub const MIN_MAX_CHARS: u64 = 100;
pub const MAX_MAX_CHARS: u64 = 200_000;
/// Most bytes of a body read (the host has its own, usually lower, limit).
const MAX_BODY: usize = 8 << 20;
/// Characters of an error page quoted in the error.
const ERROR_EXCERPT: usize = 200;

const USER_AGENT: &str = concat!("wasmclaw-web-fetch/", env!("CARGO_PKG_VERSION"));
const ACCEPT: &str =
    "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,text/*;q=0.8";

struct WebFetch;

fn error(kind: ErrorKind, message: impl Into<String>, retryable: bool) -> PluginError {
    PluginError {
        kind,
        message: message.into(),
        retryable,
    }
}

fn invalid(message: impl Into<String>) -> PluginError {
    error(ErrorKind::InvalidInput, message, false)
}

fn upstream(message: impl Into<String>) -> PluginError {
    error(ErrorKind::Upstream, message, false)
}

impl Guest for WebFetch {
    fn list_tools() -> Vec<ToolSpec> {
        let schema = json!({
            "type": "object",
            "properties": {
                "url": {
                    "type": "string",
                    "description": "The page to fetch: an absolute http:// or https:// URL."
                },
                "max_chars": {
                    "type": "integer",
                    "minimum": MIN_MAX_CHARS,
                    "maximum": MAX_MAX_CHARS,
                    "description": "Most characters of text to return (default 20000)."
                }
            },
            "required": ["url"],
            "additionalProperties": false
        });
        vec![ToolSpec {
            name: "web_fetch".into(),
            description: "Fetch a web page (HTTP GET, following up to 5 redirects) and return \
                          it as readable text: HTML reduced to its text, plain text and JSON as \
                          they are. The result starts with the final URL and the HTTP status. \
                          Only sites the operator allows can be reached."
                .into(),
            input_schema: schema.to_string(),
        }]
    }

    fn call_tool(
        _ctx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<String, PluginError> {
        if name != "web_fetch" {
            return Err(error(
                ErrorKind::NotFound,
                format!("web_fetch has no tool named {name:?}"),
                false,
            ));
        }
        let args = match serde_json::from_str::<Value>(&arguments) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(invalid("arguments must be a JSON object")),
            Err(e) => return Err(invalid(format!("arguments are not JSON: {e}"))),
        };
        let url = args
            .get("url")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("`url` must be a string"))?;
        let max_chars = match args.get("max_chars") {
            None => DEFAULT_MAX_CHARS,
            Some(v) => v
                .as_u64()
                .filter(|n| (MIN_MAX_CHARS..=MAX_MAX_CHARS).contains(n))
                .ok_or_else(|| {
                    invalid(format!(
                        "`max_chars` must be an integer from {MIN_MAX_CHARS} to {MAX_MAX_CHARS}"
                    ))
                })?,
        };
        let url = Url::parse(url).map_err(invalid)?;
        let (url, response) = fetch(url)?;
        render(&url, &response, max_chars as usize)
    }
}

/// GETs `url`, following redirects; the final URL and its response.
fn fetch(mut url: Url) -> Result<(Url, Response), PluginError> {
    let headers = [
        ("accept".to_string(), ACCEPT.to_string()),
        ("user-agent".to_string(), USER_AGENT.to_string()),
    ];
    let mut hops = 0;
    loop {
        log(Level::Debug, &format!("GET {url}"));
        let response = http_client::send(&Request {
            method: "GET",
            scheme: &url.scheme,
            authority: &url.authority,
            path_with_query: &url.path_and_query,
            headers: &headers,
            body: None,
            max_body: MAX_BODY,
        })
        .map_err(|failure| match failure {
            Failure::Invalid(m) => invalid(format!("{url}: {m}")),
            Failure::Forbidden(m) => error(ErrorKind::Denied, m, false),
            Failure::Upstream(m) => upstream(m),
        })?;
        let location = match response.status {
            301 | 302 | 303 | 307 | 308 => response.header("location"),
            _ => None,
        };
        let Some(location) = location else {
            return Ok((url, response));
        };
        if hops == MAX_REDIRECTS {
            return Err(upstream(format!(
                "too many redirects: gave up after {MAX_REDIRECTS}; {url} redirects \
                 ({}) to {location}",
                response.status
            )));
        }
        hops += 1;
        url = url.join(&location).map_err(|e| {
            upstream(format!(
                "{url} redirects ({}) to {location:?}, which cannot be followed: {e}",
                response.status
            ))
        })?;
    }
}

/// The tool's result for the final response.
fn render(url: &Url, response: &Response, max_chars: usize) -> Result<String, PluginError> {
    let content_type = response.header("content-type");
    let content_type = content_type.as_deref();
    if response.status >= 400 {
        let body = text::decode(content_type, &response.body);
        let body = match text::classify(content_type, &response.body) {
            Ok(Kind::Html) => text::html_to_text(&body),
            _ => body,
        };
        let body = body.split_whitespace().collect::<Vec<_>>().join(" ");
        let excerpt = match text::cut(&body, ERROR_EXCERPT) {
            Some(start) => format!("{start}…"),
            None => body,
        };
        let retryable = response.status == 408 || response.status == 429 || response.status >= 500;
        return Err(error(
            ErrorKind::Upstream,
            format!("HTTP status {} from {url}: {excerpt}", response.status),
            retryable,
        ));
    }
    let kind = text::classify(content_type, &response.body)
        .map_err(|e| error(ErrorKind::Upstream, format!("{url}: {e}"), false))?;
    let body = text::decode(content_type, &response.body);
    let body = match kind {
        Kind::Html => text::html_to_text(&body),
        Kind::Text => body,
    };
    let mut out = format!("URL: {url}\nStatus: {}\n\n", response.status);
    match text::cut(&body, max_chars) {
        Some(start) => {
            out.push_str(start);
            out.push_str(&format!("\n\n[cut at {max_chars} characters]"));
        }
        None => {
            out.push_str(&body);
            if response.truncated {
                out.push_str(&format!(
                    "\n\n[the response was longer than {} MiB; only its start was read]",
                    MAX_BODY >> 20
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, content_type: &str, body: &str) -> Response {
        Response {
            status,
            headers: vec![("content-type".into(), content_type.as_bytes().to_vec())],
            body: body.as_bytes().to_vec(),
            truncated: false,
        }
    }

    fn url() -> Url {
        Url::parse("https://example.com/page").unwrap()
    }

    #[test]
    fn renders_html_with_url_and_status() {
        let r = response(
            200,
            "text/html; charset=utf-8",
            "<h1>Title</h1><p>Hello &amp; bye</p>",
        );
        assert_eq!(
            render(&url(), &r, 20_000).unwrap(),
            "URL: https://example.com/page\nStatus: 200\n\nTitle\n\nHello & bye"
        );
    }

    #[test]
    fn renders_json_as_it_is_and_cuts_long_text() {
        let r = response(200, "application/json", "{\"a\": [1, 2]}");
        assert_eq!(
            render(&url(), &r, 100).unwrap(),
            "URL: https://example.com/page\nStatus: 200\n\n{\"a\": [1, 2]}"
        );
        let long = "é".repeat(150);
        let r = response(200, "text/plain", &long);
        let out = render(&url(), &r, 100).unwrap();
        assert!(
            out.ends_with(&format!("{}\n\n[cut at 100 characters]", "é".repeat(100))),
            "{out}"
        );
    }

    #[test]
    fn refuses_other_content_types() {
        let r = response(200, "application/pdf", "%PDF-1.7");
        let e = render(&url(), &r, 100).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Upstream);
        assert!(e.message.contains("application/pdf"), "{}", e.message);
    }

    #[test]
    fn error_statuses_quote_the_start_of_the_body() {
        let r = response(
            404,
            "text/html",
            &format!(
                "<head><title>x</title></head><p>Not   found</p>{}",
                "z".repeat(500)
            ),
        );
        let e = render(&url(), &r, 100).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Upstream);
        assert!(!e.retryable);
        let expected = format!(
            "HTTP status 404 from https://example.com/page: Not found {}…",
            "z".repeat(200 - "Not found ".len())
        );
        assert_eq!(e.message, expected);
        let e = render(&url(), &response(503, "text/plain", "busy"), 100).unwrap_err();
        assert_eq!(
            e.message,
            "HTTP status 503 from https://example.com/page: busy"
        );
        assert!(e.retryable);
    }
}
