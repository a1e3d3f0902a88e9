//! Leptos bindings for Tether: tools declared in components, next to the state they need.
//!
//! Wrap the app in [`AgentProvider`] (it connects to `/ws` on the page's own origin unless given
//! a `url`); inside it, a component calls [`use_agent_tool`] (or [`use_agent_tool_typed`], whose
//! JSON Schema comes from the argument type) to register a tool while it is mounted. The handler
//! is a closure: it reads signals when it runs, so it always sees the current state without
//! re-registering. [`ApprovalDialog`], [`ChatPanel`], [`ToolInspector`] and [`RuntimeErrors`]
//! are ready-made UI over the same context, styled by the provider (`styles=false` leaves the
//! styling to you). [`McpPairing`] lets the user pair an MCP client with the page (`tether serve
//! --expose-mcp`), and [`use_webmcp`] offers the page's tools to the browser's own agents
//! (WebMCP). Every hook fails loudly when called outside the provider: the message is
//! logged to the console first, so it is there even in builds that abort without one.
//!
//! Features: `csr` (default) turns on `leptos/csr`; an app that hydrates instead turns off the
//! default features and turns on `hydrate`.
//!
//! # Risk
//!
//! A tool's risk is `none` unless its definition sets one (`ToolDef::new` gives `Risk::None`;
//! `.risk(Risk::High)` changes it): `none` runs; `low` runs and the chat says so (a line
//! `Running <tool> <args>`); `high` and `critical` wait for the user's approval
//! ([`ApprovalDialog`]) and run only on a yes; `blocked` never runs. The server's
//! `--risk-floor` can raise a tool's risk, never lower it.
//!
//! # Test ids
//!
//! The ready components carry these `data-testid`s for your own browser tests; they are part of
//! the crate's public surface, and `@tether/react`'s components carry the same.
//!
//! | test id | element | attributes, and when it is there |
//! | --- | --- | --- |
//! | `chat-panel` | `<section>`, the chat | |
//! | `chat-message` | `<li>`, a line of the user, the agent or the runtime | `data-status`: how the run ended (`completed`, `aborted`, `failed`, `refused`, `capped`, `max_turns`, `timed_out`, `loop_detected`) on the run's last agent line once it ended, else `""`; `data-waiting="true"` on a message written while offline, until it leaves |
//! | `chat-tool-call` | `<li>`, a tool call at its place in the chat | `data-tool`: the tool's name; `data-call-status`: `streaming`, `approval`, `running`, `done`, `failed`, `refused` or `cancelled` |
//! | `chat-status` | `<p role="status">` | only while not connected: says so, in words |
//! | `chat-input` | `<input type="text">`, the message | |
//! | `chat-send` | `<button type="submit">` | `disabled` while a run is in progress (not while it waits for an approval or an answer: then a message answers it) |
//! | `chat-stop` | `<button>`, Stop | only while a run is in progress (as for `chat-send`) and connected |
//! | `approval-dialog` | `<div role="dialog">` | only while a call waits for approval (the oldest first) |
//! | `approval-risk` | `<span>` | text: the call's risk; class `tether-risk-<risk>` |
//! | `approval-args` | `<dl>`, the arguments | |
//! | `approval-arg` | `<div>`, one per field (`<dt>` name, `<dd>` value) | |
//! | `approval-arg-input` | after Edit, per string, number or boolean field: a `<select>` when its schema lists the values (`enum`, `const`, `oneOf`/`anyOf` of them), else `<input type="text">` | `data-field`: the field's name |
//! | `approval-reason` | `<input type="text">` | Enter there rejects, with its text as the reason |
//! | `approval-approve` | `<button>` | text `Approve`, or `Approve with changes` after Edit |
//! | `approval-edit` | `<button>` | only when the arguments are an object, until clicked |
//! | `approval-reject` | `<button>` | has the focus when the dialog opens |
//! | `approval-stop` | `<button>`, Stop the run | |
//! | `tool-inspector` | `<aside>`, the inspector | |
//! | `inspector-count` | `<span>` | text: how many tools the page has registered |
//! | `inspector-connection` | `<span>` | `data-state`: `idle`, `connecting`, `open`, `reconnecting` or `closed`; text: the state in words |
//! | `inspector-context-updates` | `<span>` | text: how many `CONTEXT_UPDATE`s were sent |
//! | `inspector-note` | `<p>` | only while not connected |
//! | `inspector-tool` | `<li>`, one per tool | `data-tool`: its name |
//! | `inspector-refused` | `<li>`, one per refused registration | `data-event`: e.g. `tool.registry.limit` |
//! | `inspector-call` | `<li>`, one per recent call | `data-status`: its result status (`ok`, `error`, `invalid_args`, `unknown_tool`, `denied`, `blocked`, `cancelled`, `timeout`, `interrupted`) |
//! | `runtime-errors` | `<ul>`, the error list | |
//! | `runtime-error` | `<li>`, one per error | text: the error |
//! | `mcp-pair` | `<button>` ([`McpPairing`]) | only while not paired |
//! | `mcp-pairing` | `<div role="region">` | only while paired |
//! | `mcp-endpoint` | `<code>` | text: the endpoint |
//! | `mcp-code` | `<span>` | text: the pairing code |
//! | `mcp-unpair` | `<button>`, Stop sharing | |

