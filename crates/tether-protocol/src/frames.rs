//! The frames of the Tether protocol as serde types, one struct per frame.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{CallId, RunId};

/// How dangerous a tool is. It decides what the executor does before the handler runs.
///
/// The order of the variants is the order of strictness, so `max` picks the stricter risk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Runs without asking anybody.
    #[default]
    None,
    /// Runs, and the user is notified.
    Low,
    /// Waits for the user's explicit approval.
    High,
    /// Waits for the user's explicit approval; the UI should make the consequences clear.
    Critical,
    /// Never runs.
    Blocked,
}

impl Risk {
    /// All risk levels, from the least to the most strict.
    pub const ALL: [Risk; 5] = [Risk::None, Risk::Low, Risk::High, Risk::Critical, Risk::Blocked];

    /// The stricter of two risk levels: a floor can raise a risk but never lower it.
    #[must_use]
    pub fn stricter(self, other: Risk) -> Risk {
        self.max(other)
    }

    /// The wire name of this level (`"none"`, `"low"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::None => "none",
            Risk::Low => "low",
            Risk::High => "high",
            Risk::Critical => "critical",
            Risk::Blocked => "blocked",
        }
    }

    /// Parses a wire name; `None` for anything else.
    pub fn parse(name: &str) -> Option<Risk> {
        Risk::ALL.into_iter().find(|risk| risk.as_str() == name)
    }
}

impl std::fmt::Display for Risk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn empty_object_schema() -> Value {
    serde_json::json!({ "type": "object" })
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_true(value: &bool) -> bool {
    *value
}

fn yes() -> bool {
    true
}

/// A tool as the model sees it: what the client announces in [`ContextUpdate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// Unique name within the session, e.g. `cart_add`.
    pub name: String,
    /// What the tool does, written for the model.
    pub description: String,
    /// JSON Schema (2020-12) of the arguments object.
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
    /// How dangerous the tool is, as declared by the client.
    #[serde(default)]
    pub risk: Risk,
    /// Whether the tool survives navigation (it belongs to the app, not to a page).
    #[serde(default, skip_serializing_if = "is_false")]
    pub global: bool,
    /// Whether the model is asked again after the tool's result. `false` (`followUp: false`):
    /// a run ends once a call of this tool succeeded, with the result recorded and no further
    /// model turn (the tool's rendered result is the answer); a failed or refused call is still
    /// followed up. Default `true`; sent only when `false`. Since protocol 4.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub follow_up: bool,
}

impl ToolSpec {
    /// A tool that takes no arguments (`{"type": "object"}`), risk `none`, of the page (not
    /// global), followed up: the defaults a client announces. The `with_*` methods change them.
    ///
    /// ```
    /// use tether_protocol::{Risk, ToolSpec};
    /// let tool = ToolSpec::new("checkout", "Place the order.").with_risk(Risk::High);
    /// assert_eq!(tool.parameters, serde_json::json!({"type": "object"}));
    /// assert!(tool.follow_up && !tool.global);
    /// ```
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: empty_object_schema(),
            risk: Risk::default(),
            global: false,
            follow_up: true,
        }
    }

    /// The JSON Schema of the arguments object.
    #[must_use]
    pub fn with_parameters(mut self, parameters: Value) -> Self {
        self.parameters = parameters;
        self
    }

    /// How dangerous the tool is.
    #[must_use]
    pub fn with_risk(mut self, risk: Risk) -> Self {
        self.risk = risk;
        self
    }

    /// Whether the tool survives navigation.
    #[must_use]
    pub fn with_global(mut self, global: bool) -> Self {
        self.global = global;
        self
    }

    /// Whether the model is asked again after the tool's result ([`ToolSpec::follow_up`]).
    #[must_use]
    pub fn with_follow_up(mut self, follow_up: bool) -> Self {
        self.follow_up = follow_up;
        self
    }
}

/// Where the user is: the page whose tools are announced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PageInfo {
    /// The page's URL (path or absolute).
    pub url: String,
    /// The page's title.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
}

/// Proof that a reconnecting client is the one that owned a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resume {
    /// The session id from the earlier [`Welcome`].
    pub session_id: String,
    /// The secret resume token from the earlier [`Welcome`].
    pub token: String,
    /// The sequence number of the last server frame the client processed (the `n` of its
    /// id `s<n>`): the server replays every frame after it. Absent: the frames sent while the
    /// client was away.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    /// The client lost what it showed (the page was reloaded): the server answers the
    /// [`Welcome`] with a [`History`] of the conversation so far, and replays no older frame
    /// than it covers. Since protocol 3.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub history: bool,
}

