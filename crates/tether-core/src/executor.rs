//! The executor: a tool call's life as a state machine, with no runtime, clock or IO.
//!
//! For every call the order is fixed: look the tool up → validate the arguments → apply schema
//! defaults → risk policy (ask for approval when needed) → the resolver's before-hook → the
//! handler → the resolver's after- or error-hook → the result. The edge (browser runtime or
//! server) feeds in what happened ([`Executor::approval_decided`], [`Executor::handler_done`],
//! …) and does what each returned [`Step`] says. Time comes from the edge as milliseconds, so
//! timeouts are deterministic in tests: [`Executor::next_deadline`] says when to call
//! [`Executor::poll_timeouts`].

use serde_json::Value;
use tether_protocol::{CallId, ResultStatus, Risk};

use crate::policy::{PolicyDecision, decide, effective_risk};
use crate::recent::RecentIds;
use crate::registry::ToolRegistry;
use crate::small_map::SmallMap;
use crate::validate::{CompiledSchema, Validator, apply_defaults, format_validation_errors};

/// Default time a handler may run.
pub const DEFAULT_HANDLER_TIMEOUT_MS: u64 = 10_000;
/// Default time the user has to answer an approval request.
pub const DEFAULT_APPROVAL_TIMEOUT_MS: u64 = 300_000;
/// How many finished call ids are remembered to refuse a repeated call.
const FINISHED_IDS_KEPT: usize = 1024;

/// A request to run a tool, as the server sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRequest {
    /// Unique id of the call.
    pub call_id: CallId,
    /// The tool's name.
    pub tool: String,
    /// The arguments the model chose.
    pub args: Value,
    /// The server's risk floor for this call.
    pub server_risk: Risk,
}

/// What the approval UI must show.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The call waiting for the user.
    pub call_id: CallId,
    /// The tool's name.
    pub tool: String,
    /// The tool's description.
    pub description: String,
    /// The effective risk (`high` or `critical`).
    pub risk: Risk,
    /// The validated arguments, defaults applied: exactly what the handler will get.
    pub args: Value,
}

/// The user's answer to an [`ApprovalRequest`]. Only [`ApprovalDecision::Approved`] runs the tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalDecision {
    /// The user said yes.
    Approved,
    /// The user said no, optionally with a reason for the model.
    Rejected {
        /// Why, in the user's words.
        reason: Option<String>,
    },
    /// The dialog was closed without an answer.
    Dismissed,
}

/// What a resolver's before-hook decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookOutcome {
    /// Go on and run the handler.
    Continue,
    /// Do not run the handler; the model reads the reason.
    Refuse(String),
}

/// How a call ended: becomes a `TOOL_RESULT`.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The call.
    pub call_id: CallId,
    /// The tool's name.
    pub tool: String,
    /// How it ended.
    pub status: ResultStatus,
    /// The handler's output, or a message for the model.
    pub content: Value,
}

/// What the edge must do next for a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Ask the user; answer with [`Executor::approval_decided`].
    AskApproval(ApprovalRequest),
    /// Run the resolver's before-hook; answer with [`Executor::before_hook_done`].
    BeforeHook {
        /// The call.
        call_id: CallId,
        /// The tool.
        tool: String,
        /// The resolver prefix.
        resolver: String,
        /// The arguments, defaults applied.
        args: Value,
    },
    /// Run the handler (notify the user first when `notify`); answer with
    /// [`Executor::handler_done`]. Abort it if the call later finishes as cancelled or timed out.
    Run {
        /// The call.
        call_id: CallId,
        /// The tool; look its handler up now, so it is the current one.
        tool: String,
        /// The arguments, validated and with defaults applied.
        args: Value,
        /// Whether the user must be notified (`low` risk).
        notify: bool,
        /// When the call times out, in the edge's milliseconds.
        deadline_ms: u64,
    },
    /// Run the resolver's after-hook; answer with [`Executor::after_hook_done`].
    AfterHook {
        /// The call.
        call_id: CallId,
        /// The tool.
        tool: String,
        /// The resolver prefix.
        resolver: String,
        /// The handler's output.
        output: Value,
    },
    /// Run the resolver's error-hook; answer with [`Executor::after_hook_done`].
    ErrorHook {
        /// The call.
        call_id: CallId,
        /// The tool.
        tool: String,
        /// The resolver prefix.
        resolver: String,
        /// The handler's error.
        error: String,
    },
    /// The call is over: send this result (and abort anything still running for it).
    Finish(Outcome),
}

