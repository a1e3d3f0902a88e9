//! Sessions: one per browser tab, surviving reconnects within a grace period.
//!
//! A session holds the client's live tool list (from `CONTEXT_UPDATE`), the tool calls waiting
//! for a `TOOL_RESULT`, the ids of calls already answered (a result that arrives twice is
//! applied once and acknowledged again), a numbered log of recent frames to replay after a
//! reconnect (what a dying socket lost, and what was sent while the client was away), and the
//! conversation. Sessions never share anything: a call id, a result or a tool of one session
//! means nothing to another.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;
use tether_core::check_tool_name;
use tether_core::validate::{CompiledSchema, FullSchema, FullValidator, Validator, format_validation_errors};
use tether_protocol::{
    AgentMessage, ContextUpdate, ErrorCode, ErrorFrame, EventFrame, PageInfo, ResultStatus, RunEvent, RunStatus,
    ServerFrame, ToolCall, ToolCancel, ToolResult, ToolResultAck, ToolSpec, encode_frame,
};
use tokio::sync::{mpsc, oneshot};

use crate::config::ServerConfig;
use tether_agent::ChatMessage;
use tether_agent::ToolOutput;

/// How many answered call ids a session remembers to recognise duplicates.
const COMPLETED_IDS_KEPT: usize = 4096;

/// What the connection's writer task sends.
#[derive(Debug)]
pub(crate) enum Outbound {
    /// A text frame.
    Text(String),
    /// Close the socket with a code and reason.
    Close(u16, String),
}

struct Pending {
    frame: ToolCall,
    reply: oneshot::Sender<ToolOutput>,
}

struct Connection {
    id: u64,
    tx: mpsc::UnboundedSender<Outbound>,
}

#[derive(Default)]
struct State {
    connection: Option<Connection>,
    /// Every frame sent (or to send), numbered, for replay after a reconnect; bounded.
    log: VecDeque<(u64, String)>,
    /// The number of the last frame sent.
    seq: u64,
    /// The number of the last frame sent before the client went away.
    away_from: Option<u64>,
    tools: Vec<ToolSpec>,
    schemas: HashMap<String, Arc<FullSchema>>,
    revision: u64,
    page: Option<PageInfo>,
    pending: HashMap<String, Pending>,
    completed: HashSet<String>,
    completed_order: VecDeque<String>,
    run: Option<(String, tokio::task::AbortHandle)>,
    history: Vec<ChatMessage>,
    disconnected_at: Option<Instant>,
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
        Arc::new(Session {
            id: format!("s-{}", &random_token()[..16]),
            resume_token: random_token(),
            peer_ip,
            config,
            run_counter: AtomicU64::new(0),
            state: Mutex::new(State::default()),
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
        let mut frame = frame;
        let mut state = self.lock();
        Self::send_locked(&mut state, self.config.outbox_limit, &mut frame);
    }

    /// Numbers `frame` (`s<n>`, in send order), logs it for replay, and writes it to the socket
    /// if the client is connected. A frame lost with a dying socket is replayed on resume.
    fn send_locked(state: &mut State, log_limit: usize, frame: &mut ServerFrame) {
        state.seq += 1;
        frame.set_id(format!("s{}", state.seq));
        let text = encode_frame(frame);
        if let Some(connection) = &state.connection {
            let _ = connection.tx.send(Outbound::Text(text.clone()));
        }
        if state.log.len() >= log_limit {
            state.log.pop_front();
        }
        state.log.push_back((state.seq, text));
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

    /// Makes `tx` the session's connection, then sends `welcome`, the frames the client has
    /// not processed (after `last_seq` when it says, else those sent while it was away), and
    /// every tool call still waiting for a result that is not among them.
    pub(crate) fn attach(
        &self,
        connection_id: u64,
        tx: mpsc::UnboundedSender<Outbound>,
        welcome: &ServerFrame,
        last_seq: Option<u64>,
    ) {
        let mut state = self.lock();
        let _ = tx.send(Outbound::Text(encode_frame(welcome)));
        let from = last_seq.or(state.away_from).unwrap_or(state.seq);
        let oldest = state.log.front().map_or(state.seq + 1, |(seq, _)| *seq);
        if from < state.seq && oldest > from + 1 {
            tracing::warn!(
                session = self.id,
                lost = oldest - from - 1,
                "frames older than the replay log were not resent"
            );
        }
        for (_, text) in state.log.iter().filter(|(seq, _)| *seq > from) {
            let _ = tx.send(Outbound::Text(text.clone()));
        }
        let mut pending: Vec<&Pending> = state.pending.values().collect();
        pending.sort_by_key(|p| ServerFrame::ToolCall(p.frame.clone()).seq());
        for call in pending {
            let frame = ServerFrame::ToolCall(call.frame.clone());
            let replayed = frame.seq().is_some_and(|seq| seq > from && seq >= oldest);
            if !replayed {
                let _ = tx.send(Outbound::Text(encode_frame(&frame)));
            }
        }
        state.connection = Some(Connection { id: connection_id, tx });
        state.disconnected_at = None;
        state.away_from = None;
    }

    /// The connection went away. Returns when it happened, if it was the current one.
    pub(crate) fn detach(&self, connection_id: u64) -> Option<Instant> {
        let mut state = self.lock();
        if state.connection.as_ref().is_some_and(|c| c.id == connection_id) {
            state.connection = None;
            let now = Instant::now();
            state.disconnected_at = Some(now);
            state.away_from = Some(state.seq);
            return Some(now);
        }
        None
    }

    /// Whether the client has been away since `since` (no resume in between).
    pub(crate) fn still_away_since(&self, since: Instant) -> bool {
        self.lock().disconnected_at == Some(since)
    }

    /// Ends the session: aborts its run and fails the calls waiting for the client.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        if let Some((_, abort)) = state.run.take() {
            abort.abort();
        }
        state.pending.clear();
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
        self.lock().pending.len()
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
        let (reply, answer) = oneshot::channel();
        {
            let mut state = self.lock();
            // The agent loop admits no more calls than the limit; this holds it for any caller.
            if state.pending.len() >= self.config.max_pending_calls {
                let limit = self.config.max_pending_calls;
                return ToolOutput::new(
                    ResultStatus::Denied,
                    format!("Not run: {limit} tool calls are already waiting for the client (max_pending_calls)."),
                );
            }
            let mut sent = ServerFrame::ToolCall(frame);
            Self::send_locked(&mut state, self.config.outbox_limit, &mut sent);
            let ServerFrame::ToolCall(frame) = sent else { unreachable!("a TOOL_CALL stays a TOOL_CALL") };
            state.pending.insert(call_id.clone(), Pending { frame, reply });
        }
        match tokio::time::timeout(self.config.tool_result_timeout, answer).await {
            Ok(Ok(output)) => output,
            Ok(Err(_)) => {
                ToolOutput::new(ResultStatus::Error, format!("The client went away before \"{name}\" answered."))
            }
            Err(_) => {
                self.cancel_call(&call_id, "no result in time");
                let seconds = self.config.tool_result_timeout.as_secs();
                ToolOutput::new(
                    ResultStatus::Timeout,
                    format!("The client did not answer \"{name}\" within {seconds} s."),
                )
            }
        }
    }

