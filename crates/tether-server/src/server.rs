//! The server: HTTP routes (`/ws`, `/healthz`, static pages), the WebSocket connection loop,
//! runs started by `USER_MESSAGE`, and server-side tools.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tether_core::validate::{CompiledSchema, FullSchema, FullValidator, Validator, format_validation_errors};
use tether_protocol::{
    ClientFrame, ErrorCode, ErrorFrame, Hello, PROTOCOL_VERSION, ResultStatus, Risk, RunEvent, RunStatus, ServerFrame,
    ToolCall, ToolCollisionEvent, ToolProgressEvent, ToolSpec, Welcome, decode_client_frame,
};
use tokio::sync::mpsc;

use crate::ServerError;
use crate::config::ServerConfig;
use crate::policy::{origin_allowed, presented_token, token_accepted};
use crate::session::{Outbound, Session, Sessions};
use tether_agent::BoxFuture;
use tether_agent::ToolOutput;
use tether_agent::{AgentLoop, RunSink, ToolHost};

/// The WebSocket close code for a refused connection (policy violation).
const CLOSE_POLICY: u16 = 1008;

/// What a server-side tool's handler returns.
pub type ServerToolResult = Result<Value, String>;

type ServerToolHandler = Arc<dyn Fn(Value) -> BoxFuture<'static, ServerToolResult> + Send + Sync>;

/// A tool that runs in the server process. It wins over a client tool of the same name.
#[derive(Clone)]
pub struct ServerTool {
    spec: ToolSpec,
    schema: Arc<FullSchema>,
    handler: ServerToolHandler,
}

impl std::fmt::Debug for ServerTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTool").field("spec", &self.spec).finish_non_exhaustive()
    }
}

impl ServerTool {
    /// A server-side tool. Refused when its name or schema is invalid.
    pub fn new<F, Fut>(spec: ToolSpec, handler: F) -> Result<Self, ServerError>
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ServerToolResult> + Send + 'static,
    {
        tether_core::check_tool_name(&spec.name).map_err(|e| ServerError::Config(e.to_string()))?;
        let schema = FullValidator
            .compile(&spec.parameters)
            .map_err(|e| ServerError::Config(format!("tool {:?}: {e}", spec.name)))?;
        Ok(ServerTool { spec, schema: Arc::new(schema), handler: Arc::new(move |args| Box::pin(handler(args))) })
    }
}

/// Shared state of a running server.
pub(crate) struct App {
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) agent: AgentLoop,
    pub(crate) server_tools: Vec<ServerTool>,
    pub(crate) sessions: Sessions,
    connection_counter: AtomicU64,
    stats: Stats,
}

/// Counters since the server started, reported by `/healthz` (for operators and load tests).
#[derive(Default)]
struct Stats {
    /// Runs started.
    runs_started: AtomicU64,
    /// Runs ended, whatever their status.
    runs_ended: AtomicU64,
    /// Runs ended with status `completed`.
    runs_completed: AtomicU64,
    /// `TOOL_RESULT`s applied (the first one for each call).
    results_applied: AtomicU64,
    /// `TOOL_RESULT`s for calls already answered: acknowledged again, not applied.
    results_duplicate: AtomicU64,
}

impl Stats {
    fn count(counter: &AtomicU64) {
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

/// Why a connection may not open a session (its origin or its token), or `None`.
fn admission(config: &ServerConfig, headers: &HeaderMap, query: Option<&str>) -> Option<String> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = String::from_utf8_lossy(origin.as_bytes());
        let host = headers.get(header::HOST).and_then(|host| host.to_str().ok());
        if !origin_allowed(&config.allowed_origins, &origin, host) {
            return Some(format!("origin {origin} is not allowed here (--allow-origin)"));
        }
    }
    if !config.auth_tokens.is_empty() {
        let authorization = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok());
        return match presented_token(authorization, query) {
            None => Some("a token is required (Authorization: Bearer, or ?token= in the URL)".into()),
            Some(token) if !token_accepted(&config.auth_tokens, Some(&token)) => Some("the token is not valid".into()),
            Some(_) => None,
        };
    }
    None
}

/// Cuts a close reason to what a close frame carries (123 bytes).
fn close_reason(reason: &str) -> String {
    let mut end = reason.len().min(120);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_string()
}

