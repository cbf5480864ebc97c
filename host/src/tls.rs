//! TLS for outgoing connections (the model clients, plugins' `wasi:http`
//! requests): the system's root certificates are read once per process,
//! and only when the first https client is set up.
//!
//! Reading them (a few hundred files under `/etc/ssl/certs` on Linux) was
//! an eighth of a one-shot run's CPU, though a local model is plain http.
//! A client for plain http gets no roots at all ([`plain`]); one for https
//! gets the shared configuration ([`https`]), which verifies servers as
//! reqwest's own would (the platform's verifier, TLS 1.2 and 1.3, HTTP/2 or
//! 1.1 by ALPN).

use std::sync::{Arc, OnceLock};

/// `builder` for plain http: no root certificates read. An https URL (a
/// redirect) cannot be verified by such a client; callers refuse those
/// before.
pub fn plain(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    builder.tls_certs_only(std::iter::empty())
}

/// `builder` for https, with the shared configuration; the error says why
/// the system's roots could not be read.
pub fn https(builder: reqwest::ClientBuilder) -> Result<reqwest::ClientBuilder, String> {
    Ok(builder.tls_backend_preconfigured(config()?))
}

/// The configuration every https client shares, made on first use.
fn config() -> Result<rustls::ClientConfig, String> {
    static CONFIG: OnceLock<Result<rustls::ClientConfig, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
            let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
                .map_err(|e| format!("the system's TLS root certificates: {e}"))?;
            let mut config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("setting up TLS: {e}"))?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth();
            config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
            Ok(config)
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kinds_of_client_build() {
        plain(reqwest::Client::builder()).build().unwrap();
        https(reqwest::Client::builder()).unwrap().build().unwrap();
    }
}
