//! Sessions: one per browser tab, surviving reconnects within a grace period.
//!
//! The exactly-once and nothing-lost bookkeeping — numbered frames and their replay log, the
//! tool calls waiting for a `TOOL_RESULT` with their deadlines, the calls answered (a result
//! that arrives twice is applied once and acknowledged again) and abandoned (a late result is
//! acknowledged, not applied) — is the sans-IO `tether_core::session::ServerSession`. This edge
//! holds it under a lock with what it does not know: the socket's writer, the runs waiting for
//! results, the client's live tool list (from `CONTEXT_UPDATE`) and the conversation. Sessions
//! never share anything: a call id, a result or a tool of one session means nothing to another.
//!
//! With a durable store (`--store sqlite:…`, the default, or Redis) everything a session needs to
//! go on is written before the frames that depend on it leave (`persist.rs`): the machine's
//! bookkeeping, the tools and app state, the conversation, what the user saw, and the run in
//! progress at its last checkpoint. A session the server does not hold (after a restart) is
//! read back from the store when its client resumes, and its run goes on.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tether_core::session::{ServerSession, ServerSessionConfig};
use tether_core::validate::{FullSchema, FullValidator, Validator};
use tether_protocol::{
    AgentMessage, ContextEntry, ErrorCode, ErrorFrame, EventFrame, PageInfo, RunEvent, RunStatus, ServerFrame,
    ToolSpec, encode_frame,
};
use tokio::sync::{mpsc, oneshot};

use crate::config::ServerConfig;
use crate::outbound::{CLOSE_RESTART, Outbound};
use crate::pages::PageMemory;
use crate::persist::{Head, Job, Persister, STORED_IDS_KEPT, Snapshot, StoreCopy, StoredRun};
use crate::store::{SessionStore, SessionWrite, StoredSession};
use tether_agent::{ChatMessage, ToolOutput};
use tether_protocol::{CallId, History, HistoryLine, HistoryRole, RunId};

mod calls;
mod context;
mod index;
mod runs;

pub(crate) use calls::NotOpened;
pub(crate) use index::Sessions;

/// Milliseconds on a monotonic clock (since the first call in this process): the time the
/// session machines are fed.
pub(crate) fn monotonic_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// A run waiting for the result of one of its calls.
struct Waiter {
    tool: String,
    reply: oneshot::Sender<ToolOutput>,
}

/// The run in progress: its id, its task, and how to stop it as the user asked.
struct RunHandle {
    id: RunId,
    /// The `USER_MESSAGE` frame that started it.
    message_id: String,
    abort: tokio::task::AbortHandle,
    stop: Option<oneshot::Sender<()>>,
}

struct State {
    /// Numbered frames, replay log, pending calls, answered and abandoned ids.
    machine: ServerSession,
    /// The writer of the attached connection: `machine` names its id.
    tx: Option<mpsc::UnboundedSender<Outbound>>,
    waiters: HashMap<CallId, Waiter>,
    tools: Vec<ToolSpec>,
    schemas: HashMap<String, Arc<FullSchema>>,
    /// The app state the page shares with the agent (from `CONTEXT_UPDATE`).
    context: Vec<ContextEntry>,
    revision: u64,
    page: Option<PageInfo>,
    /// The tools each page of the session offered (not stored: `pages.rs`).
    pages: PageMemory,
    run: Option<RunHandle>,
    history: Vec<ChatMessage>,
    /// What the user saw: each message and each finished run's answer.
    transcript: Vec<HistoryLine>,
    /// The answer text of the run in progress, as streamed so far.
    run_text: String,
    /// The run in progress at its last checkpoint (what a restart goes on from).
    stored_run: Option<StoredRun>,
    /// The durable store's persister; `None` with `--store memory`.
    persister: Option<Persister>,
    /// The state changed since it was last given to the persister.
    dirty: bool,
    /// The last frame given to the persister.
    persisted_seq: u64,
    /// A `tool_execution_end` was sent and the run's checkpoint that records its result is
    /// about to follow (in the same step of the run): nothing is flushed until it does, so that
    /// the two are stored in one write whatever else (an acknowledgement, a progress event)
    /// would flush meanwhile. Otherwise a crash between two writes could leave a client that
    /// saw the call end with a stored run that ends it again.
    awaiting_checkpoint: bool,
    /// What the store holds of the state (so that a write carries only what changed).
    store_copy: StoreCopy,
    /// The resume token's hash, given with the first write.
    token_hash: Option<[u8; 32]>,
    /// How long the store keeps the session after its last write.
    ttl: Duration,
    run_counter: u64,
    /// The `USER_MESSAGE` ids of the last runs that ended, newest last: a message sent again (by
    /// a client that could not tell whether it arrived) is not run twice.
    messages: Vec<String>,
    /// Handed to another server (a shared store): this one no longer serves it.
    moved: bool,
    /// Being handed to another server ([`Session::hand_off`]): a `TOOL_RESULT` is not applied
    /// here (its write might reach the store after the other server read it), nor acknowledged,
    /// so the client sends it again where the session goes. `deferred` says one was.
    leaving: bool,
    deferred: bool,
    /// Ended ([`Session::close_if_expired`]): its calls are no longer waited for, and no connection may
    /// attach to it any more (a client that comes back reads it back from the store, or starts
    /// afresh).
    closed: bool,
}