async fn websocket(
    ws: WebSocketUpgrade,
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    uri: Uri,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
) -> Response {
    let peer = peer.map(|Extension(ConnectInfo(addr))| addr);
    let refusal = admission(&app.config, &headers, uri.query());
    if let Some(reason) = &refusal {
        // The reason names the origin, never a token.
        tracing::warn!(peer = ?peer, reason = ?reason, "WebSocket connection refused");
    }
    // The transport limit is far above the protocol limit, so that an oversized frame gets a
    // typed ERROR from the decoder and the session goes on; beyond it the socket closes (1009).
    let transport_limit = app.config.max_frame_bytes.saturating_mul(4).max(1 << 20);
    // Small buffers keep an idle session cheap (tungstenite's defaults are 128 KiB each).
    ws.max_message_size(transport_limit)
        .max_frame_size(transport_limit)
        .read_buffer_size(8 * 1024)
        .write_buffer_size(8 * 1024)
        .on_upgrade(move |socket| async move {
            match refusal {
                Some(reason) => refuse(socket, &reason).await,
                None => connection(socket, app, peer.map(|addr| addr.ip())).await,
            }
        })
        .into_response()
}

/// Tells a refused client why (an `ERROR unauthorized`, then a close frame with the reason) and
/// waits briefly for its side of the close handshake.
async fn refuse(mut socket: WebSocket, reason: &str) {
    let frame = ServerFrame::Error(ErrorFrame {
        id: "s0".into(),
        code: ErrorCode::Unauthorized,
        message: format!("connection refused: {reason}"),
        reply_to: None,
    });
    let _ = socket.send(Message::Text(tether_protocol::encode_frame(&frame).into())).await;
    let close = CloseFrame { code: CLOSE_POLICY, reason: close_reason(reason).into() };
    let _ = socket.send(Message::Close(Some(close))).await;
    let _ =
        tokio::time::timeout(Duration::from_secs(5), async { while let Some(Ok(_)) = socket.recv().await {} }).await;
}

/// A token bucket: `per_second` frames a second on average, bursts of twice as many.
struct FrameRate {
    per_second: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
    /// Whether the client was told about the frames dropped since the last one admitted.
    told: bool,
}

impl FrameRate {
    fn new(per_second: u32) -> Option<FrameRate> {
        (per_second > 0).then(|| {
            let burst = f64::from(per_second) * 2.0;
            FrameRate { per_second: f64::from(per_second), burst, tokens: burst, last: Instant::now(), told: false }
        })
    }

    fn admit(&mut self) -> bool {
        let now = Instant::now();
        let earned = now.duration_since(self.last).as_secs_f64() * self.per_second;
        self.tokens = (self.tokens + earned).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            self.told = false;
            true
        } else {
            false
        }
    }
}

/// Sends an `ERROR` on a connection that has no session yet.
fn send_direct_error(tx: &mpsc::UnboundedSender<Outbound>, code: ErrorCode, message: String, reply_to: Option<String>) {
    let frame = ServerFrame::Error(ErrorFrame { id: "s0".into(), code, message, reply_to });
    let _ = tx.send(Outbound::Text(tether_protocol::encode_frame(&frame)));
}

