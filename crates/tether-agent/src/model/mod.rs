//! Models: the [`ChatModel`] seam, the conversation types, an OpenAI-compatible provider and the
//! deterministic built-in model.

#[cfg(feature = "openai")]
mod openai;
mod partial;
pub mod schema;
mod tool_text;

#[cfg(feature = "openai")]
pub use openai::{MAX_RETRY_AFTER, OpenAiConfig, OpenAiProvider};
pub use partial::{partial_object, partial_value};
pub use tool_text::{ReadReply, json_values, read_reply};
pub(crate) use tool_text::{answer_text, with_answer};

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use tether_protocol::{CallId, ResultStatus, ToolSpec};

use crate::AgentError;

/// What a prompted turn tells the model after the first tool result of a run that did nothing
/// else (the request comes before it).
pub(crate) const REMINDER: &str = "If part of it is not done yet and a tool does it, call that tool; otherwise answer.";

/// What a prompted turn tells the model after a tool result, before the calls the run made.
#[cfg_attr(not(feature = "openai"), allow(dead_code))]
pub(crate) const DONE_SO_FAR: &str = "Done so far:";

/// What a prompted turn asks after the calls the run made.
pub(crate) const NOT_DONE_YET: &str =
    "What the request asks that is not done yet: call the tool for it now. When everything is done, answer.";

/// What a prompted turn of a question's run ([`ChatRequest::question`]) asks after a tool result
/// the user or a policy did not refuse.
pub(crate) const QUESTION_REMINDER: &str =
    "Answer it from the results above. If they do not show what it asks, call the tool that shows it.";

/// What a prompted turn tells the model after a result the user or a policy refused.
pub(crate) const REMINDER_AFTER_REFUSAL: &str =
    "That call was refused: do not try it again or another way; tell the user.";

/// The label of a tool result where a prompt writes it as text: a prompted conversation's, and
/// the arithmetic check's data.
pub(crate) fn result_label(name: &str) -> String {
    format!("[result of {name}] ")
}

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a [`ChatMessage::Note`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoteKind {
    /// A hook's message, or one the loop itself writes (`HOOK_LABEL`).
    Hook,
    /// What the app shows, given with the user's message (`CONTEXT_LABEL`).
    AppState,
    /// What changed in the app since the run's start (`CONTEXT_CHANGED_LABEL`).
    AppStateChanged,
}

impl ChatMessage {
    /// The result of the call `call_id` of `name` that ended as `status`, `content` as the
    /// model reads it (its `[status]` first when the call did not succeed).
    pub fn tool(
        call_id: impl Into<CallId>,
        name: impl Into<String>,
        status: ResultStatus,
        content: impl Into<String>,
    ) -> ChatMessage {
        ChatMessage::Tool {
            call_id: call_id.into(),
            name: name.into(),
            status,
            call_again: false,
            content: content.into(),
        }
    }

    /// A note of `kind`.
    pub fn note(kind: NoteKind, content: impl Into<String>) -> ChatMessage {
        ChatMessage::Note { kind, content: content.into() }
    }

    /// Whether this is the user's own message (not a note the loop added).
    pub fn is_users_own(&self) -> bool {
        matches!(self, ChatMessage::User { .. })
    }
}

/// One message of the conversation with the model. Serialisable (run checkpoints keep it):
/// `{"role": "user", "content": …}`, tool calls and results as their fields.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "role", rename_all = "snake_case", from = "StoredMessage")]
pub enum ChatMessage {
    /// Instructions from the operator.
    System {
        /// The text.
        content: String,
    },
    /// The user's own words.
    User {
        /// The text.
        content: String,
    },
    /// Text the loop adds for the model, not the user's words: a hook's message (Stop
    /// feedback, added context, the loop guard's and the claim check's notes, the context
    /// window's note), or what the app shows. Sent to the model in the user's role with its
    /// label in the text, as the model reads it; what it is, is this field, never the text.
    Note {
        /// What it is.
        kind: NoteKind,
        /// The text, its label first.
        content: String,
    },
    /// The model's reply: text, tool calls, or both.
    Assistant {
        /// The text.
        content: String,
        /// The tools it asked for.
        #[serde(default, rename = "toolCalls", skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ModelToolCall>,
    },
    /// The result of a tool call, as the model reads it. Build it with [`ChatMessage::tool`].
    Tool {
        /// The call it answers.
        #[serde(rename = "callId")]
        call_id: CallId,
        /// The tool's name.
        name: String,
        /// How the call ended. The model reads it as the `[status]` that opens `content` when
        /// the call did not succeed ([`ToolOutput::for_model`](crate::ToolOutput::for_model));
        /// code reads it here, never from the text.
        status: ResultStatus,
        /// Whether one of the agent loop's own checks refused the call before it reached the app
        /// and its result asks for another call: the tool the message asks for, this one with
        /// the value the message names, or the calls over the limit of one reply. Unlike after
        /// the user's, a policy's or a hook's refusal, the model is then not told to give up.
        #[serde(default, rename = "callAgain", skip_serializing_if = "std::ops::Not::not")]
        call_again: bool,
        /// What the model reads.
        content: String,
    },
}

/// [`ChatMessage`] as a checkpoint stores it. A tool result stored before its status was a
/// field has none: it gets the one its text's `[status]` prefix names.
#[derive(serde::Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum StoredMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Note {
        kind: NoteKind,
        content: String,
    },
    Assistant {
        content: String,
        #[serde(default, rename = "toolCalls")]
        tool_calls: Vec<ModelToolCall>,
    },
    Tool {
        #[serde(rename = "callId")]
        call_id: CallId,
        name: String,
        status: Option<ResultStatus>,
        #[serde(default, rename = "callAgain")]
        call_again: bool,
        content: String,
    },
}