pub mod components;
pub mod webmcp;

use std::collections::HashMap;
use std::future::Future;
use std::rc::Rc;

use leptos::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tether_web::{
    ApprovalDecision, ApprovalView, CallRecord, Client, ClientConfig, ClientEvent, Handler, LocalFuture, Notification,
    OwnerId, ResolverHooks, RunEvent, RunStatus,
};

pub use components::{
    ApprovalDialog, ChatPanel, MCP_PAIRING_KEY, McpPairing, McpPairingEntry, RuntimeErrors, ToolInspector,
    allowed_values,
};
pub use tether_web::{CallId, ConnectionState, Risk, ToolDef, ToolSpec};
pub use webmcp::use_webmcp;
/// The versions of these crates that tether-leptos uses: `#[derive(JsonSchema)]` for
/// [`use_agent_tool_typed`] needs schemars **1.x** (schemars 0.8's `JsonSchema` is another trait).
pub use {schemars, serde, serde_json};

/// What every hook and component says (and logs) when it is used outside [`AgentProvider`].
pub const OUTSIDE_PROVIDER: &str = "must be called inside <AgentProvider>; wrap the app (or this component) in it: \
view! { <AgentProvider> <App/> <ChatPanel/> <ApprovalDialog/> </AgentProvider> }";

/// The styles of the ready-made components (the same as `@tether/react/styles.css`).
pub const STYLES: &str = include_str!("styles.css");

/// Where a tool call shown in the chat stands (the runtime's chat's [`CallStatus`](tether_web::chat::CallStatus)).
pub use tether_web::chat::CallStatus as ToolCallStatus;
pub use tether_web::chat::{CallView, ChatRole, SESSION_LOST, edited_args_reason};

/// A tool call as the chat shows it (what a renderer of [`use_tool_call_renderer`] gets): the
/// runtime chat's [`CallView`] (its fields read through this view: `call.tool`, `call.status`,
/// `call.question`, …), with a [`Responder`] while its handler waits for the user.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallView {
    call: CallView,
    /// Answers the call's question ([`use_human_in_the_loop`], [`AgentContext::ask`]): present
    /// while it waits for the user.
    pub respond: Option<Responder>,
}

impl std::ops::Deref for ToolCallView {
    type Target = CallView;

    fn deref(&self) -> &CallView {
        &self.call
    }
}

/// Answers a call of a [`use_human_in_the_loop`] tool: the value is the tool's result.
#[derive(Clone, Copy)]
pub struct Responder {
    context: AgentContext,
    call_id: StoredValue<CallId>,
}

impl Responder {
    /// Answers the question with `value` (later answers are ignored).
    pub fn respond(&self, value: Value) {
        if let Some(call_id) = self.call_id.try_get_value() {
            self.context.respond(&call_id, value);
        }
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Responder")
    }
}

impl PartialEq for Responder {
    fn eq(&self, other: &Self) -> bool {
        self.call_id == other.call_id
    }
}

/// Draws a tool call in the chat.
type Renderer = Rc<dyn Fn(ToolCallView) -> AnyView>;

/// One line of the chat (the runtime chat's [`ChatLine`](tether_web::chat::ChatLine)).
#[derive(Debug, Clone, PartialEq)]
pub struct ChatLine {
    /// A stable key: the run id for agent lines (`run~n` for the words after its n-th tool
    /// call), `call-<call id>` for calls.
    pub key: String,
    /// Who wrote it.
    pub role: ChatRole,
    /// The text so far.
    pub text: String,
    /// How the run ended, once it did.
    pub status: Option<RunStatus>,
    /// A user message written while not connected: it is sent when the connection opens.
    pub waiting: bool,
    /// The call ([`ChatRole::Tool`]).
    pub call: Option<ToolCallView>,
}

