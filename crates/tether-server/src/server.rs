//! The server: its configuration as a value ([`TetherServer`]), the HTTP routes (`/ws`,
//! `/healthz`, static pages) and the counters `/healthz` reports. The WebSocket connection loop
//! is in `connection.rs`, runs in `run.rs`, the tools a run sees in `tools.rs`.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;
use tether_protocol::PROTOCOL_VERSION;

use crate::ServerError;
use crate::config::ServerConfig;
use crate::connection::websocket;
use crate::session::{Session, Sessions};
use crate::tools::ServerTool;
use tether_agent::AgentLoop;

/// Shared state of a running server.
pub(crate) struct App {
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) agent: AgentLoop,
    pub(crate) server_tools: Vec<ServerTool>,
    pub(crate) sessions: Sessions,
    pub(crate) connection_counter: AtomicU64,
    pub(crate) stats: Stats,
}

/// Counters since the server started, reported by `/healthz` (for operators and load tests).
#[derive(Default)]
pub(crate) struct Stats {
    /// Runs started.
    pub(crate) runs_started: AtomicU64,
    /// Runs ended, whatever their status.
    pub(crate) runs_ended: AtomicU64,
    /// Runs ended with status `completed`.
    pub(crate) runs_completed: AtomicU64,
    /// `TOOL_RESULT`s applied (the first one for each call).
    pub(crate) results_applied: AtomicU64,
    /// `TOOL_RESULT`s for calls already answered: acknowledged again, not applied.
    pub(crate) results_duplicate: AtomicU64,
    /// `TOOL_RESULT`s for calls that had timed out or been cancelled: acknowledged, not applied.
    pub(crate) results_late: AtomicU64,
}

impl Stats {
    pub(crate) fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn json(&self) -> Value {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        serde_json::json!({
            "runsStarted": read(&self.runs_started),
            "runsEnded": read(&self.runs_ended),
            "runsCompleted": read(&self.runs_completed),
            "resultsApplied": read(&self.results_applied),
            "resultsDuplicate": read(&self.results_duplicate),
            "resultsLate": read(&self.results_late),
        })
    }
}

/// A Tether server: configure it, then [`TetherServer::serve`] it or mount its
/// [`TetherServer::router`].
#[derive(Clone)]
pub struct TetherServer {
    app: Arc<App>,
    static_dir: Option<PathBuf>,
}

impl std::fmt::Debug for TetherServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TetherServer").field("config", &self.app.config).finish_non_exhaustive()
    }
}

impl TetherServer {
    /// A server running `agent` with `config`.
    pub fn new(config: ServerConfig, agent: AgentLoop) -> Self {
        TetherServer::build(config, agent, Vec::new(), None)
    }

    fn build(
        config: ServerConfig,
        agent: AgentLoop,
        server_tools: Vec<ServerTool>,
        static_dir: Option<PathBuf>,
    ) -> Self {
        let app = App {
            config: Arc::new(config),
            agent,
            server_tools,
            sessions: Sessions::default(),
            connection_counter: AtomicU64::new(0),
            stats: Stats::default(),
        };
        TetherServer { app: Arc::new(app), static_dir }
    }

    /// Adds a server-side tool.
    #[must_use]
    pub fn with_tool(self, tool: ServerTool) -> Self {
        let app =
            Arc::try_unwrap(self.app).unwrap_or_else(|_| panic!("with_tool is called before the server is shared"));
        let mut tools = app.server_tools;
        tools.retain(|t| t.spec.name != tool.spec.name);
        tools.push(tool);
        TetherServer::build((*app.config).clone(), app.agent, tools, self.static_dir)
    }

    /// Serves the files of `dir` at `/` (unknown paths get `index.html`, for client-side routing).
    #[must_use]
    pub fn with_static_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.static_dir = Some(dir.into());
        self
    }

    /// The routes: `/ws`, `/healthz` and, when set, the static pages.
    pub fn router(&self) -> Router {
        let mut router =
            Router::new().route("/ws", get(websocket)).route("/healthz", get(healthz)).with_state(self.app.clone());
        if let Some(dir) = &self.static_dir {
            let index = tower_http::services::ServeFile::new(dir.join("index.html"));
            router = router.fallback_service(tower_http::services::ServeDir::new(dir).fallback(index));
        }
        router
    }

    /// Serves on `listener` until `shutdown` completes.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        use axum::serve::ListenerExt;
        // Frames are small and interactive: send them at once instead of waiting for more (Nagle).
        let listener = listener.tap_io(|stream| {
            if let Err(error) = stream.set_nodelay(true) {
                tracing::debug!(%error, "could not set TCP_NODELAY");
            }
        });
        axum::serve(listener, self.router().into_make_service_with_connect_info::<SocketAddr>())
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| ServerError::Io(e.to_string()))
    }

    /// A session by id, to inspect it (its tools, its page).
    pub fn session(&self, id: &str) -> Option<Arc<Session>> {
        self.app.sessions.get(id)
    }

    /// How many sessions exist (connected or waiting for a reconnect).
    pub fn session_count(&self) -> usize {
        self.app.sessions.len()
    }
}

async fn healthz(State(app): State<Arc<App>>) -> Json<Value> {
    Json(serde_json::json!({
        "status": "ok",
        "sessions": app.sessions.len(),
        "protocolVersion": PROTOCOL_VERSION,
        "stats": app.stats.json(),
    }))
}