impl From<StoredMessage> for ChatMessage {
    fn from(stored: StoredMessage) -> ChatMessage {
        match stored {
            StoredMessage::System { content } => ChatMessage::System { content },
            StoredMessage::User { content } => ChatMessage::User { content },
            StoredMessage::Note { kind, content } => ChatMessage::Note { kind, content },
            StoredMessage::Assistant { content, tool_calls } => ChatMessage::Assistant { content, tool_calls },
            StoredMessage::Tool { call_id, name, status, call_again, content } => ChatMessage::Tool {
                status: status.unwrap_or_else(|| crate::hooks::status_for_model(&content)),
                call_id,
                name,
                call_again,
                content,
            },
        }
    }
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelToolCall {
    /// The call's id (generated when the model gave none).
    pub id: CallId,
    /// The tool's name.
    pub name: String,
    /// The arguments.
    pub arguments: Value,
}

/// What is sent to a model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The conversation so far, system prompt first.
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// The tools as a prompted turn lists them, when that is not `tools`: a run's later turns
    /// list the tools of its first turn, so that within a run the prompt only grows and a model
    /// server's prompt cache keeps it (the tools that came since are not listed; the result that
    /// brought them names them; the constrained schema and validation always use `tools`).
    /// `None`: `tools`.
    pub listed_tools: Option<Vec<ToolSpec>>,
    /// Whether the run answers a question (the user's message asks for information and changes
    /// nothing): a prompted turn after tool results asks the model to answer from them, not
    /// what is "not done yet" (measured with the 1.5B model: after a `cart_view` that answered
    /// "What's in my cart?", "What the request asks that is not done yet: call the tool for it
    /// now" had it call `cart_view` again).
    pub question: bool,
}

/// How the first step of a reply (call a tool, or answer) is chosen
/// ([`ChatModel::complete_step`]).
///
/// A constrained reply names its step first (`{"next": "cancel_event", …}` or
/// `{"next": "answer", …}`), and a model that writes the likeliest token may answer although its
/// tools together were likelier: measured with the 1.5B model on a calendar, "Cancel lunch with
/// Ana." had "answer" at 0.44 and the tools at 0.52 (`move` 0.29, `cancel` 0.22, `add` 0.01),
/// and the answer was "Lunch with Ana has been canceled.", with nothing cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StepRule {
    /// The step the model writes (the default).
    #[default]
    AsWritten,
    /// When the model starts to answer but the tools together were likelier at the step, the
    /// reply is asked again as [`StepRule::MustCall`]; nothing of the answer is passed on.
    CallIfLikelier,
    /// The reply calls a tool: the answer is not among the steps it may take.
    MustCall,
}

/// What a model answered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelReply {
    /// The reply's text for the user (without any tool call written into it).
    pub text: String,
    /// The tool calls, whether the model used `tool_calls` or wrote them into its text.
    pub tool_calls: Vec<ModelToolCall>,
    /// Set when the text looked like a tool call that could not be parsed; the agent loop tells
    /// the model what was wrong so it can try again.
    pub malformed_tool_call: Option<String>,
    /// The reply's text exactly as the model wrote it, calls included; the conversation keeps
    /// this. Empty when the model wrote nothing besides `tool_calls` (or for models that do not
    /// tell), in which case `text` is kept.
    pub raw: String,
    /// Tools of the request the provider refused (their schema); they were left out of it.
    pub refused_tools: Vec<RefusedTool>,
}