/// A refused tool, as the inspector shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RefusedView {
    /// The tool.
    pub tool: String,
    /// `tool.registry.limit` or `tool.registry.refused`.
    pub event: String,
    /// Why.
    pub reason: String,
}

/// The reactive state the provider keeps up to date from the client's events.
#[derive(Debug, Clone, Copy)]
pub struct AgentState {
    /// The connection.
    pub connection: RwSignal<ConnectionState>,
    /// Failed connection attempts since the last success.
    pub attempt: RwSignal<u32>,
    /// The tools registered in this page, as the model sees them once connected (kept up to date
    /// while offline too).
    pub tools: RwSignal<Vec<ToolSpec>>,
    /// Refused registrations.
    pub refused: RwSignal<Vec<RefusedView>>,
    /// The last calls and how they ended, newest last.
    pub calls: RwSignal<Vec<CallRecord>>,
    /// The chat.
    pub messages: RwSignal<Vec<ChatLine>>,
    /// Whether a run is in progress.
    pub running: RwSignal<bool>,
    /// Approval requests waiting for the user, oldest first.
    pub approvals: RwSignal<Vec<ApprovalView>>,
    /// The calls of [`use_human_in_the_loop`] tools waiting for the user's answer, oldest first.
    pub questions: RwSignal<Vec<CallId>>,
    /// Errors reported by the runtime (refused tools, server errors, connection outages), newest
    /// last.
    pub errors: RwSignal<Vec<String>>,
    /// How many `CONTEXT_UPDATE` frames were sent (dev tools and tests read it).
    pub context_updates: RwSignal<u64>,
}

/// The connection state in words, as the inspector and the chat show it.
pub fn connection_words(state: ConnectionState, attempt: u32) -> String {
    match state {
        ConnectionState::Idle => "not connected".into(),
        ConnectionState::Connecting if attempt == 0 => "connecting…".into(),
        ConnectionState::Connecting => format!("connecting (try {})…", attempt + 1),
        ConnectionState::Open => "connected".into(),
        ConnectionState::Reconnecting => format!("offline, retrying ({attempt} failed)"),
        ConnectionState::Closed => "disconnected".into(),
    }
}

/// The WebSocket URL of a `tether serve` on the page's own origin: `ws(s)://<host>/ws`. A dev
/// server on another port reaches it through a proxy for `/ws` (see the README).
pub fn same_origin_url() -> String {
    let location = web_sys::window().map(|window| window.location());
    let secure = location.as_ref().and_then(|l| l.protocol().ok()).is_some_and(|p| p == "https:");
    let host = location.and_then(|l| l.host().ok()).unwrap_or_else(|| "localhost".into());
    format!("{}://{host}/ws", if secure { "wss" } else { "ws" })
}

/// What [`AgentProvider`] puts in the Leptos context.
#[derive(Clone, Copy)]
pub struct AgentContext {
    client: StoredValue<Client, LocalStorage>,
    /// The chat revision the signals show.
    shown: StoredValue<u64, LocalStorage>,
    /// The responder of each call whose question is open: made once per question, so a line
    /// drawn again keeps an equal one.
    responders: StoredValue<HashMap<CallId, Responder>, LocalStorage>,
    refresh_scheduled: StoredValue<bool, LocalStorage>,
    /// How each tool's calls look in the chat (`"*"`: the rest).
    renderers: StoredValue<HashMap<String, Renderer>, LocalStorage>,
    /// Opens a page of the app for a call whose tool is there (`None`: [`open_page`]).
    navigate: StoredValue<Option<Callback<String>>, LocalStorage>,
    /// The reactive state.
    pub state: AgentState,
}

impl AgentContext {
    /// Runs `f` with the client (a no-op once the provider is gone).
    pub fn with_client<R>(&self, f: impl FnOnce(&Client) -> R) -> Option<R> {
        self.client.try_with_value(f)
    }

    /// Brings the chat's signals up to the runtime's chat (only what changed is set).
    fn sync(&self) {
        let shown = self.shown.try_get_value();
        let context = *self;
        let chat = self.with_client(|client| {
            client.chat(|chat| {
                (shown != Some(chat.revision())).then(|| {
                    let lines: Vec<ChatLine> = chat.lines().iter().map(|line| context.line(line)).collect();
                    let errors: Vec<String> = chat.errors().iter().map(|e| e.message.clone()).collect();
                    (
                        chat.revision(),
                        lines,
                        chat.running(),
                        chat.approvals().to_vec(),
                        chat.questions().to_vec(),
                        errors,
                    )
                })
            })
        });
        let Some(Some((revision, lines, running, approvals, questions, errors))) = chat else { return };
        self.shown.set_value(revision);
        self.responders.update_value(|responders| responders.retain(|call_id, _| questions.contains(call_id)));
        let state = self.state;
        set_changed(state.messages, lines);
        set_changed(state.running, running);
        set_changed(state.approvals, approvals);
        set_changed(state.questions, questions);
        set_changed(state.errors, errors);
    }

