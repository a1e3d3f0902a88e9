//! The chat as a state machine without IO: the client's events and the user's actions in; chat
//! lines, pending approvals, open questions and the error list out.
//!
//! With feature `chat` the [`Client`](crate::Client) feeds it every [`ClientEvent`], every error
//! and notification, and the user's actions, and tether-leptos draws what it holds; the toolkit
//! keeps only the UI glue (opening a page, rendering). The npm module leaves it out (its size,
//! see ARCHITECTURE.md), so `@tether/react`'s store keeps its own reducer: the fixtures in
//! `tests/chat/` (events in, lines out) hold the two to one behaviour, run against this by
//! `cargo test` and against the React store by vitest.
//!
//! Calls carry their run id and call id as fields: nothing here reads meaning out of an id.

use serde::Serialize;
use serde_json::Value;
use tether_core::ApprovalDecision;
use tether_core::json_text as to_text;
use tether_protocol::{
    CallId, ErrorCode, HistoryLine, HistoryRole, JsonObject, ResultStatus, RunEvent, RunId, RunStatus,
};

use crate::{ApprovalView, ClientEvent, ConnectionState, Notification, WebError};

/// How many chat lines and errors the chat keeps.
pub const KEPT: usize = 50;

/// What the chat says when the server could not resume the conversation.
pub const SESSION_LOST: &str = "The server could not resume this conversation (it expired, or the server lost it): the run in progress ended, and what you say next starts a new conversation.";

/// Who wrote a chat line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ChatRole {
    /// The user.
    User,
    /// The agent (streamed).
    Agent,
    /// The runtime (a low-risk tool ran, the session was lost).
    System,
    /// A tool call ([`ChatLine::call`]).
    Tool,
}

impl ChatRole {
    /// The role's name: `user`, `agent`, `system` or `tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChatRole::User => "user",
            ChatRole::Agent => "agent",
            ChatRole::System => "system",
            ChatRole::Tool => "tool",
        }
    }
}

/// Where a tool call shown in the chat stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CallStatus {
    /// The model is still writing it ([`CallView::partial_args`] holds its arguments so far).
    Streaming,
    /// Waiting for the user's approval.
    Approval,
    /// Its handler runs.
    Running,
    /// It succeeded.
    Done,
    /// It failed (invalid arguments, an unknown tool, the handler threw).
    Failed,
    /// The user or a policy refused it.
    Refused,
    /// It was cancelled (Stop, a timeout, an unmount).
    Cancelled,
}

impl CallStatus {
    /// The status a finished call shows, from its result status.
    pub fn finished(status: ResultStatus) -> CallStatus {
        match status {
            ResultStatus::Ok => CallStatus::Done,
            ResultStatus::Denied | ResultStatus::Blocked => CallStatus::Refused,
            ResultStatus::Cancelled | ResultStatus::Interrupted => CallStatus::Cancelled,
            _ => CallStatus::Failed,
        }
    }

    /// The status's name (`data-call-status`): `streaming`, `approval`, `running`, `done`,
    /// `failed`, `refused` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Streaming => "streaming",
            CallStatus::Approval => "approval",
            CallStatus::Running => "running",
            CallStatus::Done => "done",
            CallStatus::Failed => "failed",
            CallStatus::Refused => "refused",
            CallStatus::Cancelled => "cancelled",
        }
    }

    /// What it says in the chat (the same words in both toolkits).
    pub fn words(self) -> &'static str {
        match self {
            CallStatus::Streaming => "being written",
            CallStatus::Approval => "waiting for your approval",
            other => other.as_str(),
        }
    }
}

/// A tool call as the chat shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallView {
    /// The run that made it, when the server said (a streamed call); `None` for a call only
    /// known from its `TOOL_CALL`.
    pub run_id: Option<RunId>,
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub tool: String,
    /// The arguments the model gave (validated once the call runs); while streaming, the
    /// arguments so far.
    pub args: Value,
    /// The arguments as far as the model had written them (strings may be cut short, later
    /// fields missing); kept once the call runs. `None` when the model did not stream the call.
    pub partial_args: Option<Value>,
    /// Where it stands.
    pub status: CallStatus,
    /// The handler's last progress message, while it runs.
    pub progress: Option<String>,
    /// What the handler returned (`Done`), or the message (`Failed`, `Refused`, `Cancelled`).
    pub result: Option<Value>,
    /// The message, when the call did not succeed.
    pub error: Option<String>,
    /// What the handler asks the user, while it waits for the answer.
    pub question: Option<Value>,
}