/// How a tool call ended, as the client reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResultStatus {
    /// The handler ran and returned `content`.
    Ok,
    /// The handler ran and failed; `content` is the error message.
    Error,
    /// The arguments did not match the schema; `content` lists every problem.
    InvalidArgs,
    /// No tool of that name is registered.
    UnknownTool,
    /// The user (or a policy) refused the call; `content` says why.
    Denied,
    /// The tool's risk is `blocked`: it never runs.
    Blocked,
    /// The call was cancelled (by the server, or because its component went away).
    Cancelled,
    /// The handler did not finish in time.
    Timeout,
    /// The handler was running when its page went away (a reload): whether it did what it
    /// does is unknown, and it is not run again by itself. Since protocol 3.
    Interrupted,
}

impl ResultStatus {
    /// Every status.
    pub const ALL: [ResultStatus; 9] = [
        ResultStatus::Ok,
        ResultStatus::Error,
        ResultStatus::InvalidArgs,
        ResultStatus::UnknownTool,
        ResultStatus::Denied,
        ResultStatus::Blocked,
        ResultStatus::Cancelled,
        ResultStatus::Timeout,
        ResultStatus::Interrupted,
    ];

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<ResultStatus> {
        ResultStatus::ALL.into_iter().find(|status| status.as_str() == name)
    }

    /// Whether the tool ran and succeeded.
    pub fn is_ok(self) -> bool {
        self == ResultStatus::Ok
    }

    /// The wire name of this status.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultStatus::Ok => "ok",
            ResultStatus::Error => "error",
            ResultStatus::InvalidArgs => "invalid_args",
            ResultStatus::UnknownTool => "unknown_tool",
            ResultStatus::Denied => "denied",
            ResultStatus::Blocked => "blocked",
            ResultStatus::Cancelled => "cancelled",
            ResultStatus::Timeout => "timeout",
            ResultStatus::Interrupted => "interrupted",
        }
    }
}

/// How an agent run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The model gave its final answer and every Stop hook accepted it.
    Completed,
    /// Stop hooks rejected the answer `maxRejections` times; the last answer was delivered.
    Capped,
    /// The run reached `maxTurns` without a final answer.
    MaxTurns,
    /// The run took longer than the server allows.
    TimedOut,
    /// The run failed: provider error, hook error or panic. The `error` field says which.
    Failed,
    /// The run was aborted (the session closed or the server shut down).
    Aborted,
    /// A hook refused the user's message before the model saw it (a `UserPromptSubmit` hook);
    /// the answer says why, and the message is not kept in the conversation.
    Refused,
    /// The model kept asking for calls it had already made in the run (the loop guard refused
    /// them); the answer says what was done.
    LoopDetected,
}

impl RunStatus {
    /// Every status.
    pub const ALL: [RunStatus; 8] = [
        RunStatus::Completed,
        RunStatus::Capped,
        RunStatus::MaxTurns,
        RunStatus::TimedOut,
        RunStatus::Failed,
        RunStatus::Aborted,
        RunStatus::Refused,
        RunStatus::LoopDetected,
    ];

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|status| status.as_str() == name)
    }

    /// The wire name of this status.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Completed => "completed",
            RunStatus::Capped => "capped",
            RunStatus::MaxTurns => "max_turns",
            RunStatus::TimedOut => "timed_out",
            RunStatus::Failed => "failed",
            RunStatus::Aborted => "aborted",
            RunStatus::Refused => "refused",
            RunStatus::LoopDetected => "loop_detected",
        }
    }
}

