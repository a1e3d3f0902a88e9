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

use futures_channel::oneshot;
use leptos::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tether_web::{
    ApprovalDecision, ApprovalRequest, ApprovalView, CallRecord, Client, ClientConfig, ClientEvent, Handler,
    LocalFuture, Notification, OwnerId, ResolverHooks, ResultStatus, RunStatus,
};

pub use components::{
    ApprovalDialog, ChatPanel, MCP_PAIRING_KEY, McpPairing, McpPairingEntry, RuntimeErrors, ToolInspector,
    allowed_values,
};
pub use tether_web::{ConnectionState, Risk, ToolDef, ToolSpec};
pub use webmcp::use_webmcp;
/// The versions of these crates that tether-leptos uses: `#[derive(JsonSchema)]` for
/// [`use_agent_tool_typed`] needs schemars **1.x** (schemars 0.8's `JsonSchema` is another trait).
pub use {schemars, serde, serde_json};

/// What every hook and component says (and logs) when it is used outside [`AgentProvider`].
pub const OUTSIDE_PROVIDER: &str = "must be called inside <AgentProvider>; wrap the app (or this component) in it: \
view! { <AgentProvider> <App/> <ChatPanel/> <ApprovalDialog/> </AgentProvider> }";

/// The styles of the ready-made components (the same as `@tether/react/styles.css`).
pub const STYLES: &str = include_str!("styles.css");

/// Who wrote a chat line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatRole {
    /// The user.
    User,
    /// The agent (streamed).
    Agent,
    /// The runtime (a low-risk tool ran, an error).
    System,
    /// A tool call ([`ChatLine::call`]).
    Tool,
}

/// Where a tool call shown in the chat stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolCallStatus {
    /// The model is still writing it ([`ToolCallView::partial_args`] holds its arguments so far).
    Streaming,
    /// Waiting for the user's approval.
    Approval,
    /// Its handler runs.
    Running,
    /// It succeeded.
    Done,
    /// It failed (an error, invalid arguments, a timeout, an unknown tool).
    Failed,
    /// The user or a policy refused it.
    Refused,
    /// It was cancelled (Stop, the server, an unmount, a reload).
    Cancelled,
}

impl ToolCallStatus {
    /// The status a finished call shows, from its result status.
    pub fn finished(status: ResultStatus) -> ToolCallStatus {
        match status {
            ResultStatus::Ok => ToolCallStatus::Done,
            ResultStatus::Denied | ResultStatus::Blocked => ToolCallStatus::Refused,
            ResultStatus::Cancelled | ResultStatus::Interrupted => ToolCallStatus::Cancelled,
            _ => ToolCallStatus::Failed,
        }
    }

    /// Its name, as `data-call-status` carries it: `approval`, `running`, `done`, …
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCallStatus::Streaming => "streaming",
            ToolCallStatus::Approval => "approval",
            ToolCallStatus::Running => "running",
            ToolCallStatus::Done => "done",
            ToolCallStatus::Failed => "failed",
            ToolCallStatus::Refused => "refused",
            ToolCallStatus::Cancelled => "cancelled",
        }
    }

    /// What it says in the chat (the same words as `@tether/react`).
    pub fn words(self) -> &'static str {
        match self {
            ToolCallStatus::Streaming => "being written",
            ToolCallStatus::Approval => "waiting for your approval",
            other => other.as_str(),
        }
    }
}

/// A tool call as the chat shows it (what a renderer of [`use_tool_call_renderer`] gets).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallView {
    /// The call.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments the model gave (validated once the call runs); while `Streaming`, the
    /// arguments so far.
    pub args: Value,
    /// The arguments as far as the model had written them, read from the incomplete JSON on the
    /// server (strings may be cut short, later fields missing); kept once the call runs. `None`
    /// when the model did not stream the call.
    pub partial_args: Option<Value>,
    /// Where it stands.
    pub status: ToolCallStatus,
    /// The handler's last progress message, while it runs.
    pub progress: Option<String>,
    /// What the handler returned (`Done`), or the message (`Failed`, `Refused`, `Cancelled`).
    pub result: Option<Value>,
    /// The message, when the call did not succeed.
    pub error: Option<String>,
    /// What the handler asks the user ([`AgentContext::ask`]), while it waits for the answer.
    pub question: Option<Value>,
    /// Answers the call's question ([`use_human_in_the_loop`], [`AgentContext::ask`]): present
    /// while it waits for the user.
    pub respond: Option<Responder>,
}

