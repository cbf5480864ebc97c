//! Blocking HTTP requests over `wasi:http/outgoing-handler` (WASI 0.2), for
//! wasmclaw's Rust plugins (web_fetch, github_repo) and test fixtures, through
//! the `wasi` crate's bindings.
//!
//! The host checks every request against the plugin's network grant and
//! refuses with `error-code.internal-error(some(reason))`; that reason is
//! passed on word for word. The host does not follow redirects: a 3xx is an
//! ordinary response here.

use wasi::http::outgoing_handler;
use wasi::http::types::{
    ErrorCode, Fields, FutureIncomingResponse, HeaderError, IncomingBody, IncomingResponse, Method,
    OutgoingBody, OutgoingRequest, Scheme, http_error_code,
};
use wasi::io::streams::StreamError;

/// Bytes written to the request body per `blocking-write-and-flush` (the
/// most WASI 0.2 promises to take at once).
const WRITE_CHUNK: usize = 4096;

/// Bytes asked for per read of the response body.
const READ_CHUNK: u64 = 64 * 1024;

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The request could not be built from what the caller gave (method,
    /// scheme, authority, path or a header's syntax).
    Invalid(String),
    /// The host does not let the plugin set this header.
    Forbidden(String),
    /// The host refused the request, or the request or its response failed.
    Upstream(String),
}

/// One request.
pub struct Request<'a> {
    /// `GET`, `POST`, ... (any other token is sent as is).
    pub method: &'a str,
    /// `http`, `https` or anything else (the host decides).
    pub scheme: &'a str,
    /// `host[:port]`.
    pub authority: &'a str,
    /// Starts with `/`.
    pub path_with_query: &'a str,
    pub headers: &'a [(String, String)],
    /// `None`: no body at all (not an empty streamed one).
    pub body: Option<&'a [u8]>,
    /// Read at most this many bytes of the response body; the rest is left
    /// unread and `Response::truncated` says so.
    pub max_body: usize,
}

/// A response, read whole (or up to `Request::max_body`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// In the order the host gives them; names are lower-case.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    pub truncated: bool,
}

impl Response {
    /// The first value of a header, lossy UTF-8.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }
}

/// What a WASI error code says: the host's own reason for an
/// `internal-error(some(reason))`, verbatim; otherwise the code's debug text.
pub fn describe(code: &ErrorCode) -> String {
    match code {
        ErrorCode::InternalError(Some(message)) => message.clone(),
        other => format!("{other:?}"),
    }
}

/// Sends the request, waits for the response and reads its body.
pub fn send(request: &Request<'_>) -> Result<Response, Failure> {
    let fields = Fields::new();
    for (name, value) in request.headers {
        fields
            .append(name, value.as_bytes())
            .map_err(|e| header_failure(name, e))?;
    }
    if let Some(body) = request.body
        && !request
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        // A known length, so that the body is not sent chunked.
        fields
            .append("content-length", body.len().to_string().as_bytes())
            .map_err(|e| header_failure("content-length", e))?;
    }

    let outgoing = OutgoingRequest::new(fields);
    outgoing
        .set_method(&method(request.method))
        .map_err(|()| Failure::Invalid(format!("invalid HTTP method {:?}", request.method)))?;
    outgoing
        .set_scheme(Some(&scheme(request.scheme)))
        .map_err(|()| Failure::Invalid(format!("invalid URL scheme {:?}", request.scheme)))?;
    outgoing
        .set_authority(Some(request.authority))
        .map_err(|()| Failure::Invalid(format!("invalid URL authority {:?}", request.authority)))?;
    outgoing
        .set_path_with_query(Some(request.path_with_query))
        .map_err(|()| {
            Failure::Invalid(format!("invalid URL path {:?}", request.path_with_query))
        })?;

    // The body is taken before the request is handed over and written after:
    // the host reads it while the request is under way.
    let body = match request.body {
        Some(bytes) => Some((
            outgoing
                .body()
                .map_err(|()| Failure::Upstream("the request body was already taken".into()))?,
            bytes,
        )),
        None => None,
    };

    let future = outgoing_handler::handle(outgoing, None)
        .map_err(|code| Failure::Upstream(describe(&code)))?;

    if let Some((body, bytes)) = body
        && let Err(write_error) = write_body(body, bytes)
    {
        // The response usually says better what went wrong.
        return Err(match wait(&future) {
            Err(failure) => failure,
            Ok(_) => Failure::Upstream(write_error),
        });
    }

    let response = wait(&future)?;
    read_response(&response, request.max_body)
}