/// A tool the model provider refused, left out of the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedTool {
    /// The tool's name.
    pub name: String,
    /// What the provider said.
    pub reason: String,
}

/// How a provider offers tools to the model and reads its calls (`--tool-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolMode {
    /// The provider's own tool calling: `tools` in the request, calls read from `tool_calls`
    /// only (their arguments read leniently); the text is the answer. What a client that reads
    /// only `tool_calls` gets.
    Native,
    /// The tools listed in the prompt with how to call them; calls read from the reply's text
    /// (bare JSON, fences, `<tool_call>` tags, several calls), only for listed tools.
    Text,
    /// As `text`, and every reply constrained by a JSON Schema sent as the provider's structured
    /// output (`response_format`): one alternative per tool with its argument schema, one for
    /// the final answer `{"answer": …}`.
    Constrained,
    /// Ask the provider once which works: `constrained`, else `native`, else `text`.
    #[default]
    Auto,
}

impl ToolMode {
    /// Every mode.
    pub const ALL: [ToolMode; 4] = [ToolMode::Native, ToolMode::Text, ToolMode::Constrained, ToolMode::Auto];

    /// The mode's name, as `--tool-mode` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolMode::Native => "native",
            ToolMode::Text => "text",
            ToolMode::Constrained => "constrained",
            ToolMode::Auto => "auto",
        }
    }
}

impl std::fmt::Display for ToolMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ToolMode {
    type Err = AgentError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        ToolMode::ALL.into_iter().find(|mode| mode.as_str() == name).ok_or_else(|| {
            AgentError::Config(format!("unknown tool mode {name:?}: expected native, text, constrained or auto"))
        })
    }
}

/// Receives streamed text as it arrives.
pub type DeltaSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// A tool call the model is still writing, as far as it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallDelta<'a> {
    /// The call's place among the reply's calls (0 for the first).
    pub index: usize,
    /// The tool's name (complete: a delta comes only once the name is written).
    pub name: &'a str,
    /// The arguments read from the incomplete JSON so far ([`partial_object`]): always an object.
    pub partial_args: Value,
}

/// Receives the arguments of tool calls as they are written.
pub type ToolDeltaSink<'a> = &'a (dyn Fn(ToolCallDelta<'_>) + Send + Sync);

/// What a model passes on while it writes a reply: the text for the user, and the tool calls
/// as they are written (observe-only: a call is made only from the complete reply).
#[derive(Clone, Copy)]
pub struct Streams<'a> {
    /// Text meant for the user.
    pub text: DeltaSink<'a>,
    /// Tool calls being written.
    pub tool_call: ToolDeltaSink<'a>,
}

impl<'a> Streams<'a> {
    /// Only text; tool calls are not passed on while written.
    pub fn text(text: DeltaSink<'a>) -> Self {
        Streams { text, tool_call: &|_| {} }
    }
}

/// A chat model.
pub trait ChatModel: Send + Sync {
    /// The model's name, for logs and events.
    fn name(&self) -> &str;

    /// Answers one request. Text that is meant for the user is passed to `on_delta` as it is
    /// produced; text that turns out to be a tool call is not.
    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_delta: DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>>;

    /// Answers one request whose final answer must be one JSON object matching `answer_schema`
    /// (a prompt hook's judge: `{"ok": …, "reason": …}`). Providers that can constrain replies
    /// do; the default asks nothing more than [`complete`](Self::complete), and the caller reads
    /// the answer leniently.
    fn complete_json<'a>(
        &'a self,
        request: &'a ChatRequest,
        answer_schema: &'a Value,
        on_delta: DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>> {
        let _ = answer_schema;
        self.complete(request, on_delta)
    }

    /// How likely the model's first word in reply to `prompt` (a yes-or-no question, asked
    /// alone) is "yes" rather than "no", from the provider's token probabilities: a number
    /// from 0 to 1. `None` when the provider does not give token probabilities (the default,
    /// and a provider that answers without them), so that a check built on it is skipped.
    fn yes_probability<'a>(&'a self, prompt: &'a str) -> BoxFuture<'a, Result<Option<f64>, AgentError>> {
        let _ = prompt;
        Box::pin(async { Ok(None) })
    }

    /// How likely the model's first word in reply to `prompt` (a multiple-choice question,
    /// asked alone) is each of `labels` (`"A"`, `"B"`, …), from the provider's token
    /// probabilities: one number per label, summing to 1. `None` when the provider does not
    /// give token probabilities (the default), or gave none for any of the labels.
    fn choice_probabilities<'a>(
        &'a self,
        prompt: &'a str,
        labels: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Option<Vec<f64>>, AgentError>> {
        let _ = (prompt, labels);
        Box::pin(async { Ok(None) })
    }

    /// As [`complete`](Self::complete), and passes on each tool call's arguments while the
    /// model writes them (`streams.tool_call`). The default passes on text only.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a ChatRequest,
        streams: Streams<'a>,
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>> {
        self.complete(request, streams.text)
    }

    /// As [`complete_streaming`](Self::complete_streaming), with the reply's first step chosen
    /// by `rule` where the provider can ([`StepRule`]; the OpenAI-compatible provider in its
    /// constrained mode, with token probabilities). The default ignores the rule.
    fn complete_step<'a>(
        &'a self,
        request: &'a ChatRequest,
        rule: StepRule,
        streams: Streams<'a>,
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>> {
        let _ = rule;
        self.complete_streaming(request, streams)
    }

    /// The most tokens a request's prompt may have: the model's context window less room for
    /// the reply. The agent loop keeps every request inside it, leaving the oldest turns of a
    /// long conversation out. `None` (the default): unknown; a request the provider refuses as
    /// too long is shortened then ([`AgentError::ContextOverflow`]).
    fn prompt_budget(&self) -> BoxFuture<'_, Option<u32>> {
        Box::pin(async { None })
    }

    /// How the model is asked for tool calls, for the log at start (the OpenAI-compatible
    /// provider says which tool mode it uses and, for `auto`, why). `None`: nothing to say.
    fn describe_mode(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async { None })
    }
}

