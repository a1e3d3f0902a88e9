//! One attached MCP server, supervised: a task connects to it (starting its process, or over
//! streamable HTTP), lists its tools, lists them again on `notifications/tools/list_changed`,
//! and when the connection ends (the process exited, the server stopped answering) connects
//! again after a backoff that doubles up to a limit. Calls go through [`McpServer::call`].

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{FutureExt, StreamExt};
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities, ClientConfig,
    ClientRequest, Implementation, ProgressNotificationParam, RequestMetaObject, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::tool::result_text;
use crate::{McpError, McpServerSpec, McpTarget, McpTool};

/// How many of a child's last stderr lines are kept, to explain why it failed.
const STDERR_TAIL_LINES: usize = 5;
/// A connection up for this long resets the backoff: the next failure waits `backoff_min` again.
const HEALTHY_AFTER: Duration = Duration::from_secs(10);
/// After a call timed out, how long a `tools/list` may take (at most the call's own timeout)
/// before the server counts as hung.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The W3C trace context of a call (`traceparent`, `tracestate`), sent in the request's `_meta`
/// (SEP-414).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceContext {
    /// The `traceparent` value: version, trace id, parent span id, flags.
    pub traceparent: String,
    /// The `tracestate` value, if any.
    pub tracestate: Option<String>,
}

/// Timeouts and backoff for attached servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpOptions {
    /// Longest wait for one tool call; the call is then cancelled at the server.
    pub call_timeout: Duration,
    /// Longest wait for a server to start and answer `initialize` and `tools/list`.
    pub connect_timeout: Duration,
    /// The first wait before connecting again after a failure.
    pub backoff_min: Duration,
    /// The longest wait between attempts (the wait doubles up to it).
    pub backoff_max: Duration,
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            call_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(30),
            backoff_min: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
        }
    }
}

impl McpOptions {
    /// The wait before attempt `failures + 1`: `backoff_min`, doubling with each failure in a
    /// row, at most `backoff_max`.
    pub fn backoff(&self, failures: u32) -> Duration {
        let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(20));
        self.backoff_min.saturating_mul(factor).min(self.backoff_max)
    }
}

/// Where a server stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpStatus {
    /// Connecting for the first time.
    Starting,
    /// Connected; its tools are offered.
    Running,
    /// Not connected: the last attempt failed or the connection ended; another follows after
    /// the backoff.
    Down {
        /// Why (with the last lines the process wrote to stderr, when it is a process).
        reason: String,
        /// Failures in a row.
        failures: u32,
    },
    /// Stopped by [`McpServer::stop`]; it is not restarted.
    Stopped,
}

impl McpStatus {
    /// `starting`, `running`, `down`, `stopped` (as `/healthz` reports it).
    pub fn as_str(&self) -> &'static str {
        match self {
            McpStatus::Starting => "starting",
            McpStatus::Running => "running",
            McpStatus::Down { .. } => "down",
            McpStatus::Stopped => "stopped",
        }
    }
}

/// What a server's supervisor publishes: its status, its tools now, and how often it connected.
#[derive(Debug, Clone)]
pub struct McpSnapshot {
    /// Where the server stands.
    pub status: McpStatus,
    /// The tools it offers now (empty unless running).
    pub tools: Arc<Vec<McpTool>>,
    /// How many times a connection was made (1 after the first start; each restart adds one).
    pub starts: u32,
}

struct Shared {
    spec: McpServerSpec,
    options: McpOptions,
    state: watch::Sender<McpSnapshot>,
    peer: Mutex<Option<Peer<RoleClient>>>,
    /// Asks the supervisor to drop the connection and connect again (a hung server).
    reconnect: Notify,
    stop: CancellationToken,
    stderr_tail: Mutex<VecDeque<String>>,
    /// Routes `notifications/progress` to the call that asked for them (by progress token).
    progress: ProgressDispatcher,
}