/// Typed error codes carried by [`ErrorFrame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The frame is not valid JSON, or a field has the wrong shape.
    MalformedFrame,
    /// The `type` tag names no frame this side understands.
    UnknownFrameType,
    /// The frame is larger than the receiver's limit.
    FrameTooLarge,
    /// The peer speaks another protocol version.
    UnsupportedVersion,
    /// A frame other than `HELLO` arrived before the handshake.
    HandshakeRequired,
    /// A `CONTEXT_UPDATE` announced more tools than `maxActiveTools`; the previous list is kept.
    ToolCapExceeded,
    /// A tool in a `CONTEXT_UPDATE` is invalid (name, schema, size): the previous list is kept.
    /// Also sent during a run when the model provider refuses a tool's schema: the run goes on
    /// without that tool.
    InvalidTool,
    /// A `TOOL_RESULT` names a call this session does not have.
    UnknownCall,
    /// A `USER_MESSAGE` arrived while a run was in progress; it was not queued.
    RunInProgress,
    /// The run failed; the message says why.
    RunFailed,
    /// The connection sends frames faster than allowed.
    RateLimited,
    /// Some other configured limit was exceeded; the message names it.
    LimitExceeded,
    /// The connection or resume attempt is not authorised.
    Unauthorized,
    /// The server failed; the session is still usable.
    Internal,
}

impl ErrorCode {
    /// Every code.
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::MalformedFrame,
        ErrorCode::UnknownFrameType,
        ErrorCode::FrameTooLarge,
        ErrorCode::UnsupportedVersion,
        ErrorCode::HandshakeRequired,
        ErrorCode::ToolCapExceeded,
        ErrorCode::InvalidTool,
        ErrorCode::UnknownCall,
        ErrorCode::RunInProgress,
        ErrorCode::RunFailed,
        ErrorCode::RateLimited,
        ErrorCode::LimitExceeded,
        ErrorCode::Unauthorized,
        ErrorCode::Internal,
    ];

    /// The wire name of this code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::MalformedFrame => "malformed_frame",
            ErrorCode::UnknownFrameType => "unknown_frame_type",
            ErrorCode::FrameTooLarge => "frame_too_large",
            ErrorCode::UnsupportedVersion => "unsupported_version",
            ErrorCode::HandshakeRequired => "handshake_required",
            ErrorCode::ToolCapExceeded => "tool_cap_exceeded",
            ErrorCode::InvalidTool => "invalid_tool",
            ErrorCode::UnknownCall => "unknown_call",
            ErrorCode::RunInProgress => "run_in_progress",
            ErrorCode::RunFailed => "run_failed",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::LimitExceeded => "limit_exceeded",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Internal => "internal",
        }
    }

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|code| code.as_str() == name)
    }
}

/// `HELLO`: the client opens (or resumes) a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hello {
    /// Frame id, unique per sender and connection.
    pub id: String,
    /// The client's [`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION).
    pub protocol_version: u32,
    /// Present when the client resumes an earlier session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Resume>,
    /// Free-form client name and version, for logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// `CONTEXT_UPDATE`: the complete list of tools the client has now, and the app state the agent
/// may read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextUpdate {
    /// Frame id.
    pub id: String,
    /// Monotonically increasing per client; an older revision than the last one applied is ignored.
    pub revision: u64,
    /// Every active tool (a full list, not a diff).
    pub tools: Vec<ToolSpec>,
    /// The page the tools belong to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<PageInfo>,
    /// Every piece of app state the components share with the agent now (a full list, not a
    /// diff; since protocol 3). The model reads it as data, never as instructions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<ContextEntry>,
}

/// A piece of app state a component shares with the agent while it is mounted
/// (`useAgentContext`, `use_agent_context`): the model reads `description` and `value` as
/// labelled data before the user's message. At most [`MAX_CONTEXT_ENTRIES`] per client, whose
/// descriptions and values are at most [`MAX_CONTEXT_BYTES`] of JSON together.
///
/// [`MAX_CONTEXT_ENTRIES`]: crate::MAX_CONTEXT_ENTRIES
/// [`MAX_CONTEXT_BYTES`]: crate::MAX_CONTEXT_BYTES
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextEntry {
    /// Unique per client, like a tool name (1 to 64 of `A-Z a-z 0-9 _ -`): an entry of the same
    /// key replaces the older one.
    pub key: String,
    /// What the value is, for the model (e.g. "The shopping cart").
    pub description: String,
    /// The state: any JSON value; a string is read as it is.
    pub value: Value,
}

/// `USER_MESSAGE`: the user asks the agent something; starts a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// Frame id.
    pub id: String,
    /// What the user wrote.
    pub text: String,
}