async fn connection(socket: WebSocket, app: Arc<App>, peer_ip: Option<IpAddr>) {
    let connection_id = app.connection_counter.fetch_add(1, Ordering::Relaxed);
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Outbound>();
    let writer = tokio::spawn(async move {
        while let Some(outbound) = rx.recv().await {
            let result = match outbound {
                Outbound::Text(text) => sink.send(Message::Text(text.into())).await,
                Outbound::Close(code, reason) => {
                    let _ = sink.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
                    break;
                }
            };
            if result.is_err() {
                break;
            }
        }
    });

    let mut session: Option<Arc<Session>> = None;
    let mut rate = FrameRate::new(app.config.max_frames_per_second);
    while let Some(message) = stream.next().await {
        if matches!(message, Ok(Message::Text(_) | Message::Binary(_))) {
            let over = rate.as_mut().is_some_and(|rate| !rate.admit());
            if let Some(rate) = rate.as_mut().filter(|_| over) {
                if !rate.told {
                    rate.told = true;
                    tracing::warn!(peer = ?peer_ip, "frames over the rate limit: dropping them");
                    let error = format!(
                        "more than {} frames per second on this connection: frames are dropped unread until the \
                         rate falls; send again more slowly",
                        app.config.max_frames_per_second
                    );
                    match &session {
                        Some(s) => s.send_error(ErrorCode::RateLimited, error, None),
                        None => send_direct_error(&tx, ErrorCode::RateLimited, error, None),
                    }
                }
                continue;
            }
        }
        let text = match message {
            Ok(Message::Text(text)) => text,
            Ok(Message::Binary(_)) => {
                let error = "binary frames are not part of the protocol; send JSON text".to_string();
                match &session {
                    Some(s) => s.send_error(ErrorCode::MalformedFrame, error, None),
                    None => send_direct_error(&tx, ErrorCode::MalformedFrame, error, None),
                }
                continue;
            }
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => continue,
        };
        let frame = match decode_client_frame(&text, app.config.max_frame_bytes) {
            Ok(frame) => frame,
            Err(error) => {
                tracing::debug!(%error, "refused a frame");
                let reply_to = error.frame_id().map(String::from);
                match &session {
                    Some(s) => s.send_error(error.code(), error.to_string(), reply_to),
                    None => send_direct_error(&tx, error.code(), error.to_string(), reply_to),
                }
                continue;
            }
        };
        match (frame, &session) {
            (ClientFrame::Hello(hello), None) => match handshake(&app, hello, connection_id, &tx, peer_ip) {
                Some(attached) => session = Some(attached),
                None => break,
            },
            (ClientFrame::Hello(hello), Some(s)) => {
                s.send_error(
                    ErrorCode::MalformedFrame,
                    "HELLO was already received on this connection",
                    Some(hello.id),
                );
            }
            (other, None) => {
                let message = format!("{} before HELLO: start with a HELLO frame", other.type_name());
                send_direct_error(&tx, ErrorCode::HandshakeRequired, message, Some(other.id().to_string()));
            }
            (frame, Some(s)) => handle(&app, s, frame),
        }
    }
    if let Some(session) = session {
        if let Some(since) = session.detach(connection_id) {
            let app = app.clone();
            tokio::spawn(async move {
                tokio::time::sleep(app.config.reconnect_grace).await;
                if session.still_away_since(since) {
                    tracing::info!(session = session.id(), "client did not come back; session closed");
                    session.close();
                    app.sessions.remove(session.id());
                }
            });
        }
    }
    drop(tx);
    let _ = writer.await;
}

fn handshake(
    app: &Arc<App>,
    hello: Hello,
    connection_id: u64,
    tx: &mpsc::UnboundedSender<Outbound>,
    peer_ip: Option<IpAddr>,
) -> Option<Arc<Session>> {
    if hello.protocol_version != PROTOCOL_VERSION {
        let message =
            format!("this server speaks protocol version {PROTOCOL_VERSION}, the client {}", hello.protocol_version);
        send_direct_error(tx, ErrorCode::UnsupportedVersion, message.clone(), Some(hello.id));
        let _ = tx.send(Outbound::Close(1002, message));
        return None;
    }
    // Only the resume token proves a client owns a session: a known session id with a wrong
    // token gets nothing of that session (no calls, no results, no frames), only a new one.
    let mut wrong_token = false;
    let resumed = hello.resume.as_ref().and_then(|resume| {
        let session = app.sessions.get(&resume.session_id)?;
        if session.token_matches(&resume.token) {
            Some(session)
        } else {
            tracing::warn!(session = resume.session_id, peer = ?peer_ip, "resume refused: wrong token");
            wrong_token = true;
            None
        }
    });
    if wrong_token {
        let message = "resume refused: the token does not match that session; a new session is started";
        send_direct_error(tx, ErrorCode::Unauthorized, message.into(), Some(hello.id.clone()));
    }
    let (session, was_resumed) = match resumed {
        Some(session) => (session, true),
        None => {
            let session = Session::new(app.config.clone(), peer_ip);
            let limit = app.config.max_sessions_per_ip;
            if let Err(count) = app.sessions.insert(session.clone(), limit) {
                tracing::warn!(peer = ?peer_ip, count, limit, "session refused: too many sessions from this address");
                let message = format!(
                    "this address has {count} sessions, the most allowed (max_sessions_per_ip); close one or \
                     resume it"
                );
                send_direct_error(tx, ErrorCode::LimitExceeded, message, Some(hello.id));
                let _ = tx.send(Outbound::Close(CLOSE_POLICY, "too many sessions from this address".into()));
                return None;
            }
            (session, false)
        }
    };
    // One WELCOME per connection; it is not numbered (replays never include it).
    let welcome = ServerFrame::Welcome(Welcome {
        id: "welcome".into(),
        protocol_version: PROTOCOL_VERSION,
        session_id: session.id().to_string(),
        resume_token: session.resume_token().to_string(),
        resumed: was_resumed,
        max_active_tools: app.config.max_active_tools,
        max_frame_bytes: app.config.max_frame_bytes as u64,
        capabilities: vec!["tool_result_ack".into(), "resume".into(), "events".into(), "risk_floor".into()],
    });
    tracing::info!(session = session.id(), resumed = was_resumed, "client connected");
    let last_seq = if was_resumed { hello.resume.as_ref().and_then(|r| r.last_seq) } else { None };
    session.attach(connection_id, tx.clone(), &welcome, last_seq);
    Some(session)
}