/// Where a call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the user's answer.
    AwaitingApproval,
    /// The resolver's before-hook is running.
    BeforeHook,
    /// The handler is running.
    Running,
    /// The resolver's after- or error-hook is running.
    AfterHook,
}

#[derive(Debug)]
struct Call {
    tool: String,
    args: Value,
    notify: bool,
    timeout_ms: u64,
    resolver: Option<String>,
    phase: Phase,
    deadline_ms: u64,
    /// The result kept while the after- or error-hook runs.
    pending: Option<(ResultStatus, Value)>,
}

/// Executor settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutorConfig {
    /// Handler timeout for tools that do not set their own.
    pub default_timeout_ms: u64,
    /// How long an approval request waits before it counts as a refusal.
    pub approval_timeout_ms: u64,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            default_timeout_ms: DEFAULT_HANDLER_TIMEOUT_MS,
            approval_timeout_ms: DEFAULT_APPROVAL_TIMEOUT_MS,
        }
    }
}

/// The executor state machine. One per session.
#[derive(Debug)]
pub struct Executor {
    config: ExecutorConfig,
    calls: SmallMap<CallId, Call>,
    /// The ids of the last calls finished, to refuse a repeated `TOOL_CALL` (hashed, not scanned).
    finished: RecentIds,
}

impl Default for Executor {
    fn default() -> Self {
        Executor::new(ExecutorConfig::default())
    }
}

fn message(text: String) -> Value {
    Value::String(text)
}

impl Executor {
    /// An executor with the given settings.
    pub fn new(config: ExecutorConfig) -> Self {
        Executor { config, calls: SmallMap::default(), finished: RecentIds::new(FINISHED_IDS_KEPT) }
    }

    /// Starts a call. Returns `None` when a call with this id is in flight or already finished
    /// (a resent `TOOL_CALL` never runs twice).
    pub fn start<H, V: Validator>(
        &mut self,
        request: CallRequest,
        registry: &ToolRegistry<H, V>,
        now_ms: u64,
    ) -> Option<Step> {
        if self.calls.contains_key(&request.call_id) || self.finished.contains(&request.call_id) {
            return None;
        }
        let CallRequest { call_id, tool, mut args, server_risk } = request;
        let Some(registered) = registry.get(&tool) else {
            let available: Vec<&str> = registry.iter().map(|t| t.spec().name.as_str()).collect();
            let content = format!("Unknown tool \"{tool}\". Available tools: {}", available.join(", "));
            return Some(self.finish(call_id, tool, ResultStatus::UnknownTool, message(content)));
        };
        let errors = registered.schema().errors(&args);
        if !errors.is_empty() {
            let content = format_validation_errors(&tool, &errors);
            return Some(self.finish(call_id, tool, ResultStatus::InvalidArgs, message(content)));
        }
        apply_defaults(&registered.spec().parameters, &mut args);
        let risk = effective_risk(registered.spec().risk, server_risk);
        let timeout_ms = registered.def().timeout_ms.unwrap_or(self.config.default_timeout_ms);
        let mut call = Call {
            tool,
            args,
            notify: false,
            timeout_ms,
            resolver: registered.resolver().map(String::from),
            phase: Phase::Running,
            deadline_ms: 0,
            pending: None,
        };
        match decide(risk) {
            PolicyDecision::Refuse => {
                let content = format!("Tool \"{}\" is blocked by policy and never runs.", call.tool);
                Some(self.finish(call_id, call.tool, ResultStatus::Blocked, message(content)))
            }
            PolicyDecision::AskApproval => {
                call.phase = Phase::AwaitingApproval;
                call.deadline_ms = now_ms.saturating_add(self.config.approval_timeout_ms);
                let request = ApprovalRequest {
                    call_id: call_id.clone(),
                    tool: call.tool.clone(),
                    description: registered.spec().description.clone(),
                    risk,
                    args: call.args.clone(),
                };
                self.calls.insert(call_id, call);
                Some(Step::AskApproval(request))
            }
            decision => {
                call.notify = decision == PolicyDecision::RunAndNotify;
                self.calls.insert(call_id.clone(), call);
                Some(self.begin(&call_id, now_ms))
            }
        }
    }

