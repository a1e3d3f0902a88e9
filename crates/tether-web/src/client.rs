//! The browser client: registry, executor and transport glued together.
//!
//! [`Client`] is a cheap handle (`Rc`) that components share. Registrations and removals mark
//! the registry dirty and schedule one flush per microtask, so a page that mounts ten
//! components sends one `CONTEXT_UPDATE`. A `TOOL_CALL` goes through the core executor
//! (lookup, validation, defaults, risk policy); the approval callback, resolver hooks and the
//! handler run as local futures, and the result is kept until the server acknowledges it.
//! User callbacks are never called while the client's state is borrowed.

use std::cell::{RefCell, RefMut};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use futures_util::future::{AbortHandle, Abortable};
use serde::Serialize;
use serde_json::Value;
use tether_core::{
    ApprovalDecision, ApprovalRequest, CallRequest, Executor, HookOutcome, Outcome, OwnerId, RefusedTool,
    RegistryEvent, SmallMap, Step, ToolDef, ToolRegistry,
};
use tether_protocol::{
    ClientFrame, ContextUpdate, ErrorCode, Hello, JsonObject, PROTOCOL_VERSION, PageInfo, ResultStatus, Resume,
    RunStatus, ServerFrameOf, ToolResult, ToolSpec, UserMessage,
};
use wasm_bindgen_futures::spawn_local;

use crate::WebError;
use crate::time::{next_frame, now_ms, sleep_ms, yield_microtasks};

/// A boxed local future.
pub type LocalFuture<T> = Pin<Box<dyn Future<Output = T>>>;
/// Runs a tool: validated arguments (defaults applied) in, output or error message out.
pub type Handler = Rc<dyn Fn(Value) -> LocalFuture<Result<Value, String>>>;
/// Decides an approval request; the UI resolves the future when the user answers.
pub type Approver = Rc<dyn Fn(ApprovalRequest) -> LocalFuture<ApprovalDecision>>;

/// The validator the browser build uses.
#[cfg(not(feature = "full-validator"))]
pub type BrowserValidator = tether_core::validate::CompactValidator<crate::BrowserRegex>;
/// The validator the browser build uses.
#[cfg(feature = "full-validator")]
pub type BrowserValidator = tether_core::validate::FullValidator;

#[cfg(not(feature = "full-validator"))]
fn browser_validator() -> BrowserValidator {
    tether_core::validate::CompactValidator::new(crate::BrowserRegex)
}
#[cfg(feature = "full-validator")]
fn browser_validator() -> BrowserValidator {
    tether_core::validate::FullValidator
}

/// A resolver's before-hook: gets the tool and arguments; `Err` refuses the call with that reason.
pub type BeforeHook = Rc<dyn Fn(&str, &Value) -> LocalFuture<Result<(), String>>>;
/// A resolver's after-hook: gets the tool and its output.
pub type AfterHook = Rc<dyn Fn(&str, &Value)>;
/// A resolver's error-hook: gets the tool and the handler's error.
pub type ErrorHook = Rc<dyn Fn(&str, &str)>;

/// Shared hooks of a resolver group, run around each of its tools' handlers.
#[derive(Clone, Default)]
pub struct ResolverHooks {
    /// Before the handler (after approval).
    pub before: Option<BeforeHook>,
    /// After a successful handler, with its output.
    pub after: Option<AfterHook>,
    /// After a failed handler, with its error.
    pub error: Option<ErrorHook>,
}

type NotifyCallback = Rc<dyn Fn(&Notification)>;
type ErrorCallback = Rc<dyn Fn(&WebError)>;

/// A `low`-risk call that is running: show the user what happens.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    /// The call.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub args: Value,
}

/// The state of the connection to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ConnectionState {
    /// Not connected and not trying.
    Idle,
    /// Opening the socket.
    Connecting,
    /// Welcomed by the server.
    Open,
    /// The socket closed; a reconnect is scheduled.
    Reconnecting,
    /// Closed on purpose.
    Closed,
}

/// A finished tool call, for dev tools.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRecord {
    /// The call.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// How it ended.
    pub status: ResultStatus,
    /// The result or message.
    pub content: Value,
    /// How long the result waited for navigation to settle, in milliseconds.
    pub settle_ms: Option<f64>,
}

