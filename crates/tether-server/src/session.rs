//! Sessions: one per browser tab, surviving reconnects within a grace period.
//!
//! The exactly-once and nothing-lost bookkeeping — numbered frames and their replay log, the
//! tool calls waiting for a `TOOL_RESULT` with their deadlines, the calls answered (a result
//! that arrives twice is applied once and acknowledged again) and abandoned (a late result is
//! acknowledged, not applied) — is the sans-IO `tether_core::session::ServerSession`. This edge
//! holds it under a lock with what it does not know: the socket's writer, the runs waiting for
//! results, the client's live tool list (from `CONTEXT_UPDATE`) and the conversation. Sessions
//! never share anything: a call id, a result or a tool of one session means nothing to another.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tether_core::check_tool_name;
use tether_core::session::{ResultOutcome, ServerSession, ServerSessionConfig};
use tether_core::validate::{CompiledSchema, FullSchema, FullValidator, Validator, format_validation_errors};
use tether_protocol::{
    AgentMessage, ContextUpdate, ErrorCode, ErrorFrame, EventFrame, PageInfo, ResultStatus, RunEvent, RunStatus,
    ServerFrame, ToolCall, ToolResult, ToolSpec, encode_frame,
};
use tokio::sync::{mpsc, oneshot};

use crate::config::ServerConfig;
use tether_agent::ChatMessage;
use tether_agent::ToolOutput;

/// Milliseconds on a monotonic clock (since the first call in this process): the time the
/// session machines are fed.
pub(crate) fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// What the connection's writer task sends.
#[derive(Debug)]
pub(crate) enum Outbound {
    /// A text frame.
    Text(String),
    /// Close the socket with a code and reason.
    Close(u16, String),
}

/// A run waiting for the result of one of its calls.
struct Waiter {
    tool: String,
    reply: oneshot::Sender<ToolOutput>,
}

struct State {
    /// Numbered frames, replay log, pending calls, answered and abandoned ids.
    machine: ServerSession,
    /// The writer of the attached connection: `machine` names its id.
    tx: Option<mpsc::UnboundedSender<Outbound>>,
    waiters: HashMap<String, Waiter>,
    tools: Vec<ToolSpec>,
    schemas: HashMap<String, Arc<FullSchema>>,
    revision: u64,
    page: Option<PageInfo>,
    run: Option<(String, tokio::task::AbortHandle)>,
    history: Vec<ChatMessage>,
}

impl State {
    /// Writes what the machine queued, in order, to the attached connection. Called under the
    /// lock after every event, so frames reach the socket in the order they were numbered.
    fn flush(&mut self) {
        let writes = self.machine.take_writes();
        if let Some(tx) = &self.tx {
            for text in writes {
                let _ = tx.send(Outbound::Text(text));
            }
        }
    }
}

/// What became of a `TOOL_RESULT`, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    /// Applied: the first result of a waiting call.
    First,
    /// Answered before: acknowledged again, ignored.
    Duplicate,
    /// The call had timed out or was cancelled: acknowledged, not applied.
    Late,
    /// Not a call of this session: refused.
    Unknown,
}

/// A client session.
pub struct Session {
    id: String,
    resume_token: String,
    /// The address of the client that opened it, for the per-address session limit.
    peer_ip: Option<IpAddr>,
    config: Arc<ServerConfig>,
    run_counter: AtomicU64,
    state: Mutex<State>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.id).finish_non_exhaustive()
    }
}

/// Why a `CONTEXT_UPDATE` was refused.
pub(crate) struct Refusal {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
}

