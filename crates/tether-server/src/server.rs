//! The server: its configuration as a value ([`TetherServer`]), the HTTP routes (`/ws`,
//! `/healthz`, static pages) and the counters `/healthz` reports. The WebSocket connection loop
//! is in `connection.rs`, runs in `run.rs`, the tools a run sees in `tools.rs`.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;
use tether_protocol::PROTOCOL_VERSION;

use crate::ServerError;
use crate::app::App;
use crate::config::ServerConfig;
use crate::connection::websocket;
use crate::server_tool::ServerTool;
use crate::session::Session;
use crate::store::SessionStore;
use tether_agent::AgentLoop;
#[cfg(feature = "mcp")]
use tether_mcp::McpTools;

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
        TetherServer { app: Arc::new(App::new(config, agent)), static_dir: None }
    }

    /// The server's state, for a `with_*` builder (called before the server is shared).
    fn app_mut(&mut self, builder: &str) -> &mut App {
        Arc::get_mut(&mut self.app).unwrap_or_else(|| panic!("{builder} is called before the server is shared"))
    }

    /// Keeps sessions in `store` (a SQLite file, Redis): written before the frames that depend
    /// on them leave, read back when a client resumes a session this process does not hold
    /// (after a restart), runs in progress going on from their last checkpoint. Without it (or
    /// with a [`crate::store::MemoryStore`]) sessions live in memory only.
    #[must_use]
    pub fn with_store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.app_mut("with_store").store = store.durable().then_some(store);
        self
    }

    /// Adds a server-side tool.
    #[must_use]
    pub fn with_tool(mut self, tool: ServerTool) -> Self {
        let tools = &mut self.app_mut("with_tool").server_tools;
        tools.retain(|t| t.spec.name != tool.spec.name);
        tools.push(tool);
        self
    }

    /// Offers the tools of these MCP servers to every session's runs, beside the page's tools
    /// (see `docs/mcp.md`): named `SERVER__tool`, validated against their schemas, under the
    /// operator's risk floor and the hooks like any tool, and run on their servers. The server
    /// stops them when it is dropped.
    #[cfg(feature = "mcp")]
    #[must_use]
    pub fn with_mcp(mut self, mcp: McpTools) -> Self {
        self.app_mut("with_mcp").mcp = Arc::new(mcp);
        self
    }

    /// Serves the files of `dir` at `/` (unknown paths get `index.html`, for client-side routing).
    #[must_use]
    pub fn with_static_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.static_dir = Some(dir.into());
        self
    }

    /// Counts into `metrics` instead of a registry of its own: give the same [`Metrics`] to the
    /// `tracing` subscriber's [`Metrics::layer`] so that model and tool calls are measured too
    /// (`tether serve` does).
    ///
    /// [`Metrics`]: crate::metrics::Metrics
    /// [`Metrics::layer`]: crate::metrics::Metrics::layer
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.app_mut("with_metrics").metrics = metrics;
        self
    }

    /// This server's metrics (what `/metrics` serves).
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.app.metrics
    }

    /// The routes: `/ws`, `/healthz`, `/readyz`, `/metrics`, `/console` and, when set, the static pages. (With a store shared by
    /// several servers, use [`TetherServer::serve`]: it keeps this server's heartbeat and
    /// answers other servers' requests for its sessions.)
    pub fn router(&self) -> Router {
        let mut router = Router::new()
            .route("/ws", get(websocket))
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .route("/metrics", get(metrics))
            .route("/console", get(crate::console::page))
            .route("/console/api/sessions", get(crate::console::sessions))
            .route("/console/api/runs", get(crate::console::runs))
            .with_state(self.app.clone());
        #[cfg(feature = "mcp")]
        if self.app.config.expose_mcp {
            let pairing = axum::middleware::from_fn_with_state(self.app.clone(), crate::expose::require_pairing);
            let mcp = Router::new().route_service("/mcp", crate::expose::service(self.app.clone())).layer(pairing);
            router = router.merge(mcp);
        }
        if let Some(dir) = &self.static_dir {
            router = router.merge(crate::static_files::router(dir));
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
        let app = self.app.clone();
        if let Some(store) = app.store.clone() {
            tokio::spawn(expire_sessions(store.clone()));
            if store.shared() {
                // Alive before the first claim, so that no other server takes a new session.
                store.heartbeat(&app.instance, app.config.instance_lease).await?;
                tokio::spawn(crate::handoff::heartbeat(app.clone(), store.clone()));
                tokio::spawn(crate::handoff::answer_requests(app.clone(), store));
            }
        }
        let drain = async move {
            shutdown.await;
            app.drain().await;
        };
        axum::serve(listener, self.router().into_make_service_with_connect_info::<SocketAddr>())
            .with_graceful_shutdown(drain)
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

/// How often expired sessions are removed from the store.
const EXPIRY_INTERVAL: Duration = Duration::from_secs(600);

/// Removes expired sessions from the store now and then, so that it does not grow without bound.
async fn expire_sessions(store: Arc<dyn SessionStore>) {
    loop {
        match store.expire(crate::store::unix_ms()).await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "expired sessions removed from the store"),
            Err(error) => tracing::warn!(%error, "could not remove expired sessions from the store"),
        }
        tokio::time::sleep(EXPIRY_INTERVAL).await;
    }
}