/// Something that happened in the client. Subscribe with [`Client::subscribe`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ClientEvent {
    /// The connection changed state.
    #[serde(rename_all = "camelCase")]
    Connection {
        /// The new state.
        state: ConnectionState,
        /// Reconnect attempts since the last success.
        attempt: u32,
    },
    /// The server welcomed the client.
    #[serde(rename_all = "camelCase")]
    Welcome {
        /// The session.
        session_id: String,
        /// The cap the server announced.
        max_active_tools: u32,
        /// Whether the earlier session was resumed.
        resumed: bool,
    },
    /// A `CONTEXT_UPDATE` was sent.
    #[serde(rename_all = "camelCase")]
    ContextSent {
        /// Its revision.
        revision: u64,
        /// The tool names it announced.
        tools: Vec<String>,
    },
    /// A registration was refused (over the cap: `tool.registry.limit`).
    #[serde(rename_all = "camelCase")]
    ToolRefused {
        /// `tool.registry.limit` or `tool.registry.refused`.
        event: String,
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// A tool call arrived.
    #[serde(rename_all = "camelCase")]
    CallStarted {
        /// The call.
        call_id: String,
        /// The tool.
        tool: String,
        /// The arguments the server sent.
        args: Value,
    },
    /// The user is asked to approve a call.
    ApprovalRequested {
        /// What the approval UI shows.
        request: ApprovalView,
    },
    /// A tool call finished and its result was sent.
    CallFinished {
        /// The record.
        record: CallRecord,
    },
    /// Streamed answer text.
    #[serde(rename_all = "camelCase")]
    AgentMessage {
        /// The run.
        run_id: String,
        /// Text to append.
        delta: String,
        /// Whether the answer is complete.
        done: bool,
        /// How the run ended, when done.
        status: Option<RunStatus>,
    },
    /// A run event from the server.
    #[serde(rename_all = "camelCase")]
    Run {
        /// The run.
        run_id: Option<String>,
        /// What happened: the event's JSON as the server sent it (its `kind` names it;
        /// [`RunEvent::from_value`](tether_protocol::RunEvent::from_value) reads it typed). The
        /// runtime only forwards run events, so it does not decode them.
        event: Value,
    },
    /// The server refused something the client sent.
    ServerError {
        /// The error code.
        code: ErrorCode,
        /// The explanation.
        message: String,
    },
}

/// An approval request as the UI shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalView {
    /// The call.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Its description.
    pub description: String,
    /// `high` or `critical`.
    pub risk: tether_protocol::Risk,
    /// The arguments the handler will get.
    pub args: Value,
}

impl From<&ApprovalRequest> for ApprovalView {
    fn from(request: &ApprovalRequest) -> Self {
        ApprovalView {
            call_id: request.call_id.clone(),
            tool: request.tool.clone(),
            description: request.description.clone(),
            risk: request.risk,
            args: request.args.clone(),
        }
    }
}

// The JSON shapes the JavaScript API hands out (its TypeScript types document them). Built by
// hand rather than through the `Serialize` derives, which cost the module about 10 kB; the
// tests below hold the two to the same output.

impl Notification {
    /// The notification as JSON: `{callId, tool, args}`.
    pub fn to_value(&self) -> Value {
        JsonObject::new()
            .text("callId", &self.call_id)
            .text("tool", &self.tool)
            .value("args", self.args.clone())
            .build()
    }
}

impl ConnectionState {
    /// The state's name: `idle`, `connecting`, `open`, `reconnecting` or `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Idle => "idle",
            ConnectionState::Connecting => "connecting",
            ConnectionState::Open => "open",
            ConnectionState::Reconnecting => "reconnecting",
            ConnectionState::Closed => "closed",
        }
    }
}

impl CallRecord {
    /// The record as JSON: `{callId, tool, status, content, settleMs}`.
    pub fn to_value(&self) -> Value {
        JsonObject::new()
            .text("callId", &self.call_id)
            .text("tool", &self.tool)
            .text("status", self.status.as_str())
            .value("content", self.content.clone())
            .value("settleMs", self.settle_ms.map_or(Value::Null, Value::from))
            .build()
    }
}

impl ApprovalView {
    /// The request as JSON: `{callId, tool, description, risk, args}`.
    pub fn to_value(&self) -> Value {
        JsonObject::new()
            .text("callId", &self.call_id)
            .text("tool", &self.tool)
            .text("description", &self.description)
            .text("risk", self.risk.as_str())
            .value("args", self.args.clone())
            .build()
    }
}

impl ClientEvent {
    /// The event as JSON, tagged by `type` (see `TetherEvent` in the TypeScript declarations).
    pub fn to_value(&self) -> Value {
        let object = JsonObject::new();
        match self {
            ClientEvent::Connection { state, attempt } => {
                object.text("type", "connection").text("state", state.as_str()).value("attempt", Value::from(*attempt))
            }
            ClientEvent::Welcome { session_id, max_active_tools, resumed } => object
                .text("type", "welcome")
                .text("sessionId", session_id)
                .value("maxActiveTools", Value::from(*max_active_tools))
                .value("resumed", Value::Bool(*resumed)),
            ClientEvent::ContextSent { revision, tools } => object
                .text("type", "contextSent")
                .value("revision", Value::from(*revision))
                .value("tools", Value::from(tools.clone())),
            ClientEvent::ToolRefused { event, tool, reason } => {
                object.text("type", "toolRefused").text("event", event).text("tool", tool).text("reason", reason)
            }
            ClientEvent::CallStarted { call_id, tool, args } => object
                .text("type", "callStarted")
                .text("callId", call_id)
                .text("tool", tool)
                .value("args", args.clone()),
            ClientEvent::ApprovalRequested { request } => {
                object.text("type", "approvalRequested").value("request", request.to_value())
            }
            ClientEvent::CallFinished { record } => {
                object.text("type", "callFinished").value("record", record.to_value())
            }
            ClientEvent::AgentMessage { run_id, delta, done, status } => object
                .text("type", "agentMessage")
                .text("runId", run_id)
                .text("delta", delta)
                .value("done", Value::Bool(*done))
                .value("status", status.map_or(Value::Null, |status| Value::from(status.as_str()))),
            ClientEvent::Run { run_id, event } => {
                object.text("type", "run").value("runId", Value::from(run_id.clone())).value("event", event.clone())
            }
            ClientEvent::ServerError { code, message } => {
                object.text("type", "serverError").text("code", code.as_str()).text("message", message)
            }
        }
        .build()
    }
}