    /// A line of the runtime's chat as the components show it.
    fn line(&self, line: &tether_web::chat::ChatLine) -> ChatLine {
        let call = line.call.as_ref().map(|call| ToolCallView {
            call: call.clone(),
            respond: call.question.is_some().then(|| self.responder(&call.call_id)),
        });
        ChatLine {
            key: line.key.clone(),
            role: line.role,
            text: line.text.clone(),
            status: line.status,
            waiting: line.waiting,
            call,
        }
    }

    /// The responder of call `call_id`'s open question.
    fn responder(&self, call_id: &CallId) -> Responder {
        let kept = self.responders.with_value(|responders| responders.get(call_id).copied());
        kept.unwrap_or_else(|| {
            let responder = Responder { context: *self, call_id: StoredValue::new(call_id.clone()) };
            self.responders.update_value(|responders| {
                responders.insert(call_id.clone(), responder);
            });
            responder
        })
    }

    /// Sends the user's message and shows it in the chat.
    ///
    /// While the run waits for approvals, the message answers them instead: each pending call is
    /// refused with the message as the reason (`the user wrote instead: …`), the run goes on,
    /// and the model reads those words with the refusal; a question of a
    /// [`use_human_in_the_loop`] tool is answered with the text. No new run starts. The same as
    /// `@tether/react` (both are the runtime's chat).
    pub fn send_message(&self, text: &str) {
        self.with_client(|client| client.chat_message(text));
        self.sync();
    }

    /// The URL the provider connects to.
    pub fn url(&self) -> String {
        self.with_client(|client| client.config().url.clone()).unwrap_or_default()
    }

    /// Reads the registry into `state.tools` once this tick's registrations are done.
    fn refresh_tools(&self) {
        if self.refresh_scheduled.try_update_value(|scheduled| std::mem::replace(scheduled, true)) != Some(false) {
            return;
        }
        let context = *self;
        queue_microtask(move || {
            context.refresh_scheduled.try_set_value(false);
            if let Some(tools) = context.with_client(Client::tools) {
                context.state.tools.try_set(tools);
            }
        });
    }

    /// Stops the run in progress (a Stop button): it ends as `aborted`, and the calls it waits
    /// for are cancelled (an open approval is dismissed).
    pub fn stop(&self) {
        self.with_client(Client::stop);
    }

    /// Asks the user, from a handler of `tool`, and waits for the answer: the call's line in the
    /// chat gets [`ToolCallView::question`] and [`ToolCallView::respond`] (draw them in the
    /// tool's renderer), and the future gives the value given to [`Responder::respond`] (or the
    /// text of a chat message sent meanwhile). Call it before the handler's first `.await`: the
    /// question goes to the oldest call of `tool` that reached the page and has not asked yet
    /// (a tool's handlers start in the order its calls arrive). Dropping the future (the call
    /// was cancelled) closes the question.
    pub fn ask(&self, tool: &str, question: Value) -> LocalFuture<Result<Value, String>> {
        let call_id = self.with_client(|client| client.claim_call(tool)).flatten();
        let Some(call_id) = call_id else {
            let message = format!("no call of {tool} is waiting to ask the user");
            return Box::pin(async move { Err(message) });
        };
        let Some(answer) = self.with_client(|client| client.ask(&call_id, question)) else {
            return Box::pin(async { Err("the question was cancelled".to_string()) });
        };
        self.sync();
        // Dropped (the call was cancelled: Stop, an unmount, the timeout): the question closes.
        let guard = QuestionGuard { context: *self, call_id };
        Box::pin(async move {
            let answer = answer.await;
            drop(guard);
            answer
        })
    }

    /// Answers the human-in-the-loop call `call_id`: `value` is its result.
    pub fn respond(&self, call_id: &CallId, value: Value) {
        self.with_client(|client| client.respond(call_id, value));
        self.sync();
    }

    /// The renderer of `tool`'s calls, if one was given ([`use_tool_call_renderer`]).
    pub(crate) fn renderer(&self, tool: &str) -> Option<Renderer> {
        self.renderers.with_value(|renderers| renderers.get(tool).or_else(|| renderers.get("*")).cloned())
    }