/// The `chat` span (OpenTelemetry GenAI conventions) of one model call the agent loop makes, for
/// `purpose` (`turn`, `question_check`, `read_only_check`, `fit_check`, `rival_check`,
/// `value_check`). The loop records the time to the first streamed piece and the error; a
/// provider records what it knows on the current span (`openai.rs`: its address, tool mode,
/// retries, token counts, finish reason).
pub(crate) fn chat_span(model: &dyn ChatModel, purpose: &'static str) -> tracing::Span {
    use tracing::field::Empty;
    tracing::info_span!(
        target: crate::SPAN_TARGET,
        "chat",
        otel.name = %format_args!("chat {}", model.name()),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.request.model = %model.name(),
        tether.purpose = purpose,
        gen_ai.provider.name = Empty,
        server.address = Empty,
        server.port = Empty,
        gen_ai.response.model = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        tether.tool_mode = Empty,
        tether.retries = Empty,
        tether.time_to_first_token_s = Empty,
        error.type = Empty,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_result_keeps_its_status_and_who_refused_it_through_a_checkpoint() {
        let messages = [
            ChatMessage::tool("1", "cart_add", ResultStatus::Ok, "[\"a list\"]"),
            ChatMessage::Tool {
                call_id: "2".into(),
                name: "move_event".into(),
                status: ResultStatus::Denied,
                call_again: true,
                content: "[denied] Not run: …".into(),
            },
        ];
        for message in messages {
            let stored = serde_json::to_value(&message).unwrap();
            assert_eq!(serde_json::from_value::<ChatMessage>(stored).unwrap(), message);
        }
        assert_eq!(
            serde_json::to_value(ChatMessage::tool("1", "t", ResultStatus::Error, "[error] x")).unwrap(),
            json!({"role": "tool", "callId": "1", "name": "t", "status": "error", "content": "[error] x"})
        );
    }

    #[test]
    fn a_tool_result_stored_before_its_status_was_a_field_reads_it_from_its_text() {
        let read = |content: &str| {
            serde_json::from_value::<ChatMessage>(
                json!({"role": "tool", "callId": "1", "name": "t", "content": content}),
            )
            .unwrap()
        };
        assert_eq!(
            read("[denied] The user rejected the call"),
            ChatMessage::tool("1", "t", ResultStatus::Denied, "[denied] The user rejected the call")
        );
        assert_eq!(read("[\"a list\"]"), ChatMessage::tool("1", "t", ResultStatus::Ok, "[\"a list\"]"));
        // The other messages read as they always did.
        let user: ChatMessage = serde_json::from_value(json!({"role": "user", "content": "hi"})).unwrap();
        assert_eq!(user, ChatMessage::User { content: "hi".into() });
        let note: ChatMessage =
            serde_json::from_value(json!({"role": "note", "kind": "app_state", "content": "[app state] x"})).unwrap();
        assert_eq!(note, ChatMessage::note(NoteKind::AppState, "[app state] x"));
        let reply: ChatMessage = serde_json::from_value(json!({"role": "assistant", "content": "ok"})).unwrap();
        assert_eq!(reply, ChatMessage::Assistant { content: "ok".into(), tool_calls: Vec::new() });
    }
}