/// `STOP_RUN`: the user stops the run in progress (the chat's Stop button). The run ends as
/// `aborted`, its calls still waiting get `TOOL_CANCEL` (their handlers are told to stop), and
/// what was done so far stays in the conversation. Nothing happens when no run is in progress
/// (or `runId` names another). Since protocol 3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StopRun {
    /// Frame id.
    pub id: String,
    /// The run to stop; absent: whichever is in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
}

/// `TOOL_RESULT`: how a [`ToolCall`] ended. Sent until acknowledged by [`ToolResultAck`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// Frame id.
    pub id: String,
    /// The call this answers.
    pub call_id: CallId,
    /// How the call ended.
    pub status: ResultStatus,
    /// The handler's output (`ok`) or a message the model can read (every other status).
    pub content: Value,
}

/// `TOOL_PROGRESS`: optional progress of a long-running tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolProgress {
    /// Frame id.
    pub id: String,
    /// The call in progress.
    pub call_id: CallId,
    /// A short human-readable progress message.
    pub message: String,
}

/// `WELCOME`: the server's answer to [`Hello`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Welcome {
    /// Frame id.
    pub id: String,
    /// The server's protocol version.
    pub protocol_version: u32,
    /// The session's id.
    pub session_id: String,
    /// Secret the client must present to resume this session after a reconnect.
    pub resume_token: String,
    /// Whether an earlier session was resumed (unacknowledged results may be resent).
    pub resumed: bool,
    /// The most tools the session may have active at once.
    pub max_active_tools: u32,
    /// The largest frame the server accepts, in bytes.
    pub max_frame_bytes: u64,
    /// Optional features the server supports, e.g. `tool_result_ack`.
    pub capabilities: Vec<String>,
}

/// `TOOL_CALL`: the agent wants the client to run a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Frame id.
    pub id: String,
    /// Unique id of this call; the result must carry it.
    pub call_id: CallId,
    /// The run that asked for it.
    pub run_id: RunId,
    /// The tool's name.
    pub name: String,
    /// The arguments the model chose (already validated by the server against the declared schema).
    pub args: Value,
    /// The server's risk floor for this tool; the client applies the stricter of this and its own.
    #[serde(default)]
    pub risk: Risk,
}

/// `TOOL_CANCEL`: the server no longer wants the result of a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCancel {
    /// Frame id.
    pub id: String,
    /// The call to abort.
    pub call_id: CallId,
    /// Why it is cancelled.
    pub reason: String,
}

/// `TOOL_RESULT_ACK`: the server has applied a [`ToolResult`]; the client may forget it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultAck {
    /// Frame id.
    pub id: String,
    /// The call whose result was applied (or had been applied before: duplicates are acknowledged too).
    pub call_id: CallId,
}

/// `AGENT_MESSAGE`: streamed text of the agent's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentMessage {
    /// Frame id.
    pub id: String,
    /// The run this text belongs to.
    pub run_id: RunId,
    /// Text to append to the message being shown.
    pub delta: String,
    /// Whether this is the last frame of the run's answer.
    pub done: bool,
    /// How the run ended; present when `done` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
    /// The text shown for this run so far is replaced by `delta` (a run that goes on after a
    /// server restart repeats its last model turn). Since protocol 3.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
}

/// `HISTORY`: the conversation so far, for a client that lost what it showed (it resumed with
/// `history: true`, after a reload). Sent right after the [`Welcome`]; the frames the replay
/// sends after it are newer. Since protocol 3.
/// `L` is what the lines are read as: [`HistoryLine`], or JSON values as sent (the browser
/// runtime forwards them to the page).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct History<L = HistoryLine> {
    /// Frame id.
    pub id: String,
    /// The lines, oldest first: each user message and each run's answer as the user saw it.
    pub lines: Vec<L>,
}

/// One line of a [`History`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryLine {
    /// Who wrote it.
    pub role: HistoryRole,
    /// What was shown.
    pub text: String,
    /// The run an agent line belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// How that run ended; absent while it is in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
}

/// Who wrote a [`HistoryLine`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HistoryRole {
    /// The user.
    User,
    /// The agent.
    Agent,
}

impl HistoryRole {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            HistoryRole::User => "user",
            HistoryRole::Agent => "agent",
        }
    }

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<HistoryRole> {
        [HistoryRole::User, HistoryRole::Agent].into_iter().find(|role| role.as_str() == name)
    }
}