    /// Approves the request of `call_id` with arguments the user changed: unchanged, an ordinary
    /// approval; changed, the call is refused with the new arguments for the model
    /// ([`edited_args_reason`]), and the model's next call of the tool with exactly those runs
    /// without asking again (after the runtime validated it against the schema, as every call).
    /// The same as `@tether/react`'s `approveWithArgs`.
    pub fn approve_with_args(&self, call_id: &CallId, args: Value) {
        self.with_client(|client| client.approve_with_args(call_id, args));
        self.sync();
    }

    /// Answers the approval request of `call_id`.
    pub fn answer_approval(&self, call_id: &CallId, decision: ApprovalDecision) {
        self.with_client(|client| client.answer_approval(call_id, decision));
        self.sync();
    }
}

/// Sets `signal` to `value` unless it holds that already (no needless reruns).
fn set_changed<T: PartialEq + Send + Sync + 'static>(signal: RwSignal<T>, value: T) {
    if signal.try_with_untracked(|now| *now != value) == Some(true) {
        signal.set(value);
    }
}

/// Closes a question when its handler's future goes (answered or cancelled).
struct QuestionGuard {
    context: AgentContext,
    call_id: CallId,
}

impl Drop for QuestionGuard {
    fn drop(&mut self) {
        self.context.with_client(|client| client.close_question(&self.call_id));
        self.context.sync();
    }
}

/// The agent context; outside [`AgentProvider`] it logs and panics with [`OUTSIDE_PROVIDER`].
#[track_caller]
pub fn use_agent() -> AgentContext {
    agent_for("use_agent()")
}

/// The agent context for `what` (a hook or component, named in the message when it is missing).
#[track_caller]
pub(crate) fn agent_for(what: &str) -> AgentContext {
    if let Some(context) = use_context::<AgentContext>() {
        return context;
    }
    let at = std::panic::Location::caller();
    let message = format!("tether-leptos: {what} (at {}:{}) {OUTSIDE_PROVIDER}", at.file(), at.line());
    // Logged first: size-optimised builds abort on a panic without printing its message.
    #[cfg(target_family = "wasm")]
    web_sys::console::error_1(&message.as_str().into());
    panic!("{message}")
}

/// How many calls the inspector keeps.
const KEPT: usize = tether_web::chat::KEPT;

/// What the inspector keeps of the client's events (the chat is the runtime's, see
/// [`AgentContext::sync`]), and the page opened for a call whose tool is on another page.
fn apply_event(context: &AgentContext, event: &ClientEvent) {
    let state = &context.state;
    match event {
        ClientEvent::Connection { state: connection, attempt } => {
            state.connection.set(*connection);
            state.attempt.set(*attempt);
        }
        ClientEvent::ContextSent { .. } => state.context_updates.update(|n| *n += 1),
        ClientEvent::ToolRefused { event, tool, reason } => state.refused.update(|refused| {
            refused.retain(|r| &r.tool != tool);
            refused.push(RefusedView { tool: tool.clone(), event: event.clone(), reason: reason.clone() });
        }),
        ClientEvent::CallFinished { record } => state.calls.update(|calls| {
            calls.push(record.clone());
            if calls.len() > KEPT {
                calls.remove(0);
            }
        }),
        ClientEvent::Run { event, .. } => {
            // The call's tool is on another page of the app: open it (the server then sends the call).
            if let Ok(RunEvent::Navigate(navigate)) = RunEvent::from_value(event) {
                match context.navigate.get_value() {
                    Some(open) => open.run(navigate.url),
                    None => open_page(&navigate.url),
                }
            }
        }
        _ => {}
    }
}

/// Opens `url`, a page of this app, as a client-side router does: `history.pushState` and a
/// `popstate` event (which `leptos_router` and hand-written routers listen to). A URL of another
/// origin is never opened. The same as `@tether/react`'s `openPage`; [`AgentProvider`]'s
/// `navigate` replaces it for a router that does not follow `popstate`.
pub fn open_page(url: &str) {
    let Some(window) = web_sys::window() else { return };
    let location = window.location();
    let (Ok(href), Ok(origin)) = (location.href(), location.origin()) else { return };
    let Ok(target) = web_sys::Url::new_with_base(url, &href) else { return };
    if target.origin() != origin {
        return;
    }
    let path = format!("{}{}{}", target.pathname(), target.search(), target.hash());
    let here = format!(
        "{}{}{}",
        location.pathname().unwrap_or_default(),
        location.search().unwrap_or_default(),
        location.hash().unwrap_or_default()
    );
    if path == here {
        return;
    }
    let Ok(history) = window.history() else { return };
    if history.push_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&path)).is_err() {
        return;
    }
    let init = web_sys::PopStateEventInit::new();
    if let Ok(event) = web_sys::PopStateEvent::new_with_event_init_dict("popstate", &init) {
        let _ = window.dispatch_event(&event);
    }
}

