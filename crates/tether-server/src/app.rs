//! A running server's shared state ([`App`]): its configuration, agent, tools, sessions, store
//! and counters, handed to every connection, run and route. `server.rs` builds it
//! ([`TetherServer`](crate::TetherServer)) and serves its routes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tether_agent::AgentLoop;
#[cfg(feature = "mcp")]
use tether_mcp::McpTools;

use crate::config::ServerConfig;
use crate::server_tool::ServerTool;
use crate::session::{Session, Sessions};
use crate::store::SessionStore;

/// The attached MCP servers.
#[cfg(feature = "mcp")]
pub(crate) type Mcp = Arc<McpTools>;

/// Shared state of a running server.
pub(crate) struct App {
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) agent: AgentLoop,
    pub(crate) server_tools: Vec<ServerTool>,
    /// The attached MCP servers, whose tools every session's runs see (none without `--mcp`).
    #[cfg(feature = "mcp")]
    pub(crate) mcp: Mcp,
    pub(crate) sessions: Sessions,
    /// Sessions whose page paired an MCP client (`--expose-mcp`).
    pub(crate) exposed: crate::pairing::Exposed,
    pub(crate) connection_counter: AtomicU64,
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    /// Where sessions are kept between processes; `None`: memory only (`--store memory`).
    pub(crate) store: Option<Arc<dyn SessionStore>>,
    /// Set once a draining shutdown began: no new sessions.
    pub(crate) draining: std::sync::atomic::AtomicBool,
    /// WebSocket connections open now, and a wake-up when one closes (a drain waits for all).
    pub(crate) open_connections: std::sync::atomic::AtomicUsize,
    pub(crate) connection_closed: tokio::sync::Notify,
    /// This server's id among those sharing a store (random, new with each process).
    pub(crate) instance: String,
    /// Resumes in progress, one lock per session id: two connections resuming one session at
    /// once claim it once.
    pub(crate) resuming: std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// How long a draining shutdown waits for the store to take what the sessions queued.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

impl App {
    /// A server's state: `agent` with `config`, no server-side tools, MCP servers or store yet.
    pub(crate) fn new(config: ServerConfig, agent: AgentLoop) -> Self {
        App {
            config: Arc::new(config),
            agent,
            server_tools: Vec::new(),
            #[cfg(feature = "mcp")]
            mcp: Mcp::default(),
            sessions: Sessions::default(),
            exposed: crate::pairing::Exposed::default(),
            connection_counter: AtomicU64::new(0),
            metrics: Arc::default(),
            store: None,
            draining: std::sync::atomic::AtomicBool::new(false),
            open_connections: std::sync::atomic::AtomicUsize::new(0),
            connection_closed: tokio::sync::Notify::new(),
            instance: format!("i-{}", &crate::session::random_token()[..12]),
            resuming: std::sync::Mutex::default(),
        }
    }

    /// Forgets a session this server no longer serves (ended, moved, read back anew), and its
    /// MCP pairing with it.
    pub(crate) fn remove_session(&self, session: &Arc<Session>) {
        self.sessions.remove(session);
        self.exposed.unpair(session.id());
    }

    /// Whether a tool of this server has the name (a `ServerTool` or an MCP tool): it wins over
    /// a page tool of that name.
    pub(crate) fn runs_here(&self, name: &str) -> bool {
        #[cfg(feature = "mcp")]
        if self.mcp.find(name).is_some() {
            return true;
        }
        self.server_tools.iter().any(|tool| tool.spec.name == name)
    }

    /// A draining shutdown (SIGTERM, Ctrl-C): no new sessions; with a durable store, the runs in
    /// progress stop where they are (their last checkpoint is stored, and the server that reads
    /// the session back goes on with them), everything queued is stored, and each client is told
    /// to reconnect (close 1012). Bounded by [`DRAIN_TIMEOUT`].
    pub(crate) async fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
        let sessions = self.sessions.all();
        tracing::info!(sessions = sessions.len(), durable = self.store.is_some(), "draining");
        if self.store.is_some() {
            for session in &sessions {
                session.suspend_run();
            }
            let stored = futures_util::future::join_all(sessions.iter().map(|session| session.flushed()));
            if tokio::time::timeout(DRAIN_TIMEOUT, stored).await.is_err() {
                tracing::warn!("the store did not take every session within {} s", DRAIN_TIMEOUT.as_secs());
            }
        }
        if let Some(store) = self.store.as_ref().filter(|store| store.shared()) {
            // Gone: the other servers may claim this one's sessions at once.
            if let Err(error) = store.heartbeat(&self.instance, Duration::ZERO).await {
                tracing::warn!(%error, "could not tell the other servers that this one is going");
            }
        }
        for session in &sessions {
            session.close_connection(crate::outbound::CLOSE_RESTART, "the server is restarting; reconnect to go on");
        }
        // The close frames go out before the process ends (the clients answer them).
        let closed = async {
            loop {
                let notified = self.connection_closed.notified();
                if self.open_connections.load(Ordering::Acquire) == 0 {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(DRAIN_TIMEOUT, closed).await.is_err() {
            tracing::warn!("some clients did not close within {} s", DRAIN_TIMEOUT.as_secs());
        }
    }
}
