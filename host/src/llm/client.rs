//! The HTTP clients every model candidate shares: one for plain http and
//! one for https, each made on its first request, so a chain of local
//! models (plain http on 127.0.0.1) never reads the system's TLS roots (see
//! [`crate::tls`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The candidates' clients (connection pools). Cheap to clone: clones
/// share them.
#[derive(Clone, Default)]
pub struct HttpClient {
    inner: Arc<Clients>,
}

#[derive(Default)]
struct Clients {
    plain: OnceLock<Result<reqwest::Client, String>>,
    https: OnceLock<Result<reqwest::Client, String>>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient").finish_non_exhaustive()
    }
}

/// How many redirects a model request follows (reqwest's default).
const MAX_REDIRECTS: usize = 10;

impl HttpClient {
    /// The client for `url`: the https one for an `https:` URL (set up,
    /// with the system's roots, on its first use), else the plain one. The
    /// error says why a client could not be set up.
    pub fn for_url(&self, url: &str) -> Result<&reqwest::Client, String> {
        let https = url
            .get(..8)
            .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"));
        let client = if https {
            self.inner
                .https
                .get_or_init(|| crate::tls::https(builder())?.build().map_err(text))
        } else {
            // A plain client cannot verify a server: a redirect to https is
            // refused, naming the URL to use instead.
            let redirects = reqwest::redirect::Policy::custom(|attempt| {
                if attempt.url().scheme() == "https" {
                    let to = attempt.url().to_string();
                    attempt.error(format!(
                        "the server redirected to {to}: use that (an https URL) as the base URL"
                    ))
                } else if attempt.previous().len() >= MAX_REDIRECTS {
                    attempt.error("too many redirects")
                } else {
                    attempt.follow()
                }
            });
            self.inner.plain.get_or_init(|| {
                crate::tls::plain(builder())
                    .redirect(redirects)
                    .build()
                    .map_err(text)
            })
        };
        client.as_ref().map_err(Clone::clone)
    }
}

/// A provider's endpoint: its URL, parsed once rather than at each call.
#[derive(Debug, Clone)]
pub struct Endpoint {
    text: String,
    /// None when `text` is no URL: the request then fails as reqwest says.
    parsed: Option<reqwest::Url>,
}

impl Endpoint {
    /// `base_url` (a trailing `/` or not) and `path` (starting with `/`).
    pub fn new(base_url: &str, path: &str) -> Endpoint {
        let text = format!("{}{path}", base_url.trim_end_matches('/'));
        let parsed = reqwest::Url::parse(&text).ok();
        Endpoint { text, parsed }
    }

    /// A POST to this endpoint with the client for it (see
    /// [`HttpClient::for_url`]).
    pub fn post(&self, clients: &HttpClient) -> Result<reqwest::RequestBuilder, String> {
        let client = clients.for_url(&self.text)?;
        Ok(match &self.parsed {
            Some(url) => client.post(url.clone()),
            None => client.post(&self.text),
        })
    }
}

/// What both clients share.
fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("wasmclaw/", env!("CARGO_PKG_VERSION")))
}

fn text(e: reqwest::Error) -> String {
    format!(
        "setting up the HTTP client: {}",
        super::sse::error_chain(&e)
    )
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[test]
    fn each_scheme_has_its_client_and_keeps_it() {
        let clients = HttpClient::default();
        assert!(clients.inner.https.get().is_none());
        clients.for_url("http://127.0.0.1:1/v1").unwrap();
        // A plain URL does not set up TLS.
        assert!(clients.inner.https.get().is_none());
        clients.for_url("HTTPS://api.example.com/v1").unwrap();
        assert!(clients.inner.https.get().is_some());
        let plain = clients.for_url("http://a/").unwrap() as *const _;
        assert_eq!(plain, clients.for_url("http://b/").unwrap() as *const _);
    }

    #[tokio::test]
    async fn a_plain_client_refuses_a_redirect_to_https_and_names_it() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/v1/chat/completions",
            listener.local_addr().unwrap()
        );
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0; 4096];
            let _ = socket.read(&mut request).await.unwrap();
            let answer = "HTTP/1.1 307 Temporary Redirect\r\nlocation: https://models.example.com/v1/chat/completions\r\ncontent-length: 0\r\n\r\n";
            socket.write_all(answer.as_bytes()).await.unwrap();
        });
        let clients = HttpClient::default();
        let error = clients
            .for_url(&url)
            .unwrap()
            .post(&url)
            .send()
            .await
            .unwrap_err();
        let text = super::super::sse::error_chain(&error);
        assert!(
            text.contains(
                "the server redirected to https://models.example.com/v1/chat/completions: use that (an https URL) as the base URL"
            ),
            "{text}"
        );
    }
}