/// Connects to the agent server and provides the context every `use_agent_*` hook needs.
#[component]
pub fn AgentProvider(
    /// The server's WebSocket URL. Default: `/ws` on the page's own origin
    /// ([`same_origin_url`]), which is where `tether serve --static DIR` serves it.
    #[prop(optional, into)]
    url: Option<String>,
    /// Opens a page of the app (a path such as `/product/mug-blue`) when the agent calls a tool
    /// that another page offers: the server asks for it, waits for that page's tools, then
    /// calls. Default: [`open_page`] (`history.pushState` and a `popstate` event).
    #[prop(optional, into)]
    navigate: Option<Callback<String>>,
    /// Put the ready-made components' styles ([`STYLES`]) in the page. Default: true.
    #[prop(default = true)]
    styles: bool,
    /// The app.
    children: Children,
) -> impl IntoView {
    let url = url.unwrap_or_else(same_origin_url);
    let client = Client::new(ClientConfig::new(url));
    let state = AgentState {
        connection: RwSignal::new(ConnectionState::Idle),
        attempt: RwSignal::new(0),
        tools: RwSignal::new(Vec::new()),
        refused: RwSignal::new(Vec::new()),
        calls: RwSignal::new(Vec::new()),
        messages: RwSignal::new(Vec::new()),
        running: RwSignal::new(false),
        approvals: RwSignal::new(Vec::new()),
        questions: RwSignal::new(Vec::new()),
        errors: RwSignal::new(Vec::new()),
        context_updates: RwSignal::new(0),
    };
    let context = AgentContext {
        client: StoredValue::new_local(client.clone()),
        shown: StoredValue::new_local(0),
        responders: StoredValue::new_local(HashMap::new()),
        refresh_scheduled: StoredValue::new_local(false),
        renderers: StoredValue::new_local(HashMap::new()),
        navigate: StoredValue::new_local(navigate),
        state,
    };
    // The runtime's chat holds the conversation, the approvals and the questions; the signals
    // follow it after each event, error and notification.
    client.use_chat_approvals();
    client.subscribe(move |event| {
        apply_event(&context, event);
        context.sync();
        if matches!(event, ClientEvent::ContextSent { .. } | ClientEvent::ToolRefused { .. }) {
            context.refresh_tools();
        }
    });
    client.on_notify(move |_: &Notification| context.sync());
    client.on_error(move |_| context.sync());
    provide_context(context);
    client.connect();
    on_cleanup(move || {
        context.with_client(Client::disconnect);
    });
    view! {
        {styles.then(|| view! { <style id="tether-styles">{STYLES}</style> })}
        {children()}
    }
}

#[track_caller]
fn register_with_cleanup(what: &str, register: impl FnOnce(&Client, OwnerId)) {
    let context = agent_for(what);
    let Some(owner) = context.with_client(Client::new_owner) else { return };
    context.with_client(|client| register(client, owner));
    context.refresh_tools();
    // When the component unmounts, its tools leave (globals stay) and their calls are aborted.
    on_cleanup(move || {
        context.with_client(|client| client.unregister_owner(owner));
        context.refresh_tools();
    });
}

/// Draws the calls of `tool` in [`ChatPanel`](crate::ChatPanel) (`"*"`: of every tool without a
/// renderer of its own): `render` gets the call ([`ToolCallView`]: status, arguments, result)
/// each time it changes. The renderer stays after the component unmounts, so the calls already
/// in the chat keep their look (a later one for the same tool replaces it). Without one, a call
/// shows its tool, its arguments and its status.
#[track_caller]
pub fn use_tool_call_renderer<V: IntoView + 'static>(tool: &str, render: impl Fn(ToolCallView) -> V + 'static) {
    let context = agent_for(&format!("use_tool_call_renderer(\"{tool}\")"));
    let render: Renderer = Rc::new(move |call| render(call).into_any());
    context.renderers.update_value(|renderers| {
        renderers.insert(tool.to_string(), render);
    });
}

