//! The Tether agent loop, as a library: model turns, tool calls and the hooks around them.
//!
//! Give an [`AgentLoop`] a [`ChatModel`], optional [`Hooks`], and a [`ToolHost`] that runs tools,
//! and it runs a conversation. It knows nothing of sockets or sessions: `tether-server` runs it
//! for browser sessions, `examples/travel-agent` with tools of its own.
//!
//! Models: the OpenAI-compatible [`OpenAiProvider`] (feature `openai`, on by default), or any
//! [`ChatModel`]. The deterministic built-in model of `tether serve --model scripted`, the tests
//! and the examples is a crate of its own, `tether-scripted`.

mod agent_loop;
mod arithmetic;
mod claims;
mod error;
mod grounding;
pub mod hooks;
mod loop_guard;
mod made_up;
pub mod model;
mod questions;
mod respell;
mod window;

pub use agent_loop::{
    AgentLoop, BETTER_FIT_CEILING, BETTER_FIT_RATIO, CONTEXT_CHANGED_LABEL, CONTEXT_LABEL, CallRef, DATA_RULE,
    DEFAULT_FIT_THRESHOLD, DEFAULT_INSTRUCTIONS, DEFAULT_MAX_TURNS, DEFAULT_RUN_TIMEOUT, DEFAULT_SYSTEM_PROMPT,
    MAX_TOOL_RESULT_BYTES, NONE_MOST_ACTIONS, NONE_RATIO, RIVAL_RATIO, RunCheckpoint, RunOutcome, RunSink, SAYS_DONE,
    ToolHost, context_changes, context_message,
};
pub use error::AgentError;
pub use hooks::{
    EarlierCall, EventEmitter, HOOK_LABEL, HookError, HookResult, Hooks, ProviderCall, RunBegin, RunBeginDecision,
    RunInfo, StopCheck, StopDecision, ToolDecision, ToolOutput, ToolUse, TurnEnd, TurnStart,
};
pub use loop_guard::{DEFAULT_MAX_CALLS_PER_TOOL, LoopGuard};
pub use model::{
    BoxFuture, ChatMessage, ChatModel, ChatRequest, DeltaSink, ModelReply, ModelToolCall, NoteKind, ReadReply,
    RefusedTool, StepRule, Streams, ToolCallDelta, ToolDeltaSink, ToolMode, json_values, partial_object, partial_value,
    read_reply,
};
/// The `tracing` target of the spans Tether opens for its traces and metrics (`invoke_agent`,
/// `chat`, `execute_tool`, `tether.hook`, …; docs/observability.md): what an OpenTelemetry
/// exporter and `tether-server`'s metrics layer listen to, and what log output leaves out.
pub const SPAN_TARGET: &str = "tether::span";

/// The W3C trace context (`traceparent`, `tracestate`) of the current span, by the global
/// OpenTelemetry propagator: empty until one is set, as `tether serve` does when it exports
/// traces. The model provider sends it as headers; `tether-server` sends it to MCP servers.
#[cfg(feature = "otel")]
pub fn trace_context() -> std::collections::HashMap<String, String> {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let context = tracing::Span::current().context();
    let mut fields = std::collections::HashMap::new();
    opentelemetry::global::get_text_map_propagator(|propagator| propagator.inject_context(&context, &mut fields));
    fields
}

pub use grounding::{Grounding, grounded_values, unknown_names, unknown_times};
pub use made_up::{looks_like_identifier, made_up_value, mislabelled_number, unasked_amount, unshown_number};
#[cfg(feature = "openai")]
pub use model::{MAX_RETRY_AFTER, OpenAiConfig, OpenAiProvider};
pub use questions::{
    BetterFit, Fit, MOST_VALUES, MessageKind, QuestionCheck, Rival, VALUE_SURE, VALUE_TIE, ValueVerdict, judge_values,
    names_tool, names_value,
};
pub use respell::{Respelled, respell};
