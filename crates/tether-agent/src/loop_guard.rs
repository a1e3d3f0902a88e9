//! The loop guard: the `before_tool_execution` hook that keeps a confused model from acting twice.
//!
//! It is an ordinary [`Hooks`] set that [`AgentLoop`](crate::AgentLoop) runs before every other
//! one ([`AgentLoop::with_loop_guard`](crate::AgentLoop::with_loop_guard)): it reads the calls of
//! the run that ran before ([`ToolUse::earlier`]) and denies a repeat and a call over the
//! per-tool limit. Ending a run whose model keeps repeating (`loop_detected`) and the claim check
//! stay the loop's, which counts the repeats it was asked for.

use crate::hooks::{Hooks, ToolDecision, ToolUse};

/// Default most calls to one tool per run ([`LoopGuard::max_calls_per_tool`]).
pub const DEFAULT_MAX_CALLS_PER_TOOL: u32 = 5;

/// What the loop does about calls it has seen before in the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopGuard {
    /// A call to the same tool with the same arguments (defaults filled in) as an earlier call
    /// of the run is not run again: the model reads the earlier result and that it was not
    /// repeated. Default on.
    pub refuse_repeats: bool,
    /// After this many refused repeats the run ends with status `loop_detected` (default 2).
    pub max_repeats: u32,
    /// Most calls to one tool per run; the calls over it are not run and the model reads why
    /// (default [`DEFAULT_MAX_CALLS_PER_TOOL`]; 0: no limit).
    pub max_calls_per_tool: u32,
    /// An answer that says something was done that no successful tool call of the run did
    /// ("Your order has been placed." without a call that places orders) is not delivered: the
    /// model is told so once and answers again; if it claims it again, the user reads that
    /// nothing was done instead. Sentences are streamed once checked. Default on.
    pub check_claims: bool,
}

impl Default for LoopGuard {
    fn default() -> Self {
        LoopGuard {
            refuse_repeats: true,
            max_repeats: 2,
            max_calls_per_tool: DEFAULT_MAX_CALLS_PER_TOOL,
            check_claims: true,
        }
    }
}

impl LoopGuard {
    /// No guard: every call runs (the loop's behaviour before the guard; `max_turns` still
    /// bounds a run).
    pub fn off() -> Self {
        LoopGuard { refuse_repeats: false, max_repeats: 0, max_calls_per_tool: 0, check_claims: false }
    }

    /// The guard as a hook set named `loop_guard`: denies a call identical to one that already
    /// ran in the run (`refuse_repeats`) and a call over the per-tool limit
    /// (`max_calls_per_tool`); allows everything else. A guard that refuses nothing
    /// ([`LoopGuard::off`]) is a set with no hook.
    pub fn hooks(self) -> Hooks {
        let guard = Hooks::new().named("loop_guard");
        if !self.refuse_repeats && self.max_calls_per_tool == 0 {
            return guard;
        }
        guard.on_before_tool_execution(move |call: ToolUse| {
            let decision = self.decide(&call);
            async move { Ok(decision) }
        })
    }

    /// What the guard decides of one call (what its hook answers).
    pub fn decide(&self, call: &ToolUse) -> ToolDecision {
        if let Some(earlier) = call.same_earlier_call().filter(|_| self.refuse_repeats) {
            return ToolDecision::Deny {
                reason: format!(
                    "Not run again: {} {REPEATED} Its result then: {} {DO_NOT_REPEAT}",
                    call.name, earlier.result
                ),
            };
        }
        let so_far = call.earlier_calls_of_tool();
        if self.max_calls_per_tool > 0 && so_far >= self.max_calls_per_tool as usize {
            return ToolDecision::Deny { reason: format!("Not run: {} was called {so_far} {OVER_LIMIT}", call.name) };
        }
        ToolDecision::Allow
    }
}

/// What the loop guard says of a repeated call (after the tool's name).
pub(crate) const REPEATED: &str = "was already called with these arguments in this request.";
/// What the loop guard says after the earlier result of a repeated call.
pub(crate) const DO_NOT_REPEAT: &str = "Do not repeat it: answer the user, or call something else.";
/// What the loop guard says of a call over the per-tool limit (after the count).
pub(crate) const OVER_LIMIT: &str = "times in this request, the most allowed. Answer the user.";