/// Registers a tool while the calling component is mounted.
///
/// `handler` gets the validated arguments (schema defaults applied) and runs when the model
/// calls the tool; it reads signals at that moment, so it always sees the current state. A
/// refused registration (over the cap, invalid schema) is reported to the error list and the
/// inspector.
///
/// When the call is cancelled before the handler finished (the user's Stop, the server's
/// `TOOL_CANCEL`, the handler's timeout, the component unmounted), the handler's future is
/// dropped at its next `.await`: that is its cancellation signal. Put what must happen then in
/// a `Drop` guard (the storefront's `BackendWait` shows one); nothing it returns is sent.
#[track_caller]
pub fn use_agent_tool<F, Fut>(def: ToolDef, handler: F)
where
    F: Fn(Value) -> Fut + 'static,
    Fut: Future<Output = Result<Value, String>> + 'static,
{
    let handler: Handler = Rc::new(move |args| Box::pin(handler(args)));
    register_with_cleanup(&format!("use_agent_tool(\"{}\")", def.name()), move |client, owner| {
        // A refusal has already been reported to the error callback and subscribers.
        let _ = client.register_handler(owner, def, handler);
    });
}

/// Registers a tool whose handler asks the user, while the calling component is mounted: each
/// call is drawn in [`ChatPanel`](crate::ChatPanel) by `render`, which gets the call with
/// [`ToolCallView::respond`] while it waits; the value given to
/// [`Responder::respond`] is the result the model reads. A message the user types instead
/// answers it too (the text is the result). The question is the user's decision, so the tool
/// asks no approval (its risk is `none`); Stop or an unmount cancels it. The definition's
/// timeout, unless set, is 10 minutes.
///
/// ```ignore
/// use_human_in_the_loop(
///     ToolDef::new("ask_size", "Ask the user which size they want.").parameters(schema_of::<AskSize>()),
///     |call| match call.respond {
///         Some(answer) => view! { <button on:click=move |_| answer.respond(json!("M"))>"M"</button> }.into_any(),
///         None => view! { <span>{format!("{:?}", call.result)}</span> }.into_any(),
///     },
/// );
/// ```
#[track_caller]
pub fn use_human_in_the_loop<V: IntoView + 'static>(def: ToolDef, render: impl Fn(ToolCallView) -> V + 'static) {
    let what = format!("use_human_in_the_loop(\"{}\")", def.name());
    let context = agent_for(&what);
    let name = def.name().to_string();
    use_tool_call_renderer(&name, render);
    let mut def = def.risk(Risk::None);
    if def.timeout_ms.is_none() {
        def = def.timeout_ms(600_000);
    }
    let handler: Handler = Rc::new(move |args| context.ask(&name, args));
    register_with_cleanup(&what, move |client, owner| {
        let _ = client.register_handler(owner, def, handler);
    });
}

/// Like [`use_agent_tool`], but the definition is computed from signals: when a signal it reads
/// changes, the tool is registered again (replacing itself), e.g. a `cart_remove` whose
/// `productId` enum lists what is in the cart now. The handler stays the same.
#[track_caller]
pub fn use_agent_tool_reactive<D, F, Fut>(def: D, handler: F)
where
    D: Fn() -> ToolDef + 'static,
    F: Fn(Value) -> Fut + 'static,
    Fut: Future<Output = Result<Value, String>> + 'static,
{
    let context = agent_for("use_agent_tool_reactive");
    let Some(owner) = context.with_client(Client::new_owner) else { return };
    let handler: Handler = Rc::new(move |args| Box::pin(handler(args)));
    Effect::new(move |_| {
        let def = def();
        context.with_client(|client| {
            let _ = client.register_handler(owner, def, handler.clone());
        });
        context.refresh_tools();
    });
    on_cleanup(move || {
        context.with_client(|client| client.unregister_owner(owner));
        context.refresh_tools();
    });
}

/// Shares app state with the agent while the calling component is mounted: the model reads
/// `description` and the value (any JSON; a string is read as it is) as data, never as
/// instructions, before the user's message. `value` is computed from signals and sent again, in
/// the same `CONTEXT_UPDATE` as this tick's tool changes, whenever a signal it reads changes:
///
/// ```ignore
/// use_agent_context("The shopping cart", move || json!(cart_summary(&cart.get())));
/// ```
///
/// The key that identifies the entry is made from the description (`the_shopping_cart`); use
/// [`use_agent_context_keyed`] to choose it. At most 16 entries and 8 KiB of JSON together per
/// page; past that the entry is refused loudly (the error list and the inspector show
/// `agent.context.limit`) and not sent.
#[track_caller]
pub fn use_agent_context(description: impl Into<String>, value: impl Fn() -> Value + 'static) {
    let description = description.into();
    let key = context_key(&description);
    use_agent_context_keyed(&key, description, value);
}