fn handle(app: &Arc<App>, session: &Arc<Session>, frame: ClientFrame) {
    match frame {
        ClientFrame::Hello(_) => unreachable!("handled by the connection loop"),
        ClientFrame::ContextUpdate(update) => {
            let frame_id = update.id.clone();
            let collisions: Vec<String> = update
                .tools
                .iter()
                .filter(|t| app.server_tools.iter().any(|s| s.spec.name == t.name))
                .map(|t| t.name.clone())
                .collect();
            match session.apply_context(update) {
                Ok(_) => {
                    for tool in collisions {
                        session.send_event(None, RunEvent::ToolCollision(ToolCollisionEvent { tool }));
                    }
                }
                Err(refusal) => session.send_error(refusal.code, refusal.message, Some(frame_id)),
            }
        }
        ClientFrame::UserMessage(message) => start_run(app, session, message.id, message.text),
        ClientFrame::ToolResult(result) => {
            let frame_id = result.id.clone();
            match session.apply_result(result) {
                Ok((ack, first)) => {
                    Stats::count(if first { &app.stats.results_applied } else { &app.stats.results_duplicate });
                    session.send(ack);
                }
                Err(message) => session.send_error(ErrorCode::UnknownCall, message, Some(frame_id)),
            }
        }
        ClientFrame::ToolProgress(progress) => {
            session.send_event(
                None,
                RunEvent::ToolProgress(ToolProgressEvent { call_id: progress.call_id, message: progress.message }),
            );
        }
    }
}

fn start_run(app: &Arc<App>, session: &Arc<Session>, frame_id: String, text: String) {
    let run_id = session.next_run_id();
    let (start, started) = tokio::sync::oneshot::channel::<()>();
    let task = {
        let (app, session, run_id, message_id) = (app.clone(), session.clone(), run_id.clone(), frame_id.clone());
        tokio::spawn(async move {
            // Wait until the run is registered, so that its end is always recorded after it.
            if started.await.is_err() {
                return;
            }
            let host = SessionTools { app: app.clone(), session: session.clone() };
            let on_delta = |delta: &str| session.send_delta(&run_id, delta, false, None);
            let on_event = |event: RunEvent| {
                tracing::debug!(run = run_id, ?event, "run event");
                session.send_event(Some(&run_id), event);
            };
            let sink = RunSink { on_delta: &on_delta, on_event: &on_event };
            let history = session.take_history();
            let outcome = app.agent.run(&host, &sink, &run_id, &text, history).await;
            Stats::count(&app.stats.runs_ended);
            if outcome.status == RunStatus::Completed {
                Stats::count(&app.stats.runs_completed);
            }
            let (status, error) = (outcome.status, outcome.error);
            // The run is over before the client hears so: a message sent right after the last
            // AGENT_MESSAGE starts a new run instead of getting run_in_progress.
            session.end_run(&run_id, Some(outcome.messages));
            if let Some(error) = error {
                tracing::warn!(run = run_id, %error, "run failed");
                session.send_error(ErrorCode::RunFailed, error, None);
            }
            let limit = match status {
                RunStatus::MaxTurns => {
                    Some(format!("the run stopped at the limit of {} turns (max_turns)", app.agent.max_turns()))
                }
                RunStatus::TimedOut => Some(format!(
                    "the run stopped at the limit of {} s (run timeout)",
                    app.agent.run_timeout().unwrap_or_default().as_secs_f64()
                )),
                _ => None,
            };
            if let Some(message) = limit {
                tracing::info!(run = run_id, "{message}");
                session.send_error(ErrorCode::LimitExceeded, message, Some(message_id));
            }
            // The last frame of a run.
            session.send_delta(&run_id, "", true, Some(status));
        })
    };
    if !session.begin_run(&run_id, || task.abort_handle(), frame_id) {
        task.abort();
        return;
    }
    Stats::count(&app.stats.runs_started);
    let _ = start.send(());
    // If the run task panics outside a hook, the session still hears about it and can run again.
    let (app, session, run_id) = (app.clone(), session.clone(), run_id);
    tokio::spawn(async move {
        if let Err(error) = task.await {
            // Aborted (its session closed) or panicked: it ended all the same.
            Stats::count(&app.stats.runs_ended);
            if error.is_panic() {
                tracing::error!(run = run_id, "run panicked");
                session.send_delta(&run_id, "", true, Some(RunStatus::Failed));
                session.send_error(ErrorCode::RunFailed, "the run failed unexpectedly (internal error)", None);
                session.end_run(&run_id, None);
            }
        }
    });
}

