//! `wasmclaw serve`: the HTTP API.
//!
//! A front end like the CLI: it holds a [`Core`] and nothing else of the
//! host, submits [`crate::protocol::Op`]s to it and reads
//! [`crate::protocol::Event`]s from it. Every route but `/healthz` needs the
//! bearer token.
//!
//! - [`sessions`]: messages, steering, interrupts, policy, a session's
//!   history and live turn tree.
//! - [`approvals`]: the tool calls of a session waiting for a person, and
//!   the decisions.
//! - [`events`]: a session's events as Server-Sent Events, resumable from a
//!   `seq` (`Last-Event-ID`), so a client that reconnects loses nothing.
//! - [`openai`]: `POST /v1/chat/completions`, where the model is the agent
//!   with its tools.
//! - [`metrics`]: Prometheus text, fed from the bus.
//! - [`auth`]: the bearer token. [`error`]: every failure as a JSON body.
//!
//! Shutdown ([`serve`]): messages are refused, running turns are asked to
//! wind down (then stopped once the grace period is over), the event log is
//! flushed, and then event streams end and the listener closes.

pub mod approvals;
pub mod auth;
pub mod error;
pub mod events;
pub mod mcp;
pub mod metrics;
pub mod openai;
pub mod sessions;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::core::Core;

pub use error::ApiError;

/// How the API behaves.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The bearer token every request but `/healthz` must carry.
    pub token: String,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Events an SSE client may fall behind before the stream refills from
    /// the event log.
    pub sse_buffer: usize,
    /// How long running turns may take to wind down at shutdown before they
    /// are stopped.
    pub shutdown_grace: Duration,
    /// What `/mcp` serves and to whom (`[mcp.server]`).
    pub mcp: crate::config::mcp::McpServeSettings,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

impl ServerConfig {
    pub fn new(token: String) -> ServerConfig {
        ServerConfig {
            token,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            sse_buffer: 1024,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            mcp: Default::default(),
        }
    }
}

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct Api {
    inner: Arc<Shared>,
}

struct Shared {
    core: Core,
    config: ServerConfig,
    metrics: metrics::Metrics,
    /// Fires once the host has wound down: event streams end.
    stopped: CancellationToken,
    started: Instant,
}

impl Api {
    /// The API over `core`. Starts the metrics task: call within a Tokio
    /// runtime.
    pub fn new(core: Core, config: ServerConfig) -> Api {
        let metrics = metrics::Metrics::start(&core);
        Api {
            inner: Arc::new(Shared {
                core,
                config,
                metrics,
                stopped: CancellationToken::new(),
                started: Instant::now(),
            }),
        }
    }

    pub fn core(&self) -> &Core {
        &self.inner.core
    }

    fn config(&self) -> &ServerConfig {
        &self.inner.config
    }

    /// Every route.
    pub fn router(&self) -> Router {
        let api = Router::new()
            .route("/v1/sessions", get(sessions::list))
            .route("/v1/sessions/{key}", get(sessions::show))
            .route("/v1/sessions/{key}/messages", post(sessions::message))
            .route("/v1/sessions/{key}/steer", post(sessions::steer))
            .route("/v1/sessions/{key}/interrupt", post(sessions::interrupt))
            .route("/v1/sessions/{key}/policy", post(sessions::policy))
            .route("/v1/sessions/{key}/compact", post(sessions::compact))
            .route("/v1/sessions/{key}/events", get(events::stream))
            .route("/v1/sessions/{key}/approvals", get(approvals::list))
            .route(
                "/v1/sessions/{key}/approvals/{call_id}",
                post(approvals::decide),
            )
            .route("/v1/plugins", get(plugins))
            .route("/v1/chat/completions", post(openai::completions))
            .route("/v1/models", get(openai::models))
            .route("/metrics", get(metrics::render))
            .nest_service("/mcp", mcp::service(self.core(), &self.config().mcp))
            .route_layer(axum::middleware::from_fn_with_state(
                self.clone(),
                auth::require_token,
            ));
        Router::new()
            .route("/healthz", get(healthz))
            .merge(api)
            .fallback(error::not_found)
            .method_not_allowed_fallback(error::method_not_allowed)
            .layer(DefaultBodyLimit::max(self.config().max_body_bytes))
            .with_state(self.clone())
    }

    /// Winds the host down: refuses messages, asks running turns to wind
    /// down, stops those still running after the grace period, flushes the
    /// event log, then ends the event streams.
    pub async fn shut_down(&self) {
        self.core().shut_down(self.config().shutdown_grace).await;
        self.inner.stopped.cancel();
    }
}

/// Serves `api` on `listener` until `signal` resolves, then shuts down
/// ([`Api::shut_down`]) and waits for open requests to finish.
pub async fn serve(
    listener: TcpListener,
    api: Api,
    signal: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let stopped = api.inner.stopped.clone();
    let server = axum::serve(listener, api.router())
        .with_graceful_shutdown(async move { stopped.cancelled().await });
    let mut server = tokio::spawn(server.into_future());
    tokio::select! {
        _ = signal => {}
        // The listener failed on its own.
        ended = &mut server => return Ok(ended??),
    }
    api.shut_down().await;
    server.await??;
    Ok(())
}

async fn healthz(State(api): State<Api>) -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({
        "status": if api.core().is_closed() { "stopping" } else { "ok" },
        "plugins": if api.core().plugins_scanned() { "loaded" } else { "loading" },
        "uptime_s": api.inner.started.elapsed().as_secs(),
    }))
}

/// `GET /v1/plugins`: every file of the plugin directory, as `wasmclaw
/// plugins list --json` prints it.
async fn plugins(State(api): State<Api>) -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "plugins": api.core().plugins() }))
}
