//! In-process hooks: code the agent loop calls at fixed points and whose answer it obeys.
//!
//! Every hook is optional; an unset hook is a `None` the loop skips, so it costs nothing. A
//! hook that returns an error or panics ends the run with a clear error; the server and the
//! other sessions go on.

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;
use tether_protocol::{CallId, ResultStatus, RunEvent, RunId, ToolSpec};

use crate::model::{BoxFuture, ChatMessage};

/// Messages the loop adds to the conversation for hooks (their context, a Stop hook's feedback,
/// the tool-call parser's complaint) start with this label, so that models and hooks can tell
/// them from the user's own words.
pub const HOOK_LABEL: &str = "[hook ";

/// An error a hook returns: it ends the run, and the client reads the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookError(pub String);

impl<T: Into<String>> From<T> for HookError {
    fn from(message: T) -> Self {
        HookError(message.into())
    }
}

/// What a hook returns.
pub type HookResult<T> = Result<T, HookError>;

/// Lets a hook report events (e.g. declarative hooks' audit records). They are delivered to
/// the run's observers right after the hook returns, like every event: after the hook.
#[derive(Clone, Default)]
pub struct EventEmitter(Arc<std::sync::Mutex<Vec<RunEvent>>>);

impl EventEmitter {
    /// Reports an event.
    pub fn emit(&self, event: RunEvent) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(event);
    }

    /// Takes the events reported so far.
    pub(crate) fn take(&self) -> Vec<RunEvent> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

impl std::fmt::Debug for EventEmitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventEmitter")
    }
}

/// Where in the run a hook is called.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// The run's id.
    pub run_id: RunId,
    /// The agent's name (for declarative hooks' context).
    pub agent_name: String,
    /// The current turn, from 1.
    pub turn: u32,
    /// The most turns the run may take.
    pub max_turns: u32,
    /// Reports events from the hook.
    pub events: EventEmitter,
}

/// Input of `before_turn`.
#[derive(Debug, Clone)]
pub struct TurnStart {
    /// Where the run is.
    pub run: RunInfo,
    /// The conversation so far.
    pub messages: Arc<[ChatMessage]>,
}

/// Input and output of `before_provider_call`: change the messages or the tools for this turn.
#[derive(Debug, Clone)]
pub struct ProviderCall {
    /// Where the run is.
    pub run: RunInfo,
    /// What the model will read, system prompt first.
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call this turn (remove one to hide it).
    pub tools: Vec<ToolSpec>,
}

/// A tool call the model asked for (input of the tool hooks).
#[derive(Debug, Clone)]
pub struct ToolUse {
    /// Where the run is.
    pub run: RunInfo,
    /// The call's id.
    pub call_id: CallId,
    /// The tool's name.
    pub name: String,
    /// The arguments.
    pub args: Value,
    /// The tool as the model was offered it this turn (`None`: the model named a tool it was
    /// not offered).
    pub tool: Option<ToolSpec>,
    /// The calls of this run that ran before this one, oldest first.
    pub earlier: Arc<[EarlierCall]>,
}

impl ToolUse {
    /// The latest earlier call of this run with the same tool and the same arguments, the
    /// tool's top-level defaults filled in on both sides and key order ignored.
    pub fn same_earlier_call(&self) -> Option<&EarlierCall> {
        same_call(&self.earlier, self.tool.as_ref(), &self.name, &self.args)
    }

    /// How many calls of this tool ran earlier in the run.
    pub fn earlier_calls_of_tool(&self) -> usize {
        self.earlier.iter().filter(|earlier| earlier.name == self.name).count()
    }
}

/// A call of the run that ran (a call that a check or a hook refused did not), as the tool
/// hooks see it in [`ToolUse::earlier`] and a run's checkpoint keeps it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EarlierCall {
    /// The tool's name.
    pub name: String,
    /// The arguments the model gave.
    pub args: Value,
    /// Its result as the model read it.
    pub result: String,
}

/// The latest of `earlier` that called `name` with `args` ([`ToolUse::same_earlier_call`]).
pub(crate) fn same_call<'a>(
    earlier: &'a [EarlierCall],
    tool: Option<&ToolSpec>,
    name: &str,
    args: &Value,
) -> Option<&'a EarlierCall> {
    let args = with_defaults(tool, args);
    earlier.iter().rev().find(|call| call.name == name && with_defaults(tool, &call.args) == args)
}