/// The tools a run sees: server-side tools, then the client's (minus name collisions).
struct SessionTools {
    app: Arc<App>,
    session: Arc<Session>,
}

impl SessionTools {
    fn server_tool(&self, name: &str) -> Option<&ServerTool> {
        self.app.server_tools.iter().find(|tool| tool.spec.name == name)
    }
}

impl ToolHost for SessionTools {
    fn tools(&self) -> Vec<ToolSpec> {
        let mut tools: Vec<ToolSpec> = self.app.server_tools.iter().map(|t| t.spec.clone()).collect();
        tools.extend(self.session.client_tools().into_iter().filter(|t| self.server_tool(&t.name).is_none()));
        tools
    }

    fn check(&self, name: &str, args: &Value) -> Result<(), ToolOutput> {
        // The operator's `blocked` floor: refused here, so no TOOL_CALL is ever sent for it.
        if self.app.config.risk_floor(name) == Risk::Blocked {
            tracing::info!(session = self.session.id(), tool = name, "call refused: the tool is blocked by policy");
            return Err(ToolOutput::new(
                ResultStatus::Blocked,
                format!("\"{name}\" is blocked by the server's policy: it was not run and will not be."),
            ));
        }
        if let Some(tool) = self.server_tool(name) {
            let errors = tool.schema.errors(args);
            return if errors.is_empty() {
                Ok(())
            } else {
                Err(ToolOutput::new(ResultStatus::InvalidArgs, format_validation_errors(name, &errors)))
            };
        }
        self.session
            .check_client_call(name, args)
            .unwrap_or_else(|| Err(ToolOutput::new(ResultStatus::UnknownTool, format!("Unknown tool \"{name}\"."))))
    }

    fn provider_refused(&self, name: &str, reason: &str) {
        tracing::warn!(session = self.session.id(), tool = name, %reason, "the model provider refused a tool");
        let message = format!("the model provider refused the tool \"{name}\" ({reason}); this run goes on without it");
        self.session.send_error(ErrorCode::InvalidTool, message, None);
    }

    fn execute<'a>(
        &'a self,
        run_id: &'a str,
        call_id: &'a str,
        name: &'a str,
        args: Value,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if let Some(tool) = self.server_tool(name) {
                let handler = tool.handler.clone();
                return match tokio::spawn(async move { handler(args).await }).await {
                    Ok(Ok(value)) => ToolOutput::new(
                        ResultStatus::Ok,
                        match value {
                            Value::String(text) => text,
                            other => other.to_string(),
                        },
                    ),
                    Ok(Err(message)) => ToolOutput::new(ResultStatus::Error, message),
                    Err(_) => {
                        ToolOutput::new(ResultStatus::Error, format!("server tool \"{name}\" failed unexpectedly"))
                    }
                };
            }
            let frame = ToolCall {
                id: String::new(),
                call_id: call_id.to_string(),
                run_id: run_id.to_string(),
                name: name.to_string(),
                args,
                // The client applies the stricter of this and its own risk, so it cannot lower it.
                risk: self.app.config.risk_floor(name).stricter(self.session.client_risk(name)),
            };
            self.session.call_client_tool(frame).await
        })
    }

    fn admit(&self, asked: usize) -> usize {
        let limit = self.app.config.max_pending_calls;
        let room = limit.saturating_sub(self.session.pending_calls());
        if asked > room {
            tracing::warn!(session = self.session.id(), asked, limit, "model asked for more tool calls than allowed");
            self.session.send_error(
                ErrorCode::LimitExceeded,
                format!(
                    "the model asked for {asked} tool calls at once; a session may have {limit} outstanding \
                     (max_pending_calls): {} were not run",
                    asked - room
                ),
                None,
            );
        }
        room.min(asked)
    }
}