/// An attached MCP server. Dropping it stops it (its process is killed).
pub struct McpServer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").field("spec", &self.shared.spec).field("status", &self.status()).finish()
    }
}

/// What the SDK calls back: a changed tool list wakes the supervisor; progress goes to its call.
#[derive(Clone)]
struct Handler {
    tools_changed: Arc<Notify>,
    progress: ProgressDispatcher,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.progress.handle_notification(params).await;
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("tether", env!("CARGO_PKG_VERSION")))
    }
}

impl McpServer {
    /// Starts supervising `spec` (in the current tokio runtime) and returns at once; see
    /// [`McpServer::ready`] to wait for its first connection.
    pub fn start(spec: McpServerSpec, options: McpOptions) -> McpServer {
        // reqwest's rustls needs a crypto provider; ring is the one this crate builds with.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (state, _) = watch::channel(McpSnapshot { status: McpStatus::Starting, tools: Arc::default(), starts: 0 });
        let shared = Arc::new(Shared {
            spec,
            options,
            state,
            peer: Mutex::new(None),
            reconnect: Notify::new(),
            stop: CancellationToken::new(),
            stderr_tail: Mutex::default(),
            progress: ProgressDispatcher::new(),
        });
        tokio::spawn(supervise(shared.clone()));
        McpServer { shared }
    }

    /// The server's name (the prefix of its tools).
    pub fn name(&self) -> &str {
        &self.shared.spec.name
    }

    /// How it was given.
    pub fn spec(&self) -> &McpServerSpec {
        &self.shared.spec
    }

    /// Where it stands now.
    pub fn status(&self) -> McpStatus {
        self.shared.state.borrow().status.clone()
    }

    /// How many times a connection was made.
    pub fn starts(&self) -> u32 {
        self.shared.state.borrow().starts
    }

    /// The tools it offers now.
    pub fn tools(&self) -> Arc<Vec<McpTool>> {
        self.shared.state.borrow().tools.clone()
    }

    /// Every change of status, tools or starts, as it happens.
    pub fn subscribe(&self) -> watch::Receiver<McpSnapshot> {
        self.shared.state.subscribe()
    }