/// `args` with the top-level defaults of `tool`'s schema filled in where they are missing.
pub(crate) fn with_defaults(tool: Option<&ToolSpec>, args: &Value) -> Value {
    let mut args = args.clone();
    let properties = tool.and_then(|tool| tool.parameters.get("properties")).and_then(Value::as_object);
    if let (Some(properties), Value::Object(object)) = (properties, &mut args) {
        for (name, property) in properties {
            if let Some(default) = property.get("default") {
                object.entry(name.clone()).or_insert_with(|| default.clone());
            }
        }
    }
    args
}

/// What `before_tool_execution` decides.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolDecision {
    /// Run the tool.
    Allow,
    /// Do not run it; the model reads the reason as an error result.
    Deny {
        /// What the model reads.
        reason: String,
    },
    /// Do not run it; the model reads this result as if the tool had returned it.
    Mock {
        /// The result.
        result: Value,
    },
    /// Run it, changed: with other arguments, and/or only once the user approves it.
    Change {
        /// Arguments to run it with instead of the model's. They are checked against the tool's
        /// schema again before anything else (invalid ones: the tool does not run), and the
        /// model reads that they were changed.
        args: Option<Value>,
        /// Ask the user first, whatever the tool's own risk (the page's approval dialog shows
        /// this reason); the tool runs only on an explicit yes.
        ask: Option<String>,
    },
}

/// Input of `before_run`: a user message, before the model or any other hook sees it.
#[derive(Debug, Clone)]
pub struct RunBegin {
    /// The run (turn 0: no turn has started).
    pub run: RunInfo,
    /// The user's message.
    pub text: String,
    /// Whether this run starts the conversation (nothing before it in the history).
    pub first: bool,
}

/// What `before_run` decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunBeginDecision {
    /// Go on; each text is added to the conversation after the user's message, as it is (label
    /// it as hook output, e.g. with [`HOOK_LABEL`]).
    Continue {
        /// Context for the model.
        context: Vec<String>,
    },
    /// Do not run: the message is not sent to the model nor kept in the conversation; the user
    /// reads the reason, and the run ends as `refused`.
    Refuse {
        /// Why.
        reason: String,
    },
}

/// A tool's result as the model will read it (input and output of `after_tool_execution`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    /// How the call ended.
    pub status: ResultStatus,
    /// The result's text.
    pub content: String,
    /// Extra context to add to the conversation after the tool results, each as its own
    /// labelled message (declarative `PostToolUse` hooks' `additionalContext`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_context: Vec<String>,
}

impl ToolOutput {
    /// A result with no extra context.
    pub fn new(status: ResultStatus, content: impl Into<String>) -> Self {
        ToolOutput { status, content: content.into(), extra_context: Vec::new() }
    }

    /// What the model reads: the content, prefixed with `[status]` when the call did not succeed.
    pub fn for_model(&self) -> String {
        if self.status.is_ok() { self.content.clone() } else { format!("[{}] {}", self.status.as_str(), self.content) }
    }
}

/// The status of a result as the model reads it ([`ToolOutput::for_model`]): the one its
/// `[status]` prefix names, else `Ok` (a result that is a JSON array starts with `[` too).
/// Only for a tool result stored before `ChatMessage::Tool` had its `status` field (read once,
/// with the checkpoint); everything else reads that field.
pub(crate) fn status_for_model(text: &str) -> ResultStatus {
    text.strip_prefix('[')
        .and_then(|rest| rest.split_once(']'))
        .and_then(|(name, _)| ResultStatus::parse(name))
        .filter(|status| !status.is_ok())
        .unwrap_or(ResultStatus::Ok)
}

/// Input of `after_turn`.
#[derive(Debug, Clone)]
pub struct TurnEnd {
    /// Where the run is.
    pub run: RunInfo,
    /// The model's text this turn.
    pub reply: String,
    /// How many tools it called this turn.
    pub tool_calls: usize,
}

/// Input of the stop gate (declarative `Stop` hooks): the answer about to leave.
#[derive(Debug, Clone)]
pub struct StopCheck {
    /// Where the run is.
    pub run: RunInfo,
    /// The final answer.
    pub final_output: String,
    /// How many times the answer was rejected in this run.
    pub rejection_count: u32,
    /// The conversation so far.
    pub messages: Arc<[ChatMessage]>,
}

