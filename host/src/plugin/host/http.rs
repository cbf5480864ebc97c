//! `wasi:http/outgoing-handler`: every outgoing request passes the plugin's
//! network grant before the host sends it.
//!
//! For each request, in order:
//! 1. the call has requests left (`max_requests`), and the host a
//!    descriptor for it (see [`crate::plugin::sandbox::descriptors`]), held until the
//!    response is read;
//! 2. its origin (`scheme://host:port`) is in the allow-list;
//! 3. the host resolves the name itself; every address must be public,
//!    unless the origin names that address (`http://127.0.0.1:8080`);
//! 4. the request goes to exactly the address checked (no second lookup,
//!    so a name cannot be re-pointed in between), with no proxy and without
//!    following redirects: a redirect comes back to the guest, whose next
//!    request is checked again;
//! 5. credentials the grant names for that host are added as headers here,
//!    so their values never enter the guest;
//! 6. the response is read up to `max_response_kib` within `timeout_ms`,
//!    and every credential value in it is replaced before the guest sees it;
//! 7. the request body while it is sent, and the answer until the guest lets
//!    go of it, count against the call's memory limit (see
//!    [`crate::plugin::sandbox::host_memory`]).
//!
//! A refusal reaches the guest as `error-code.internal-error` with the
//! host's reason, which names the plugin and the origin.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::plugin::policy::network::{NetworkGrant, internal_address};
use crate::plugin::policy::secrets::Secrets;
use crate::plugin::sandbox::access::NetworkAccess;
use crate::plugin::sandbox::host_memory::{BODY_CHUNK, CallMemory, Charge};
use crate::plugin::units::{duration, size};

/// How long the host waits for a name to resolve.
const DNS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What replaces a credential's value in a response.
const SCRUBBED: &[u8] = b"[REDACTED]";

type Sent = Box<dyn Future<Output = Result<(), Error>> + Send>;
type Answer = Box<dyn Future<Output = Result<(http::Response<WasiBody>, Sent), Error>> + Send>;

impl WasiHttpHooks for NetworkAccess {
    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        BODY_CHUNK
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _sent: Sent,
    ) -> Answer {
        self.sent = self.sent.saturating_add(1);
        let over = (self.sent > self.grant.max_requests).then(|| {
            format!(
                "plugin '{}' made more than {} HTTP requests in one call",
                self.plugin, self.grant.max_requests
            )
        });
        let (plugin, grant, secrets, descriptors, memory) = (
            self.plugin.clone(),
            self.grant.clone(),
            self.secrets.clone(),
            self.descriptors.clone(),
            self.memory.clone(),
        );
        Box::new(async move {
            if let Some(message) = over {
                return Err(refuse(&plugin, message));
            }
            // The connection's socket, until the whole answer is read.
            let _socket = descriptors
                .take()
                .ok_or_else(|| refuse(&plugin, descriptors.spent(&plugin, "send a request")))?;
            let response = send(&plugin, &grant, &secrets, &memory, request, options)
                .await
                .map_err(|message| refuse(&plugin, message))?;
            Ok((response, Box::new(async { Ok(()) }) as Sent))
        })
    }
}

fn refuse(plugin: &str, message: String) -> Error {
    tracing::warn!(target: "plugin", plugin, "{message}");
    Error::InternalError(Some(message))
}