/// Settings of a [`Client`].
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// The server's WebSocket URL, e.g. `ws://127.0.0.1:8787/ws`.
    pub url: String,
    /// The longest a result waits for a navigating handler's page to settle. Default 250 ms.
    pub max_settle_ms: u32,
    /// First reconnect delay; doubled per attempt, with ±50 % jitter. Default 250 ms.
    pub reconnect_base_ms: u32,
    /// Longest reconnect delay. Default 10 s.
    pub reconnect_max_ms: u32,
}

impl ClientConfig {
    /// Defaults for a server URL.
    pub fn new(url: impl Into<String>) -> Self {
        ClientConfig { url: url.into(), max_settle_ms: 250, reconnect_base_ms: 250, reconnect_max_ms: 10_000 }
    }
}

type Listener = Rc<dyn Fn(&ClientEvent)>;

struct ToolEntry {
    handler: Handler,
}

/// A call in flight, as the edge sees it.
#[derive(Default)]
struct CallState {
    /// Set for [`Client::invoke_local`]: the outcome goes here, not to the server.
    local: Option<futures_channel::oneshot::Sender<Outcome>>,
    abort: Option<AbortHandle>,
    url_before: Option<String>,
    revision_before: u64,
    changes_before: u64,
    /// The server cancelled it: it no longer wants a result.
    cancelled_by_server: bool,
}

struct Inner {
    registry: ToolRegistry<ToolEntry, BrowserValidator>,
    resolvers: SmallMap<ResolverHooks>,
    executor: Executor,
    calls: SmallMap<CallState>,
    /// Results sent (or to send) and not yet acknowledged, oldest first.
    outbox: Vec<ToolResult>,
    /// User messages waiting for a connection.
    queued_messages: Vec<UserMessage>,
    socket: Option<crate::transport::Socket>,
    state: ConnectionState,
    attempt: u32,
    session: Option<Resume>,
    /// The sequence number of the last server frame processed (sent when resuming).
    last_seq: Option<u64>,
    next_frame: u64,
    next_owner: u64,
    /// Counts every registry change, to see whether a navigation is still mounting tools.
    changes: u64,
    flush_scheduled: bool,
    timer_at: Option<u64>,
    approver: Option<Approver>,
    notify: Option<NotifyCallback>,
    on_error: Option<ErrorCallback>,
    listeners: Vec<(u32, Listener)>,
    next_listener: u32,
    recent: VecDeque<CallRecord>,
    running: bool,
}

struct Shared {
    config: ClientConfig,
    inner: RefCell<Inner>,
}

/// The browser runtime. Clone it freely: clones share one registry and one connection.
#[derive(Clone)]
pub struct Client(Rc<Shared>);

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("url", &self.0.config.url).finish_non_exhaustive()
    }
}

/// How many finished calls the client remembers for dev tools.
const RECENT_CALLS_KEPT: usize = 20;

fn current_page() -> Option<PageInfo> {
    let window = web_sys::window()?;
    let location = window.location();
    let url = format!("{}{}", location.pathname().ok()?, location.search().unwrap_or_default());
    let title = window.document().map(|d| d.title()).unwrap_or_default();
    Some(PageInfo { url, title })
}

fn current_url() -> Option<String> {
    web_sys::window()?.location().href().ok()
}

/// What to do after the state borrow is released.
enum Effect {
    Emit(ClientEvent),
    Error(WebError),
}

impl Client {
    /// A client for `config`. Call [`Client::connect`] to open the connection.
    pub fn new(config: ClientConfig) -> Self {
        let inner = Inner {
            registry: ToolRegistry::new(browser_validator()),
            resolvers: SmallMap::default(),
            executor: Executor::default(),
            calls: SmallMap::default(),
            outbox: Vec::new(),
            queued_messages: Vec::new(),
            socket: None,
            state: ConnectionState::Idle,
            attempt: 0,
            session: None,
            last_seq: None,
            next_frame: 0,
            next_owner: 0,
            changes: 0,
            flush_scheduled: false,
            timer_at: None,
            approver: None,
            notify: None,
            on_error: None,
            listeners: Vec::new(),
            next_listener: 0,
            recent: VecDeque::new(),
            running: false,
        };
        Client(Rc::new(Shared { config, inner: RefCell::new(inner) }))
    }

