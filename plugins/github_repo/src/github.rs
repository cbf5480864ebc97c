//! The GitHub side of `github_repo`, without I/O: checking names, reading
//! the operator's config, the request target, the summary of a repository
//! and what an error status means.

use serde_json::Value;

use crate::bindings::wasmclaw::plugin::types::{ErrorKind, PluginError};

pub const DEFAULT_BASE_URL: &str = "https://api.github.com";

/// `^[A-Za-z0-9_.-]{1,100}$`, and not `.` or `..` (which would change the
/// path rather than name a repository).
pub fn valid_name(name: &str) -> bool {
    (1..=100).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        && name != "."
        && name != ".."
}

/// An absolute http(s) URL in the parts a request needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `http` or `https`, lower case.
    pub scheme: String,
    /// `host[:port]`, lower case.
    pub authority: String,
    /// Starts with `/`.
    pub path_and_query: String,
}

impl Target {
    pub fn url(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme, self.authority, self.path_and_query
        )
    }
}

/// Splits `scheme://authority/path?query`; `None` unless it is an absolute
/// http or https URL with a host and no user name.
pub fn split_url(url: &str) -> Option<Target> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let rest = rest.split('#').next().unwrap_or_default();
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.is_empty()
        || !authority
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':' | '[' | ']'))
    {
        return None;
    }
    let path_and_query = match path.chars().next() {
        None => "/".to_string(),
        Some('?') => format!("/{path}"),
        Some(_) => path.to_string(),
    };
    Some(Target {
        scheme,
        authority: authority.to_ascii_lowercase(),
        path_and_query,
    })
}

/// The API's base URL from the operator's `[config]` (`base_url`, default
/// `https://api.github.com`), without a trailing `/`.
pub fn base_url(config: &str) -> Result<Target, String> {
    let config: Value = match config.trim() {
        "" => Value::Object(Default::default()),
        text => serde_json::from_str(text)
            .map_err(|e| format!("the plugin's config is not JSON: {e}"))?,
    };
    let url = match config.get("base_url") {
        None | Some(Value::Null) => DEFAULT_BASE_URL,
        Some(Value::String(url)) => url.as_str(),
        Some(_) => return Err("config.base_url must be a string".into()),
    };
    let mut target = split_url(url.trim()).ok_or_else(|| {
        format!("config.base_url {url:?} is not an http:// or https:// URL with a host")
    })?;
    if target.path_and_query.contains('?') {
        return Err(format!("config.base_url {url:?} must not have a query"));
    }
    let path = target.path_and_query.trim_end_matches('/').to_string();
    target.path_and_query = path;
    Ok(target)
}

/// `{base}/repos/{owner}/{repo}`; both names must be valid.
pub fn repo_target(base: &Target, owner: &str, repo: &str) -> Target {
    Target {
        scheme: base.scheme.clone(),
        authority: base.authority.clone(),
        path_and_query: format!("{}/repos/{owner}/{repo}", base.path_and_query),
    }
}

/// Where a redirect (a renamed or moved repository) points, when it stays on
/// the API's own origin: an absolute URL there, or a path.
pub fn redirect_target(base: &Target, location: &str) -> Option<Target> {
    let location = location.trim();
    let target = if location.starts_with('/') && !location.starts_with("//") {
        Target {
            scheme: base.scheme.clone(),
            authority: base.authority.clone(),
            path_and_query: location.split('#').next().unwrap_or_default().to_string(),
        }
    } else {
        split_url(location)?
    };
    (target.scheme == base.scheme && target.authority == base.authority).then_some(target)
}

/// The compact summary of a repository as the API describes it.
pub fn summary(body: &[u8]) -> Result<String, String> {
    let repo: Value =
        serde_json::from_slice(body).map_err(|e| format!("GitHub's answer is not JSON: {e}"))?;
    if !repo.is_object() {
        return Err("GitHub's answer is not a JSON object".into());
    }
    let field = |name: &str| repo.get(name).cloned().unwrap_or(Value::Null);
    let license = repo
        .get("license")
        .and_then(|l| l.get("spdx_id"))
        .cloned()
        .unwrap_or(Value::Null);
    let fields = [
        ("full_name", field("full_name")),
        ("description", field("description")),
        ("stargazers_count", field("stargazers_count")),
        ("forks_count", field("forks_count")),
        ("open_issues_count", field("open_issues_count")),
        ("default_branch", field("default_branch")),
        ("license", license),
        ("pushed_at", field("pushed_at")),
        ("html_url", field("html_url")),
    ];
    // Written by hand to keep this order (serde_json's maps sort their keys).
    let mut out = String::from("{");
    for (i, (name, value)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::from(*name).to_string());
        out.push(':');
        out.push_str(&value.to_string());
    }
    out.push('}');
    Ok(out)
}

/// GitHub's own explanation in an error body (`{"message": ...}`), else the
/// start of the body.
fn explanation(body: &[u8]) -> String {
    if let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body)
        && let Some(Value::String(message)) = map.get("message")
    {
        return message.clone();
    }
    let text = String::from_utf8_lossy(body);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None if text.is_empty() => "(no message)".into(),
        None => text,
    }
}