/// A hard-to-guess token: 128 random bits in hex.
pub(crate) fn random_token() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system provides randomness");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Counts the bytes of JSON a value serialises to, without building the text.
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How many bytes of JSON `value` is.
fn json_bytes(value: &Value) -> usize {
    let mut counter = ByteCounter(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// How deeply objects and arrays nest in `value` (a scalar is 0, `{}` is 1). The decoder's
/// recursion limit (128) bounds the recursion here.
fn json_depth(value: &Value) -> usize {
    match value {
        Value::Object(map) => 1 + map.values().map(json_depth).max().unwrap_or(0),
        Value::Array(items) => 1 + items.iter().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
}

impl Session {
    pub(crate) fn new(config: Arc<ServerConfig>, peer_ip: Option<IpAddr>) -> Arc<Session> {
        let machine = ServerSession::new(ServerSessionConfig {
            log_limit: config.outbox_limit,
            max_pending_calls: config.max_pending_calls,
            result_timeout_ms: config.tool_result_timeout.as_millis() as u64,
            grace_ms: config.reconnect_grace.as_millis() as u64,
            ..ServerSessionConfig::default()
        });
        let state = State {
            machine,
            tx: None,
            waiters: HashMap::new(),
            tools: Vec::new(),
            schemas: HashMap::new(),
            revision: 0,
            page: None,
            run: None,
            history: Vec::new(),
        };
        Arc::new(Session {
            id: format!("s-{}", &random_token()[..16]),
            resume_token: random_token(),
            peer_ip,
            config,
            run_counter: AtomicU64::new(0),
            state: Mutex::new(state),
        })
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn resume_token(&self) -> &str {
        &self.resume_token
    }

    pub(crate) fn token_matches(&self, token: &str) -> bool {
        crate::policy::same_secret(&self.resume_token, token)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-updated in a way that
        // matters more than losing the session, so keep serving.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn next_run_id(&self) -> String {
        // The session's id in it makes run (and call) ids unique across sessions, for logs.
        let suffix = self.id.trim_start_matches("s-").get(..8).unwrap_or("");
        format!("run-{}-{suffix}", self.run_counter.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// Sends a frame now (and keeps it for a replay after a reconnect).
    pub(crate) fn send(&self, frame: ServerFrame) {
        let mut state = self.lock();
        state.machine.send(frame);
        state.flush();
    }

    /// Sends an `ERROR`.
    pub(crate) fn send_error(&self, code: ErrorCode, message: impl Into<String>, reply_to: Option<String>) {
        let frame = ErrorFrame { id: String::new(), code, message: message.into(), reply_to };
        self.send(ServerFrame::Error(frame));
    }

    /// Sends an `EVENT`.
    pub(crate) fn send_event(&self, run_id: Option<&str>, event: RunEvent) {
        let frame = EventFrame { id: String::new(), run_id: run_id.map(String::from), event };
        self.send(ServerFrame::Event(frame));
    }

    /// Sends a streamed piece of the answer.
    pub(crate) fn send_delta(&self, run_id: &str, delta: &str, done: bool, status: Option<RunStatus>) {
        let frame =
            AgentMessage { id: String::new(), run_id: run_id.to_string(), delta: delta.to_string(), done, status };
        self.send(ServerFrame::AgentMessage(frame));
    }

    /// Makes `tx` the session's connection, then sends `welcome`, the tool calls still waiting
    /// that the replay does not carry, and the frames the client has not processed (after
    /// `last_seq` when it says, else those sent while it was away).
    pub(crate) fn attach(
        &self,
        connection_id: u64,
        tx: mpsc::UnboundedSender<Outbound>,
        welcome: &ServerFrame,
        last_seq: Option<u64>,
    ) {
        let mut state = self.lock();
        let attached = state.machine.attach(connection_id, encode_frame(welcome), last_seq);
        if attached.lost > 0 {
            tracing::warn!(session = self.id, lost = attached.lost, "frames older than the replay log were not resent");
        }
        state.tx = Some(tx);
        state.flush();
    }

    /// The connection went away. `false` if it was not the current one (a newer one replaced it).
    pub(crate) fn detach(&self, connection_id: u64) -> bool {
        let mut state = self.lock();
        if !state.machine.detach(connection_id, now_ms()) {
            return false;
        }
        state.tx = None;
        true
    }

    /// How long until the session expires, if its client is away: `Some(ZERO)` once it has.
    pub(crate) fn expires_in(&self) -> Option<Duration> {
        let at = self.lock().machine.expires_at()?;
        Some(Duration::from_millis(at.saturating_sub(now_ms())))
    }

    /// Ends the session: aborts its run and fails the calls waiting for the client.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        if let Some((_, abort)) = state.run.take() {
            abort.abort();
        }
        state.machine.close();
        // Dropping the replies tells the waiting runs that the client went away.
        state.waiters.clear();
    }

    /// Applies a `CONTEXT_UPDATE`, or refuses it and keeps the previous list.
    pub(crate) fn apply_context(&self, update: ContextUpdate) -> Result<usize, Refusal> {
        let cap = self.config.max_active_tools as usize;
        if update.tools.len() > cap {
            return Err(Refusal {
                code: ErrorCode::ToolCapExceeded,
                message: format!(
                    "CONTEXT_UPDATE has {} tools but this session allows {cap}; the previous list is kept",
                    update.tools.len()
                ),
            });
        }
        let mut schemas = HashMap::with_capacity(update.tools.len());
        for tool in &update.tools {
            let invalid = |message: String| Refusal { code: ErrorCode::InvalidTool, message };
            check_tool_name(&tool.name).map_err(|e| invalid(format!("{e}; the previous list is kept")))?;
            if schemas.contains_key(&tool.name) {
                return Err(invalid(format!("tool {:?} appears twice; the previous list is kept", tool.name)));
            }
            self.check_tool_limits(tool)?;
            let schema = FullValidator.compile(&tool.parameters).map_err(|error| {
                invalid(format!("tool {:?} has an invalid schema: {error}; the previous list is kept", tool.name))
            })?;
            schemas.insert(tool.name.clone(), Arc::new(schema));
        }
        let count = update.tools.len();
        let mut state = self.lock();
        state.tools = update.tools;
        state.schemas = schemas;
        state.revision = update.revision;
        state.page = update.page;
        Ok(count)
    }

    /// Checks the configured size limits of one announced tool.
    fn check_tool_limits(&self, tool: &ToolSpec) -> Result<(), Refusal> {
        let over = |what: String| Refusal {
            code: ErrorCode::LimitExceeded,
            message: format!("tool {:?}: {what}; the previous list is kept", tool.name),
        };
        let config = &self.config;
        let description = tool.description.chars().count();
        if description > config.max_description_chars {
            return Err(over(format!(
                "the description has {description} characters, over the limit of {} (max_description_chars)",
                config.max_description_chars
            )));
        }
        let bytes = json_bytes(&tool.parameters);
        if bytes > config.max_schema_bytes {
            return Err(over(format!(
                "the parameters schema is {bytes} bytes, over the limit of {} (max_schema_bytes)",
                config.max_schema_bytes
            )));
        }
        let depth = json_depth(&tool.parameters);
        if depth > config.max_schema_depth {
            return Err(over(format!(
                "the parameters schema nests {depth} levels deep, over the limit of {} (max_schema_depth)",
                config.max_schema_depth
            )));
        }
        Ok(())
    }

    /// The risk the client declared for its tool `name` (`none` if it has no such tool).
    pub(crate) fn client_risk(&self, name: &str) -> tether_protocol::Risk {
        self.lock().tools.iter().find(|tool| tool.name == name).map(|tool| tool.risk).unwrap_or_default()
    }

    /// How many tool calls are waiting for the client's result.
    pub(crate) fn pending_calls(&self) -> usize {
        self.lock().machine.pending().len()
    }

    /// The client's tools now.
    pub fn client_tools(&self) -> Vec<ToolSpec> {
        self.lock().tools.clone()
    }

    /// The last applied `CONTEXT_UPDATE` revision.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// Checks a call of a client tool: it exists and the arguments match its schema.
    pub(crate) fn check_client_call(&self, name: &str, args: &Value) -> Option<Result<(), ToolOutput>> {
        let schema = self.lock().schemas.get(name).cloned()?;
        let errors = schema.errors(args);
        if errors.is_empty() {
            Some(Ok(()))
        } else {
            Some(Err(ToolOutput::new(ResultStatus::InvalidArgs, format_validation_errors(name, &errors))))
        }
    }

    /// Sends a `TOOL_CALL` and waits for its result (across reconnects, up to the timeout).
    pub(crate) async fn call_client_tool(&self, frame: ToolCall) -> ToolOutput {
        let call_id = frame.call_id.clone();
        let name = frame.name.clone();
        let (reply, mut answer) = oneshot::channel();
        {
            let mut state = self.lock();
            // The agent loop admits no more calls than the limit; this holds it for any caller.
            if let Err(limit) = state.machine.call(frame, now_ms()) {
                return ToolOutput::new(
                    ResultStatus::Denied,
                    format!("Not run: {limit} tool calls are already waiting for the client (max_pending_calls)."),
                );
            }
            state.waiters.insert(call_id.clone(), Waiter { tool: name.clone(), reply });
            state.flush();
        }
        loop {
            let deadline = {
                let state = self.lock();
                state.machine.pending().iter().find(|call| call.call_id == call_id).map(|call| call.deadline_ms)
            };
            // Waits for the answer, or for the deadline: then the session times the call out
            // (which answers with a timeout unless the result came first).
            let wait = deadline.map(|at| Duration::from_millis(at.saturating_sub(now_ms())));
            let timed = async {
                match wait {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                output = &mut answer => {
                    return output.unwrap_or_else(|_| {
                        ToolOutput::new(ResultStatus::Error, format!("The client went away before \"{name}\" answered."))
                    });
                }
                () = timed => self.poll_timeouts(),
            }
        }
    }

    /// Times out the calls whose deadline has passed: the client is told to abort them
    /// (`TOOL_CANCEL`) and their runs read a timeout.
    fn poll_timeouts(&self) {
        let mut state = self.lock();
        let polled = state.machine.poll(now_ms());
        let seconds = self.config.tool_result_timeout.as_secs();
        for call_id in polled.timed_out {
            if let Some(waiter) = state.waiters.remove(&call_id) {
                let message = format!("The client did not answer \"{}\" within {seconds} s.", waiter.tool);
                let _ = waiter.reply.send(ToolOutput::new(ResultStatus::Timeout, message));
            }
        }
        state.flush();
    }

    /// Applies a `TOOL_RESULT` once, and acknowledges it (duplicates and late ones too) or
    /// refuses it (`ERROR unknown_call`, naming the frame).
    pub(crate) fn apply_result(&self, result: ToolResult) -> Applied {
        let mut state = self.lock();
        let applied = match state.machine.result(result) {
            ResultOutcome::Applied(result) => {
                if let Some(waiter) = state.waiters.remove(&result.call_id) {
                    let content = match result.content {
                        Value::String(text) => text,
                        other => other.to_string(),
                    };
                    let _ = waiter.reply.send(ToolOutput::new(result.status, content));
                }
                Applied::First
            }
            ResultOutcome::Duplicate => Applied::Duplicate,
            ResultOutcome::Late => Applied::Late,
            ResultOutcome::Unknown => Applied::Unknown,
        };
        state.flush();
        applied
    }

    /// Starts a run unless one is in progress. When one is, answers the `USER_MESSAGE`
    /// `frame_id` with `ERROR run_in_progress` and returns `false`. The refusal is queued under
    /// the same lock as the run's end, so it always reaches the client before that run's last
    /// frame: a client can send again when it sees that frame.
    pub(crate) fn begin_run(
        &self,
        run_id: &str,
        abort: impl FnOnce() -> tokio::task::AbortHandle,
        frame_id: String,
    ) -> bool {
        let mut state = self.lock();
        if state.run.is_some() {
            let message = "a run is in progress; wait for its end (AGENT_MESSAGE done) and send again";
            let frame = ErrorFrame {
                id: String::new(),
                code: ErrorCode::RunInProgress,
                message: message.into(),
                reply_to: Some(frame_id),
            };
            state.machine.send(ServerFrame::Error(frame));
            state.flush();
            return false;
        }
        state.run = Some((run_id.to_string(), abort()));
        true
    }

    /// Whether a run is in progress.
    pub fn run_in_progress(&self) -> bool {
        self.lock().run.is_some()
    }

    pub(crate) fn take_history(&self) -> Vec<ChatMessage> {
        std::mem::take(&mut self.lock().history)
    }

    /// Records the end of a run (and the conversation to continue).
    pub(crate) fn end_run(&self, run_id: &str, history: Option<Vec<ChatMessage>>) {
        let mut state = self.lock();
        if state.run.as_ref().is_some_and(|(id, _)| id == run_id) {
            state.run = None;
        }
        if let Some(history) = history {
            state.history = history;
        }
        // Its calls still waiting are cancelled (a result that comes anyway is acknowledged as late).
        for call_id in state.machine.end_run(run_id) {
            state.waiters.remove(&call_id);
        }
        state.flush();
    }

    /// The page the client is on.
    pub fn page(&self) -> Option<PageInfo> {
        self.lock().page.clone()
    }
}

/// All sessions of a server, and how many each client address has.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    inner: Mutex<SessionIndex>,
}

#[derive(Debug, Default)]
struct SessionIndex {
    by_id: HashMap<String, Arc<Session>>,
    per_ip: HashMap<IpAddr, usize>,
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, SessionIndex> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a session unless its client address already has `per_ip_limit` sessions (0: no
    /// limit). `Err` carries how many it has.
    pub(crate) fn insert(&self, session: Arc<Session>, per_ip_limit: usize) -> Result<(), usize> {
        let mut index = self.lock();
        if let Some(ip) = session.peer_ip {
            let count = index.per_ip.entry(ip).or_insert(0);
            if per_ip_limit > 0 && *count >= per_ip_limit {
                return Err(*count);
            }
            *count += 1;
        }
        index.by_id.insert(session.id.clone(), session);
        Ok(())
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.lock().by_id.get(id).cloned()
    }

    pub(crate) fn remove(&self, id: &str) {
        let mut index = self.lock();
        let Some(session) = index.by_id.remove(id) else { return };
        if let Some(ip) = session.peer_ip {
            if let Some(count) = index.per_ip.get_mut(&ip) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    index.per_ip.remove(&ip);
                }
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().by_id.len()
    }
}