/// How long `/readyz` waits for the store before it says the server is not ready.
const READY_STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// Readiness, for a load balancer or an orchestrator (`/healthz` is liveness): `200` when the
/// server takes new sessions and its store answers within [`READY_STORE_TIMEOUT`]; `503` while
/// it drains for a shutdown, or when the store fails or does not answer in time.
async fn readyz(State(app): State<Arc<App>>) -> (axum::http::StatusCode, Json<Value>) {
    use axum::http::StatusCode;
    let unready = |status: &str, reason: Option<String>| {
        (StatusCode::SERVICE_UNAVAILABLE, Json(serde_json::json!({"status": status, "reason": reason})))
    };
    if app.draining.load(Ordering::Relaxed) {
        return unready("draining", None);
    }
    let Some(store) = &app.store else {
        return (StatusCode::OK, Json(serde_json::json!({"status": "ready", "store": "memory"})));
    };
    match tokio::time::timeout(READY_STORE_TIMEOUT, store.count()).await {
        Ok(Ok(stored)) => (
            StatusCode::OK,
            Json(serde_json::json!({"status": "ready", "store": store.describe(), "storedSessions": stored})),
        ),
        Ok(Err(error)) => unready("store failing", Some(error.to_string())),
        Err(_) => unready("store not answering", Some(format!("no answer within {} s", READY_STORE_TIMEOUT.as_secs()))),
    }
}

/// The metrics in the OpenMetrics text format, for Prometheus; with an operator token set, only
/// for a request that presents it (`401` otherwise).
async fn metrics(State(app): State<Arc<App>>, headers: axum::http::HeaderMap) -> axum::response::Response {
    use axum::response::IntoResponse;
    if let Some(refused) = crate::console::without_operator_token(&app, &headers) {
        return refused;
    }
    app.metrics.sessions_live.set(i64::try_from(app.sessions.len()).unwrap_or(i64::MAX));
    (
        [(axum::http::header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        app.metrics.encode(),
    )
        .into_response()
}

async fn healthz(State(app): State<Arc<App>>) -> Json<Value> {
    Json(serde_json::json!({
        "status": "ok",
        "sessions": app.sessions.len(),
        "store": app.store.as_ref().map_or_else(|| "memory".to_string(), |store| store.describe()),
        "instance": app.instance,
        "protocolVersion": PROTOCOL_VERSION,
        "stats": app.metrics.json(),
        "mcp": mcp_health(&app),
    }))
}

/// The MCP servers' state, for `/healthz`.
#[cfg(feature = "mcp")]
fn mcp_health(app: &App) -> Value {
    let servers = app.mcp.servers().iter().map(|server| {
        let status = server.status();
        let reason = match &status {
            tether_mcp::McpStatus::Down { reason, .. } => Some(reason.clone()),
            _ => None,
        };
        serde_json::json!({
            "name": server.name(),
            "status": status.as_str(),
            "reason": reason,
            "tools": server.tools().len(),
            "starts": server.starts(),
        })
    });
    Value::Array(servers.collect())
}

/// No MCP servers in a build without the `mcp` feature.
#[cfg(not(feature = "mcp"))]
fn mcp_health(_: &App) -> Value {
    Value::Array(Vec::new())
}