impl State {
    /// Writes what the machine queued, in order, to the attached connection — through the
    /// persister, which stores first, when the store is durable. Called under the lock after
    /// every event, so frames reach the socket in the order they were numbered.
    fn flush(&mut self) {
        if self.awaiting_checkpoint {
            return;
        }
        let writes = self.machine.take_writes();
        let Some(persister) = &self.persister else {
            if let Some(tx) = &self.tx {
                for text in writes {
                    let _ = tx.send(Outbound::Text(text));
                }
            }
            return;
        };
        let append = self.machine.logged_after(self.persisted_seq);
        if append.is_empty() && writes.is_empty() && !self.dirty && self.token_hash.is_none() {
            return;
        }
        self.persisted_seq = self.machine.seq();
        let failing = persister.failing();
        let (state, patches) = match std::mem::take(&mut self.dirty) {
            true => self.state_write(failing),
            false => (None, Vec::new()),
        };
        let Some(persister) = &self.persister else { return };
        let write = SessionWrite {
            token_hash: self.token_hash.take(),
            state,
            patches,
            append,
            trim_below: self.machine.oldest_logged(),
            expires_at_ms: crate::store::unix_ms().saturating_add(self.ttl.as_millis() as u64),
            claim: None,
        };
        persister.send(Job::Write { write, frames: writes });
    }

    /// Sends an `AGENT_MESSAGE` and keeps the run's text as the user sees it: `delta` added to
    /// it, or (`reset`) replacing it.
    fn send_text(&mut self, run_id: &RunId, delta: String, done: bool, status: Option<RunStatus>, reset: bool) {
        if reset {
            self.run_text.clone_from(&delta);
        } else {
            self.run_text.push_str(&delta);
        }
        let frame = AgentMessage { id: String::new(), run_id: run_id.clone(), delta, done, status, reset };
        self.machine.send(ServerFrame::AgentMessage(frame));
        self.flush();
    }

    /// The conversation as the user saw it, for a client that reloaded: each message and
    /// answer, and the run in progress with its text so far.
    fn history_frame(&self) -> ServerFrame {
        let mut lines = self.transcript.clone();
        if let Some(run) = &self.run {
            lines.push(HistoryLine {
                role: HistoryRole::Agent,
                text: self.run_text.clone(),
                run_id: Some(run.id.clone()),
                status: None,
            });
        }
        ServerFrame::History(History { id: "history".into(), lines })
    }