/// `EVENT`: something happened in a run. Observe-only, for dev tools and audit.
///
/// `E` is what the event is read as: a typed [`RunEvent`] (the default), or the JSON value
/// as sent (`serde_json::Value`) for a receiver that only forwards events, as the browser
/// runtime does (see [`EventPayload`](crate::EventPayload)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    rename = "EventFrame",
    description = "`EVENT`: something happened in a run. Observe-only, for dev tools and audit."
)]
pub struct EventFrame<E = RunEvent> {
    /// Frame id.
    pub id: String,
    /// The run it belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// What happened.
    pub event: E,
}

/// `ERROR`: something the peer sent was refused, or something failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorFrame {
    /// Frame id.
    pub id: String,
    /// What kind of error.
    pub code: ErrorCode,
    /// A human-readable explanation.
    pub message: String,
    /// The id of the frame that caused it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
}

/// Who decided a hook's outcome, in a [`HookAudit`] record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HookDecidedBy {
    /// The hook itself answered.
    Hook,
    /// The hook timed out and its `failMode` decided.
    Timeout,
    /// The hook failed (crash, bad output, missing script) and its `failMode` decided.
    FailMode,
}

impl HookDecidedBy {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            HookDecidedBy::Hook => "hook",
            HookDecidedBy::Timeout => "timeout",
            HookDecidedBy::FailMode => "fail_mode",
        }
    }

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<HookDecidedBy> {
        [HookDecidedBy::Hook, HookDecidedBy::Timeout, HookDecidedBy::FailMode].into_iter().find(|d| d.as_str() == name)
    }
}

/// One record per declarative hook call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookAudit {
    /// The hook's id (its position and name in the configuration).
    pub hook_id: String,
    /// `agent` or `custom_agent`.
    pub level: String,
    /// `Stop`, `PostToolUse` or `PreToolUse`.
    pub hook_event: String,
    /// `allow` or `block`.
    pub decision: String,
    /// The reason given, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How long the hook took, in milliseconds.
    pub duration_ms: f64,
    /// The process exit code of a command hook, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Whether the hook, a timeout or the fail mode decided.
    pub decided_by: HookDecidedBy,
}

/// `run_start`: a run started for a user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunStartEvent {
    /// The user's message.
    pub text: String,
}

/// `turn_start`: a turn (one model call and the tools it asked for) started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartEvent {
    /// 1-based turn number.
    pub turn: u32,
}

/// `tool_execution_start`: a tool is about to run (after `before_tool_execution` allowed it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolStartEvent {
    /// The call id.
    pub call_id: CallId,
    /// The tool's name.
    pub tool: String,
    /// The arguments.
    pub args: Value,
}

/// `tool_execution_end`: a tool finished; `output` is what the model reads (after
/// `after_tool_execution`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolEndEvent {
    /// The call id.
    pub call_id: CallId,
    /// The tool's name.
    pub tool: String,
    /// How it ended.
    pub status: ResultStatus,
    /// What the model reads.
    pub output: String,
}

/// `turn_end`: a turn ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnEndEvent {
    /// 1-based turn number.
    pub turn: u32,
    /// The model's text in this turn (may be empty when it only called tools).
    pub reply: String,
}

/// `run_end`: the run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunEndEvent {
    /// How it ended.
    pub status: RunStatus,
    /// How many turns it took.
    pub turns: u32,
    /// The error, when `status` is `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `tool_collision`: a client tool has the same name as a server-side tool; the server-side
/// tool wins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCollisionEvent {
    /// The tool's name.
    pub tool: String,
}

/// `tool_progress`: progress reported by a running client tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolProgressEvent {
    /// The call id.
    pub call_id: CallId,
    /// The progress message.
    pub message: String,
}

/// `tool_call_delta`: the arguments of a tool call the model is still writing, parsed from the
/// incomplete JSON so far (strings may be cut short, later properties missing). Observe-only:
/// the call runs only from its complete, validated `TOOL_CALL`, which carries the same
/// `callId` (if the call is made at all: a refused call gets a `tool_execution_end` instead).
/// Since protocol 4.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallDeltaEvent {
    /// The id the call will have.
    pub call_id: CallId,
    /// The tool's name.
    pub tool: String,
    /// The arguments as far as they are written: always a JSON object.
    pub partial_args: Value,
}