impl CallView {
    fn new(run_id: Option<&RunId>, call_id: &CallId, tool: &str, args: Value, status: CallStatus) -> CallView {
        CallView {
            run_id: run_id.cloned(),
            call_id: call_id.clone(),
            tool: tool.to_string(),
            args,
            partial_args: None,
            status,
            progress: None,
            result: None,
            error: None,
            question: None,
        }
    }
}

/// One line of the chat.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatLine {
    /// A stable key: the run id for the agent's first words in a run (`run~n` for its words
    /// after its n-th tool call), `call-<call id>` for calls, `user-<n>` for the user's.
    pub key: String,
    /// Who wrote it.
    pub role: ChatRole,
    /// The text so far.
    pub text: String,
    /// How the run ended, on the run's last agent line once it did.
    pub status: Option<RunStatus>,
    /// A user message written while not connected: it is sent when the connection opens.
    pub waiting: bool,
    /// The run whose words these are (agent lines).
    pub run_id: Option<RunId>,
    /// The call ([`ChatRole::Tool`]).
    pub call: Option<CallView>,
}

impl ChatLine {
    fn new(key: String, role: ChatRole, text: String) -> ChatLine {
        ChatLine { key, role, text, status: None, waiting: false, run_id: None, call: None }
    }
}

/// What kind of problem an entry of the error list is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ErrorKind {
    /// A registration was refused.
    Registry,
    /// The server refused a frame.
    Server,
    /// The server cannot be reached, or the connection was lost (an outage going on).
    Connection,
    /// An outage that ended: the connection is back.
    Reconnected,
    /// A frame from the server could not be read.
    Protocol,
    /// Results could not be delivered: the server lost the session.
    ResultsLost,
}

impl ErrorKind {
    /// The kind's name: `registry`, `server`, `connection`, `reconnected`, `protocol` or
    /// `resultsLost`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Registry => "registry",
            ErrorKind::Server => "server",
            ErrorKind::Connection => "connection",
            ErrorKind::Reconnected => "reconnected",
            ErrorKind::Protocol => "protocol",
            ErrorKind::ResultsLost => "resultsLost",
        }
    }
}

/// One entry of the error list.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorLine {
    /// What kind of problem.
    pub kind: ErrorKind,
    /// In words.
    pub message: String,
    /// The registry event of a refused registration (`tool.registry.limit`,
    /// `tool.registry.refused`).
    pub event: Option<&'static str>,
}

impl ErrorLine {
    /// The entry as JSON: `{kind, message, event?}` (the React package's `TetherError`).
    pub fn to_value(&self) -> Value {
        JsonObject::new()
            .text("kind", self.kind.as_str())
            .text("message", &self.message)
            .maybe("event", self.event.map(Value::from))
            .build()
    }
}

impl From<&WebError> for ErrorLine {
    fn from(error: &WebError) -> ErrorLine {
        let (kind, event) = match error {
            WebError::Registry(tether_core::CoreError::ToolLimit { .. }) => {
                (ErrorKind::Registry, Some(tether_core::LIMIT_EVENT))
            }
            WebError::Registry(_) => (ErrorKind::Registry, Some("tool.registry.refused")),
            WebError::Server { .. } => (ErrorKind::Server, None),
            WebError::Connection(_) => (ErrorKind::Connection, None),
            WebError::Protocol(_) => (ErrorKind::Protocol, None),
            WebError::ResultsLost { .. } => (ErrorKind::ResultsLost, None),
        };
        ErrorLine { kind, message: error.to_string(), event }
    }
}

/// What the toolkit does after the user wrote a message ([`Chat::user_message`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Nothing (an empty message).
    Nothing,
    /// Send it to the server (`Client::send_message`; the client keeps it until connected).
    Send(String),
    /// The message answered what the run waits for instead: resolve these approvals with their
    /// decisions and these questions with the text. No new run starts.
    Answers {
        /// Approval requests, refused with the message as the reason.
        approvals: Vec<(CallId, ApprovalDecision)>,
        /// Questions of handlers (`ask`), answered with the message's text.
        questions: Vec<(CallId, Value)>,
    },
}

/// An outage going on: the index of its entry in the error list, whether it began with a lost
/// connection (rather than a server never reached), and the attempts that failed so far.
#[derive(Debug, Clone, Copy)]
struct Outage {
    entry: usize,
    lost: bool,
    attempts: u32,
}