/// The checks and the request; the error is the reason, in words.
async fn send(
    plugin: &str,
    grant: &NetworkGrant,
    secrets: &Secrets,
    memory: &Arc<CallMemory>,
    request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<http::Response<WasiBody>, String> {
    let uri = request.uri().clone();
    let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
    let host = uri
        .host()
        .ok_or_else(|| format!("plugin '{plugin}' sent a request without a host: {uri}"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let origin_text = format!(
        "{}://{}",
        if https { "https" } else { "http" },
        uri.authority().map(|a| a.as_str()).unwrap_or(host)
    );
    let Some(origin) = grant.allow.iter().find(|o| o.matches(https, host, port)) else {
        return Err(format!(
            "plugin '{plugin}' may not reach {origin_text}: it is not in the plugin's network allow-list"
        ));
    };

    let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => tokio::time::timeout(DNS_TIMEOUT, tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| {
                format!(
                    "plugin '{plugin}' could not reach {origin_text}: {host} did not resolve within {}",
                    duration(DNS_TIMEOUT)
                )
            })?
            .map_err(|e| {
                format!("plugin '{plugin}' could not reach {origin_text}: {host} does not resolve: {e}")
            })?
            .map(|a| a.ip())
            .collect(),
    };
    for ip in &addresses {
        if let Some(why) = internal_address(*ip)
            && !origin.names(*ip)
        {
            let scheme = if https { "https" } else { "http" };
            let named = SocketAddr::new(*ip, port);
            return Err(format!(
                "plugin '{plugin}' may not reach {origin_text}: {host} is {ip}, {why}; only an origin that names that address (e.g. \"{scheme}://{named}\") allows it"
            ));
        }
    }
    let ip = *addresses.first().ok_or_else(|| {
        format!("plugin '{plugin}' could not reach {origin_text}: {host} resolves to no address")
    })?;
    let checked: Vec<SocketAddr> = addresses
        .iter()
        .map(|a| SocketAddr::new(*a, port))
        .collect();

    let mut timeout = grant.timeout;
    if let Some(connect) = options.and_then(|o| o.connect_timeout) {
        timeout = timeout.min(connect.max(std::time::Duration::from_millis(1)));
    }
    let builder = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(grant.timeout)
        .connect_timeout(timeout)
        // Only the addresses checked above, in their order.
        .resolve_to_addrs(host, &checked);
    // The system's TLS roots are read for the first https request only,
    // then shared.
    let builder = match https {
        true => crate::tls::https(builder)
            .map_err(|e| format!("the host could not set up the request: {e}"))?,
        false => crate::tls::plain(builder),
    };
    let client = builder
        .build()
        .map_err(|e| format!("the host could not set up the request: {e}"))?;

    let over_memory = |what: String| {
        format!(
            "{what} would put plugin '{plugin}' over its memory limit of {} (its memory and what the host holds for it count together)",
            size(memory.limit())
        )
    };
    let (parts, body) = request.into_parts();
    let limit = grant.max_request_bytes as usize;
    let mut body = http_body_util::Limited::new(body, limit);
    // Charged as it is collected, and held while it is sent.
    let mut sending = memory
        .charge(0)
        .map_err(|_| over_memory(format!("the request body to {origin_text}")))?;
    let mut collected = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                format!(
                    "plugin '{plugin}' sent a request body to {origin_text} larger than its limit of {} (network.max_request_kib)",
                    size(limit as u64)
                )
            } else {
                format!("plugin '{plugin}' sent a request body that could not be read: {e}")
            }
        })?;
        if let Ok(chunk) = frame.into_data() {
            let len = (collected.len() + chunk.len()) as u64;
            sending.resize(len).map_err(|_| {
                over_memory(format!(
                    "the request body to {origin_text} (at least {})",
                    size(len)
                ))
            })?;
            collected.extend_from_slice(&chunk);
        }
    }
    let body = Bytes::from(collected);
    let mut headers = parts.headers;
    headers.remove(http::header::HOST);
    // Hop-by-hop: how the answer travels is the host's to choose. A guest's
    // `TE` could ask for a transfer coding that hides a credential from the
    // scrub.
    headers.remove(http::header::TE);
    headers.remove(http::header::TRANSFER_ENCODING);
    let mut scrub: Vec<Vec<u8>> = Vec::new();
    // A credential travels only encrypted, or to an address the operator
    // named (a test server on loopback).
    let may_carry = https || host.parse::<IpAddr>().is_ok();
    for credential in grant
        .credentials
        .iter()
        .filter(|c| may_carry && c.host.matches(host))
    {
        let value = secrets.get(&credential.secret).ok_or_else(|| {
            format!(
                "the secret {:?} of plugin '{plugin}' is no longer set; {}",
                credential.secret,
                secrets.where_to_put(&credential.secret)
            )
        })?;
        let header = http::HeaderName::from_bytes(credential.header.as_bytes())
            .expect("checked when the grants were read");
        let mut full = http::HeaderValue::from_str(&format!("{}{value}", credential.prefix))
            .map_err(|_| {
                format!(
                    "the secret {:?} is not a valid header value",
                    credential.secret
                )
            })?;
        full.set_sensitive(true);
        headers.insert(header, full);
        scrub.push(value.into_bytes());
    }

    if !scrub.is_empty() {
        // The scrub below finds the secret only as sent: no compressed or
        // partial answers, in which it would hide.
        headers.insert(
            http::header::ACCEPT_ENCODING,
            http::HeaderValue::from_static("identity"),
        );
        headers.remove(http::header::RANGE);
    }

    let mut response = client
        .request(parts.method, uri.to_string())
        .headers(headers)
        .body(body)
        .send()
        .await
        .map_err(|e| request_error(&origin_text, ip, grant, &e))?;

    if !scrub.is_empty()
        && let Some(why) = not_plain(response.status(), response.headers())
    {
        return Err(format!(
            "the response from {origin_text} is {why}, so the credential could not be removed from it; it was not passed on"
        ));
    }
    let limit = grant.max_response_bytes;
    let over_memory_answer = || over_memory(format!("the response from {origin_text}"));
    // Charged as each piece arrives, so the host never holds more for the
    // call than its limit allows; counted until the guest has read it and
    // let go of it.
    let mut charge = memory.charge(0).map_err(|_| over_memory_answer())?;
    let mut data = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| request_error(&origin_text, ip, grant, &e))?
    {
        if data.len() as u64 + chunk.len() as u64 > limit {
            return Err(format!(
                "the response from {origin_text} is larger than the plugin's limit of {} (network.max_response_kib)",
                size(limit)
            ));
        }
        charge
            .resize((data.len() + chunk.len()) as u64)
            .map_err(|_| over_memory_answer())?;
        data.extend_from_slice(&chunk);
    }

    let mut out = http::Response::builder().status(response.status());
    for (name, value) in response.headers() {
        if matches!(
            name,
            &http::header::CONTENT_LENGTH | &http::header::TRANSFER_ENCODING
        ) {
            continue;
        }
        let mut value = value.as_bytes().to_vec();
        for secret in &scrub {
            value = replace_all(&value, secret, SCRUBBED);
        }
        if let Ok(value) = http::HeaderValue::from_bytes(&value) {
            out = out.header(name, value);
        }
    }
    for secret in &scrub {
        // The scrub's copy is held beside the answer until it replaces it:
        // charged first at the answer's size, then at what it came to.
        let before = data.len() as u64;
        charge
            .resize(2 * before)
            .map_err(|_| over_memory_answer())?;
        let scrubbed = replace_all(&data, secret, SCRUBBED);
        charge
            .resize(before + scrubbed.len() as u64)
            .map_err(|_| over_memory_answer())?;
        data = scrubbed;
        charge
            .resize(data.len() as u64)
            .map_err(|_| over_memory_answer())?;
    }
    let body = Full::new(Bytes::from_owner(Held {
        data,
        _charge: charge,
    }))
    .map_err(|never| match never {})
    .boxed_unsync();
    out.body(body)
        .map_err(|e| format!("the response from {origin_text} could not be passed on: {e}"))
}