    fn inner(&self) -> RefMut<'_, Inner> {
        self.0.inner.borrow_mut()
    }

    /// The settings.
    pub fn config(&self) -> &ClientConfig {
        &self.0.config
    }

    /// Opens the connection (and keeps reconnecting until [`Client::disconnect`]).
    pub fn connect(&self) {
        {
            let mut inner = self.inner();
            if inner.running {
                return;
            }
            inner.running = true;
        }
        crate::transport::open(self);
    }

    /// Closes the connection and stops reconnecting.
    pub fn disconnect(&self) {
        let socket = {
            let mut inner = self.inner();
            inner.running = false;
            inner.socket.take()
        };
        if let Some(socket) = socket {
            socket.close();
        }
        self.set_state(ConnectionState::Closed);
    }

    pub(crate) fn is_running(&self) -> bool {
        self.0.inner.borrow().running
    }

    /// A fresh owner id for a component.
    pub fn new_owner(&self) -> OwnerId {
        let mut inner = self.inner();
        inner.next_owner += 1;
        OwnerId(inner.next_owner)
    }

    /// Registers a tool for `owner` with a handler. Refused (and reported to the error
    /// callback and subscribers) when the name or schema is invalid or the cap is reached.
    pub fn register<F, Fut>(&self, owner: OwnerId, def: ToolDef, handler: F) -> Result<(), WebError>
    where
        F: Fn(Value) -> Fut + 'static,
        Fut: Future<Output = Result<Value, String>> + 'static,
    {
        self.register_handler(owner, def, Rc::new(move |args| Box::pin(handler(args))))
    }

    /// Registers a tool with an already boxed handler.
    pub fn register_handler(&self, owner: OwnerId, def: ToolDef, handler: Handler) -> Result<(), WebError> {
        let result = self.inner().registry.register(owner, def, ToolEntry { handler });
        self.registry_changed();
        result.map(|_| ()).map_err(WebError::from)
    }

    /// Registers a resolver group: each tool is named `prefix_name` and runs `hooks` around
    /// its handler. Each tool is admitted or refused on its own.
    pub fn register_resolver(
        &self,
        owner: OwnerId,
        prefix: &str,
        tools: Vec<(ToolDef, Handler)>,
        hooks: ResolverHooks,
    ) -> Vec<Result<(), WebError>> {
        let results = {
            let mut inner = self.inner();
            inner.resolvers.insert(prefix.to_string(), hooks);
            let tools = tools.into_iter().map(|(def, handler)| (def, ToolEntry { handler })).collect();
            inner.registry.register_resolver(owner, prefix, tools)
        };
        self.registry_changed();
        results.into_iter().map(|r| r.map(|_| ()).map_err(WebError::from)).collect()
    }

    /// Removes every non-global tool of `owner` (its component unmounted) and aborts their
    /// calls in flight.
    pub fn unregister_owner(&self, owner: OwnerId) {
        let steps = {
            let mut inner = self.inner();
            let removed = inner.registry.unregister_owner(owner);
            inner.executor.cancel_tools(&removed, "its component was unmounted")
        };
        self.registry_changed();
        for step in steps {
            self.drive(step);
        }
    }

    /// Removes one tool of `owner` (if `owner` still owns it) and aborts its calls in flight.
    pub fn unregister(&self, owner: OwnerId, name: &str) {
        let steps = {
            let mut inner = self.inner();
            if inner.registry.unregister_owned(owner, name) {
                inner.executor.cancel_tools(&[name.to_string()], "the tool was unregistered")
            } else {
                Vec::new()
            }
        };
        self.registry_changed();
        for step in steps {
            self.drive(step);
        }
    }

    /// Sets the approval callback (`high` and `critical` tools). Without one, such calls are
    /// refused with a reason the model can read.
    pub fn set_approver(&self, approver: Approver) {
        self.inner().approver = Some(approver);
    }

    /// Sets the callback told about `low`-risk calls as they run.
    pub fn on_notify(&self, notify: impl Fn(&Notification) + 'static) {
        self.inner().notify = Some(Rc::new(notify));
    }

    /// Sets the callback told about errors: refused registrations, server errors, lost results.
    pub fn on_error(&self, on_error: impl Fn(&WebError) + 'static) {
        self.inner().on_error = Some(Rc::new(on_error));
    }

    /// Subscribes to every [`ClientEvent`]; returns an id for [`Client::unsubscribe`].
    pub fn subscribe(&self, listener: impl Fn(&ClientEvent) + 'static) -> u32 {
        let mut inner = self.inner();
        inner.next_listener += 1;
        let id = inner.next_listener;
        inner.listeners.push((id, Rc::new(listener)));
        id
    }

    /// Removes a subscription.
    pub fn unsubscribe(&self, id: u32) {
        self.inner().listeners.retain(|(listener, _)| *listener != id);
    }

    /// Sends the user's message (queued until connected).
    pub fn send_message(&self, text: &str) {
        let message = {
            let mut inner = self.inner();
            let id = next_id(&mut inner);
            UserMessage { id, text: text.to_string() }
        };
        let sent = self.send_frame(&ClientFrame::UserMessage(message.clone()), true);
        if !sent {
            self.inner().queued_messages.push(message);
        }
    }

    /// The tools as the model sees them now.
    pub fn tools(&self) -> Vec<ToolSpec> {
        self.0.inner.borrow().registry.specs()
    }

    /// The most recent refused registrations.
    pub fn refused(&self) -> Vec<RefusedTool> {
        self.0.inner.borrow().registry.refused().to_vec()
    }

    /// The most recent finished calls, newest last.
    pub fn recent_calls(&self) -> Vec<CallRecord> {
        self.0.inner.borrow().recent.iter().cloned().collect()
    }

    /// Runs a tool here, without the server: the same lookup, validation, defaults, risk policy
    /// (approval included) and handler as a `TOOL_CALL`. For dev tools and tests; the outcome
    /// is not sent anywhere.
    pub fn invoke_local(&self, tool: &str, args: Value) -> LocalFuture<Outcome> {
        let (sender, receiver) = futures_channel::oneshot::channel();
        let call_id = {
            let mut inner = self.inner();
            inner.next_frame += 1;
            format!("local-{}", inner.next_frame)
        };
        let request =
            CallRequest { call_id: call_id.clone(), tool: tool.to_string(), args, server_risk: Default::default() };
        self.start_call_with(request, Some(sender));
        let tool = tool.to_string();
        Box::pin(async move {
            receiver.await.unwrap_or(Outcome {
                call_id,
                tool,
                status: ResultStatus::Cancelled,
                content: Value::String("the call was dropped".into()),
            })
        })
    }

    /// Checks arguments against a registered tool's schema: every problem, empty when valid.
    pub fn validate(&self, tool: &str, args: &Value) -> Option<Vec<String>> {
        use tether_core::validate::CompiledSchema;
        let inner = self.0.inner.borrow();
        let registered = inner.registry.get(tool)?;
        Some(registered.schema().errors(args).iter().map(ToString::to_string).collect())
    }

    /// The connection's state.
    pub fn connection_state(&self) -> ConnectionState {
        self.0.inner.borrow().state
    }

    /// The session id, once welcomed.
    pub fn session_id(&self) -> Option<String> {
        self.0.inner.borrow().session.as_ref().map(|s| s.session_id.clone())
    }

    /// The cap on active tools in force.
    pub fn max_active_tools(&self) -> u32 {
        self.0.inner.borrow().registry.cap()
    }

    /// How many results wait for the server's acknowledgement.
    pub fn unacknowledged_results(&self) -> usize {
        self.0.inner.borrow().outbox.len()
    }

    // ---- internals -------------------------------------------------------------------

    fn emit(&self, event: &ClientEvent) {
        let listeners: Vec<Listener> = self.0.inner.borrow().listeners.iter().map(|(_, l)| l.clone()).collect();
        for listener in listeners {
            listener(event);
        }
    }

    fn report(&self, error: &WebError) {
        let callback = self.0.inner.borrow().on_error.clone();
        match callback {
            Some(callback) => callback(error),
            None => web_sys::console::warn_1(&format!("tether: {error}").into()),
        }
    }

    fn apply(&self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::Emit(event) => self.emit(&event),
                Effect::Error(error) => self.report(&error),
            }
        }
    }

    pub(crate) fn set_state(&self, state: ConnectionState) {
        let attempt = {
            let mut inner = self.inner();
            inner.state = state;
            inner.attempt
        };
        self.emit(&ClientEvent::Connection { state, attempt });
    }

    /// Marks the registry changed and schedules one flush for this tick.
    fn registry_changed(&self) {
        let schedule = {
            let mut inner = self.inner();
            inner.changes += 1;
            !std::mem::replace(&mut inner.flush_scheduled, true)
        };
        if schedule {
            let client = self.clone();
            // spawn_local runs in a microtask: every change made in this tick is flushed together.
            spawn_local(async move { client.flush() });
        }
    }

    /// Reports registry events and sends one `CONTEXT_UPDATE` if the tool list changed.
    pub(crate) fn flush(&self) {
        let mut effects = Vec::new();
        let frame = {
            let mut inner = self.inner();
            inner.flush_scheduled = false;
            for event in inner.registry.drain_events() {
                if let RegistryEvent::Refused { name, error } = &event {
                    effects.push(Effect::Emit(ClientEvent::ToolRefused {
                        event: event.name().to_string(),
                        tool: name.clone(),
                        reason: error.to_string(),
                    }));
                    effects.push(Effect::Error(WebError::Registry(error.clone())));
                }
            }
            let welcomed = inner.state == ConnectionState::Open;
            match inner.registry.flush().filter(|_| welcomed) {
                Some(snapshot) => {
                    let id = next_id(&mut inner);
                    let names = snapshot.tools.iter().map(|t| t.name.clone()).collect();
                    effects.push(Effect::Emit(ClientEvent::ContextSent { revision: snapshot.revision, tools: names }));
                    Some(ClientFrame::ContextUpdate(ContextUpdate {
                        id,
                        revision: snapshot.revision,
                        tools: snapshot.tools,
                        page: current_page(),
                    }))
                }
                None => None,
            }
        };
        if let Some(frame) = frame {
            self.send_frame(&frame, false);
        }
        self.apply(effects);
    }

    /// Sends a frame if a socket is open (and, unless `only_when_welcomed` is false, welcomed).
    fn send_frame(&self, frame: &ClientFrame, only_when_welcomed: bool) -> bool {
        let inner = self.0.inner.borrow();
        if only_when_welcomed && inner.state != ConnectionState::Open {
            return false;
        }
        match &inner.socket {
            Some(socket) => socket.send(&crate::json::stringify(&frame.to_value())),
            None => false,
        }
    }

    /// A socket was created; it is used once it opens.
    pub(crate) fn set_socket(&self, socket: crate::transport::Socket) {
        self.inner().socket = Some(socket);
    }

    /// Whether a socket is open or opening.
    pub(crate) fn has_socket(&self) -> bool {
        self.0.inner.borrow().socket.is_some()
    }

    /// The socket opened: say HELLO.
    pub(crate) fn attach(&self) {
        let hello = {
            let mut inner = self.inner();
            match &mut inner.socket {
                Some(socket) => socket.open = true,
                None => return,
            }
            let id = next_id(&mut inner);
            ClientFrame::Hello(Hello {
                id,
                protocol_version: PROTOCOL_VERSION,
                resume: inner.session.clone().map(|resume| Resume { last_seq: inner.last_seq, ..resume }),
                client: Some(concat!("tether-web/", env!("CARGO_PKG_VERSION")).to_string()),
            })
        };
        self.send_frame(&hello, false);
    }

    /// The socket closed.
    pub(crate) fn detach(&self) {
        let socket = {
            let mut inner = self.inner();
            inner.attempt += 1;
            inner.socket.take()
        };
        // Dropped outside the borrow: dropping detaches the socket's callbacks.
        drop(socket);
    }

    pub(crate) fn attempt(&self) -> u32 {
        self.0.inner.borrow().attempt
    }

    /// Handles one text frame from the server.
    pub(crate) fn receive(&self, text: &str) {
        match crate::json::parse(text).and_then(|value| ServerFrameOf::<Value>::decode_value(&value)) {
            Ok(frame) => self.on_frame(frame),
            Err(error) => self.report(&WebError::Protocol(error)),
        }
    }

    fn on_frame(&self, frame: ServerFrameOf<Value>) {
        if !matches!(frame, ServerFrameOf::Welcome(_)) {
            if let Some(seq) = frame.seq() {
                let mut inner = self.inner();
                inner.last_seq = Some(inner.last_seq.map_or(seq, |last| last.max(seq)));
            }
        }
        match frame {
            ServerFrameOf::Welcome(welcome) => self.on_welcome(welcome),
            ServerFrameOf::ToolCall(call) => {
                self.emit(&ClientEvent::CallStarted {
                    call_id: call.call_id.clone(),
                    tool: call.name.clone(),
                    args: call.args.clone(),
                });
                let request =
                    CallRequest { call_id: call.call_id, tool: call.name, args: call.args, server_risk: call.risk };
                self.start_call(request);
            }
            ServerFrameOf::ToolCancel(cancel) => {
                let step = {
                    let mut inner = self.inner();
                    if let Some(state) = inner.calls.get_mut(&cancel.call_id) {
                        state.cancelled_by_server = true;
                    }
                    inner.executor.cancel(&cancel.call_id, &cancel.reason)
                };
                if let Some(step) = step {
                    self.drive(step);
                }
            }
            ServerFrameOf::ToolResultAck(ack) => self.inner().outbox.retain(|r| r.call_id != ack.call_id),
            ServerFrameOf::AgentMessage(message) => self.emit(&ClientEvent::AgentMessage {
                run_id: message.run_id,
                delta: message.delta,
                done: message.done,
                status: message.status,
            }),
            ServerFrameOf::Event(event) => self.emit(&ClientEvent::Run { run_id: event.run_id, event: event.event }),
            ServerFrameOf::Error(error) => {
                self.emit(&ClientEvent::ServerError { code: error.code, message: error.message.clone() });
                self.report(&WebError::Server { code: error.code, message: error.message });
            }
        }
    }

    fn on_welcome(&self, welcome: tether_protocol::Welcome) {
        let mut effects = Vec::new();
        let (context, resend, queued) = {
            let mut inner = self.inner();
            if !welcome.resumed {
                // A new session numbers its frames from 1.
                inner.last_seq = None;
            }
            inner.session = Some(Resume {
                session_id: welcome.session_id.clone(),
                token: welcome.resume_token.clone(),
                last_seq: None,
            });
            inner.state = ConnectionState::Open;
            inner.attempt = 0;
            for name in inner.registry.set_cap(welcome.max_active_tools) {
                effects.push(Effect::Emit(ClientEvent::ToolRefused {
                    event: tether_core::LIMIT_EVENT.to_string(),
                    tool: name,
                    reason: format!("the server allows at most {} active tools", welcome.max_active_tools),
                }));
            }
            if !welcome.resumed && !inner.outbox.is_empty() {
                // The server lost the session: nobody is waiting for these results any more.
                let count = inner.outbox.len();
                inner.outbox.clear();
                effects.push(Effect::Error(WebError::ResultsLost { count }));
            }
            let snapshot = inner.registry.resync();
            let id = next_id(&mut inner);
            effects.push(Effect::Emit(ClientEvent::ContextSent {
                revision: snapshot.revision,
                tools: snapshot.tools.iter().map(|t| t.name.clone()).collect(),
            }));
            let context = ClientFrame::ContextUpdate(ContextUpdate {
                id,
                revision: snapshot.revision,
                tools: snapshot.tools,
                page: current_page(),
            });
            let resend: Vec<ToolResult> = inner.outbox.clone();
            let queued = std::mem::take(&mut inner.queued_messages);
            (context, resend, queued)
        };
        self.emit(&ClientEvent::Connection { state: ConnectionState::Open, attempt: 0 });
        self.emit(&ClientEvent::Welcome {
            session_id: welcome.session_id,
            max_active_tools: welcome.max_active_tools,
            resumed: welcome.resumed,
        });
        // The tool list first, so that results and messages are read against it.
        self.send_frame(&context, false);
        for result in resend {
            self.send_frame(&ClientFrame::ToolResult(result), false);
        }
        for message in queued {
            self.send_frame(&ClientFrame::UserMessage(message), false);
        }
        self.apply(effects);
    }

    fn start_call(&self, request: CallRequest) {
        self.start_call_with(request, None);
    }

    fn start_call_with(&self, request: CallRequest, local: Option<futures_channel::oneshot::Sender<Outcome>>) {
        let call_id = request.call_id.clone();
        let step = {
            let mut inner = self.inner();
            let Inner { executor, registry, .. } = &mut *inner;
            let step = executor.start(request, registry, now_ms());
            if step.is_none() {
                // A repeated TOOL_CALL (after a reconnect): answer again if we already have the result.
                let known = inner.outbox.iter().find(|r| r.call_id == call_id).cloned();
                drop(inner);
                if let Some(result) = known {
                    self.send_frame(&ClientFrame::ToolResult(result), false);
                }
                return;
            }
            inner.calls.insert(call_id, CallState { local, ..CallState::default() });
            step
        };
        if let Some(step) = step {
            self.drive(step);
        }
    }

    /// Performs one executor step and feeds the outcome back.
    fn drive(&self, step: Step) {
        match step {
            Step::AskApproval(request) => {
                self.emit(&ClientEvent::ApprovalRequested { request: ApprovalView::from(&request) });
                let approver = self.0.inner.borrow().approver.clone();
                let client = self.clone();
                let call_id = request.call_id.clone();
                match approver {
                    Some(approver) => spawn_local(async move {
                        let decision = approver(request).await;
                        let step = client.inner().executor.approval_decided(&call_id, decision, now_ms());
                        client.after(step);
                    }),
                    None => {
                        let reason = Some("no approval dialog is available on this page".to_string());
                        let step = self.inner().executor.approval_decided(
                            &call_id,
                            ApprovalDecision::Rejected { reason },
                            now_ms(),
                        );
                        self.after(step);
                    }
                }
            }
            Step::BeforeHook { call_id, tool, resolver, args } => {
                let hook = self.0.inner.borrow().resolvers.get(&resolver).and_then(|h| h.before.clone());
                let client = self.clone();
                spawn_local(async move {
                    let outcome = match hook {
                        Some(hook) => match hook(&tool, &args).await {
                            Ok(()) => HookOutcome::Continue,
                            Err(reason) => HookOutcome::Refuse(reason),
                        },
                        None => HookOutcome::Continue,
                    };
                    let step = client.inner().executor.before_hook_done(&call_id, outcome);
                    client.after(step);
                });
            }
            Step::Run { call_id, tool, args, notify, .. } => self.run_handler(call_id, &tool, args, notify),
            Step::AfterHook { call_id, tool, resolver, output } => {
                let hook = self.0.inner.borrow().resolvers.get(&resolver).and_then(|h| h.after.clone());
                if let Some(hook) = hook {
                    hook(&tool, &output);
                }
                let step = self.inner().executor.after_hook_done(&call_id);
                self.after(step);
            }
            Step::ErrorHook { call_id, tool, resolver, error } => {
                let hook = self.0.inner.borrow().resolvers.get(&resolver).and_then(|h| h.error.clone());
                if let Some(hook) = hook {
                    hook(&tool, &error);
                }
                let step = self.inner().executor.after_hook_done(&call_id);
                self.after(step);
            }
            Step::Finish(outcome) => self.finish(outcome),
        }
        self.arm_timer();
    }

    fn after(&self, step: Option<Step>) {
        if let Some(step) = step {
            self.drive(step);
        }
    }

    fn run_handler(&self, call_id: String, tool: &str, args: Value, notify: bool) {
        let (handler, notify_callback) = {
            let mut inner = self.inner();
            let handler = inner.registry.get(tool).map(|t| t.handler().handler.clone());
            let (revision, changes) = (inner.registry.revision(), inner.changes);
            if let Some(state) = inner.calls.get_mut(&call_id) {
                state.url_before = current_url();
                state.revision_before = revision;
                state.changes_before = changes;
            }
            (handler, inner.notify.clone())
        };
        let Some(handler) = handler else {
            let step =
                self.inner().executor.handler_done(&call_id, Err(format!("tool \"{tool}\" is no longer available")));
            return self.after(step);
        };
        if notify {
            if let Some(callback) = notify_callback {
                callback(&Notification { call_id: call_id.clone(), tool: tool.to_string(), args: args.clone() });
            }
        }
        let (abort, registration) = AbortHandle::new_pair();
        if let Some(state) = self.inner().calls.get_mut(&call_id) {
            state.abort = Some(abort);
        }
        let future = Abortable::new(handler(args), registration);
        let client = self.clone();
        spawn_local(async move {
            // An aborted handler (cancelled, timed out, unmounted) reports nothing: its call is already finished.
            if let Ok(result) = future.await {
                let step = client.inner().executor.handler_done(&call_id, result);
                client.after(step);
            }
        });
    }

    /// Keeps one timer armed for the executor's next deadline.
    fn arm_timer(&self) {
        let deadline = {
            let mut inner = self.inner();
            let Some(deadline) = inner.executor.next_deadline() else { return };
            if inner.timer_at.is_some_and(|armed| armed <= deadline) {
                return;
            }
            inner.timer_at = Some(deadline);
            deadline
        };
        let client = self.clone();
        spawn_local(async move {
            let wait = deadline.saturating_sub(now_ms());
            sleep_ms(u32::try_from(wait).unwrap_or(u32::MAX)).await;
            let steps = {
                let mut inner = client.inner();
                if inner.timer_at == Some(deadline) {
                    inner.timer_at = None;
                }
                inner.executor.poll_timeouts(now_ms())
            };
            for step in steps {
                client.drive(step);
            }
            client.arm_timer();
        });
    }

    fn finish(&self, outcome: Outcome) {
        let state = {
            let mut inner = self.inner();
            inner.calls.remove(&outcome.call_id).unwrap_or_default()
        };
        if let Some(abort) = &state.abort {
            abort.abort();
        }
        if let Some(local) = state.local {
            let _ = local.send(outcome);
            return;
        }
        if state.cancelled_by_server {
            // The server no longer waits for it: record it, send nothing.
            self.record(&outcome, None);
            return;
        }
        let client = self.clone();
        spawn_local(async move {
            // Tools that a framework registers a microtask after the handler (React applies
            // mounts that way) count as the handler's navigation too.
            yield_microtasks().await;
            let navigated = {
                let inner = client.0.inner.borrow();
                state.url_before.is_some()
                    && (current_url() != state.url_before || inner.changes != state.changes_before)
            };
            let settle_ms = if navigated { Some(client.settle().await) } else { None };
            client.send_result(&outcome, settle_ms);
        });
    }

    /// Waits until the registry stops changing (no change for one frame) or the bounded wait
    /// ends, then flushes, so that the new page's tools reach the server before the result.
    async fn settle(&self) -> f64 {
        let started = js_sys::Date::now();
        let limit = f64::from(self.0.config.max_settle_ms);
        loop {
            yield_microtasks().await;
            let before = self.0.inner.borrow().changes;
            next_frame().await;
            yield_microtasks().await;
            let quiet = self.0.inner.borrow().changes == before;
            if quiet || js_sys::Date::now() - started >= limit {
                break;
            }
        }
        self.flush();
        js_sys::Date::now() - started
    }

    fn send_result(&self, outcome: &Outcome, settle_ms: Option<f64>) {
        let result = {
            let mut inner = self.inner();
            let id = next_id(&mut inner);
            let result = ToolResult {
                id,
                call_id: outcome.call_id.clone(),
                status: outcome.status,
                content: outcome.content.clone(),
            };
            inner.outbox.push(result.clone());
            result
        };
        // Kept in the outbox until acknowledged; resent after a reconnect.
        self.send_frame(&ClientFrame::ToolResult(result), true);
        self.record(outcome, settle_ms);
    }

    fn record(&self, outcome: &Outcome, settle_ms: Option<f64>) {
        let record = CallRecord {
            call_id: outcome.call_id.clone(),
            tool: outcome.tool.clone(),
            status: outcome.status,
            content: outcome.content.clone(),
            settle_ms,
        };
        {
            let mut inner = self.inner();
            if inner.recent.len() == RECENT_CALLS_KEPT {
                inner.recent.pop_front();
            }
            inner.recent.push_back(record.clone());
        }
        self.emit(&ClientEvent::CallFinished { record });
    }

    /// Reports a connection problem to the error callback.
    pub(crate) fn connection_error(&self, message: String) {
        self.report(&WebError::Connection(message));
    }
}

