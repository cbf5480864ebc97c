//! The HTTP API in the test process: an agent over real plugins and the
//! fake model, its [`Core`], and `wasmclaw::server` on a loopback port;
//! plus a client that sends the token.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use wasmclaw::agent::profile::Profiles;
use wasmclaw::agent::{Agent, AgentConfig};
use wasmclaw::bus::EventBus;
use wasmclaw::core::Core;
use wasmclaw::llm::ProviderConfig;
use wasmclaw::plugin::Plugins;
use wasmclaw::scheduler::SchedulerConfig;
use wasmclaw::server::{Api, ServerConfig};
use wasmclaw::store::Store;

pub const TOKEN: &str = "test-token-0123456789";

/// A running API server; stopped (gracefully) by [`TestServer::stop`].
pub struct TestServer {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    pub api: Api,
    pub core: Core,
    /// For tests of what only the agent shows (the bus's own numbering,
    /// events published by hand, the store's last seq).
    pub agent: Arc<Agent>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<anyhow::Result<()>>,
    /// Holds the session store's file.
    _dir: TempDir,
}

/// How to build a [`TestServer`].
pub struct Setup {
    pub agent: AgentConfig,
    pub scheduler: SchedulerConfig,
    pub server: ServerConfig,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            agent: AgentConfig::default(),
            scheduler: SchedulerConfig::default(),
            server: ServerConfig::new(TOKEN.to_string()),
        }
    }
}

impl TestServer {
    pub async fn start(
        plugins: Arc<Plugins>,
        candidates: Vec<ProviderConfig>,
        setup: Setup,
    ) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("sessions.db")).unwrap();
        let (agent, _events) = crate::agents::agent_with(plugins, candidates, store, setup.agent);
        Self::serve(agent, dir, setup.scheduler, setup.server).await
    }

    /// A server over the named agents `profiles` (`setup.agent` is not
    /// used: each agent has its own configuration).
    pub async fn start_agents(
        plugins: Arc<Plugins>,
        profiles: Profiles,
        setup: Setup,
    ) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("sessions.db")).unwrap();
        let bus = EventBus::new(store.last_seq().unwrap());
        let agent = Arc::new(Agent::with_profiles(plugins, profiles, bus, store, 64));
        Self::serve(agent, dir, setup.scheduler, setup.server).await
    }

    async fn serve(
        agent: Arc<Agent>,
        dir: TempDir,
        scheduler: SchedulerConfig,
        server: ServerConfig,
    ) -> TestServer {
        let core = Core::new(agent.clone(), scheduler);
        let api = Api::new(core.clone(), server);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(wasmclaw::server::serve(listener, api.clone(), async move {
            let _ = stopped.await;
        }));
        TestServer {
            url,
            api,
            core,
            agent,
            stop: Some(stop),
            task,
            _dir: dir,
        }
    }

    /// `url` + `path`.
    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// A client that sends the token with every request.
    pub fn client(&self) -> reqwest::Client {
        client_builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap()
    }

    /// Shuts the server down as SIGTERM would, and waits for it (at most
    /// 30 s).
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(30), &mut self.task)
            .await
            .expect("the server stops within 30 s")
            .expect("the server task does not panic")
            .expect("the server stops cleanly");
    }
}

/// A client builder that sends [`TOKEN`] with every request (for a client
/// in another process than the server).
pub fn client_builder() -> reqwest::ClientBuilder {
    let mut headers = HeaderMap::new();
    let bearer = HeaderValue::from_str(&format!("Bearer {TOKEN}")).unwrap();
    headers.insert(AUTHORIZATION, bearer);
    reqwest::Client::builder().default_headers(headers)
}
