//! The bearer token: checked on every request but `/healthz`, and made at
//! first start when none is configured.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{Api, ApiError};

/// Lets the request through if it carries `Authorization: Bearer TOKEN`.
pub async fn require_token(State(api): State<Api>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token);
    match given {
        Some(token) if same(token.trim().as_bytes(), api.config().token.as_bytes()) => {
            next.run(request).await
        }
        _ => {
            let message = match given {
                None => {
                    "this API needs `Authorization: Bearer TOKEN` (the token `wasmclaw serve` printed, or --token / WASMCLAW_API_TOKEN)"
                }
                Some(_) => "the bearer token is not this server's",
            };
            let mut response =
                ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}

/// Compares in time that depends on the length only, not on where the
/// first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token kept at `path`, made (32 random bytes, hex) and written there,
/// readable by the owner only, if there is none yet. `true` when it was made
/// now.
pub fn load_or_create(path: &Path) -> Result<(String, bool)> {
    match std::fs::read_to_string(path) {
        Ok(token) if !token.trim().is_empty() => return Ok((token.trim().to_string(), false)),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("getting random bytes for the API token: {e}"))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("creating {}", path.display()))?
    };
    // `mode` applies only to a file it creates: an empty one found there
    // may be readable by others.
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("making {} readable by its owner only", path.display()))?;
    }
    writeln!(file, "{token}").with_context(|| format!("writing {}", path.display()))?;
    Ok((token, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_made_once_for_the_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api-token");
        let (token, made) = load_or_create(&path).unwrap();
        assert!(made);
        assert_eq!(token.len(), 64);
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(load_or_create(&path).unwrap(), (token, false));
    }

    #[test]
    fn comparison_needs_every_byte() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