    /// The state's write: a patch with what changed since the last one, or, now and then, the
    /// whole state (see [`StoreCopy`]). `compact`: write it whole.
    fn state_write(&mut self, compact: bool) -> (Option<String>, Vec<(u64, String)>) {
        let mut head = self.head();
        let run_messages = self.stored_run.as_ref().map(|run| &run.checkpoint.messages[..]);
        if let Some(patch) = self.store_copy.patch(&mut head, run_messages, &self.history, &self.transcript, compact) {
            return (None, vec![patch]);
        }
        head.run = self.stored_run.clone();
        let snapshot = Snapshot {
            head,
            history: self.history.clone(),
            transcript: self.transcript.clone(),
            patched: self.store_copy.last_patch(),
        };
        let text = serde_json::to_string(&snapshot).expect("a snapshot always serialises");
        self.store_copy = StoreCopy::holding(&snapshot, &text, &[]);
        (Some(text), Vec::new())
    }

    /// The part of the state that does not grow with the conversation; the run's messages left
    /// out (see [`Head::run`]).
    fn head(&mut self) -> Head {
        let machine = self.machine.snapshot_without_log(STORED_IDS_KEPT);
        let run = self.stored_run.as_mut().map(|run| {
            let messages = std::mem::take(&mut run.checkpoint.messages);
            let copy = run.clone();
            run.checkpoint.messages = messages;
            copy
        });
        Head {
            machine,
            tools: self.tools.clone(),
            revision: self.revision,
            page: self.page.clone(),
            context: self.context.clone(),
            run,
            run_counter: self.run_counter,
            messages: self.messages.clone(),
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
    /// The session is moving to another server: neither applied nor acknowledged here (the
    /// client sends it again there).
    Deferred,
}

/// How many ended runs' `USER_MESSAGE` ids a session remembers ([`Session::first_reading`]):
/// more than a client sends again at once (its messages since the last run's end it saw).
const MESSAGE_IDS_KEPT: usize = 16;

/// A client session.
pub struct Session {
    id: String,
    resume_token: String,
    /// The address of the client that opened it, for the per-address session limit.
    peer_ip: Option<IpAddr>,
    config: Arc<ServerConfig>,
    /// This server's claim on the session, in a store shared by several servers.
    claim: Option<String>,
    state: Mutex<State>,
    /// Woken after each applied `CONTEXT_UPDATE` (a call waiting for a page to open).
    context_applied: tokio::sync::Notify,
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

fn machine_config(config: &ServerConfig) -> ServerSessionConfig {
    ServerSessionConfig {
        log_limit: config.outbox_limit,
        max_pending_calls: config.max_pending_calls,
        result_timeout_ms: config.tool_result_timeout.as_millis() as u64,
        grace_ms: config.reconnect_grace.as_millis() as u64,
        ..ServerSessionConfig::default()
    }
}

fn empty_state(machine: ServerSession, config: &ServerConfig) -> State {
    State {
        machine,
        tx: None,
        waiters: HashMap::new(),
        tools: Vec::new(),
        schemas: HashMap::new(),
        context: Vec::new(),
        revision: 0,
        page: None,
        pages: PageMemory::default(),
        run: None,
        history: Vec::new(),
        transcript: Vec::new(),
        run_text: String::new(),
        stored_run: None,
        persister: None,
        dirty: true,
        persisted_seq: 0,
        awaiting_checkpoint: false,
        store_copy: StoreCopy::default(),
        token_hash: None,
        ttl: config.session_ttl,
        run_counter: 0,
        messages: Vec::new(),
        moved: false,
        leaving: false,
        deferred: false,
        closed: false,
    }
}

/// Why a stored session could not be read back.
#[derive(Debug)]
pub(crate) struct Unreadable(pub(crate) String);

impl Session {
    /// A new session's id.
    pub(crate) fn new_id() -> String {
        format!("s-{}", &random_token()[..16])
    }

    /// A new session `id` (from [`Session::new_id`]); `claim`: this server's claim on it, in a
    /// shared store.
    pub(crate) fn new(
        config: Arc<ServerConfig>,
        peer_ip: Option<IpAddr>,
        store: Option<Arc<dyn SessionStore>>,
        id: String,
        claim: Option<String>,
    ) -> Arc<Session> {
        let resume_token = random_token();
        let mut state = empty_state(ServerSession::new(machine_config(&config)), &config);
        if let Some(store) = store {
            state.persister = Some(Persister::spawn(store, id.clone(), claim.clone()));
            state.token_hash = Some(crate::store::token_hash(&resume_token));
        }
        Arc::new(Session {
            id,
            resume_token,
            peer_ip,
            config,
            claim,
            state: Mutex::new(state),
            context_applied: tokio::sync::Notify::new(),
        })
    }

    /// A session read back from its store (after a restart, or on another instance), for a
    /// client that presented `token` (the caller checked it against the stored hash). `claim`:
    /// this server's claim on it, in a shared store.
    pub(crate) fn restore(
        config: Arc<ServerConfig>,
        peer_ip: Option<IpAddr>,
        store: Arc<dyn SessionStore>,
        stored: StoredSession,
        token: &str,
        claim: Option<String>,
    ) -> Result<Arc<Session>, Unreadable> {
        let snapshot = Snapshot::read(&stored.state, &stored.patches).map_err(Unreadable)?;
        let store_copy = StoreCopy::holding(&snapshot, &stored.state, &stored.patches);
        let Snapshot { head, history, transcript, .. } = snapshot;
        let mut machine_snapshot = head.machine;
        // Frames sent after the last state write are in the log: the numbering goes on after them.
        let last_logged = stored.log.last().map_or(0, |(seq, _)| *seq);
        machine_snapshot.seq = machine_snapshot.seq.max(last_logged);
        machine_snapshot.log = stored.log;
        let machine = ServerSession::restore(machine_config(&config), machine_snapshot, monotonic_ms());
        let mut state = empty_state(machine, &config);
        state.persisted_seq = state.machine.seq();
        state.store_copy = store_copy;
        let mut schemas = HashMap::new();
        for tool in &head.tools {
            if let Ok(schema) = FullValidator.compile(&tool.parameters) {
                schemas.insert(tool.name.clone(), Arc::new(schema));
            }
        }
        state.tools = head.tools;
        state.schemas = schemas;
        state.revision = head.revision;
        state.page = head.page;
        state.context = head.context;
        state.history = history;
        state.transcript = transcript;
        state.run_text = head.run.as_ref().map(|run| run.text.clone()).unwrap_or_default();
        state.stored_run = head.run;
        state.run_counter = head.run_counter;
        state.messages = head.messages;
        state.dirty = false;
        state.persister = Some(Persister::spawn(store, stored.id.clone(), claim.clone()));
        Ok(Arc::new(Session {
            id: stored.id,
            resume_token: token.to_string(),
            peer_ip,
            config,
            claim,
            state: Mutex::new(state),
            context_applied: tokio::sync::Notify::new(),
        }))
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

    /// Whether the `USER_MESSAGE` frame `id` is new: not the message of the run in progress
    /// (started here, or read back from the store) nor of one of the last runs that ended. A
    /// client sends a message again after a reconnect when it does not know whether it arrived;
    /// one already read is not run twice. A message whose run had not reached its first stored
    /// checkpoint when the server died is new again: that run left nothing to go on with.
    pub(crate) fn first_reading(&self, id: &str) -> bool {
        let state = self.lock();
        let running = state.run.as_ref().map(|run| run.message_id.as_str());
        let stored = state.stored_run.as_ref().map(|run| run.message_id.as_str());
        running != Some(id) && stored != Some(id) && !state.messages.iter().any(|seen| seen == id)
    }

    pub(crate) fn next_run_id(&self) -> RunId {
        // The session's id in it makes run (and call) ids unique across sessions, for logs.
        let suffix = self.id.trim_start_matches("s-").get(..8).unwrap_or("");
        let mut state = self.lock();
        state.run_counter += 1;
        state.dirty = true;
        format!("run-{}-{suffix}", state.run_counter).into()
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

    /// Sends an `EVENT`. A `tool_execution_end` leaves with the checkpoint that records its
    /// result (the run checkpoints right after it, in the same step): both are stored in one
    /// write, so a crash between them cannot leave a client that saw the result applied with a
    /// stored run that applies it again.
    pub(crate) fn send_event(&self, run_id: Option<&RunId>, event: RunEvent) {
        let with_checkpoint = matches!(event, RunEvent::ToolExecutionEnd(_));
        let frame = EventFrame { id: String::new(), run_id: run_id.cloned(), event };
        let mut state = self.lock();
        state.machine.send(ServerFrame::Event(frame));
        if with_checkpoint && state.persister.is_some() && state.run.is_some() {
            state.awaiting_checkpoint = true;
        } else if !with_checkpoint {
            state.flush();
        }
    }

    /// Sends a streamed piece of the answer.
    pub(crate) fn send_delta(&self, run_id: &RunId, delta: &str, done: bool, status: Option<RunStatus>) {
        self.lock().send_text(run_id, delta.to_string(), done, status, false);
    }

    /// Replaces the text the user sees for `run_id` with what it was at the run's checkpoint (a
    /// resumed run repeats the model turn that was in progress).
    pub(crate) fn send_reset(&self, run_id: &RunId) {
        let mut state = self.lock();
        let text = state.stored_run.as_ref().map(|run| run.text.clone()).unwrap_or_default();
        state.send_text(run_id, text, false, None, true);
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
        with_history: bool,
    ) -> bool {
        let mut state = self.lock();
        // Ended meanwhile (its grace period ran out while this connection was resuming it): not
        // served; the client connects again and reads it back from the store.
        if state.closed {
            return false;
        }
        // Whatever was queued for the previous connection goes first (through the persister).
        state.flush();
        let mut first = vec![encode_frame(welcome)];
        // A client that reloaded gets the conversation so far instead of the frames before now
        // (the calls still waiting are sent again all the same); read under the same lock as the
        // attach, so no frame falls between the two.
        let last_seq = if with_history {
            first.push(encode_frame(&state.history_frame()));
            Some(state.machine.seq())
        } else {
            last_seq
        };
        let attached = state.machine.attach_with(connection_id, first, last_seq);
        if attached.lost > 0 {
            tracing::warn!(session = self.id, lost = attached.lost, "frames older than the replay log were not resent");
        }
        if let Some(persister) = &state.persister {
            persister.send(Job::Attach(tx.clone()));
        }
        state.tx = Some(tx);
        state.flush();
        true
    }

    /// The connection went away. `false` if it was not the current one (a newer one replaced it).
    pub(crate) fn detach(&self, connection_id: u64) -> bool {
        let mut state = self.lock();
        if !state.machine.detach(connection_id, monotonic_ms()) {
            return false;
        }
        state.flush();
        if let Some(persister) = &state.persister {
            persister.send(Job::Detach);
        }
        state.tx = None;
        true
    }

    /// Waits until everything this session queued was given to the store (a draining
    /// shutdown, a hand-off); whether the store took all of it.
    pub(crate) async fn flushed(&self) -> bool {
        let persister = {
            let mut state = self.lock();
            state.flush();
            state.persister.clone()
        };
        match persister {
            Some(persister) => persister.flushed().await,
            None => true,
        }
    }

    /// Closes the attached connection with `code` and `reason`, after the frames queued for it.
    pub(crate) fn close_connection(&self, code: u16, reason: &str) {
        if let Some(tx) = &self.lock().tx {
            let _ = tx.send(Outbound::Close(code, reason.to_string()));
        }
    }

    /// This server's claim on the session (a shared store).
    pub(crate) fn claim(&self) -> Option<&str> {
        self.claim.as_deref()
    }

    /// Whether the session was handed to another server, or another server claimed it: this
    /// one must not serve it any more.
    pub(crate) fn moved(&self) -> bool {
        let state = self.lock();
        state.moved || state.persister.as_ref().is_some_and(Persister::moved)
    }

    /// Lets another server have the session (it asked, for a client that reconnected there): the
    /// run stops at its last checkpoint as in a draining shutdown, everything queued is stored,
    /// and from then on this session writes and sends nothing; a client still attached is asked
    /// to reconnect (close 1012). The caller then removes it and releases its claim. `false`
    /// when the store did not take everything (it is unavailable): the session stays here, its
    /// run suspended (the caller goes on with it), since the other server would read it back
    /// without what the store missed.
    pub(crate) async fn hand_off(&self) -> bool {
        self.lock().leaving = true;
        self.suspend_run();
        if !self.flushed().await && !self.moved() {
            let deferred = {
                let mut state = self.lock();
                state.leaving = false;
                std::mem::take(&mut state.deferred)
            };
            if deferred {
                // A result was left unacknowledged meanwhile: the client sends it again once it
                // has reconnected.
                self.close_connection(CLOSE_RESTART, "reconnect to go on");
            }
            return false;
        }
        self.close_connection(CLOSE_RESTART, "this session moved to another server; reconnect");
        let mut state = self.lock();
        state.moved = true;
        state.persister = None;
        state.tx = None;
        true
    }

    /// How long until the session expires, if its client is away: `Some(ZERO)` once it has;
    /// `None` too once it moved to another server (it is no longer this one's to expire).
    pub(crate) fn expires_in(&self) -> Option<Duration> {
        if self.moved() {
            return None;
        }
        let at = self.lock().machine.expires_at()?;
        Some(Duration::from_millis(at.saturating_sub(monotonic_ms())))
    }

    /// Ends the session if its client stayed away past the grace period, in one step with
    /// [`Session::attach`]: a client that attached meanwhile keeps it. `true` when it ended.
    pub(crate) fn close_if_expired(&self) -> bool {
        let mut state = self.lock();
        let due = !state.moved && state.machine.expires_at().is_some_and(|at| at <= monotonic_ms());
        if due {
            Self::close_locked(&mut state);
        }
        due
    }

    /// Whether the session ended ([`Session::close_if_expired`]).
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Ends the session: aborts its run and fails the calls waiting for the client.
    fn close_locked(state: &mut State) {
        state.closed = true;
        if let Some(run) = state.run.take() {
            run.abort.abort();
        }
        state.machine.close();
        // Dropping the replies tells the waiting runs that the client went away.
        state.waiters.clear();
    }

    /// Whether a client is connected now.
    pub fn connected(&self) -> bool {
        self.lock().tx.is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tether_protocol::{PROTOCOL_VERSION, ServerFrame, Welcome};
    use tokio::sync::mpsc;

    use super::Session;
    use crate::config::ServerConfig;

    fn welcome() -> ServerFrame {
        ServerFrame::Welcome(Welcome {
            id: "welcome".into(),
            protocol_version: PROTOCOL_VERSION,
            session_id: "s-test".into(),
            resume_token: "token".into(),
            resumed: true,
            max_active_tools: 30,
            max_frame_bytes: 1 << 20,
            capabilities: Vec::new(),
        })
    }

    /// A session whose client left and whose grace period (none) is over.
    fn expired() -> Arc<Session> {
        let config = ServerConfig { reconnect_grace: Duration::ZERO, ..ServerConfig::default() };
        let session = Session::new(Arc::new(config), None, None, "s-test".into(), None);
        let (tx, _rx) = mpsc::unbounded_channel();
        assert!(session.attach(1, tx, &welcome(), None, false));
        assert!(session.detach(1));
        session
    }

    #[test]
    fn a_session_that_ended_takes_no_connection() {
        let session = expired();
        assert!(session.close_if_expired(), "the grace period is over");
        assert!(session.is_closed());
        let (tx, _rx) = mpsc::unbounded_channel();
        // A client whose resume looked the session up before it ended: not attached to it.
        assert!(!session.attach(2, tx, &welcome(), None, false));
    }

    #[test]
    fn a_client_that_attached_first_keeps_its_session() {
        let session = expired();
        let (tx, _rx) = mpsc::unbounded_channel();
        assert!(session.attach(2, tx, &welcome(), None, false));
        assert!(!session.close_if_expired(), "its client is back");
        assert!(!session.is_closed());
    }
}