    /// Moves an approved (or approval-free) call to its before-hook or its handler.
    fn begin(&mut self, call_id: &CallId, now_ms: u64) -> Step {
        let call = self.calls.get_mut(call_id).expect("begin is called for a known call");
        call.deadline_ms = now_ms.saturating_add(call.timeout_ms);
        match &call.resolver {
            Some(resolver) => {
                call.phase = Phase::BeforeHook;
                Step::BeforeHook {
                    call_id: call_id.clone(),
                    tool: call.tool.clone(),
                    resolver: resolver.clone(),
                    args: call.args.clone(),
                }
            }
            None => Self::run(call_id, call),
        }
    }

    fn run(call_id: &CallId, call: &mut Call) -> Step {
        call.phase = Phase::Running;
        Step::Run {
            call_id: call_id.clone(),
            tool: call.tool.clone(),
            args: call.args.clone(),
            notify: call.notify,
            deadline_ms: call.deadline_ms,
        }
    }

    fn in_phase(&mut self, call_id: &CallId, phase: Phase) -> Option<&mut Call> {
        self.calls.get_mut(call_id).filter(|call| call.phase == phase)
    }

    /// The user answered. Only `Approved` lets the call go on; anything else finishes it as
    /// `denied` with a reason the model can read. `None` if the call is not awaiting approval.
    pub fn approval_decided(&mut self, call_id: &CallId, decision: ApprovalDecision, now_ms: u64) -> Option<Step> {
        let call = self.in_phase(call_id, Phase::AwaitingApproval)?;
        let tool = call.tool.clone();
        let content = match decision {
            ApprovalDecision::Approved => return Some(self.begin(call_id, now_ms)),
            ApprovalDecision::Rejected { reason: Some(reason) } => {
                format!("The user rejected the call to \"{tool}\": {reason}")
            }
            ApprovalDecision::Rejected { reason: None } => format!("The user rejected the call to \"{tool}\"."),
            ApprovalDecision::Dismissed => {
                format!("The user dismissed the approval request for \"{tool}\"; the call was not run.")
            }
        };
        Some(self.finish(call_id.clone(), tool, ResultStatus::Denied, message(content)))
    }

    /// The resolver's before-hook finished. `None` if the call is not in that phase.
    pub fn before_hook_done(&mut self, call_id: &CallId, outcome: HookOutcome) -> Option<Step> {
        let call = self.in_phase(call_id, Phase::BeforeHook)?;
        match outcome {
            HookOutcome::Continue => Some(Self::run(call_id, call)),
            HookOutcome::Refuse(reason) => {
                let tool = call.tool.clone();
                Some(self.finish(call_id.clone(), tool, ResultStatus::Denied, message(reason)))
            }
        }
    }

