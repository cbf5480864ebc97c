//! Every failure of the API as a status and a JSON body:
//!
//! ```json
//! {"error": {"type": "invalid_request", "message": "..."}}
//! ```
//!
//! The shape is OpenAI's, so OpenAI clients show the message too.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::protocol::Refused;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    /// A stable word for programs: `invalid_request`, `unauthorized`,
    /// `not_found`, `no_active_turn`, `queue_full`, `shutting_down`,
    /// `turn_failed`, `internal`.
    pub kind: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            kind,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    pub fn not_found_msg(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// A failure of the host itself (the store), logged with its cause.
    pub fn internal(error: anyhow::Error) -> ApiError {
        tracing::error!("API: {error:#}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("{error:#}"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "type": self.kind, "message": self.message } });
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<Refused> for ApiError {
    fn from(refused: Refused) -> ApiError {
        let (status, kind) = match &refused {
            Refused::NoActiveTurn(_) => (StatusCode::CONFLICT, "no_active_turn"),
            Refused::QueueFull(_) => (StatusCode::TOO_MANY_REQUESTS, "queue_full"),
            Refused::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid_request"),
            Refused::Closed(_) => (StatusCode::SERVICE_UNAVAILABLE, "shutting_down"),
            Refused::NotWaiting(_) => (StatusCode::CONFLICT, "not_waiting"),
            Refused::Failed(_) => {
                tracing::error!("API: {refused}");
                (StatusCode::INTERNAL_SERVER_ERROR, "internal")
            }
        };
        ApiError::new(status, kind, refused.to_string())
    }
}

/// A body that is not the JSON asked for: malformed, the wrong shape, the
/// wrong content type, or over the size limit.
impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        let status = rejection.status();
        let message = match &rejection {
            JsonRejection::MissingJsonContentType(_) => {
                "the body must be JSON, sent with `content-type: application/json`".to_string()
            }
            _ if status == StatusCode::PAYLOAD_TOO_LARGE => {
                "the body is larger than this server accepts".to_string()
            }
            _ => in_our_words(rejection.body_text()),
        };
        let kind = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "too_large"
        } else {
            "invalid_request"
        };
        ApiError::new(status, kind, message)
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> ApiError {
        ApiError::bad_request(in_our_words(rejection.body_text()))
    }
}

/// The framework's text of a rejection, its opening phrase in this API's
/// words (the rest, the parser's, names the field, line and column).
fn in_our_words(text: String) -> String {
    const PHRASES: [(&str, &str); 3] = [
        (
            "Failed to parse the request body as JSON: ",
            "the body is not valid JSON: ",
        ),
        (
            "Failed to deserialize the JSON body into the target type: ",
            "the body is not what this route takes: ",
        ),
        (
            "Failed to deserialize query string: ",
            "the query string is not what this route takes: ",
        ),
    ];
    for (theirs, ours) in PHRASES {
        if let Some(rest) = text.strip_prefix(theirs) {
            return format!("{ours}{rest}");
        }
    }
    text
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> ApiError {
        ApiError::bad_request(rejection.body_text())
    }
}

pub async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found_msg(format!("no route for {method} {}", uri.path()))
}

pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} does not take {method}", uri.path()),
    )
}