/// What the stop gate decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopDecision {
    /// Deliver the answer.
    Accept,
    /// Send the reason back to the model and go on with the run.
    Reject {
        /// What the model reads.
        reason: String,
        /// Which hook rejected (for the label).
        hook: String,
    },
    /// Too many rejections: deliver the answer and end the run as `capped`.
    Capped,
}

type Hook<I, O> = Arc<dyn Fn(I) -> BoxFuture<'static, HookResult<O>> + Send + Sync>;

/// A set of hooks. Build it with the `on_*` methods; the loop runs several sets in order.
#[derive(Clone, Default)]
pub struct Hooks {
    /// What traces call the set (`tether.hook.name` on its hooks' spans).
    pub(crate) name: Option<Arc<str>>,
    pub(crate) before_run: Option<Hook<RunBegin, RunBeginDecision>>,
    pub(crate) before_turn: Option<Hook<TurnStart, ()>>,
    pub(crate) before_provider_call: Option<Hook<ProviderCall, ProviderCall>>,
    pub(crate) before_tool_execution: Option<Hook<ToolUse, ToolDecision>>,
    pub(crate) after_tool_execution: Option<Hook<(ToolUse, ToolOutput), ToolOutput>>,
    pub(crate) after_turn: Option<Hook<TurnEnd, ()>>,
    pub(crate) stop: Option<Hook<StopCheck, StopDecision>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("name", &self.name)
            .field("before_run", &self.before_run.is_some())
            .field("before_turn", &self.before_turn.is_some())
            .field("before_provider_call", &self.before_provider_call.is_some())
            .field("before_tool_execution", &self.before_tool_execution.is_some())
            .field("after_tool_execution", &self.after_tool_execution.is_some())
            .field("after_turn", &self.after_turn.is_some())
            .field("stop", &self.stop.is_some())
            .finish()
    }
}

fn boxed<I, O, F, Fut>(hook: F) -> Hook<I, O>
where
    F: Fn(I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HookResult<O>> + Send + 'static,
{
    Arc::new(move |input| Box::pin(hook(input)))
}

impl Hooks {
    /// A set with no hooks.
    pub fn new() -> Self {
        Hooks::default()
    }

    /// Names the set: its hooks' spans carry the name as `tether.hook.name`, so a trace tells
    /// them from another set's (the loop guard's set is `loop_guard`).
    #[must_use]
    pub fn named(mut self, name: impl Into<Arc<str>>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Called once per run with the user's message, before anything else: go on (adding context
    /// for the model) or refuse the message.
    #[must_use]
    pub fn on_before_run<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(RunBegin) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<RunBeginDecision>> + Send + 'static,
    {
        self.before_run = Some(boxed(hook));
        self
    }

    /// Called before each turn with the conversation so far.
    #[must_use]
    pub fn on_before_turn<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(TurnStart) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<()>> + Send + 'static,
    {
        self.before_turn = Some(boxed(hook));
        self
    }

    /// Called before each model call; returns the messages and tools the model gets.
    #[must_use]
    pub fn on_before_provider_call<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(ProviderCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<ProviderCall>> + Send + 'static,
    {
        self.before_provider_call = Some(boxed(hook));
        self
    }

    /// Called before each tool call the model asks for: allow, deny with a reason, mock, or
    /// change (other arguments, the user's approval first).
    #[must_use]
    pub fn on_before_tool_execution<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(ToolUse) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<ToolDecision>> + Send + 'static,
    {
        self.before_tool_execution = Some(boxed(hook));
        self
    }

    /// Called after each tool call; returns what the model reads.
    #[must_use]
    pub fn on_after_tool_execution<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(ToolUse, ToolOutput) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<ToolOutput>> + Send + 'static,
    {
        self.after_tool_execution = Some(Arc::new(move |(call, output)| Box::pin(hook(call, output))));
        self
    }

    /// Called after each turn with the model's text.
    #[must_use]
    pub fn on_after_turn<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(TurnEnd) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<()>> + Send + 'static,
    {
        self.after_turn = Some(boxed(hook));
        self
    }

    /// Called with the final answer before it leaves: accept it, or reject it with a reason
    /// the model reads (the run goes on). Declarative `Stop` hooks use this.
    #[must_use]
    pub fn on_stop<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(StopCheck) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<StopDecision>> + Send + 'static,
    {
        self.stop = Some(boxed(hook));
        self
    }
}