/// [`use_agent_context`] with a key of your own (1 to 64 of `A-Z a-z 0-9 _ -`).
#[track_caller]
pub fn use_agent_context_keyed(key: &str, description: impl Into<String>, value: impl Fn() -> Value + 'static) {
    let context = agent_for(&format!("use_agent_context(\"{key}\")"));
    let Some(owner) = context.with_client(Client::new_owner) else { return };
    let entry = Rc::new((key.to_string(), description.into()));
    let set = move |value: Value| {
        context.with_client(|client| {
            // A refusal has already been reported to the error callback and subscribers.
            let _ = client.set_context(owner, &entry.0, &entry.1, value);
        });
    };
    // Now, so that the entry goes out with the tools this render registers (one CONTEXT_UPDATE),
    // then again whenever a signal it reads changes.
    set(untrack(&value));
    Effect::new(move |_| set(value()));
    on_cleanup(move || {
        context.with_client(|client| client.unregister_owner(owner));
    });
}

/// A value as a line of text: a string as it is, anything else as compact JSON (`asText` in
/// `@tether/react`).
pub(crate) use tether_web::chat::as_text;

/// A context key made from a description: lowercase letters and digits, `_` between words, at
/// most 64 characters (`"The shopping cart"` gives `the_shopping_cart`).
pub fn context_key(description: &str) -> String {
    let mut key = String::new();
    for word in description.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        if !key.is_empty() {
            key.push('_');
        }
        key.push_str(&word.to_ascii_lowercase());
    }
    key.truncate(64);
    if key.is_empty() { "context".into() } else { key }
}

/// The JSON Schema of an argument type, as tool schemas use it.
pub fn schema_of<A: schemars::JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(A)).unwrap_or_else(|_| serde_json::json!({"type": "object"}))
}

/// A tool handler taking typed arguments `A`: any `Fn(A) -> impl Future<Output = Result<Value,
/// String>>`, e.g. `move |args: A| async move { … }`. (A trait of its own, so that
/// `use_agent_tool_typed::<A>` names the argument type alone.)
pub trait TypedHandler<A>: Fn(A) -> <Self as TypedHandler<A>>::Output + 'static {
    /// The handler's future.
    type Output: Future<Output = Result<Value, String>> + 'static;
}

impl<A, F, Fut> TypedHandler<A> for F
where
    F: Fn(A) -> Fut + 'static,
    Fut: Future<Output = Result<Value, String>> + 'static,
{
    type Output = Fut;
}

/// Like [`use_agent_tool`], with typed arguments: the JSON Schema is derived from `A`
/// (`#[derive(Deserialize, JsonSchema)]` with schemars **1.x**), and the handler gets an `A`:
/// `use_agent_tool_typed::<TodoAdd>(def, move |args| async move { … })`.
#[track_caller]
pub fn use_agent_tool_typed<A>(def: ToolDef, handler: impl TypedHandler<A>)
where
    A: DeserializeOwned + schemars::JsonSchema + 'static,
{
    let def = def.parameters(schema_of::<A>());
    let handler = Rc::new(handler);
    use_agent_tool(def, move |args| {
        let handler = handler.clone();
        async move {
            let args: A =
                serde_json::from_value(args).map_err(|error| format!("arguments do not fit the tool: {error}"))?;
            handler(args).await
        }
    });
}

/// One tool of a resolver group: its definition (name without the prefix) and handler.
pub fn resolver_tool<F, Fut>(def: ToolDef, handler: F) -> (ToolDef, Handler)
where
    F: Fn(Value) -> Fut + 'static,
    Fut: Future<Output = Result<Value, String>> + 'static,
{
    (def, Rc::new(move |args| Box::pin(handler(args))))
}

/// Registers a resolver group while the component is mounted: tools named `prefix_name`
/// sharing `hooks` (before, after and error hooks around every call).
#[track_caller]
pub fn use_agent_tool_resolver(prefix: &str, tools: Vec<(ToolDef, Handler)>, hooks: ResolverHooks) {
    let what = format!("use_agent_tool_resolver(\"{prefix}\")");
    let prefix = prefix.to_string();
    register_with_cleanup(&what, move |client, owner| {
        let _ = client.register_resolver(owner, &prefix, tools, hooks);
    });
}