fn next_id(inner: &mut Inner) -> String {
    inner.next_frame += 1;
    format!("c{}", inner.next_frame)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tether_protocol::RunStatus;
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    #[wasm_bindgen_test]
    fn hand_written_views_match_the_serde_derives() {
        let record = CallRecord {
            call_id: "c1".into(),
            tool: "cart_add".into(),
            status: ResultStatus::Ok,
            content: json!({"count": 1}),
            settle_ms: Some(12.5),
        };
        let view = ApprovalView {
            call_id: "c2".into(),
            tool: "checkout".into(),
            description: "Pay".into(),
            risk: tether_protocol::Risk::Critical,
            args: json!({}),
        };
        let events = [
            ClientEvent::Connection { state: ConnectionState::Reconnecting, attempt: 3 },
            ClientEvent::Welcome { session_id: "s".into(), max_active_tools: 30, resumed: true },
            ClientEvent::ContextSent { revision: 7, tools: vec!["a".into(), "b".into()] },
            ClientEvent::ToolRefused { event: "tool.registry.limit".into(), tool: "t".into(), reason: "cap".into() },
            ClientEvent::CallStarted { call_id: "c".into(), tool: "t".into(), args: json!([1, "x"]) },
            ClientEvent::ApprovalRequested { request: view.clone() },
            ClientEvent::CallFinished { record: CallRecord { settle_ms: None, ..record.clone() } },
            ClientEvent::CallFinished { record },
            ClientEvent::AgentMessage {
                run_id: "r".into(),
                delta: "hi".into(),
                done: true,
                status: Some(RunStatus::Completed),
            },
            ClientEvent::AgentMessage { run_id: "r".into(), delta: "".into(), done: false, status: None },
            ClientEvent::Run {
                run_id: Some("r".into()),
                event: json!({"kind": "run_end", "status": "failed", "turns": 2, "error": "x"}),
            },
            ClientEvent::Run { run_id: None, event: json!({"kind": "turn_start", "turn": 1}) },
            ClientEvent::ServerError { code: ErrorCode::MalformedFrame, message: "bad".into() },
        ];
        for event in events {
            assert_eq!(event.to_value(), serde_json::to_value(&event).unwrap(), "{event:?}");
        }
        let notification = Notification { call_id: "c".into(), tool: "t".into(), args: json!({"q": null}) };
        assert_eq!(notification.to_value(), serde_json::to_value(&notification).unwrap());
        assert_eq!(view.to_value(), serde_json::to_value(&view).unwrap());
    }
}