/// `navigate`: the agent asks the page to open `url`, a page of this session that offered the
/// tool `tool` with arguments the page the user is on does not accept (a call of a tool on
/// another page, docs/models.md). The toolkits open it as the app's router would
/// (`history.pushState` and a `popstate` event, or the app's own `navigate`); the server waits
/// for that page's `CONTEXT_UPDATE`, then sends the call as a `TOOL_CALL` with the same
/// `callId`. Since protocol 5.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NavigateEvent {
    /// The call that waits for the page.
    pub call_id: CallId,
    /// The tool the page offers.
    pub tool: String,
    /// The page to open, as the page reported it (`PageInfo.url`: a path with its query).
    pub url: String,
}

/// What an [`EventFrame`] reports; the `kind` field names the variant.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunEvent {
    /// `run_start`
    RunStart(RunStartEvent),
    /// `turn_start`
    TurnStart(TurnStartEvent),
    /// `tool_execution_start`
    ToolExecutionStart(ToolStartEvent),
    /// `tool_execution_end`
    ToolExecutionEnd(ToolEndEvent),
    /// `turn_end`
    TurnEnd(TurnEndEvent),
    /// `run_end`
    RunEnd(RunEndEvent),
    /// `tool_collision`
    ToolCollision(ToolCollisionEvent),
    /// `tool_progress`
    ToolProgress(ToolProgressEvent),
    /// `tool_call_delta`
    ToolCallDelta(ToolCallDeltaEvent),
    /// `navigate`
    Navigate(NavigateEvent),
    /// `hook`: a declarative hook ran.
    Hook(HookAudit),
}

/// Implements `Deserialize` for an internally tagged enum of newtype variants: the object is
/// read once into a `Value`, then the tag picks the variant's struct, read from that value.
/// serde's derived version buffers the object in its own generic content type, which costs a
/// lot of code for every deserializer it is used with.
macro_rules! tagged_deserialize {
    ($name:ident, $tag:literal, { $($wire:literal => $variant:ident($ty:ty)),* $(,)? }) => {
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = serde_json::Value::deserialize(deserializer)?;
                $name::from_json_value(&value).map_err(serde::de::Error::custom)
            }
        }

        impl $name {
            /// Reads the value from a JSON value, dispatching on the tag.
            fn from_json_value(value: &serde_json::Value) -> Result<Self, serde_json::Error> {
                let tag = value.get($tag).and_then(serde_json::Value::as_str);
                match tag {
                    $(Some($wire) => <$ty>::deserialize(value).map($name::$variant),)*
                    Some(other) => Err(serde::de::Error::custom(format_args!("unknown {} {}", $tag, crate::Quoted(other)))),
                    None => Err(serde::de::Error::custom(format_args!("missing field `{}`", $tag))),
                }
            }
        }
    };
}

/// A frame sent by the browser runtime to the server.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ClientFrame {
    /// `HELLO`
    Hello(Hello),
    /// `CONTEXT_UPDATE`
    ContextUpdate(ContextUpdate),
    /// `USER_MESSAGE`
    UserMessage(UserMessage),
    /// `TOOL_RESULT`
    ToolResult(ToolResult),
    /// `TOOL_PROGRESS`
    ToolProgress(ToolProgress),
    /// `STOP_RUN`
    StopRun(StopRun),
}

/// A frame sent by the server to the browser runtime, with `EVENT` frames carrying typed
/// [`RunEvent`]s. [`ServerFrameOf`] names the same frames with events read otherwise.
pub type ServerFrame = ServerFrameOf<RunEvent>;

/// A frame sent by the server to the browser runtime; `E` is what `EVENT` frames carry (see
/// [`EventFrame`]) and `L` what the lines of `HISTORY` frames are read as. Usually named through
/// [`ServerFrame`].
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
#[schemars(rename = "ServerFrame", description = "A frame sent by the server to the browser runtime.")]
pub enum ServerFrameOf<E, L = HistoryLine> {
    /// `WELCOME`
    Welcome(Welcome),
    /// `TOOL_CALL`
    ToolCall(ToolCall),
    /// `TOOL_CANCEL`
    ToolCancel(ToolCancel),
    /// `TOOL_RESULT_ACK`
    ToolResultAck(ToolResultAck),
    /// `AGENT_MESSAGE`
    AgentMessage(AgentMessage),
    /// `EVENT`
    Event(EventFrame<E>),
    /// `ERROR`
    Error(ErrorFrame),
    /// `HISTORY`
    History(History<L>),
}