    /// The handler finished. `None` if the call is no longer running (cancelled, timed out).
    pub fn handler_done(&mut self, call_id: &CallId, result: Result<Value, String>) -> Option<Step> {
        let call = self.in_phase(call_id, Phase::Running)?;
        let (status, content) = match &result {
            Ok(output) => (ResultStatus::Ok, output.clone()),
            Err(error) => (ResultStatus::Error, message(error.clone())),
        };
        let Some(resolver) = call.resolver.clone() else {
            let tool = call.tool.clone();
            return Some(self.finish(call_id.clone(), tool, status, content));
        };
        call.phase = Phase::AfterHook;
        call.pending = Some((status, content));
        let (call_id, tool) = (call_id.clone(), call.tool.clone());
        Some(match result {
            Ok(output) => Step::AfterHook { call_id, tool, resolver, output },
            Err(error) => Step::ErrorHook { call_id, tool, resolver, error },
        })
    }

    /// The resolver's after- or error-hook finished: the call's result is final.
    pub fn after_hook_done(&mut self, call_id: &CallId) -> Option<Step> {
        let call = self.in_phase(call_id, Phase::AfterHook)?;
        let (status, content) = call.pending.take().unwrap_or((ResultStatus::Ok, Value::Null));
        let tool = call.tool.clone();
        Some(self.finish(call_id.clone(), tool, status, content))
    }

    /// Cancels a call in any phase (`TOOL_CANCEL`, or its component went away). `None` if the
    /// call is not in flight.
    pub fn cancel(&mut self, call_id: &CallId, reason: &str) -> Option<Step> {
        let call = self.calls.get(call_id)?;
        let tool = call.tool.clone();
        let content = format!("The call to \"{tool}\" was cancelled: {reason}");
        Some(self.finish(call_id.clone(), tool, ResultStatus::Cancelled, message(content)))
    }

    /// Cancels every in-flight call of the given tools (they were unregistered).
    pub fn cancel_tools(&mut self, tools: &[String], reason: &str) -> Vec<Step> {
        let doomed: Vec<CallId> =
            self.calls.iter().filter(|(_, call)| tools.contains(&call.tool)).map(|(id, _)| id.clone()).collect();
        doomed.iter().filter_map(|call_id| self.cancel(call_id, reason)).collect()
    }

    /// Finishes every call whose deadline has passed: an unanswered approval is a refusal, a
    /// slow handler (or hook) a timeout.
    pub fn poll_timeouts(&mut self, now_ms: u64) -> Vec<Step> {
        let mut steps = Vec::new();
        // Earliest deadline first (few calls are in flight, so a scan per call is cheap).
        while let Some(call_id) = self
            .calls
            .iter()
            .filter(|(_, call)| call.deadline_ms <= now_ms)
            .min_by_key(|(_, call)| call.deadline_ms)
            .map(|(id, _)| id.clone())
        {
            steps.push({
                let call = self.calls.get(&call_id).expect("the call was just found");
                let tool = call.tool.clone();
                let (status, content) = if call.phase == Phase::AwaitingApproval {
                    let seconds = self.config.approval_timeout_ms / 1000;
                    (
                        ResultStatus::Denied,
                        format!("Nobody approved the call to \"{tool}\" within {seconds} s; it was not run."),
                    )
                } else {
                    (ResultStatus::Timeout, format!("Tool \"{tool}\" did not finish within {} ms.", call.timeout_ms))
                };
                self.finish(call_id, tool, status, message(content))
            });
        }
        steps
    }

    /// The earliest deadline of any call in flight.
    pub fn next_deadline(&self) -> Option<u64> {
        self.calls.iter().map(|(_, call)| call.deadline_ms).min()
    }

    /// The phase of a call in flight.
    pub fn phase(&self, call_id: &CallId) -> Option<Phase> {
        self.calls.get(call_id).map(|call| call.phase)
    }

    /// How many calls are in flight.
    pub fn in_flight(&self) -> usize {
        self.calls.len()
    }

    fn finish(&mut self, call_id: CallId, tool: String, status: ResultStatus, content: Value) -> Step {
        self.calls.remove(&call_id);
        self.finished.insert(call_id.clone());
        Step::Finish(Outcome { call_id, tool, status, content })
    }
}