    /// Waits until the server is running, at most `timeout`; `false` when it is not by then.
    pub async fn ready(&self, timeout: Duration) -> bool {
        let mut changes = self.subscribe();
        tokio::time::timeout(timeout, changes.wait_for(|s| s.status == McpStatus::Running))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Calls the server's tool `remote` (its own name) with `args`, at most
    /// [`McpOptions::call_timeout`]: the result's text, or an error written for the model. A
    /// call that times out, or whose future is dropped, is cancelled at the server
    /// (`notifications/cancelled`); a server that then does not answer `tools/list` either is
    /// restarted.
    pub async fn call(&self, remote: &str, args: Value) -> Result<String, McpError> {
        self.call_with_progress(remote, args, None, |_| {}).await
    }

    /// [`McpServer::call`], with the server's progress (each call carries a progress token):
    /// `on_progress` gets each `notifications/progress` of this call as a line of text
    /// (its message, else `3/10` or `3`). With `trace`, the request carries the caller's W3C
    /// trace context in its `_meta` (SEP-414), so that a server that traces joins the trace.
    pub async fn call_with_progress(
        &self,
        remote: &str,
        args: Value,
        trace: Option<&TraceContext>,
        mut on_progress: impl FnMut(String) + Send,
    ) -> Result<String, McpError> {
        let shared = &self.shared;
        let server = shared.spec.name.clone();
        let peer = shared.peer.lock().expect("peer lock").clone();
        let Some(peer) = peer else {
            let reason = match self.status() {
                McpStatus::Down { reason, .. } => reason,
                other => other.as_str().to_string(),
            };
            return Err(McpError::NotRunning { server, reason });
        };
        let mut params = CallToolRequestParams::new(remote.to_string());
        match args {
            Value::Object(map) => params = params.with_arguments(map),
            Value::Null => {}
            other => {
                let message = format!("the arguments must be an object, not {other}");
                return Err(McpError::Call { server, tool: remote.to_string(), message });
            }
        }
        let call_error = |message: String| McpError::Call { server: server.clone(), tool: remote.to_string(), message };
        // The SDK gives each request its own progress token; the request's handle says which.
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let mut options = PeerRequestOptions::no_options();
        if let Some(trace) = trace {
            let mut meta = RequestMetaObject::new();
            meta.0.set_traceparent(trace.traceparent.clone());
            if let Some(state) = &trace.tracestate {
                meta.0.set_tracestate(state.clone());
            }
            options.meta = Some(meta);
        }
        let handle =
            peer.send_request_with_option(request, options).await.map_err(|error| call_error(describe(error)))?;
        let mut progress = shared.progress.subscribe(handle.progress_token.clone()).await;
        // Dropped before the answer (a timeout, a stopped run): the server is told to cancel.
        let mut cancel = CancelOnDrop { peer: Some(peer.clone()), id: handle.id.clone() };
        let timeout = shared.options.call_timeout;
        let call = tokio::time::timeout(timeout, handle.await_response());
        tokio::pin!(call);
        let answer = loop {
            tokio::select! {
                answer = &mut call => break answer,
                Some(update) = progress.next() => on_progress(progress_text(&update)),
            }
        };
        // Notifications are dispatched apart from the answer: take those already here.
        tokio::task::yield_now().await;
        while let Some(Some(update)) = progress.next().now_or_never() {
            on_progress(progress_text(&update));
        }
        drop(progress);
        let Ok(answer) = answer else {
            // Sent before the timeout is reported, so the server knows before anything else.
            cancel.now().await;
            tracing::warn!(server, tool = remote, ?timeout, "an MCP call timed out; it was cancelled at the server");
            let probe = shared.clone();
            tokio::spawn(async move {
                let wait = PROBE_TIMEOUT.min(timeout);
                if !matches!(tokio::time::timeout(wait, peer.list_all_tools()).await, Ok(Ok(_))) {
                    tracing::warn!(server = probe.spec.name, "the MCP server does not answer: restarting it");
                    probe.reconnect.notify_one();
                }
            });
            return Err(McpError::Timeout { server, tool: remote.to_string(), timeout });
        };
        cancel.peer = None;
        let result = match answer.map_err(|error| call_error(describe(error)))? {
            ServerResult::CallToolResult(result) => result,
            other => {
                let kind = serde_json::to_value(&other).ok().and_then(|v| v.get("resultType").cloned());
                return Err(call_error(format!(
                    "the server answered with something other than a tool result ({kind:?})"
                )));
            }
        };
        let result = serde_json::to_value(&result).unwrap_or_default();
        let text = result_text(&result);
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            let message = if text.is_empty() { "no details given".to_string() } else { text };
            return Err(McpError::ToolFailed { server, tool: remote.to_string(), message });
        }
        Ok(text)
    }

    /// Stops supervising: the connection is closed, the process killed, and the status becomes
    /// [`McpStatus::Stopped`].
    pub fn stop(&self) {
        self.shared.stop.cancel();
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    fn publish(&self, change: impl FnOnce(&mut McpSnapshot)) {
        self.state.send_modify(change);
    }

    /// `reason`, with the process's last stderr lines when it wrote any.
    fn explain(&self, reason: &str) -> String {
        let tail = self.stderr_tail.lock().expect("stderr lock");
        if tail.is_empty() {
            reason.to_string()
        } else {
            format!("{reason}; its last output: {}", tail.iter().cloned().collect::<Vec<_>>().join(" | "))
        }
    }
}

/// What the model reads of an SDK error.
fn describe(error: ServiceError) -> String {
    match error {
        ServiceError::TransportClosed => "the connection to the server closed; it is being restarted".into(),
        ServiceError::McpError(data) => format!("error {}: {}", data.code.0, data.message),
        other => other.to_string(),
    }
}

/// Sends `notifications/cancelled` for a request whose answer is no longer awaited.
struct CancelOnDrop {
    peer: Option<Peer<RoleClient>>,
    id: rmcp::model::RequestId,
}

impl CancelOnDrop {
    fn params(&self) -> CancelledNotificationParam {
        CancelledNotificationParam::new(Some(self.id.clone()), Some("Tether stopped waiting for the answer".into()))
    }