/// An answer's bytes and the memory they are charged to.
struct Held {
    data: Vec<u8>,
    _charge: Charge,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// Why the body of an answer is not the plain bytes the scrub reads, if it
/// is not: a content coding other than `identity` in any `Content-Encoding`
/// line (each a comma list), a transfer coding other than `chunked` (which
/// the client undoes), or a partial answer.
fn not_plain(status: http::StatusCode, headers: &http::HeaderMap) -> Option<String> {
    let codings = |name: &http::HeaderName, plain: &[&str]| {
        let all: Vec<String> = headers
            .get_all(name)
            .iter()
            .flat_map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .split(',')
                    .map(|c| c.trim().to_ascii_lowercase())
                    .collect::<Vec<_>>()
            })
            .filter(|c| !c.is_empty())
            .collect();
        all.iter()
            .any(|c| !plain.contains(&c.as_str()))
            .then(|| format!("encoded ({name}: {})", all.join(", ")))
    };
    codings(&http::header::CONTENT_ENCODING, &["identity"])
        .or_else(|| codings(&http::header::TRANSFER_ENCODING, &["chunked", "identity"]))
        .or_else(|| {
            (status == http::StatusCode::PARTIAL_CONTENT)
                .then(|| "partial (206 Partial Content)".to_string())
        })
}

fn request_error(origin: &str, ip: IpAddr, grant: &NetworkGrant, e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!(
            "{origin} did not answer within {} (network.timeout_ms)",
            duration(grant.timeout)
        )
    } else if e.is_connect() {
        format!("could not connect to {origin} ({ip})")
    } else {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        format!("the request to {origin} failed: {text}")
    }
}

/// `haystack` with every `needle` replaced by `with`.
fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return haystack.to_vec();
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_coding_of_every_header_line_is_considered() {
        let headers = |pairs: &[(&str, &str)]| {
            let mut map = http::HeaderMap::new();
            for (name, value) in pairs {
                map.append(
                    http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    http::HeaderValue::from_str(value).unwrap(),
                );
            }
            map
        };
        let ok = http::StatusCode::OK;
        let check = |pairs: &[(&str, &str)]| not_plain(ok, &headers(pairs));
        assert_eq!(check(&[]), None);
        assert_eq!(check(&[("content-encoding", "identity")]), None);
        assert_eq!(check(&[("transfer-encoding", "chunked")]), None);
        assert_eq!(
            check(&[
                ("content-encoding", "identity"),
                ("content-encoding", "gzip")
            ]),
            Some("encoded (content-encoding: identity, gzip)".into())
        );
        assert_eq!(
            check(&[("content-encoding", "identity, br")]),
            Some("encoded (content-encoding: identity, br)".into())
        );
        assert_eq!(
            check(&[("transfer-encoding", "gzip, chunked")]),
            Some("encoded (transfer-encoding: gzip, chunked)".into())
        );
        assert_eq!(
            not_plain(http::StatusCode::PARTIAL_CONTENT, &headers(&[])),
            Some("partial (206 Partial Content)".into())
        );
    }

    #[test]
    fn every_occurrence_is_replaced() {
        assert_eq!(
            replace_all(b"a-tok-b-tok", b"tok", b"[REDACTED]"),
            b"a-[REDACTED]-b-[REDACTED]"
        );
        assert_eq!(replace_all(b"to", b"tok", b"x"), b"to");
        assert_eq!(replace_all(b"tototok", b"tok", b"X"), b"totoX");
    }
}
