//! The fake model's fault shapes that real servers were seen to send: tool
//! calls with raw (possibly invalid) arguments, cut at the token limit;
//! llama.cpp's error events and its refusal of invalid arguments in a
//! history; blank `data:` lines; streams kept alive without end; tool-call
//! chunks identified by `id` only; each format's own error event inside a
//! stream.

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::{Ctx, Format, Reply, anthropic_body, events, fragments, openai_usage, sse_response};

/// llama.cpp's answer to a request whose history carries tool-call
/// arguments that are not valid JSON (OpenAI format), or `None`.
pub(super) fn reject_invalid_arguments(format: Format, request: &Value) -> Option<Response> {
    if !matches!(format, Format::OpenAi) {
        return None;
    }
    let messages = request["messages"].as_array()?;
    let invalid = messages
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .filter_map(|c| c["function"]["arguments"].as_str())
        .find(|a| serde_json::from_str::<Value>(a).is_err())?;
    let message = format!("Failed to parse tool call arguments as JSON: {invalid}");
    let body = json!({"error": {"code": 500, "message": message, "type": "server_error"}});
    Some((StatusCode::INTERNAL_SERVER_ERROR, Json(body)).into_response())
}

/// One tool call with `arguments` as raw text; `cut`: at the token limit.
pub(super) fn raw_tool_call(
    ctx: &Ctx,
    stream: bool,
    id: &str,
    name: &str,
    arguments: &str,
    cut: bool,
) -> Response {
    match (ctx.format, stream) {
        (Format::OpenAi, false) => {
            let finish = if cut { "length" } else { "tool_calls" };
            let call = json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}});
            Json(json!({
                "id": ctx.id,
                "object": "chat.completion",
                "created": ctx.created,
                "model": ctx.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [call]}, "finish_reason": finish}],
                "usage": openai_usage(ctx),
            }))
            .into_response()
        }
        (Format::OpenAi, true) => {
            let chunk = |delta: Value, finish: Value| {
                let chunk = json!({
                    "id": ctx.id,
                    "object": "chat.completion.chunk",
                    "created": ctx.created,
                    "model": ctx.model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                });
                format!("data: {chunk}\n\n")
            };
            let head = json!({"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}});
            let mut events = vec![
                chunk(json!({"role": "assistant", "content": null}), Value::Null),
                chunk(json!({"tool_calls": [head]}), Value::Null),
            ];
            for piece in fragments(arguments, 3) {
                let part = json!({"index": 0, "function": {"arguments": piece}});
                events.push(chunk(json!({"tool_calls": [part]}), Value::Null));
            }
            let finish = if cut { "length" } else { "tool_calls" };
            events.push(chunk(json!({}), finish.into()));
            events.push("data: [DONE]\n\n".into());
            sse_response(events, false)
        }
        (Format::Anthropic, false) => {
            let input = serde_json::from_str::<Value>(arguments)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({}));
            let mut body = anthropic_body(ctx, "", &[]);
            body["content"] = json!([{"type": "tool_use", "id": id, "name": name, "input": input}]);
            body["stop_reason"] = json!(if cut { "max_tokens" } else { "tool_use" });
            Json(body).into_response()
        }
        (Format::Anthropic, true) => {
            let event = |data: Value| {
                format!(
                    "event: {}\ndata: {data}\n\n",
                    data["type"].as_str().unwrap()
                )
            };
            let mut message = anthropic_body(ctx, "", &[]);
            message["content"] = json!([]);
            message["stop_reason"] = Value::Null;
            let mut events = vec![
                event(json!({"type": "message_start", "message": message})),
                event(json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})),
            ];
            for piece in fragments(arguments, 3) {
                events.push(event(json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": piece}})));
            }
            events.push(event(json!({"type": "content_block_stop", "index": 0})));
            let stop = if cut { "max_tokens" } else { "tool_use" };
            events.push(event(json!({"type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 5}})));
            events.push(event(json!({"type": "message_stop"})));
            sse_response(events, false)
        }
    }
}

/// The start of a text reply, then llama.cpp's error event.
pub(super) fn llama_cpp_error(ctx: &Ctx, stream: bool, message: &str) -> Response {
    let error = json!({"code": 500, "message": message, "type": "server_error"});
    if !stream {
        let body = json!({ "error": error });
        return (StatusCode::INTERNAL_SERVER_ERROR, Json(body)).into_response();
    }
    let mut events = events(ctx, "Partial text before the failure.", &[]);
    let (keep, failure) = match ctx.format {
        // Role chunk and one delta; then an `error:` line.
        Format::OpenAi => (2, format!("error: {error}\n\n")),
        // message_start, ping, content_block_start and one delta.
        Format::Anthropic => (
            4,
            format!("event: error\ndata: {}\n\n", json!({ "error": error })),
        ),
    };
    events.truncate(keep);
    events.push(failure);
    sse_response(events, false)
}

/// The start of a text reply, then the format's own error event of
/// `error_type`; not streamed, HTTP `status` with that error.
pub(super) fn stream_error(
    ctx: &Ctx,
    stream: bool,
    status: u16,
    error_type: &str,
    message: &str,
) -> Response {
    let (error, keep) = match ctx.format {
        Format::OpenAi => (
            json!({"error": {"message": message, "type": error_type, "code": null}}),
            // Role chunk and one delta.
            2,
        ),
        Format::Anthropic => (
            json!({"type": "error", "error": {"type": error_type, "message": message}}),
            // message_start, ping, content_block_start and one delta.
            4,
        ),
    };
    if !stream {
        let status = StatusCode::from_u16(status).expect("a valid HTTP status");
        return (status, Json(error)).into_response();
    }
    let mut events = events(ctx, "Partial text before the failure.", &[]);
    events.truncate(keep);
    events.push(match ctx.format {
        Format::OpenAi => format!("data: {error}\n\n"),
        Format::Anthropic => format!("event: error\ndata: {error}\n\n"),
    });
    sse_response(events, false)
}

/// The inner reply, each of its events after an event of blank data.
pub(super) fn blank_data(ctx: &Ctx, stream: bool, inner: Reply) -> Response {
    let (text, calls) = match inner {
        Reply::Text(text) => (text, Vec::new()),
        Reply::ToolCalls { text, calls } => (text, calls),
        other => panic!("fake model: BlankData wraps a text or tool-call reply, not {other:?}"),
    };
    if !stream {
        return Json(super::body(ctx, &text, &calls)).into_response();
    }
    let events = events(ctx, &text, &calls)
        .into_iter()
        .flat_map(|e| ["data:\n\n".to_string(), e])
        .collect();
    sse_response(events, false)
}

/// The reply starts, then an event that carries nothing every `every`.
pub(super) fn keep_alive(ctx: &Ctx, every: Duration) -> Response {
    let (start, nothing) = match ctx.format {
        Format::OpenAi => {
            let chunk = |delta: Value| {
                let chunk = json!({"id": ctx.id, "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
                format!("data: {chunk}\n\n")
            };
            (
                chunk(json!({"role": "assistant", "content": ""})),
                chunk(json!({})),
            )
        }
        Format::Anthropic => {
            let mut message = anthropic_body(ctx, "", &[]);
            message["content"] = json!([]);
            message["stop_reason"] = Value::Null;
            let start = json!({"type": "message_start", "message": message});
            (
                format!("event: message_start\ndata: {start}\n\n"),
                "event: ping\ndata: {\"type\": \"ping\"}\n\n".to_string(),
            )
        }
    };
    let first =
        futures_util::stream::once(async move { Ok::<_, std::io::Error>(Bytes::from(start)) });
    let rest = futures_util::stream::repeat(Bytes::from(nothing)).then(move |b| async move {
        tokio::time::sleep(every).await;
        Ok(b)
    });
    let mut response = Response::new(Body::from_stream(first.chain(rest)));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, "text/event-stream".parse().unwrap());
    response
}

/// Rewrites one call's chunks as some servers send them: each carries the
/// call's `id`, none an `index`.
pub(super) fn by_id_only(chunks: &mut [Value], id: &str) {
    for chunk in chunks {
        for call in chunk["choices"][0]["delta"]["tool_calls"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            let call = call.as_object_mut().unwrap();
            call.remove("index");
            call.insert("id".into(), id.into());
        }
    }
}
