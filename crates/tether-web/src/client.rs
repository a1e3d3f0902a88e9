//! The browser client: registry, executor and transport glued together.
//!
//! [`Client`] is a cheap handle (`Rc`) that components share. Registrations and removals mark
//! the registry dirty and schedule one flush per microtask, so a page that mounts ten
//! components sends one `CONTEXT_UPDATE`. A `TOOL_CALL` goes through the core executor
//! (lookup, validation, defaults, risk policy); the approval callback, resolver hooks and the
//! handler run as local futures. The session's bookkeeping (results kept until acknowledged and
//! resent, `lastSeq`, queued messages) is `tether_core::session::ClientSession`, which this
//! drives. User callbacks are never called while the client's state is borrowed. The events and
//! views it reports are in `events.rs`.

use std::cell::{RefCell, RefMut};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use futures_util::future::{AbortHandle, Abortable};
use serde_json::Value;
use tether_core::session::ClientSession;
use tether_core::{
    ApprovalDecision, ApprovalRequest, CallRequest, Executor, HookOutcome, Outcome, OwnerId, RefusedTool,
    RegistryEvent, SmallMap, Step, ToolDef, ToolRegistry,
};
use tether_protocol::{
    CallId, ClientFrame, ContextEntry, ContextUpdate, PageInfo, ResultStatus, ServerFrameOf, ToolResult, ToolSpec,
};
use wasm_bindgen_futures::spawn_local;

use crate::WebError;
#[cfg(feature = "chat")]
use crate::chat::{Chat, Reply};
use crate::events::{ApprovalView, CallRecord, ClientEvent, ConnectionState, Notification};
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
    /// Where its outcome goes.
    to: Destination,
    abort: Option<AbortHandle>,
    url_before: Option<String>,
    revision_before: u64,
    changes_before: u64,
    /// Its handler ran, so it holds `CONTEXT_UPDATE`s back until its result leaves (and a
    /// reload before then makes it `interrupted`).
    held: bool,
}

/// Where a call's outcome goes.
#[derive(Default)]
enum Destination {
    /// To the server, as a `TOOL_RESULT` (a call the server made).
    #[default]
    Server,
    /// To [`Client::invoke_local`]'s future.
    Future(futures_channel::oneshot::Sender<Outcome>),
    /// To subscribers, as a [`ClientEvent::CallFinished`] ([`Client::start_local`]).
    Event,
}

struct Inner {
    registry: ToolRegistry<ToolEntry, BrowserValidator>,
    resolvers: SmallMap<String, ResolverHooks>,
    executor: Executor,
    calls: SmallMap<CallId, CallState>,
    /// Results kept until acknowledged, `lastSeq`, queued messages, frame ids.
    session: ClientSession,
    socket: Option<crate::transport::Socket>,
    state: ConnectionState,
    attempt: u32,
    next_owner: u64,
    /// Counts every registry change, to see whether a navigation is still mounting tools.
    changes: u64,
    flush_scheduled: bool,
    /// Handlers whose result has not left yet: while any runs, changes to the tools and the app
    /// state are gathered into the one `CONTEXT_UPDATE` sent before its result (a navigation,
    /// with the effects it triggers, is one update).
    holding: u32,
    timer_at: Option<u64>,
    approver: Option<Approver>,
    notify: Option<NotifyCallback>,
    on_error: Option<ErrorCallback>,
    listeners: Vec<(u32, Listener)>,
    next_listener: u32,
    running: bool,
    /// The chat, fed every event, error and notification before anyone is told of them.
    #[cfg(feature = "chat")]
    chat: Chat,
    /// The approval dialogs the chat waits on ([`Client::use_chat_approvals`]), by call.
    #[cfg(feature = "chat")]
    responders: Vec<(CallId, futures_channel::oneshot::Sender<ApprovalDecision>)>,
    /// The handlers' questions waiting for the user ([`Client::ask`]), by call.
    #[cfg(feature = "chat")]
    asks: Vec<(CallId, futures_channel::oneshot::Sender<Value>)>,
}