/// The chat's state machine. See the module documentation.
#[derive(Debug, Default)]
pub struct Chat {
    url: String,
    lines: Vec<ChatLine>,
    running: bool,
    approvals: Vec<ApprovalView>,
    questions: Vec<CallId>,
    errors: Vec<ErrorLine>,
    /// Calls that reached the page and whose handler has not claimed them yet: (call, tool).
    arrived: Vec<(CallId, String)>,
    /// Calls the user approved with changed arguments, until the model makes them (this run).
    pre_approved: Vec<(String, Value)>,
    outage: Option<Outage>,
    connected: bool,
    session_id: Option<String>,
    users: usize,
    revision: u64,
}

impl Chat {
    /// An empty chat for the server at `url` (named in the connection errors).
    pub fn new(url: impl Into<String>) -> Chat {
        Chat { url: url.into(), ..Chat::default() }
    }

    /// The lines, oldest first (at most [`KEPT`]).
    pub fn lines(&self) -> &[ChatLine] {
        &self.lines
    }

    /// Whether a run is in progress.
    pub fn running(&self) -> bool {
        self.running
    }

    /// The approval requests waiting for the user, oldest first.
    pub fn approvals(&self) -> &[ApprovalView] {
        &self.approvals
    }

    /// The calls whose handler waits for the user's answer ([`Chat::ask`]), oldest first.
    pub fn questions(&self) -> &[CallId] {
        &self.questions
    }

    /// The error list, newest last (at most [`KEPT`]).
    pub fn errors(&self) -> &[ErrorLine] {
        &self.errors
    }