impl ToolCallView {
    fn new(call_id: &str, tool: &str, args: Value, status: ToolCallStatus) -> Self {
        ToolCallView {
            call_id: call_id.to_string(),
            tool: tool.to_string(),
            args,
            partial_args: None,
            status,
            progress: None,
            result: None,
            error: None,
            question: None,
            respond: None,
        }
    }
}

/// Answers a call of a [`use_human_in_the_loop`] tool: the value is the tool's result.
#[derive(Clone, Copy)]
pub struct Responder {
    context: AgentContext,
    call_id: StoredValue<String>,
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

/// One line of the chat.
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

impl ChatLine {
    /// The line of a tool call, keyed `call-<call id>`.
    fn tool(call: ToolCallView) -> ChatLine {
        ChatLine {
            key: format!("call-{}", call.call_id),
            role: ChatRole::Tool,
            text: String::new(),
            status: None,
            waiting: false,
            call: Some(call),
        }
    }
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
    pub questions: RwSignal<Vec<String>>,
    /// Errors reported by the runtime (refused tools, server errors), newest last.
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

/// How the error list words a connection that failed: `was_open` when it had been connected.
pub fn connection_error(url: &str, attempt: u32, was_open: bool) -> String {
    if was_open {
        format!("lost the connection to the agent server at {url}; reconnecting")
    } else {
        format!(
            "cannot reach the agent server at {url} ({attempt} failed attempt{}); is `tether serve` running there? Retrying",
            if attempt == 1 { "" } else { "s" }
        )
    }
}

/// What an outage's entry in the error list becomes once the connection is back: the same
/// words in the past tense.
pub fn connection_restored(url: &str, attempt: u32, was_lost: bool) -> String {
    let tries = if attempt == 1 { "1 failed attempt".to_string() } else { format!("{attempt} failed attempts") };
    if was_lost {
        format!("the connection to the agent server at {url} was lost and is back ({tries})")
    } else {
        format!("the agent server at {url} could not be reached ({tries}); connected since")
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

/// A connection outage going on: its entry in the error list, whether it began with a lost
/// connection (rather than a server never reached), and the attempts that failed so far.
#[derive(Clone)]
struct Outage {
    entry: String,
    lost: bool,
    attempts: u32,
}

/// What [`AgentProvider`] puts in the Leptos context.
#[derive(Clone, Copy)]
pub struct AgentContext {
    client: StoredValue<Client, LocalStorage>,
    responders: StoredValue<HashMap<String, oneshot::Sender<ApprovalDecision>>, LocalStorage>,
    /// Calls that reached the page and whose handler has not asked yet, oldest first: (call, tool).
    arrived: StoredValue<Vec<(String, String)>, LocalStorage>,
    /// The human-in-the-loop calls waiting for an answer.
    asks: StoredValue<HashMap<String, oneshot::Sender<Value>>, LocalStorage>,
    /// Calls the user approved with changed arguments, until the model makes them (this run only).
    pre_approved: StoredValue<Vec<(String, Value)>, LocalStorage>,
    refresh_scheduled: StoredValue<bool, LocalStorage>,
    /// How each tool's calls look in the chat (`"*"`: the rest).
    renderers: StoredValue<HashMap<String, Renderer>, LocalStorage>,
    /// Opens a page of the app for a call whose tool is there (`None`: [`open_page`]).
    navigate: StoredValue<Option<Callback<String>>, LocalStorage>,
    /// The outage going on now, if any.
    outage: StoredValue<Option<Outage>, LocalStorage>,
    /// The reactive state.
    pub state: AgentState,
}

impl AgentContext {
    /// Runs `f` with the client (a no-op once the provider is gone).
    pub fn with_client<R>(&self, f: impl FnOnce(&Client) -> R) -> Option<R> {
        self.client.try_with_value(f)
    }

    /// Sends the user's message and shows it in the chat.
    ///
    /// While the run waits for approvals, the message answers them instead: each pending call is
    /// refused with the message as the reason (`the user wrote instead: …`), the run goes on,
    /// and the model reads those words with the refusal; a question of a
    /// [`use_human_in_the_loop`] tool is answered with the text. No new run starts. The same as
    /// `@tether/react`.
    pub fn send_message(&self, text: &str) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        let waiting = self.state.connection.get_untracked() != ConnectionState::Open;
        self.state.messages.update(|lines| {
            let key = format!("user-{}", lines.len());
            lines.push(ChatLine {
                key,
                role: ChatRole::User,
                text: text.to_string(),
                status: None,
                waiting,
                call: None,
            });
        });
        let pending = self.pending_approvals();
        let questions = self.state.questions.get_untracked();
        if !pending.is_empty() || !questions.is_empty() {
            for call_id in pending {
                let reason = Some(format!("the user wrote instead: {text}"));
                self.answer_approval(&call_id, ApprovalDecision::Rejected { reason });
            }
            for call_id in questions {
                self.respond(&call_id, Value::String(text.to_string()));
            }
            return;
        }
        self.state.running.set(true);
        // The runtime keeps it until the server has welcomed the client.
        self.with_client(|client| client.send_message(text));
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

    /// The server could not resume the session (it expired, or the server lost it): nothing of
    /// the old one will ever answer. The run in progress ends in the chat, the approvals
    /// waiting for the user close without running their handlers, and the chat says so.
    fn session_lost(&self, session_id: &str) {
        for call_id in self.pending_approvals() {
            self.answer_approval(&call_id, ApprovalDecision::Dismissed);
        }
        self.state.messages.update(|lines| {
            for line in lines.iter_mut().filter(|l| l.role == ChatRole::Agent && l.status.is_none()) {
                line.status = Some(RunStatus::Failed);
            }
            lines.push(ChatLine {
                key: format!("lost-{session_id}"),
                role: ChatRole::System,
                text: SESSION_LOST.to_string(),
                status: None,
                waiting: false,
                call: None,
            });
        });
        self.state.running.set(false);
    }

    /// The call ids of the approval requests waiting for the user.
    fn pending_approvals(&self) -> Vec<String> {
        self.state.approvals.with_untracked(|pending| pending.iter().map(|a| a.call_id.clone()).collect())
    }

    /// The chat line of call `call_id`, if it is shown, now says `status` (and `result`).
    fn set_call_status(&self, call_id: &str, status: ToolCallStatus, result: Option<Value>) {
        let key = format!("call-{call_id}");
        self.state.messages.update(|lines| {
            if let Some(call) = lines.iter_mut().find(|l| l.key == key).and_then(|l| l.call.as_mut()) {
                call.status = status;
                if result.is_some() {
                    call.result = result;
                }
            }
        });
    }

    /// The chat line of call `call_id`, if it is shown, changed by `change`.
    fn update_call(&self, call_id: &str, change: impl FnOnce(&mut ToolCallView)) {
        let key = format!("call-{call_id}");
        self.state.messages.update(|lines| {
            if let Some(call) = lines.iter_mut().find(|l| l.key == key).and_then(|l| l.call.as_mut()) {
                change(call);
            }
        });
    }

    /// Asks the user, from a handler of `tool`, and waits for the answer: the call's line in the
    /// chat gets [`ToolCallView::question`] and [`ToolCallView::respond`] (draw them in the
    /// tool's renderer), and the future gives the value given to [`Responder::respond`] (or the
    /// text of a chat message sent meanwhile). Call it before the handler's first `.await`: the
    /// question goes to the oldest call of `tool` that reached the page and has not asked yet
    /// (a tool's handlers start in the order its calls arrive). Dropping the future (the call
    /// was cancelled) closes the question.
    pub fn ask(&self, tool: &str, question: Value) -> LocalFuture<Result<Value, String>> {
        let call_id = self
            .arrived
            .try_update_value(|arrived| arrived.iter().position(|(_, t)| t == tool).map(|at| arrived.remove(at).0))
            .flatten();
        let Some(call_id) = call_id else {
            let message = format!("no call of {tool} is waiting to ask the user");
            return Box::pin(async move { Err(message) });
        };
        let (sender, answer) = oneshot::channel();
        self.asks.update_value(|asks| {
            asks.insert(call_id.clone(), sender);
        });
        self.state.questions.update(|questions| questions.push(call_id.clone()));
        let respond = Responder { context: *self, call_id: StoredValue::new(call_id.clone()) };
        self.update_call(&call_id, |call| {
            call.question = Some(question);
            call.respond = Some(respond);
        });
        let context = *self;
        // Dropped (the call was cancelled: Stop, an unmount, the timeout): the question closes.
        let guard = QuestionGuard { context, call_id };
        Box::pin(async move {
            let answer = answer.await.map_err(|_| "the question was cancelled".to_string());
            drop(guard);
            answer
        })
    }

    /// Answers the human-in-the-loop call `call_id`: `value` is its result.
    pub fn respond(&self, call_id: &str, value: Value) {
        let sender = self.asks.try_update_value(|asks| asks.remove(call_id)).flatten();
        self.close_question(call_id);
        if let Some(sender) = sender {
            let _ = sender.send(value);
        }
    }

    fn close_question(&self, call_id: &str) {
        self.state.questions.try_update(|questions| questions.retain(|id| id != call_id));
        self.update_call(call_id, |call| {
            call.question = None;
            call.respond = None;
        });
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
    pub fn approve_with_args(&self, call_id: &str, args: Value) {
        let request =
            self.state.approvals.with_untracked(|pending| pending.iter().find(|a| a.call_id == call_id).cloned());
        let Some(request) = request else { return };
        if args == request.args {
            return self.answer_approval(call_id, ApprovalDecision::Approved);
        }
        let reason = Some(edited_args_reason(&request.tool, &args));
        self.pre_approved.update_value(|approved| approved.push((request.tool.clone(), args)));
        self.answer_approval(call_id, ApprovalDecision::Rejected { reason });
    }

    /// Answers the approval request of `call_id`.
    pub fn answer_approval(&self, call_id: &str, decision: ApprovalDecision) {
        if decision == ApprovalDecision::Approved {
            self.set_call_status(call_id, ToolCallStatus::Running, None);
        }
        let responder = self.responders.try_update_value(|responders| responders.remove(call_id)).flatten();
        if let Some(responder) = responder {
            let _ = responder.send(decision);
        }
        self.state.approvals.update(|pending| pending.retain(|a| a.call_id != call_id));
    }
}

/// Closes a question when its handler's future goes (answered or cancelled).
struct QuestionGuard {
    context: AgentContext,
    call_id: String,
}

impl Drop for QuestionGuard {
    fn drop(&mut self) {
        self.context.asks.try_update_value(|asks| asks.remove(&self.call_id));
        self.context.close_question(&self.call_id);
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

/// How many chat lines and calls the provider keeps.
const KEPT: usize = 50;

/// The refusal that carries arguments the user changed in the approval dialog (the same words in
/// `@tether/react`): the model calls the tool again with them, that call is validated like any
/// other, and it runs without asking again.
pub fn edited_args_reason(tool: &str, args: &Value) -> String {
    format!("the user changed the arguments before approving; call {tool} again with exactly these arguments: {args}")
}

/// What the chat says when the server could not resume the conversation (the same in
/// `@tether/react`).
pub const SESSION_LOST: &str = "The server could not resume this conversation (it expired, or the server lost it): the run in progress ended, and what you say next starts a new conversation.";

fn apply_event(context: &AgentContext, url: &str, event: &ClientEvent) {
    let state = &context.state;
    match event {
        ClientEvent::Connection { state: connection, attempt } => {
            let was_open = state.connection.get_untracked() == ConnectionState::Open;
            state.connection.set(*connection);
            state.attempt.set(*attempt);
            match connection {
                ConnectionState::Reconnecting => state.errors.update(|errors| {
                    // One entry per outage, updated as the attempts fail.
                    let outage = context.outage.get_value();
                    let lost = outage.as_ref().map_or(was_open, |o| o.lost);
                    let error = connection_error(url, *attempt, lost);
                    match outage.and_then(|o| errors.iter().rposition(|e| *e == o.entry)) {
                        Some(at) => errors[at] = error.clone(),
                        None => push_kept(errors, error.clone()),
                    }
                    context.outage.set_value(Some(Outage { entry: error, lost, attempts: *attempt }));
                }),
                ConnectionState::Open => {
                    // The outage's entry says it ended.
                    if let Some(outage) = context.outage.get_value() {
                        context.outage.set_value(None);
                        state.errors.update(|errors| {
                            if let Some(at) = errors.iter().rposition(|e| *e == outage.entry) {
                                errors[at] = connection_restored(url, outage.attempts, outage.lost);
                            }
                        });
                    }
                    // Messages written while offline have now left.
                    state.messages.update(|lines| {
                        for line in lines.iter_mut().filter(|l| l.waiting) {
                            line.waiting = false;
                        }
                    });
                }
                _ => {}
            }
        }
        ClientEvent::ContextSent { .. } => state.context_updates.update(|n| *n += 1),
        ClientEvent::ToolRefused { event, tool, reason } => state.refused.update(|refused| {
            refused.retain(|r| &r.tool != tool);
            refused.push(RefusedView { tool: tool.clone(), event: event.clone(), reason: reason.clone() });
        }),
        // The call takes its place in the chat after the words so far; the run's later words go
        // in a line after it (`run_line`).
        ClientEvent::CallStarted { call_id, tool, args } => state.messages.update(|lines| {
            context.arrived.update_value(|arrived| arrived.push((call_id.clone(), tool.clone())));
            // The call keeps the place it took while the model wrote it.
            let key = format!("call-{call_id}");
            if let Some(call) = lines.iter_mut().find(|l| l.key == key).and_then(|l| l.call.as_mut()) {
                call.args = args.clone();
                call.status = ToolCallStatus::Running;
                return;
            }
            push_kept(lines, ChatLine::tool(ToolCallView::new(call_id, tool, args.clone(), ToolCallStatus::Running)));
        }),
        ClientEvent::CallFinished { record } => {
            state.calls.update(|calls| push_kept(calls, record.clone()));
            context.arrived.update_value(|arrived| arrived.retain(|(id, _)| id != &record.call_id));
            context.set_call_status(
                &record.call_id,
                ToolCallStatus::finished(record.status),
                Some(record.content.clone()),
            );
            if record.status != ResultStatus::Ok {
                let error = as_text(&record.content);
                context.update_call(&record.call_id, |call| call.error = Some(error));
            }
        }
        ClientEvent::Run { run_id, event } => {
            // The call's tool is on another page of the app: open it (the server then sends the call).
            if event.get("kind").and_then(Value::as_str) == Some("navigate") {
                if let Some(url) = event.get("url").and_then(Value::as_str) {
                    match context.navigate.get_value() {
                        Some(navigate) => navigate.run(url.to_string()),
                        None => open_page(url),
                    }
                }
            }
            state.messages.update(|lines| on_run_event(lines, run_id.as_deref(), event));
        }
        ClientEvent::AgentMessage { run_id, delta, done, status, reset } => {
            state.messages.update(|lines| {
                if *reset {
                    // The run starts its words again: one line, after its calls.
                    lines.retain(|l| !of_run(&l.key, run_id));
                }
                let key = run_line(lines, run_id);
                match lines.iter_mut().find(|l| l.key == key) {
                    Some(line) => {
                        line.text.push_str(delta);
                        line.status = *status;
                    }
                    None => push_kept(
                        lines,
                        ChatLine {
                            key,
                            role: ChatRole::Agent,
                            text: delta.clone(),
                            status: *status,
                            waiting: false,
                            call: None,
                        },
                    ),
                }
            });
            if *done {
                state.running.set(false);
                context.pre_approved.update_value(Vec::clear);
            }
        }
        // After a reload: the conversation so far comes first (the lines this page added since
        // are kept after it).
        ClientEvent::History { lines } => {
            // A line the runtime could not read is left out (the rest still shows).
            let lines: Vec<tether_web::HistoryLine> =
                lines.iter().filter_map(|line| tether_web::HistoryLine::from_value(line).ok()).collect();
            let restored: Vec<ChatLine> = lines
                .iter()
                .enumerate()
                .map(|(n, line)| ChatLine {
                    key: line.run_id.clone().unwrap_or_else(|| format!("history-{n}")),
                    role: if line.role == tether_web::HistoryRole::User { ChatRole::User } else { ChatRole::Agent },
                    text: line.text.clone(),
                    status: line.status,
                    waiting: false,
                    call: None,
                })
                .collect();
            let running = lines.iter().any(|l| l.role == tether_web::HistoryRole::Agent && l.status.is_none());
            state.messages.update(|shown| {
                shown.retain(|line| !restored.iter().any(|r| r.key == line.key));
                shown.splice(0..0, restored);
            });
            if running {
                state.running.set(true);
            }
        }
        // The error itself reaches the list through the error callback.
        ClientEvent::ServerError { code, .. } => {
            if matches!(code, tether_web::ErrorCode::RunInProgress | tether_web::ErrorCode::RunFailed) {
                state.running.set(false);
            }
        }
        _ => {}
    }
}

/// What the server tells of a run, in the chat: a call the model is still writing takes its place
/// with its arguments so far (`tool_call_delta`), a running call's progress (`tool_progress`), a
/// streamed call refused on the server before it reached the page ends (`tool_execution_end`),
/// and one never made leaves when its run ends (`run_end`). The same as `@tether/react`.
pub fn on_run_event(lines: &mut Vec<ChatLine>, run_id: Option<&str>, event: &Value) {
    let text = |key: &str| event.get(key).and_then(Value::as_str);
    let call_id = text("callId");
    let key = call_id.map(|id| format!("call-{id}"));
    let at = key.as_ref().and_then(|key| lines.iter().position(|l| &l.key == key));
    let streaming = at.is_some_and(|at| lines[at].call.as_ref().is_some_and(|c| c.status == ToolCallStatus::Streaming));
    match text("kind") {
        Some("tool_call_delta") => {
            let (Some(call_id), Some(tool), Some(partial)) = (call_id, text("tool"), event.get("partialArgs")) else {
                return;
            };
            match at {
                None => {
                    let mut call = ToolCallView::new(call_id, tool, partial.clone(), ToolCallStatus::Streaming);
                    call.partial_args = Some(partial.clone());
                    push_kept(lines, ChatLine::tool(call));
                }
                Some(at) if streaming => {
                    if let Some(call) = lines[at].call.as_mut() {
                        call.args = partial.clone();
                        call.partial_args = Some(partial.clone());
                    }
                }
                Some(_) => {}
            }
        }
        Some("tool_progress") => {
            if let (Some(at), Some(message)) = (at, text("message")) {
                if let Some(call) = lines[at].call.as_mut() {
                    call.progress = Some(message.to_string());
                }
            }
        }
        Some("tool_execution_end") if streaming => {
            let status = text("status").and_then(ResultStatus::parse).unwrap_or(ResultStatus::Error);
            let output = text("output").unwrap_or_default().to_string();
            if let Some(call) = at.and_then(|at| lines[at].call.as_mut()) {
                call.status = ToolCallStatus::finished(status);
                call.result = Some(Value::String(output.clone()));
                call.error = Some(output);
            }
        }
        Some("run_end") => {
            if let Some(run_id) = run_id {
                let prefix = format!("call-{run_id}.");
                lines.retain(|l| {
                    !(l.key.starts_with(&prefix)
                        && l.call.as_ref().is_some_and(|c| c.status == ToolCallStatus::Streaming))
                });
            }
        }
        _ => {}
    }
}

/// Whether a chat line holds words of run `run_id` (keyed `run_id`, or `run_id~n` after a call).
fn of_run(key: &str, run_id: &str) -> bool {
    key.strip_prefix(run_id).is_some_and(|rest| rest.is_empty() || rest.starts_with('~'))
}

/// The key of the line that takes run `run_id`'s next words: its last line, unless a tool call
/// came after it (then a new line, `run_id~n`, after the call); the run id for its first.
fn run_line(lines: &[ChatLine], run_id: &str) -> String {
    let Some(last) = lines.iter().rposition(|l| l.role == ChatRole::Agent && of_run(&l.key, run_id)) else {
        return run_id.to_string();
    };
    if lines[last + 1..].iter().any(|l| l.role == ChatRole::Tool) {
        let later = lines.iter().filter(|l| l.key.starts_with(&format!("{run_id}~"))).count();
        return format!("{run_id}~{}", later + 1);
    }
    lines[last].key.clone()
}

/// Adds to a list the provider keeps short: the last [`KEPT`] entries.
fn push_kept<T>(list: &mut Vec<T>, item: T) {
    insert_kept(list, list.len(), item);
}

/// [`push_kept`] at `at`.
fn insert_kept<T>(list: &mut Vec<T>, at: usize, item: T) {
    list.insert(at, item);
    if list.len() > KEPT {
        list.remove(0);
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
    let client = Client::new(ClientConfig::new(url.clone()));
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
        responders: StoredValue::new_local(HashMap::new()),
        arrived: StoredValue::new_local(Vec::new()),
        asks: StoredValue::new_local(HashMap::new()),
        pre_approved: StoredValue::new_local(Vec::new()),
        refresh_scheduled: StoredValue::new_local(false),
        renderers: StoredValue::new_local(HashMap::new()),
        navigate: StoredValue::new_local(navigate),
        outage: StoredValue::new_local(None),
        state,
    };

    let session = StoredValue::new_local(None::<String>);
    client.subscribe(move |event| {
        // A call that ended while its approval was open (Stop, a timeout): the dialog goes.
        if let ClientEvent::CallFinished { record } = event {
            context.answer_approval(&record.call_id, ApprovalDecision::Dismissed);
        }
        if let ClientEvent::Welcome { session_id, resumed, .. } = event {
            let before = session.get_value();
            session.set_value(Some(session_id.clone()));
            if !resumed && before.is_some_and(|before| &before != session_id) {
                context.session_lost(session_id);
            }
        }
        apply_event(&context, &url, event);
        if matches!(event, ClientEvent::ContextSent { .. } | ClientEvent::ToolRefused { .. }) {
            context.refresh_tools();
        }
    });
    client.set_approver(Rc::new(move |request: ApprovalRequest| -> LocalFuture<ApprovalDecision> {
        // The call the user approved with changed arguments: it runs without asking again.
        let approved = context
            .pre_approved
            .try_update_value(|approved| {
                let at = approved.iter().position(|(tool, args)| *tool == request.tool && *args == request.args);
                at.map(|at| approved.remove(at))
            })
            .flatten();
        if approved.is_some() {
            return Box::pin(async { ApprovalDecision::Approved });
        }
        let (responder, answer) = oneshot::channel();
        context.responders.update_value(|responders| {
            responders.insert(request.call_id.clone(), responder);
        });
        state.approvals.update(|pending| pending.push(ApprovalView::from(&request)));
        context.set_call_status(&request.call_id, ToolCallStatus::Approval, None);
        Box::pin(async move { answer.await.unwrap_or(ApprovalDecision::Dismissed) })
    }));
    client.on_notify(move |notification: &Notification| {
        state.messages.update(|lines| {
            let text = format!("Running {} {}", notification.tool, notification.args);
            let line = ChatLine {
                key: format!("notify-{}", notification.call_id),
                role: ChatRole::System,
                text,
                status: None,
                waiting: false,
                call: None,
            };
            // Before the call's own line when that is in the chat already (the notice may come after it).
            let call_key = format!("call-{}", notification.call_id);
            let at = lines.iter().position(|l| l.key == call_key).unwrap_or(lines.len());
            insert_kept(lines, at, line);
        });
    });
    client.on_error(move |error| state.errors.update(|errors| push_kept(errors, error.to_string())));
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
pub(crate) fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

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