    async fn now(&mut self) {
        if let Some(peer) = self.peer.take() {
            let _ = peer.notify_cancelled(self.params()).await;
        }
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let params = self.params();
        let Some(peer) = self.peer.take() else { return };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.notify_cancelled(params).await;
            });
        }
    }
}

/// A progress notification as one line: its message, else `progress/total` or `progress`.
fn progress_text(update: &ProgressNotificationParam) -> String {
    if let Some(message) = update.message.as_deref().filter(|m| !m.trim().is_empty()) {
        return message.to_string();
    }
    match update.total {
        Some(total) => format!("{}/{}", update.progress, total),
        None => update.progress.to_string(),
    }
}

/// The supervisor: connect, serve, and connect again after a backoff, until stopped.
async fn supervise(shared: Arc<Shared>) {
    let name = shared.spec.name.clone();
    let mut failures = 0u32;
    loop {
        let tools_changed = Arc::new(Notify::new());
        let handler = Handler { tools_changed: tools_changed.clone(), progress: shared.progress.clone() };
        let attempt = tokio::select! {
            attempt = tokio::time::timeout(shared.options.connect_timeout, connect(&shared, handler)) => attempt,
            () = shared.stop.cancelled() => break,
        };
        let reason = match attempt {
            Err(_) => format!("it did not answer within {:?}", shared.options.connect_timeout),
            Ok(Err(reason)) => reason,
            Ok(Ok(running)) => {
                let up_since = Instant::now();
                let reason = serve(&shared, running, &tools_changed).await;
                *shared.peer.lock().expect("peer lock") = None;
                if shared.stop.is_cancelled() {
                    break;
                }
                if up_since.elapsed() >= HEALTHY_AFTER {
                    failures = 0;
                }
                reason
            }
        };
        failures += 1;
        let reason = shared.explain(&reason);
        let wait = shared.options.backoff(failures);
        tracing::warn!(server = name, failures, ?wait, "MCP server down: {reason}; connecting again after the wait");
        shared.publish(|s| {
            s.status = McpStatus::Down { reason, failures };
            s.tools = Arc::default();
        });
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shared.stop.cancelled() => break,
        }
    }
    *shared.peer.lock().expect("peer lock") = None;
    shared.publish(|s| {
        s.status = McpStatus::Stopped;
        s.tools = Arc::default();
    });
    tracing::info!(server = name, "MCP server stopped");
}

/// Starts the process or opens the HTTP session, and runs `initialize`.
async fn connect(shared: &Arc<Shared>, handler: Handler) -> Result<RunningService<RoleClient, Handler>, String> {
    match &shared.spec.target {
        McpTarget::Command { program, args } => {
            let mut command = tokio::process::Command::new(program);
            command.args(args).kill_on_drop(true);
            let (transport, stderr) = TokioChildProcess::builder(command)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start {program:?}: {e}"))?;
            shared.stderr_tail.lock().expect("stderr lock").clear();
            if let Some(stderr) = stderr {
                tokio::spawn(read_stderr(shared.clone(), stderr));
            }
            handler.serve(transport).await.map_err(|e| format!("it did not complete `initialize`: {e}"))
        }
        McpTarget::Url(url) => {
            let transport = StreamableHttpClientTransport::from_uri(url.as_str());
            handler.serve(transport).await.map_err(|e| format!("{url}: it did not complete `initialize`: {e}"))
        }
    }
}