/// The tool's error for an answer with status 400 or above.
pub fn status_error(status: u16, owner: &str, repo: &str, body: &[u8]) -> PluginError {
    let message = explanation(body);
    let (kind, message, retryable) = match status {
        404 => (
            ErrorKind::NotFound,
            format!(
                "repository {owner}/{repo} not found (or not visible with the configured token)"
            ),
            false,
        ),
        401 | 403 => (
            ErrorKind::Denied,
            format!("GitHub refused access to {owner}/{repo} (HTTP {status}): {message}"),
            false,
        ),
        _ => (
            ErrorKind::Upstream,
            format!("GitHub answered HTTP {status} for {owner}/{repo}: {message}"),
            status == 429 || status >= 500,
        ),
    };
    PluginError {
        kind,
        message,
        retryable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_names() {
        for good in [
            "rust-lang",
            "rust",
            "a",
            "x.y_z-1",
            &"a".repeat(100),
            ".github",
            "...",
        ] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "a?b",
            "é",
            "a%2f",
            &"a".repeat(101),
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn reads_the_base_url_from_config() {
        let default = base_url("{}").unwrap();
        assert_eq!(default.url(), "https://api.github.com");
        assert_eq!(base_url("").unwrap(), default);
        assert_eq!(base_url(r#"{"other": 1}"#).unwrap(), default);
        assert_eq!(base_url(r#"{"base_url": null}"#).unwrap(), default);
        let ghe = base_url(r#"{"base_url": "https://GHE.example.com/api/v3/"}"#).unwrap();
        assert_eq!(ghe.scheme, "https");
        assert_eq!(ghe.authority, "ghe.example.com");
        assert_eq!(ghe.path_and_query, "/api/v3");
        let local = base_url(r#"{"base_url": "http://127.0.0.1:4321"}"#).unwrap();
        assert_eq!(
            repo_target(&local, "o", "r").url(),
            "http://127.0.0.1:4321/repos/o/r"
        );
        assert_eq!(
            repo_target(&ghe, "rust-lang", "rust").url(),
            "https://ghe.example.com/api/v3/repos/rust-lang/rust"
        );
        for bad in [
            r#"{"base_url": 5}"#,
            r#"{"base_url": "ftp://example.com"}"#,
            r#"{"base_url": "api.github.com"}"#,
            r#"{"base_url": "https://u:p@example.com"}"#,
            r#"{"base_url": "https://example.com/?x=1"}"#,
            "not json",
        ] {
            assert!(base_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn follows_redirects_only_on_the_same_origin() {
        let base = base_url("{}").unwrap();
        assert_eq!(
            redirect_target(&base, "https://api.github.com/repositories/724712")
                .unwrap()
                .url(),
            "https://api.github.com/repositories/724712"
        );
        assert_eq!(
            redirect_target(&base, "/repositories/1").unwrap().url(),
            "https://api.github.com/repositories/1"
        );
        assert!(redirect_target(&base, "https://evil.example.com/x").is_none());
        assert!(redirect_target(&base, "http://api.github.com/x").is_none());
        assert!(redirect_target(&base, "//evil.example.com/x").is_none());
    }

    #[test]
    fn summarizes_a_repository() {
        let body = br#"{
            "id": 724712, "name": "rust", "full_name": "rust-lang/rust",
            "owner": {"login": "rust-lang"},
            "description": "Empowering everyone to build reliable and efficient software.",
            "html_url": "https://github.com/rust-lang/rust",
            "stargazers_count": 100000, "watchers_count": 100000, "forks_count": 12000,
            "open_issues_count": 9000, "default_branch": "master",
            "license": {"key": "other", "name": "Other", "spdx_id": "NOASSERTION"},
            "pushed_at": "2024-05-01T12:00:00Z", "topics": ["rust"]
        }"#;
        assert_eq!(
            summary(body).unwrap(),
            r#"{"full_name":"rust-lang/rust","description":"Empowering everyone to build reliable and efficient software.","stargazers_count":100000,"forks_count":12000,"open_issues_count":9000,"default_branch":"master","license":"NOASSERTION","pushed_at":"2024-05-01T12:00:00Z","html_url":"https://github.com/rust-lang/rust"}"#
        );
        let bare = br#"{"full_name": "a/b", "description": null, "license": null}"#;
        assert_eq!(
            summary(bare).unwrap(),
            r#"{"full_name":"a/b","description":null,"stargazers_count":null,"forks_count":null,"open_issues_count":null,"default_branch":null,"license":null,"pushed_at":null,"html_url":null}"#
        );
        assert!(summary(b"[1]").is_err());
        assert!(summary(b"<html>").is_err());
    }

    #[test]
    fn explains_error_statuses() {
        let e = status_error(404, "o", "r", br#"{"message":"Not Found"}"#);
        assert_eq!(e.kind, ErrorKind::NotFound);
        assert!(e.message.contains("o/r"), "{}", e.message);
        let e = status_error(
            403,
            "o",
            "r",
            br#"{"message":"API rate limit exceeded for 1.2.3.4.","documentation_url":"https://docs.github.com"}"#,
        );
        assert_eq!(e.kind, ErrorKind::Denied);
        assert_eq!(
            e.message,
            "GitHub refused access to o/r (HTTP 403): API rate limit exceeded for 1.2.3.4."
        );
        let e = status_error(401, "o", "r", br#"{"message":"Bad credentials"}"#);
        assert_eq!(e.kind, ErrorKind::Denied);
        assert!(e.message.ends_with("Bad credentials"));
        let e = status_error(502, "o", "r", b"<html>  bad\n gateway </html>");
        assert_eq!(e.kind, ErrorKind::Upstream);
        assert!(e.retryable);
        assert_eq!(
            e.message,
            "GitHub answered HTTP 502 for o/r: <html> bad gateway </html>"
        );
        let e = status_error(422, "o", "r", b"");
        assert_eq!(e.kind, ErrorKind::Upstream);
        assert!(!e.retryable);
        assert!(e.message.ends_with("(no message)"));
    }
}