    /// Stops waiting for a call and tells the client to abort it.
    pub(crate) fn cancel_call(&self, call_id: &str, reason: &str) {
        let removed = self.lock().pending.remove(call_id);
        if removed.is_some() {
            let frame = ToolCancel { id: String::new(), call_id: call_id.to_string(), reason: reason.to_string() };
            self.send(ServerFrame::ToolCancel(frame));
        }
    }

    /// Applies a `TOOL_RESULT` once. `Ok` carries the acknowledgement to send (duplicates are
    /// acknowledged again, and ignored) and whether this was the first time; `Err` is an unknown
    /// (or another session's) call.
    pub(crate) fn apply_result(&self, result: ToolResult) -> Result<(ServerFrame, bool), String> {
        let mut state = self.lock();
        let call_id = result.call_id;
        let first = state.pending.contains_key(&call_id);
        if let Some(pending) = state.pending.remove(&call_id) {
            let content = match result.content {
                Value::String(text) => text,
                other => other.to_string(),
            };
            let _ = pending.reply.send(ToolOutput::new(result.status, content));
            if state.completed_order.len() >= COMPLETED_IDS_KEPT {
                if let Some(oldest) = state.completed_order.pop_front() {
                    state.completed.remove(&oldest);
                }
            }
            state.completed.insert(call_id.clone());
            state.completed_order.push_back(call_id.clone());
        } else if !state.completed.contains(&call_id) {
            return Err(format!("TOOL_RESULT for unknown call {call_id:?}: this session never sent it"));
        }
        drop(state);
        Ok((ServerFrame::ToolResultAck(ToolResultAck { id: String::new(), call_id }), first))
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
            Self::send_locked(&mut state, self.config.outbox_limit, &mut ServerFrame::Error(frame));
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
        let stale: Vec<String> =
            state.pending.iter().filter(|(_, p)| p.frame.run_id == run_id).map(|(id, _)| id.clone()).collect();
        drop(state);
        for call_id in stale {
            self.cancel_call(&call_id, "the run ended");
        }
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
