//! wasmclaw tool plugin `github_repo`: a GitHub repository's summary from the
//! REST API (`GET /repos/{owner}/{repo}`), over `wasi:http`.
//!
//! The plugin never sees a token: `github_repo.toml` names the operator's
//! secret, and the host adds it as the `authorization` header to requests to
//! api.github.com only. The API's base URL is the operator's `[config]`
//! `base_url` (GitHub Enterprise, or a test server), default
//! `https://api.github.com`.

pub mod github;

// Rust bindings for the `tool-plugin` world, and the component-ABI glue that
// routes the exported functions to `GithubRepo`. The glue is generated unsafe
// code; everything written by hand stays safe. It is exported only when
// building the component, so that host-side unit tests link.
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "tool-plugin",
        path: "../../wit",
    });

    #[cfg(target_arch = "wasm32")]
    use super::GithubRepo;
    #[cfg(target_arch = "wasm32")]
    export!(GithubRepo);
}

use bindings::exports::wasmclaw::plugin::tool::Guest;
use bindings::wasmclaw::plugin::config;
use bindings::wasmclaw::plugin::types::{CallContext, ErrorKind, PluginError, ToolSpec};
use github::Target;
use http_client::{Failure, Request};
use serde_json::{Value, json};

/// Redirects (a renamed or transferred repository) followed on the API's origin.
const MAX_REDIRECTS: usize = 3;
/// A repository's description is small; this bounds what is read.
const MAX_BODY: usize = 1 << 20;
const NAME_PATTERN: &str = "^[A-Za-z0-9_.-]{1,100}$";

struct GithubRepo;

fn error(kind: ErrorKind, message: impl Into<String>) -> PluginError {
    PluginError {
        kind,
        message: message.into(),
        retryable: false,
    }
}

fn invalid(message: impl Into<String>) -> PluginError {
    error(ErrorKind::InvalidInput, message)
}

impl Guest for GithubRepo {
    fn list_tools() -> Vec<ToolSpec> {
        let schema = json!({
            "type": "object",
            "properties": {
                "owner": {
                    "type": "string",
                    "pattern": NAME_PATTERN,
                    "description": "The user or organization that owns the repository, e.g. 'rust-lang'."
                },
                "repo": {
                    "type": "string",
                    "pattern": NAME_PATTERN,
                    "description": "The repository's name, e.g. 'rust'."
                }
            },
            "required": ["owner", "repo"],
            "additionalProperties": false
        });
        vec![ToolSpec {
            name: "github_repo".into(),
            description: "Look up a GitHub repository: full name, description, stars, forks, \
                          open issues, default branch, license, last push and URL, as JSON."
                .into(),
            input_schema: schema.to_string(),
        }]
    }

    fn call_tool(
        _ctx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<String, PluginError> {
        if name != "github_repo" {
            return Err(error(
                ErrorKind::NotFound,
                format!("github_repo has no tool named {name:?}"),
            ));
        }
        let args = match serde_json::from_str::<Value>(&arguments) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(invalid("arguments must be a JSON object")),
            Err(e) => return Err(invalid(format!("arguments are not JSON: {e}"))),
        };
        let name_arg = |key: &str| -> Result<String, PluginError> {
            let value = args
                .get(key)
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(format!("`{key}` must be a string")))?;
            if !github::valid_name(value) {
                return Err(invalid(format!(
                    "`{key}` {value:?} is not a GitHub name: 1 to 100 of A-Z a-z 0-9 _ . -"
                )));
            }
            Ok(value.to_string())
        };
        let owner = name_arg("owner")?;
        let repo = name_arg("repo")?;
        let base = github::base_url(&config::get()).map_err(|e| error(ErrorKind::Internal, e))?;
        lookup(&base, &owner, &repo)
    }
}

fn lookup(base: &Target, owner: &str, repo: &str) -> Result<String, PluginError> {
    let headers = [
        (
            "accept".to_string(),
            "application/vnd.github+json".to_string(),
        ),
        ("user-agent".to_string(), "wasmclaw-github-repo".to_string()),
    ];
    let mut target = github::repo_target(base, owner, repo);
    let mut hops = 0;
    loop {
        let response = http_client::send(&Request {
            method: "GET",
            scheme: &target.scheme,
            authority: &target.authority,
            path_with_query: &target.path_and_query,
            headers: &headers,
            body: None,
            max_body: MAX_BODY,
        })
        .map_err(|failure| match failure {
            Failure::Invalid(m) => error(ErrorKind::Internal, format!("{}: {m}", target.url())),
            Failure::Forbidden(m) => error(ErrorKind::Denied, m),
            Failure::Upstream(m) => error(ErrorKind::Upstream, m),
        })?;
        match response.status {
            200..=299 => {
                return github::summary(&response.body).map_err(|e| error(ErrorKind::Upstream, e));
            }
            301 | 302 | 307 | 308 => {
                let location = response.header("location").unwrap_or_default();
                let next = github::redirect_target(base, &location).ok_or_else(|| {
                    error(
                        ErrorKind::Upstream,
                        format!(
                            "GitHub redirects {owner}/{repo} ({}) to {location:?}, \
                             outside {}; not followed",
                            response.status,
                            base.url()
                        ),
                    )
                })?;
                if hops == MAX_REDIRECTS {
                    return Err(error(
                        ErrorKind::Upstream,
                        format!(
                            "too many redirects for {owner}/{repo} (more than {MAX_REDIRECTS})"
                        ),
                    ));
                }
                hops += 1;
                target = next;
            }
            status if status >= 400 => {
                return Err(github::status_error(status, owner, repo, &response.body));
            }
            status => {
                return Err(error(
                    ErrorKind::Upstream,
                    format!(
                        "GitHub answered HTTP {status} for {owner}/{repo}, which is not a repository"
                    ),
                ));
            }
        }
    }
}