/// Takes the sender waiting under `call_id` out of `waiting`.
#[cfg(feature = "chat")]
fn take_sender<T>(waiting: &mut Vec<(CallId, T)>, call_id: &CallId) -> Option<T> {
    let at = waiting.iter().position(|(id, _)| id == call_id)?;
    Some(waiting.remove(at).1)
}

#[cfg(feature = "chat")]
impl Inner {
    /// Dialogs and questions the chat no longer waits for (the call ended: Stop, a timeout, a
    /// lost session) close: their futures end as dismissed or cancelled.
    fn close_stale_dialogs(&mut self) {
        let Inner { chat, responders, asks, .. } = self;
        responders.retain(|(id, _)| chat.approvals().iter().any(|a| a.call_id == *id));
        asks.retain(|(id, _)| chat.questions().iter().any(|q| q == id));
    }
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

fn current_page() -> Option<PageInfo> {
    let window = web_sys::window()?;
    let location = window.location();
    let url = format!("{}{}", location.pathname().ok()?, location.search().unwrap_or_default());
    let title = window.document().map(|d| d.title()).unwrap_or_default();
    Some(PageInfo { url, title })
}

/// The tab's `sessionStorage`, where a page keeps its session across a reload.
fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.session_storage().ok().flatten()
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
        crate::install_float_printer();
        let inner = Inner {
            registry: ToolRegistry::new(browser_validator()),
            resolvers: SmallMap::default(),
            executor: Executor::default(),
            calls: SmallMap::default(),
            session: ClientSession::default(),
            socket: None,
            state: ConnectionState::Idle,
            attempt: 0,
            next_owner: 0,
            changes: 0,
            flush_scheduled: false,
            holding: 0,
            timer_at: None,
            approver: None,
            notify: None,
            on_error: None,
            listeners: Vec::new(),
            next_listener: 0,
            running: false,
            #[cfg(feature = "chat")]
            chat: Chat::new(config.url.clone()),
            #[cfg(feature = "chat")]
            responders: Vec::new(),
            #[cfg(feature = "chat")]
            asks: Vec::new(),
        };
        let client = Client(Rc::new(Shared { config, inner: RefCell::new(inner) }));
        client.restore_saved();
        client
    }

    /// The `sessionStorage` key under which this page keeps its session.
    fn storage_key(&self) -> String {
        format!("tether:{}", self.0.config.url)
    }

    /// After a reload: goes on with the session the previous page kept in `sessionStorage` (the
    /// next `HELLO` resumes it and asks for the conversation). The results it had computed and the
    /// server had not acknowledged are sent again, never recomputed; the calls whose handler was
    /// running are answered `interrupted`: never run twice (so is a kept result that cannot be
    /// read back). Without a readable session id and token, the page starts afresh.
    fn restore_saved(&self) {
        let Some(text) = storage().and_then(|storage| storage.get_item(&self.storage_key()).ok().flatten()) else {
            return;
        };
        // Lines: session id, resume token, then a line per call: a kept result as
        // `callId TAB status TAB content`, or the id of a call whose handler was running (no
        // field holds a newline or a tab: `JSON.stringify` escapes both).
        let mut lines = text.split('\n');
        let (Some(id), Some(token)) = (lines.next(), lines.next()) else { return };
        let mut inner = self.inner();
        // Frame ids go on from the time in milliseconds: above any count the old page reached.
        let now = js_sys::Date::now() as u64;
        inner.session.reloaded(id.into(), token.into(), Vec::new(), now);
        // Each kept again, to send once the session is resumed (a result the server already took
        // is acknowledged again, not applied twice).
        for line in lines {
            let mut fields = line.split('\t');
            let call_id = CallId::from(fields.next().unwrap_or_default());
            let status = fields.next().and_then(ResultStatus::parse);
            let (status, content) = match (status, fields.next().map(crate::json::parse)) {
                (Some(status), Some(Ok(content))) => (status, content),
                // A call whose handler was running, or a result that cannot be read back: what it
                // did is unknown, and it never runs again.
                _ => (
                    ResultStatus::Interrupted,
                    Value::from("Interrupted by a page reload: whether it took effect is unknown; check first."),
                ),
            };
            inner.session.result(&call_id, status, content, now);
        }
    }

    /// Keeps what a reload needs in `sessionStorage` (tab-scoped; a new tab starts afresh): the
    /// session id and resume token, the results the server has not acknowledged, and the calls
    /// whose handler runs. Written before a handler runs, before a result is sent, and when one
    /// is acknowledged.
    #[inline(never)]
    fn save(&self) {
        let saved = {
            let inner = self.0.inner.borrow();
            let Some((id, token)) = inner.session.resume_info() else { return };
            let mut saved = format!("{id}\n{token}");
            for (call_id, _) in inner.calls.iter().filter(|(_, call)| call.held) {
                saved.push('\n');
                saved.push_str(call_id.as_str());
            }
            for ToolResult { call_id, status, content, .. } in inner.session.unacknowledged().iter().map(|e| &e.result)
            {
                saved.push('\n');
                for field in [call_id.as_str(), status.as_str()] {
                    saved.push_str(field);
                    saved.push('\t');
                }
                saved.push_str(&crate::json::stringify(content));
            }
            saved
        };
        if let Some(storage) = storage() {
            // A full or refused storage only costs a reload its session.
            let _ = storage.set_item(&self.storage_key(), &saved);
        }
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
        let removed = self.inner().registry.unregister_owner(owner);
        self.removed(&removed, "its component was unmounted");
    }

    /// Tools left the registry: their calls in flight are aborted, and the change goes out.
    #[inline(never)]
    fn removed(&self, removed: &[String], why: &str) {
        let steps = self.inner().executor.cancel_tools(removed, why);
        self.registry_changed();
        for step in steps {
            self.drive(step);
        }
    }

    /// Shares app state with the agent for `owner` (replacing the entry of the same key); it goes
    /// out with the tools in this tick's `CONTEXT_UPDATE` and leaves when `owner` unmounts.
    /// Refused (and reported like a refused tool, as `agent.context.limit`) over the limits of
    /// [`tether_protocol::MAX_CONTEXT_ENTRIES`] and [`tether_protocol::MAX_CONTEXT_BYTES`].
    pub fn set_context(&self, owner: OwnerId, key: &str, description: &str, value: Value) -> Result<(), WebError> {
        let entry = ContextEntry { key: key.to_string(), description: description.to_string(), value };
        let result = self.inner().registry.set_context(owner, entry);
        self.registry_changed();
        result.map_err(WebError::from)
    }

    /// Removes one tool of `owner` (if `owner` still owns it) and aborts its calls in flight.
    pub fn unregister(&self, owner: OwnerId, name: &str) {
        let removed = self.inner().registry.unregister_owned(owner, name);
        let removed = if removed { vec![name.to_string()] } else { Vec::new() };
        self.removed(&removed, "the tool was unregistered");
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
        let frame = self.inner().session.message(text);
        if let Some(frame) = frame {
            self.send_frame(&frame);
        }
    }

    /// Stops the run in progress (the user's Stop button): the server ends it as `aborted`,
    /// and the calls it waits for are cancelled here. Nothing happens when no run is in
    /// progress or the client is not connected.
    pub fn stop(&self) {
        let frame = {
            let mut inner = self.inner();
            let id = inner.session.next_id();
            ClientFrame::StopRun(tether_protocol::StopRun { id, run_id: None })
        };
        if self.connection_state() == ConnectionState::Open {
            self.send_frame(&frame);
        }
    }

    // ---- the chat (feature `chat`) -------------------------------------------------------

    #[cfg(feature = "chat")]
    /// Reads the chat: every event, error and notification of this client reaches it before
    /// subscribers hear of them, so a subscriber reads it up to date.
    pub fn chat<R>(&self, read: impl FnOnce(&Chat) -> R) -> R {
        read(&self.0.inner.borrow().chat)
    }

    #[cfg(feature = "chat")]
    /// Approval requests wait for the chat's dialog ([`Client::answer_approval`],
    /// [`Client::approve_with_args`], or a message written meanwhile) instead of an approver
    /// callback. What both toolkits' approval dialogs use.
    pub fn use_chat_approvals(&self) {
        let client = self.clone();
        self.set_approver(Rc::new(move |request: ApprovalRequest| -> LocalFuture<ApprovalDecision> {
            let (sender, answer) = futures_channel::oneshot::channel();
            client.inner().responders.push((request.call_id, sender));
            Box::pin(async move { answer.await.unwrap_or(ApprovalDecision::Dismissed) })
        }));
    }

    #[cfg(feature = "chat")]
    /// The user wrote `text` in the chat: it is sent (kept until connected), or, while the run
    /// waits for approvals or a handler's question, it answers them (see
    /// [`Chat::user_message`]).
    pub fn chat_message(&self, text: &str) {
        let reply = self.inner().chat.user_message(text);
        match reply {
            Reply::Nothing => {}
            Reply::Send(text) => self.send_message(&text),
            Reply::Answers { approvals, questions } => {
                for (call_id, decision) in approvals {
                    self.resolve_approval(&call_id, decision);
                }
                for (call_id, value) in questions {
                    self.resolve_question(&call_id, value);
                }
            }
        }
    }

    #[cfg(feature = "chat")]
    /// Answers the approval request of `call_id` in the chat's dialog.
    pub fn answer_approval(&self, call_id: &CallId, decision: ApprovalDecision) {
        self.inner().chat.answer_approval(call_id, &decision);
        self.resolve_approval(call_id, decision);
    }

    #[cfg(feature = "chat")]
    /// Approves the request of `call_id` with the arguments the user may have changed: see
    /// [`Chat::approve_with_args`].
    pub fn approve_with_args(&self, call_id: &CallId, args: Value) {
        let decision = self.inner().chat.approve_with_args(call_id, args);
        if let Some(decision) = decision {
            self.resolve_approval(call_id, decision);
        }
    }

    #[cfg(feature = "chat")]
    fn resolve_approval(&self, call_id: &CallId, decision: ApprovalDecision) {
        let sender = take_sender(&mut self.inner().responders, call_id);
        if let Some(sender) = sender {
            let _ = sender.send(decision);
        }
    }

    #[cfg(feature = "chat")]
    /// A handler of `tool` starts: the id of its call (see [`Chat::claim`]).
    pub fn claim_call(&self, tool: &str) -> Option<CallId> {
        self.inner().chat.claim(tool)
    }

    #[cfg(feature = "chat")]
    /// The handler of call `call_id` asks the user `question` and waits: the call's line in the
    /// chat shows it until [`Client::respond`] (or a chat message) answers it. Dropping the
    /// future, or [`Client::close_question`], closes it; the future then ends with an error.
    pub fn ask(&self, call_id: &CallId, question: Value) -> LocalFuture<Result<Value, String>> {
        let (sender, answer) = futures_channel::oneshot::channel();
        {
            let mut inner = self.inner();
            inner.chat.ask(call_id, question);
            inner.asks.push((call_id.clone(), sender));
        }
        Box::pin(async move { answer.await.map_err(|_| "the question was cancelled".to_string()) })
    }

    #[cfg(feature = "chat")]
    /// Answers the question of call `call_id` with `value` (later answers are ignored).
    pub fn respond(&self, call_id: &CallId, value: Value) {
        self.inner().chat.close_question(call_id);
        self.resolve_question(call_id, value);
    }

    #[cfg(feature = "chat")]
    /// Closes the question of call `call_id` unanswered (its handler was cancelled).
    pub fn close_question(&self, call_id: &CallId) {
        let mut inner = self.inner();
        inner.chat.close_question(call_id);
        inner.close_stale_dialogs();
    }

    #[cfg(feature = "chat")]
    fn resolve_question(&self, call_id: &CallId, value: Value) {
        let sender = take_sender(&mut self.inner().asks, call_id);
        if let Some(sender) = sender {
            let _ = sender.send(value);
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

    /// Runs a tool here, without the server: the same lookup, validation, defaults, risk policy
    /// (approval included) and handler as a `TOOL_CALL`. For dev tools and tests; the outcome
    /// is not sent anywhere.
    pub fn invoke_local(&self, tool: &str, args: Value) -> LocalFuture<Outcome> {
        let (sender, receiver) = futures_channel::oneshot::channel();
        let call_id = CallId::from(format!("local-{}", self.inner().session.next_id()));
        let request =
            CallRequest { call_id: call_id.clone(), tool: tool.to_string(), args, server_risk: Default::default() };
        self.start_call_with(request, Destination::Future(sender));
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

    /// Starts a call here without the server, as [`Client::invoke_local`] does, under `call_id`
    /// (which the caller makes unique: a call id that is running already starts nothing). Its
    /// outcome is reported to subscribers as a [`ClientEvent::CallFinished`] with that id and is
    /// never sent to the server. The entry for callers outside Rust, such as a WebMCP agent in
    /// the page: the same lookup, validation, defaults, risk policy (approval included) and
    /// handler as a `TOOL_CALL`.
    pub fn start_local(&self, call_id: CallId, tool: &str, args: Value) {
        let request = CallRequest { call_id, tool: tool.to_string(), args, server_risk: Default::default() };
        self.start_call_with(request, Destination::Event);
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
        self.0.inner.borrow().session.session_id().map(String::from)
    }

    /// The cap on active tools in force.
    pub fn max_active_tools(&self) -> u32 {
        self.0.inner.borrow().registry.cap()
    }

    /// How many results wait for the server's acknowledgement.
    pub fn unacknowledged_results(&self) -> usize {
        self.0.inner.borrow().session.unacknowledged().len()
    }

    // ---- internals -------------------------------------------------------------------

    fn emit(&self, event: &ClientEvent) {
        let listeners: Vec<Listener> = {
            #[cfg_attr(not(feature = "chat"), allow(unused_mut))]
            let mut inner = self.inner();
            #[cfg(feature = "chat")]
            {
                inner.chat.event(event);
                inner.close_stale_dialogs();
            }
            inner.listeners.iter().map(|(_, l)| l.clone()).collect()
        };
        for listener in listeners {
            listener(event);
        }
    }

    fn report(&self, error: &WebError) {
        let callback = {
            #[cfg_attr(not(feature = "chat"), allow(unused_mut))]
            let mut inner = self.inner();
            #[cfg(feature = "chat")]
            inner.chat.error(error);
            inner.on_error.clone()
        };
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

    /// Marks the registry changed and schedules one flush for this tick. (Not inlined: every
    /// registration method calls it.)
    #[inline(never)]
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

    /// Reports registry events and sends one `CONTEXT_UPDATE` if the tool list or the app state
    /// changed, unless a handler's result is pending (it sends the update before it leaves).
    pub(crate) fn flush(&self) {
        self.flush_unless_held(true);
    }

    fn flush_unless_held(&self, hold: bool) {
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
            let welcomed = inner.state == ConnectionState::Open && !(hold && inner.holding > 0);
            match if welcomed { inner.registry.flush() } else { None } {
                Some(snapshot) => {
                    let id = inner.session.next_id();
                    let names = snapshot.tools.iter().map(|t| t.name.clone()).collect();
                    effects.push(Effect::Emit(ClientEvent::ContextSent { revision: snapshot.revision, tools: names }));
                    Some(ClientFrame::ContextUpdate(ContextUpdate {
                        id,
                        revision: snapshot.revision,
                        tools: snapshot.tools,
                        page: current_page(),
                        context: snapshot.context,
                    }))
                }
                None => None,
            }
        };
        if let Some(frame) = frame {
            self.send_frame(&frame);
        }
        self.apply(effects);
    }

    /// Sends a frame if a socket is open (the session decides what may go before a welcome).
    fn send_frame(&self, frame: &ClientFrame) {
        if let Some(socket) = &self.0.inner.borrow().socket {
            socket.send(&crate::json::stringify(&frame.to_value()));
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
            inner.session.connected()
        };
        self.send_frame(&hello);
    }

    /// The socket closed.
    pub(crate) fn detach(&self) {
        let socket = {
            let mut inner = self.inner();
            inner.attempt += 1;
            inner.session.disconnected();
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
        match crate::json::parse(text).and_then(|value| ServerFrameOf::<Value, Value>::decode_value(&value)) {
            Ok(frame) => self.on_frame(frame),
            Err(error) => self.report(&WebError::Protocol(error)),
        }
    }

    fn on_frame(&self, frame: ServerFrameOf<Value, Value>) {
        // A frame processed before (delivered again after a reconnect) is skipped.
        if !self.inner().session.received(&frame) {
            return;
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
                    let step = inner.executor.cancel(&cancel.call_id, &cancel.reason);
                    if step.is_some() {
                        // The server no longer waits: the result is recorded, not sent.
                        inner.session.nobody_waits(&cancel.call_id);
                    }
                    step
                };
                if let Some(step) = step {
                    self.drive(step);
                }
            }
            ServerFrameOf::ToolResultAck(ack) => {
                self.inner().session.acknowledged(&ack.call_id);
                self.save();
            }
            ServerFrameOf::AgentMessage(message) => self.emit(&ClientEvent::AgentMessage {
                run_id: message.run_id,
                delta: message.delta,
                done: message.done,
                status: message.status,
                reset: message.reset,
            }),
            ServerFrameOf::History(history) => self.emit(&ClientEvent::History { lines: history.lines }),
            ServerFrameOf::Event(event) => self.emit(&ClientEvent::Run { run_id: event.run_id, event: event.event }),
            ServerFrameOf::Error(error) => {
                // `unknown_call` naming a kept result: the server will never take it.
                self.inner().session.refused(&error);
                self.emit(&ClientEvent::ServerError { code: error.code, message: error.message.clone() });
                self.report(&WebError::Server { code: error.code, message: error.message });
            }
        }
    }

    fn on_welcome(&self, welcome: tether_protocol::Welcome) {
        let mut effects = Vec::new();
        let send = {
            let mut inner = self.inner();
            inner.state = ConnectionState::Open;
            inner.attempt = 0;
            for name in inner.registry.set_cap(welcome.max_active_tools) {
                effects.push(Effect::Emit(ClientEvent::ToolRefused {
                    event: tether_core::LIMIT_EVENT.to_string(),
                    tool: name,
                    reason: format!("the server allows at most {} active tools", u64::from(welcome.max_active_tools)),
                }));
            }
            let snapshot = inner.registry.resync();
            effects.push(Effect::Emit(ClientEvent::ContextSent {
                revision: snapshot.revision,
                tools: snapshot.tools.iter().map(|t| t.name.clone()).collect(),
            }));
            let context = ClientFrame::ContextUpdate(ContextUpdate {
                id: inner.session.next_id(),
                revision: snapshot.revision,
                tools: snapshot.tools,
                page: current_page(),
                context: snapshot.context,
            });
            // The tool list first, so that results and messages are read against it.
            let welcomed = inner.session.welcomed(&welcome, context, now_ms());
            if welcomed.lost > 0 {
                // The server lost the session: nobody is waiting for these results any more.
                effects.push(Effect::Error(WebError::ResultsLost { count: welcomed.lost }));
            }
            welcomed.send
        };
        self.emit(&ClientEvent::Connection { state: ConnectionState::Open, attempt: 0 });
        self.emit(&ClientEvent::Welcome {
            session_id: welcome.session_id,
            max_active_tools: welcome.max_active_tools,
            resumed: welcome.resumed,
        });
        for frame in send {
            self.send_frame(&frame);
        }
        self.save();
        // Unacknowledged results are sent again if no acknowledgement comes.
        self.arm_timer();
        self.apply(effects);
    }

    fn start_call(&self, request: CallRequest) {
        self.start_call_with(request, Destination::Server);
    }

    fn start_call_with(&self, request: CallRequest, to: Destination) {
        let call_id = request.call_id.clone();
        let step = {
            let mut inner = self.inner();
            // A call whose result is kept (a repeated TOOL_CALL after a reconnect, or one a
            // reload kept): that result again, never a second run.
            if inner.session.unacknowledged().iter().any(|entry| entry.result.call_id == call_id) {
                let known = inner.session.repeated_call(&call_id);
                drop(inner);
                if let Some(frame) = known {
                    self.send_frame(&frame);
                }
                return;
            }
            let Inner { executor, registry, .. } = &mut *inner;
            let step = executor.start(request, registry, now_ms());
            if step.is_none() {
                // Running already (a repeated TOOL_CALL): its result follows when it ends.
                return;
            }
            inner.calls.insert(call_id, CallState { to, ..CallState::default() });
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
                // The call the user approved already with these arguments (edited in the
                // dialog): it runs without asking again.
                #[cfg(feature = "chat")]
                if self.inner().chat.take_pre_approved(&request.call_id, &request.tool, &request.args) {
                    let step =
                        self.inner().executor.approval_decided(&request.call_id, ApprovalDecision::Approved, now_ms());
                    return self.after(step);
                }
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

    fn run_handler(&self, call_id: CallId, tool: &str, args: Value, notify: bool) {
        let (handler, notify_callback) = {
            let mut inner = self.inner();
            let handler = inner.registry.get(tool).map(|t| t.handler().handler.clone());
            let (revision, changes) = (inner.registry.revision(), inner.changes);
            let held =
                handler.is_some() && inner.calls.get(&call_id).is_some_and(|c| matches!(c.to, Destination::Server));
            if let Some(state) = inner.calls.get_mut(&call_id) {
                state.url_before = current_url();
                state.revision_before = revision;
                state.changes_before = changes;
                state.held = held;
            }
            inner.holding += u32::from(held);
            (handler, inner.notify.clone())
        };
        // Kept before the handler starts: a reload while it runs answers it `interrupted`.
        if handler.is_some() {
            self.save();
        }
        let Some(handler) = handler else {
            let step =
                self.inner().executor.handler_done(&call_id, Err(format!("tool \"{tool}\" is no longer available")));
            return self.after(step);
        };
        if notify {
            let notification = Notification { call_id: call_id.clone(), tool: tool.to_string(), args: args.clone() };
            #[cfg(feature = "chat")]
            self.inner().chat.notified(&notification);
            if let Some(callback) = notify_callback {
                callback(&notification);
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

    /// Keeps one timer armed for the next deadline: the executor's (timeouts) or the session's
    /// (results to send again).
    fn arm_timer(&self) {
        let deadline = {
            let mut inner = self.inner();
            let deadline = match (inner.executor.next_deadline(), inner.session.next_deadline()) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(deadline) => deadline,
                    None => return,
                },
            };
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
            let (steps, resend) = {
                let mut inner = client.inner();
                if inner.timer_at == Some(deadline) {
                    inner.timer_at = None;
                }
                let now = now_ms();
                (inner.executor.poll_timeouts(now), inner.session.poll(now))
            };
            for frame in resend {
                client.send_frame(&frame);
            }
            for step in steps {
                client.drive(step);
            }
            client.arm_timer();
        });
    }

    fn finish(&self, outcome: Outcome) {
        let mut state = {
            let mut inner = self.inner();
            inner.calls.remove(&outcome.call_id).unwrap_or_default()
        };
        if let Some(abort) = &state.abort {
            abort.abort();
        }
        match std::mem::take(&mut state.to) {
            Destination::Server => {}
            Destination::Future(sender) => {
                let _ = sender.send(outcome);
                return;
            }
            Destination::Event => {
                self.record(&outcome, None);
                return;
            }
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
            if state.held {
                client.inner().holding -= 1;
            }
            if state.held || navigated {
                // What changed while it ran goes first (nothing is sent when nothing did).
                client.flush_unless_held(false);
            }
            client.send_result(&outcome, settle_ms);
        });
    }

    /// Waits until the registry stops changing (no change for one frame) or the bounded wait
    /// ends; the caller then flushes, so that the new page's tools reach the server before the
    /// result.
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
        js_sys::Date::now() - started
    }

    fn send_result(&self, outcome: &Outcome, settle_ms: Option<f64>) {
        // Kept until acknowledged: resent after a reconnect or a reload, and on this connection
        // if no acknowledgement comes in time; in `sessionStorage` before it leaves. Not sent at
        // all if the server cancelled the call.
        let frame = self.inner().session.result(&outcome.call_id, outcome.status, outcome.content.clone(), now_ms());
        self.save();
        if let Some(frame) = frame {
            self.send_frame(&frame);
            self.arm_timer();
        }
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
        self.emit(&ClientEvent::CallFinished { record });
    }

    /// Reports a connection problem to the error callback.
    pub(crate) fn connection_error(&self, message: String) {
        self.report(&WebError::Connection(message));
    }
}