fn header_failure(name: &str, error: HeaderError) -> Failure {
    match error {
        HeaderError::Forbidden => {
            Failure::Forbidden(format!("the header {name:?} may not be set by the plugin"))
        }
        HeaderError::InvalidSyntax => {
            Failure::Invalid(format!("the header {name:?} or its value is not valid"))
        }
        HeaderError::Immutable => {
            Failure::Invalid(format!("the header {name:?} cannot be changed"))
        }
    }
}

fn method(name: &str) -> Method {
    match name {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "CONNECT" => Method::Connect,
        "OPTIONS" => Method::Options,
        "TRACE" => Method::Trace,
        "PATCH" => Method::Patch,
        other => Method::Other(other.to_string()),
    }
}

fn scheme(name: &str) -> Scheme {
    if name.eq_ignore_ascii_case("http") {
        Scheme::Http
    } else if name.eq_ignore_ascii_case("https") {
        Scheme::Https
    } else {
        Scheme::Other(name.to_string())
    }
}

fn stream_error(error: StreamError) -> String {
    match error {
        StreamError::Closed => "the stream was closed early".into(),
        StreamError::LastOperationFailed(e) => match http_error_code(&e) {
            Some(code) => describe(&code),
            None => e.to_debug_string(),
        },
    }
}

/// Writes the whole body and finishes it.
fn write_body(body: OutgoingBody, bytes: &[u8]) -> Result<(), String> {
    {
        // The stream must be gone before the body is finished.
        let stream = body
            .write()
            .map_err(|()| "the request body stream was already taken".to_string())?;
        for chunk in bytes.chunks(WRITE_CHUNK) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(stream_error)?;
        }
    }
    OutgoingBody::finish(body, None).map_err(|code| describe(&code))
}

/// Blocks until the response (or the error) is there.
fn wait(future: &FutureIncomingResponse) -> Result<IncomingResponse, Failure> {
    {
        let pollable = future.subscribe();
        pollable.block();
    }
    match future.get() {
        Some(Ok(Ok(response))) => Ok(response),
        Some(Ok(Err(code))) => Err(Failure::Upstream(describe(&code))),
        Some(Err(())) => Err(Failure::Upstream("the response was already taken".into())),
        None => Err(Failure::Upstream("no response after waiting for it".into())),
    }
}

fn read_response(response: &IncomingResponse, max_body: usize) -> Result<Response, Failure> {
    let status = response.status();
    let headers = {
        let fields = response.headers();
        fields.entries()
    };
    let incoming = response
        .consume()
        .map_err(|()| Failure::Upstream("the response body was already taken".into()))?;
    let (body, truncated) = read_body(&incoming, max_body);
    // Trailers are not wanted; finishing releases the body.
    drop(IncomingBody::finish(incoming));
    let body = body.map_err(Failure::Upstream)?;
    Ok(Response {
        status,
        headers,
        body,
        truncated,
    })
}

fn read_body(incoming: &IncomingBody, max_body: usize) -> (Result<Vec<u8>, String>, bool) {
    let stream = match incoming.stream() {
        Ok(stream) => stream,
        Err(()) => {
            return (
                Err("the response body stream was already taken".into()),
                false,
            );
        }
    };
    let mut data = Vec::new();
    loop {
        // At the limit, one more byte tells whether anything is left.
        let want = READ_CHUNK
            .min(max_body.saturating_sub(data.len()) as u64)
            .max(1);
        match stream.blocking_read(want) {
            Ok(chunk) if data.len() >= max_body && !chunk.is_empty() => return (Ok(data), true),
            Ok(chunk) => data.extend_from_slice(&chunk),
            Err(StreamError::Closed) => return (Ok(data), false),
            Err(error) => return (Err(stream_error(error)), false),
        }
    }
}
