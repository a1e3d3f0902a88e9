//! The server: HTTP routes (`/ws`, `/healthz`, static pages), the WebSocket connection loop,
//! runs started by `USER_MESSAGE`, and server-side tools.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tether_core::validate::{CompiledSchema, FullSchema, FullValidator, Validator, format_validation_errors};
use tether_protocol::{
    ClientFrame, ErrorCode, ErrorFrame, Hello, PROTOCOL_VERSION, ResultStatus, RunEvent, ServerFrame, ToolCall,
    ToolCollisionEvent, ToolProgressEvent, ToolSpec, Welcome, decode_client_frame,
};
use tokio::sync::mpsc;

use crate::ServerError;
use crate::agent::hooks::ToolOutput;
use crate::agent::{AgentLoop, RunSink, ToolHost};
use crate::config::ServerConfig;
use crate::model::BoxFuture;
use crate::session::{Outbound, Session, Sessions};

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
    Json(serde_json::json!({"status": "ok", "sessions": app.sessions.len(), "protocolVersion": PROTOCOL_VERSION}))
}

async fn websocket(ws: WebSocketUpgrade, State(app): State<Arc<App>>) -> Response {
    // The transport limit is far above the protocol limit, so that an oversized frame gets a
    // typed ERROR from the decoder and the session goes on; beyond it the socket closes (1009).
    let transport_limit = app.config.max_frame_bytes.saturating_mul(4).max(1 << 20);
    // Small buffers keep an idle session cheap (tungstenite's defaults are 128 KiB each).
    ws.max_message_size(transport_limit)
        .max_frame_size(transport_limit)
        .read_buffer_size(8 * 1024)
        .write_buffer_size(8 * 1024)
        .on_upgrade(move |socket| connection(socket, app))
        .into_response()
}

/// Sends an `ERROR` on a connection that has no session yet.
fn send_direct_error(tx: &mpsc::UnboundedSender<Outbound>, code: ErrorCode, message: String, reply_to: Option<String>) {
    let frame = ServerFrame::Error(ErrorFrame { id: "s0".into(), code, message, reply_to });
    let _ = tx.send(Outbound::Text(tether_protocol::encode_frame(&frame)));
}

async fn connection(socket: WebSocket, app: Arc<App>) {
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
    while let Some(message) = stream.next().await {
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
            (ClientFrame::Hello(hello), None) => match handshake(&app, hello, connection_id, &tx) {
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
) -> Option<Arc<Session>> {
    if hello.protocol_version != PROTOCOL_VERSION {
        let message =
            format!("this server speaks protocol version {PROTOCOL_VERSION}, the client {}", hello.protocol_version);
        send_direct_error(tx, ErrorCode::UnsupportedVersion, message.clone(), Some(hello.id));
        let _ = tx.send(Outbound::Close(1002, message));
        return None;
    }
    let resumed = hello.resume.as_ref().and_then(|resume| {
        let session = app.sessions.get(&resume.session_id)?;
        if session.token_matches(&resume.token) {
            Some(session)
        } else {
            tracing::warn!(session = resume.session_id, "resume refused: wrong token");
            None
        }
    });
    let (session, was_resumed) = match resumed {
        Some(session) => (session, true),
        None => {
            let session = Session::new(app.config.clone());
            app.sessions.insert(session.clone());
            (session, false)
        }
    };
    let welcome = ServerFrame::Welcome(Welcome {
        id: session.next_frame_id(),
        protocol_version: PROTOCOL_VERSION,
        session_id: session.id().to_string(),
        resume_token: session.resume_token().to_string(),
        resumed: was_resumed,
        max_active_tools: app.config.max_active_tools,
        max_frame_bytes: app.config.max_frame_bytes as u64,
        capabilities: vec!["tool_result_ack".into(), "resume".into(), "events".into(), "risk_floor".into()],
    });
    tracing::info!(session = session.id(), resumed = was_resumed, "client connected");
    session.attach(connection_id, tx.clone(), &welcome);
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
                Ok(ack) => session.send(&ack),
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
        let (app, session, run_id) = (app.clone(), session.clone(), run_id.clone());
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
            session.send_delta(&run_id, "", true, Some(outcome.status));
            if let Some(error) = &outcome.error {
                tracing::warn!(run = run_id, %error, "run failed");
                session.send_error(ErrorCode::RunFailed, error.clone(), None);
            }
            session.end_run(&run_id, Some(outcome.messages));
        })
    };
    if !session.begin_run(&run_id, || task.abort_handle()) {
        task.abort();
        session.send_error(
            ErrorCode::RunInProgress,
            "a run is in progress; wait for its end (AGENT_MESSAGE done) and send again",
            Some(frame_id),
        );
        return;
    }
    let _ = start.send(());
    // If the run task panics outside a hook, the session still hears about it and can run again.
    let (session, run_id) = (session.clone(), run_id);
    tokio::spawn(async move {
        if let Err(error) = task.await {
            if error.is_panic() {
                tracing::error!(run = run_id, "run panicked");
                session.send_delta(&run_id, "", true, Some(tether_protocol::RunStatus::Failed));
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
                id: self.session.next_frame_id(),
                call_id: call_id.to_string(),
                run_id: run_id.to_string(),
                name: name.to_string(),
                args,
                risk: Default::default(),
            };
            self.session.call_client_tool(frame).await
        })
    }
}