impl ClientFrame {
    /// Every `type` tag a client frame can have.
    pub const TYPES: [&'static str; 6] =
        ["HELLO", "CONTEXT_UPDATE", "USER_MESSAGE", "TOOL_RESULT", "TOOL_PROGRESS", "STOP_RUN"];

    /// The frame's `type` tag.
    pub fn type_name(&self) -> &'static str {
        match self {
            ClientFrame::Hello(_) => "HELLO",
            ClientFrame::ContextUpdate(_) => "CONTEXT_UPDATE",
            ClientFrame::UserMessage(_) => "USER_MESSAGE",
            ClientFrame::ToolResult(_) => "TOOL_RESULT",
            ClientFrame::ToolProgress(_) => "TOOL_PROGRESS",
            ClientFrame::StopRun(_) => "STOP_RUN",
        }
    }

    /// The frame's id.
    pub fn id(&self) -> &str {
        match self {
            ClientFrame::Hello(f) => &f.id,
            ClientFrame::ContextUpdate(f) => &f.id,
            ClientFrame::UserMessage(f) => &f.id,
            ClientFrame::ToolResult(f) => &f.id,
            ClientFrame::ToolProgress(f) => &f.id,
            ClientFrame::StopRun(f) => &f.id,
        }
    }
}

impl ServerFrame {
    /// Every `type` tag a server frame can have.
    pub const TYPES: [&'static str; 8] =
        ["WELCOME", "TOOL_CALL", "TOOL_CANCEL", "TOOL_RESULT_ACK", "AGENT_MESSAGE", "EVENT", "ERROR", "HISTORY"];
}

impl<E, L> ServerFrameOf<E, L> {
    /// Sets the frame's id (the server numbers a session's frames as it sends them).
    pub fn set_id(&mut self, id: String) {
        match self {
            ServerFrameOf::Welcome(f) => f.id = id,
            ServerFrameOf::ToolCall(f) => f.id = id,
            ServerFrameOf::ToolCancel(f) => f.id = id,
            ServerFrameOf::ToolResultAck(f) => f.id = id,
            ServerFrameOf::AgentMessage(f) => f.id = id,
            ServerFrameOf::Event(f) => f.id = id,
            ServerFrameOf::Error(f) => f.id = id,
            ServerFrameOf::History(f) => f.id = id,
        }
    }

    /// The sequence number in a session frame's id (`s<n>`), if it has one.
    pub fn seq(&self) -> Option<u64> {
        self.id().strip_prefix('s')?.parse().ok()
    }

    /// The frame's `type` tag.
    pub fn type_name(&self) -> &'static str {
        match self {
            ServerFrameOf::Welcome(_) => "WELCOME",
            ServerFrameOf::ToolCall(_) => "TOOL_CALL",
            ServerFrameOf::ToolCancel(_) => "TOOL_CANCEL",
            ServerFrameOf::ToolResultAck(_) => "TOOL_RESULT_ACK",
            ServerFrameOf::AgentMessage(_) => "AGENT_MESSAGE",
            ServerFrameOf::Event(_) => "EVENT",
            ServerFrameOf::Error(_) => "ERROR",
            ServerFrameOf::History(_) => "HISTORY",
        }
    }

    /// The frame's id.
    pub fn id(&self) -> &str {
        match self {
            ServerFrameOf::Welcome(f) => &f.id,
            ServerFrameOf::ToolCall(f) => &f.id,
            ServerFrameOf::ToolCancel(f) => &f.id,
            ServerFrameOf::ToolResultAck(f) => &f.id,
            ServerFrameOf::AgentMessage(f) => &f.id,
            ServerFrameOf::Event(f) => &f.id,
            ServerFrameOf::Error(f) => &f.id,
            ServerFrameOf::History(f) => &f.id,
        }
    }
}

tagged_deserialize!(ClientFrame, "type", {
    "HELLO" => Hello(Hello),
    "CONTEXT_UPDATE" => ContextUpdate(ContextUpdate),
    "USER_MESSAGE" => UserMessage(UserMessage),
    "TOOL_RESULT" => ToolResult(ToolResult),
    "TOOL_PROGRESS" => ToolProgress(ToolProgress),
    "STOP_RUN" => StopRun(StopRun),
});