/// Serves one connection until it ends, is stopped, or the server is found hung; says why it ended.
async fn serve(shared: &Arc<Shared>, running: RunningService<RoleClient, Handler>, tools_changed: &Notify) -> String {
    let name = &shared.spec.name;
    let peer = running.peer().clone();
    let cancel = running.cancellation_token();
    let mut cancel_later = Some(running.cancellation_token());
    let tools = match tokio::time::timeout(shared.options.connect_timeout, list_tools(name, &peer)).await {
        Ok(Ok(tools)) => tools,
        Ok(Err(reason)) => {
            cancel.cancel();
            return reason;
        }
        Err(_) => {
            cancel.cancel();
            return format!("it did not answer `tools/list` within {:?}", shared.options.connect_timeout);
        }
    };
    tracing::info!(server = name, tools = tools.len(), "MCP server running");
    *shared.peer.lock().expect("peer lock") = Some(peer.clone());
    shared.publish(|s| {
        s.status = McpStatus::Running;
        s.tools = Arc::new(tools);
        s.starts += 1;
    });
    let ended = running.waiting();
    tokio::pin!(ended);
    loop {
        tokio::select! {
            quit = &mut ended => {
                return match quit {
                    Ok(_) => "the connection ended (the server exited or closed it)".to_string(),
                    Err(error) => format!("the connection failed: {error}"),
                };
            }
            () = tools_changed.notified() => match list_tools(name, &peer).await {
                Ok(tools) => {
                    tracing::info!(server = name, tools = tools.len(), "MCP server's tools changed");
                    shared.publish(|s| s.tools = Arc::new(tools));
                }
                Err(reason) => tracing::warn!(server = name, "cannot list the changed tools: {reason}"),
            },
            () = shared.reconnect.notified() => {
                *shared.peer.lock().expect("peer lock") = None;
                if let Some(token) = cancel_later.take() {
                    token.cancel();
                }
                let _ = (&mut ended).await;
                return "it stopped answering (a call timed out and `tools/list` went unanswered)".to_string();
            }
            () = shared.stop.cancelled() => {
                *shared.peer.lock().expect("peer lock") = None;
                if let Some(token) = cancel_later.take() {
                    token.cancel();
                }
                let _ = (&mut ended).await;
                return "stopped".to_string();
            }
        }
    }
}

/// `tools/list` (every page), as Tether tools; a tool that cannot be offered is logged and left out.
async fn list_tools(server: &str, peer: &Peer<RoleClient>) -> Result<Vec<McpTool>, String> {
    let listed = peer.list_all_tools().await.map_err(|e| format!("`tools/list` failed: {e}"))?;
    let mut tools: Vec<McpTool> = Vec::with_capacity(listed.len());
    for tool in listed {
        let json = serde_json::to_value(&tool).unwrap_or_default();
        match McpTool::from_listing(server, &json) {
            Ok(tool) if tools.iter().any(|t| t.spec.name == tool.spec.name) => {
                tracing::warn!(
                    server,
                    tool = tool.remote,
                    "left out: another tool of this server has the same name in Tether"
                );
            }
            Ok(tool) => tools.push(tool),
            Err(reason) => tracing::warn!(server, "a tool is left out: {reason}"),
        }
    }
    Ok(tools)
}

/// The child's stderr goes to the log, and its last lines are kept for [`Shared::explain`].
async fn read_stderr(shared: Arc<Shared>, stderr: tokio::process::ChildStderr) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(server = shared.spec.name, "stderr: {line}");
        let mut tail = shared.stderr_tail.lock().expect("stderr lock");
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_limit() {
        let options = McpOptions {
            backoff_min: Duration::from_millis(250),
            backoff_max: Duration::from_secs(2),
            ..McpOptions::default()
        };
        let waits: Vec<u128> = (1..=6).map(|n| options.backoff(n).as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 2000, 2000, 2000]);
        assert_eq!(options.backoff(u32::MAX), Duration::from_secs(2));
    }
}