    /// Bumped by every change: equal revisions mean nothing changed.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    fn touch(&mut self) {
        self.revision += 1;
    }

    /// Adds a line at `at`, keeping the last [`KEPT`].
    fn insert(&mut self, at: usize, line: ChatLine) {
        self.touch();
        self.lines.insert(at, line);
        if self.lines.len() > KEPT {
            self.lines.remove(0);
        }
    }

    fn push(&mut self, line: ChatLine) {
        self.insert(self.lines.len(), line);
    }

    fn push_error(&mut self, error: ErrorLine) {
        self.touch();
        self.errors.push(error);
        if self.errors.len() > KEPT {
            self.errors.remove(0);
            if let Some(outage) = self.outage.as_mut() {
                // Its entry left the list: the next attempt starts a new one.
                outage.entry = outage.entry.checked_sub(1).unwrap_or(usize::MAX);
            }
        }
    }

    fn call_at(&self, call_id: &CallId) -> Option<usize> {
        self.lines.iter().position(|l| l.call.as_ref().is_some_and(|c| c.call_id == *call_id))
    }

    /// Changes the line of call `call_id`, if it is shown.
    fn update_call(&mut self, call_id: &CallId, change: impl FnOnce(&mut CallView)) {
        if let Some(at) = self.call_at(call_id) {
            self.touch();
            if let Some(call) = self.lines[at].call.as_mut() {
                change(call);
            }
        }
    }

    /// The index of the agent line that takes run `run_id`'s next words: its last one, unless a
    /// tool call came after it (then a new line after the call).
    fn run_line(&mut self, run_id: &RunId) -> usize {
        let last = self.lines.iter().rposition(|l| l.role == ChatRole::Agent && l.run_id.as_ref() == Some(run_id));
        if let Some(last) = last.filter(|&last| !self.lines[last + 1..].iter().any(|l| l.role == ChatRole::Tool)) {
            return last;
        }
        let words = self.lines.iter().filter(|l| l.run_id.as_ref() == Some(run_id)).count();
        let key = if words == 0 { run_id.to_string() } else { format!("{run_id}~{words}") };
        let mut line = ChatLine::new(key, ChatRole::Agent, String::new());
        line.run_id = Some(run_id.clone());
        self.push(line);
        self.lines.len() - 1
    }

    /// Feeds one event of the client.
    pub fn event(&mut self, event: &ClientEvent) {
        match event {
            ClientEvent::Connection { state, attempt } => self.connection(*state, *attempt),
            ClientEvent::Welcome { session_id, resumed, .. } => {
                let before = self.session_id.replace(session_id.clone());
                if !resumed && before.is_some_and(|before| &before != session_id) {
                    self.session_lost(session_id);
                }
            }
            ClientEvent::CallStarted { call_id, tool, args } => {
                self.arrived.push((call_id.clone(), tool.clone()));
                // The call keeps the place it took while the model wrote it.
                if self.call_at(call_id).is_some() {
                    self.update_call(call_id, |call| {
                        call.args = args.clone();
                        call.status = CallStatus::Running;
                    });
                } else {
                    self.push(tool_line(CallView::new(None, call_id, tool, args.clone(), CallStatus::Running)));
                }
            }
            ClientEvent::ApprovalRequested { request } => {
                self.touch();
                self.approvals.push(request.clone());
                self.update_call(&request.call_id, |call| call.status = CallStatus::Approval);
            }
            ClientEvent::CallFinished { record } => {
                // A call that ended while its approval or question was open (Stop, a timeout).
                self.touch();
                self.approvals.retain(|a| a.call_id != record.call_id);
                self.questions.retain(|id| *id != record.call_id);
                self.arrived.retain(|(id, _)| *id != record.call_id);
                let error = (record.status != ResultStatus::Ok).then(|| as_text(&record.content));
                self.update_call(&record.call_id, |call| {
                    call.status = CallStatus::finished(record.status);
                    call.result = Some(record.content.clone());
                    call.error = error;
                    call.question = None;
                });
            }
            ClientEvent::Run { run_id, event } => {
                // A run event this version cannot read changes nothing in the chat.
                if let Ok(event) = RunEvent::from_value(event) {
                    self.run_event(run_id.as_ref(), &event);
                }
            }
            ClientEvent::AgentMessage { run_id, delta, done, status, reset } => {
                if *reset {
                    // The run starts its words again: one line, after its calls.
                    self.lines.retain(|l| !(l.role == ChatRole::Agent && l.run_id.as_ref() == Some(run_id)));
                }
                let at = self.run_line(run_id);
                self.touch();
                let line = &mut self.lines[at];
                line.text.push_str(delta);
                line.status = *status;
                if *done {
                    self.running = false;
                    self.pre_approved.clear();
                }
            }
            ClientEvent::History { lines } => self.history(lines),
            ClientEvent::ServerError { code, .. } => {
                if matches!(code, ErrorCode::RunInProgress | ErrorCode::RunFailed) {
                    self.touch();
                    self.running = false;
                }
            }
            ClientEvent::ContextSent { .. } | ClientEvent::ToolRefused { .. } => {}
        }
    }

    fn connection(&mut self, state: ConnectionState, attempt: u32) {
        let was_open = self.connected;
        self.connected = state == ConnectionState::Open;
        match state {
            ConnectionState::Reconnecting => {
                // One entry per outage, updated as the attempts fail.
                let lost = self.outage.map_or(was_open, |o| o.lost);
                let message = if lost {
                    format!("lost the connection to the agent server at {}; reconnecting", self.url)
                } else {
                    format!(
                        "cannot reach the agent server at {} ({}); is `tether serve` running there? Retrying",
                        self.url,
                        attempts(attempt)
                    )
                };
                let error = ErrorLine { kind: ErrorKind::Connection, message, event: None };
                let entry = match self.outage {
                    Some(outage) if outage.entry < self.errors.len() => {
                        self.touch();
                        self.errors[outage.entry] = error;
                        outage.entry
                    }
                    _ => {
                        self.push_error(error);
                        self.errors.len() - 1
                    }
                };
                self.outage = Some(Outage { entry, lost, attempts: attempt });
            }
            ConnectionState::Open => {
                // The outage's entry says it ended.
                if let Some(outage) = self.outage.take() {
                    let message = if outage.lost {
                        format!(
                            "the connection to the agent server at {} was lost and is back ({})",
                            self.url,
                            attempts(outage.attempts)
                        )
                    } else {
                        format!(
                            "the agent server at {} could not be reached ({}); connected since",
                            self.url,
                            attempts(outage.attempts)
                        )
                    };
                    if let Some(entry) = self.errors.get_mut(outage.entry) {
                        *entry = ErrorLine { kind: ErrorKind::Reconnected, message, event: None };
                    }
                }
                // Messages written while offline have now left.
                self.touch();
                for line in self.lines.iter_mut().filter(|l| l.waiting) {
                    line.waiting = false;
                }
            }
            _ => {}
        }
    }

    /// The server could not resume the session: nothing of the old one will ever answer. The
    /// run in progress ends, the approvals and questions waiting close (the toolkit dismisses
    /// what no longer is in [`Chat::approvals`]), and the chat says so.
    fn session_lost(&mut self, session_id: &str) {
        self.touch();
        self.approvals.clear();
        self.questions.clear();
        for line in self.lines.iter_mut().filter(|l| l.role == ChatRole::Agent && l.status.is_none()) {
            line.status = Some(RunStatus::Failed);
        }
        self.push(ChatLine::new(format!("lost-{session_id}"), ChatRole::System, SESSION_LOST.to_string()));
        self.running = false;
    }

    /// What the server tells of a run: a call the model is still writing takes its place with its
    /// arguments so far, a running call's progress, a streamed call refused on the server before
    /// it reached the page ends, and one never made leaves when its run ends.
    fn run_event(&mut self, run_id: Option<&RunId>, event: &RunEvent) {
        let streaming = |chat: &Chat, call_id: &CallId| {
            chat.call_at(call_id)
                .is_some_and(|at| chat.lines[at].call.as_ref().is_some_and(|c| c.status == CallStatus::Streaming))
        };
        match event {
            RunEvent::ToolCallDelta(delta) => match self.call_at(&delta.call_id) {
                None => {
                    let args = delta.partial_args.clone();
                    let mut call =
                        CallView::new(run_id, &delta.call_id, &delta.tool, args.clone(), CallStatus::Streaming);
                    call.partial_args = Some(args);
                    self.push(tool_line(call));
                }
                Some(_) if streaming(self, &delta.call_id) => self.update_call(&delta.call_id, |call| {
                    call.args = delta.partial_args.clone();
                    call.partial_args = Some(delta.partial_args.clone());
                }),
                Some(_) => {}
            },
            RunEvent::ToolProgress(progress) => {
                self.update_call(&progress.call_id, |call| call.progress = Some(progress.message.clone()));
            }
            RunEvent::ToolExecutionEnd(end) if streaming(self, &end.call_id) => {
                self.update_call(&end.call_id, |call| {
                    call.status = CallStatus::finished(end.status);
                    call.result = Some(Value::String(end.output.clone()));
                    call.error = Some(end.output.clone());
                });
            }
            RunEvent::RunEnd(_) => {
                if let Some(run_id) = run_id {
                    let before = self.lines.len();
                    self.lines.retain(|l| {
                        !l.call
                            .as_ref()
                            .is_some_and(|c| c.status == CallStatus::Streaming && c.run_id.as_ref() == Some(run_id))
                    });
                    if self.lines.len() != before {
                        self.touch();
                    }
                }
            }
            _ => {}
        }
    }

    /// After a reload: the conversation so far comes first (the lines this page added since
    /// stay after it). A line this version cannot read is left out.
    fn history(&mut self, lines: &[Value]) {
        self.touch();
        let restored: Vec<ChatLine> = lines
            .iter()
            .filter_map(|line| HistoryLine::from_value(line).ok())
            .enumerate()
            .map(|(n, line)| {
                let agent = line.role == HistoryRole::Agent;
                let key = line.run_id.clone().map_or_else(|| format!("history-{n}"), RunId::into_string);
                let mut shown = ChatLine::new(key, if agent { ChatRole::Agent } else { ChatRole::User }, line.text);
                shown.status = line.status;
                shown.run_id = line.run_id.filter(|_| agent);
                shown
            })
            .collect();
        if restored.iter().any(|l| l.role == ChatRole::Agent && l.status.is_none()) {
            self.running = true;
        }
        self.lines.retain(|line| !restored.iter().any(|r| r.key == line.key));
        self.lines.splice(0..0, restored);
        self.lines.drain(..self.lines.len().saturating_sub(KEPT));
    }

    /// Feeds an error the client reported.
    pub fn error(&mut self, error: &WebError) {
        self.push_error(ErrorLine::from(error));
    }

    /// Feeds a notification: a `low`-risk call runs. Its line goes before the call's own line
    /// when that is in the chat already (the notice may come after it).
    pub fn notified(&mut self, notification: &Notification) {
        let text = format!("Running {} {}", notification.tool, to_text(&notification.args));
        let at = self.call_at(&notification.call_id).unwrap_or(self.lines.len());
        self.insert(at, ChatLine::new(format!("notify-{}", notification.call_id), ChatRole::System, text));
    }

    /// The user wrote `text`. It shows in the chat (marked waiting while not connected). While
    /// the run waits for approvals or a handler's question, the message answers them instead:
    /// each pending call is refused with the message as the reason (`the user wrote instead:
    /// …`), each question gets the text, and the run goes on; otherwise it is to be sent.
    pub fn user_message(&mut self, text: &str) -> Reply {
        let text = text.trim();
        if text.is_empty() {
            return Reply::Nothing;
        }
        let mut line = ChatLine::new(format!("user-{}", self.users), ChatRole::User, text.to_string());
        self.users += 1;
        line.waiting = !self.connected;
        self.push(line);
        if self.approvals.is_empty() && self.questions.is_empty() {
            self.running = true;
            return Reply::Send(text.to_string());
        }
        let reason = format!("the user wrote instead: {text}");
        let approvals = std::mem::take(&mut self.approvals)
            .into_iter()
            .map(|a| (a.call_id, ApprovalDecision::Rejected { reason: Some(reason.clone()) }))
            .collect();
        let questions: Vec<(CallId, Value)> = self.questions.iter().map(|id| (id.clone(), text.into())).collect();
        for (call_id, _) in &questions {
            self.close_question(call_id);
        }
        Reply::Answers { approvals, questions }
    }

    /// The user answered the approval request of `call_id` (the toolkit resolves its dialog's
    /// future with the same decision): it leaves the pending list, and an approved call runs.
    pub fn answer_approval(&mut self, call_id: &CallId, decision: &ApprovalDecision) {
        self.touch();
        self.approvals.retain(|a| a.call_id != *call_id);
        if *decision == ApprovalDecision::Approved {
            self.update_call(call_id, |call| call.status = CallStatus::Running);
        }
    }

    /// The user approved `call_id` with the arguments `args` (edited in the dialog): unchanged,
    /// an ordinary approval; changed, the call is refused with the new arguments for the model
    /// ([`edited_args_reason`]), and the model's next call of the tool with exactly those runs
    /// without asking again ([`Chat::take_pre_approved`]). The decision to resolve the dialog
    /// with; `None` when no such request waits.
    pub fn approve_with_args(&mut self, call_id: &CallId, args: Value) -> Option<ApprovalDecision> {
        let request = self.approvals.iter().find(|r| r.call_id == *call_id)?;
        let decision = if args == request.args {
            ApprovalDecision::Approved
        } else {
            let reason = Some(edited_args_reason(&request.tool, &args));
            self.pre_approved.push((request.tool.clone(), args));
            ApprovalDecision::Rejected { reason }
        };
        self.answer_approval(call_id, &decision);
        Some(decision)
    }

    /// Whether the approval request of `call_id` (`tool` with `args`) is one the user approved
    /// already with these arguments ([`Chat::approve_with_args`]): then it runs without asking
    /// again, and this answers it.
    pub fn take_pre_approved(&mut self, call_id: &CallId, tool: &str, args: &Value) -> bool {
        let Some(at) = self.pre_approved.iter().position(|(t, a)| t == tool && a == args) else { return false };
        self.pre_approved.remove(at);
        self.answer_approval(call_id, &ApprovalDecision::Approved);
        true
    }

    /// A handler of `tool` starts: the id of its call, the oldest of `tool` that reached the page
    /// and whose handler has not claimed one yet (the runtime starts a tool's handlers in the
    /// order its calls arrive).
    pub fn claim(&mut self, tool: &str) -> Option<CallId> {
        let at = self.arrived.iter().position(|(_, t)| t == tool)?;
        Some(self.arrived.remove(at).0)
    }

    /// The handler of call `call_id` asks the user `question`: the call's line shows it, and
    /// [`Chat::questions`] lists the call until [`Chat::close_question`].
    pub fn ask(&mut self, call_id: &CallId, question: Value) {
        self.touch();
        self.questions.push(call_id.clone());
        self.update_call(call_id, |call| call.question = Some(question));
    }

    /// The question of `call_id` closes (answered or cancelled); whether it was open.
    pub fn close_question(&mut self, call_id: &CallId) -> bool {
        let open = self.questions.iter().any(|id| id == call_id);
        self.touch();
        self.questions.retain(|id| id != call_id);
        self.update_call(call_id, |call| call.question = None);
        open
    }
}

fn tool_line(call: CallView) -> ChatLine {
    let mut line = ChatLine::new(format!("call-{}", call.call_id), ChatRole::Tool, String::new());
    line.call = Some(call);
    line
}

fn attempts(n: u32) -> String {
    format!("{n} failed attempt{}", if n == 1 { "" } else { "s" })
}

/// A value in words: a string as it is, anything else as compact JSON.
pub fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => to_text(other),
    }
}

/// The refusal that carries arguments the user changed in the approval dialog: the model calls
/// the tool again with them, that call is validated like any other, and it runs without asking
/// again.
pub fn edited_args_reason(tool: &str, args: &Value) -> String {
    format!(
        "the user changed the arguments before approving; call {tool} again with exactly these arguments: {}",
        to_text(args)
    )
}
