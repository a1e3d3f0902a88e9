//! Models: the [`ChatModel`] seam, the conversation types, an OpenAI-compatible provider and the
//! deterministic built-in model.

#[cfg(feature = "openai")]
mod openai;
mod scripted;
mod tool_text;

#[cfg(feature = "openai")]
pub use openai::{OpenAiConfig, OpenAiProvider};
pub use scripted::{SCRIPTED_CONTRACT, SCRIPTED_PREFIX, ScriptedModel};
pub use tool_text::{ContentToolCalls, extract_tool_calls};

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use tether_protocol::ToolSpec;

use crate::AgentError;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One message of the conversation with the model.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatMessage {
    /// Instructions from the operator.
    System {
        /// The text.
        content: String,
    },
    /// The user, or labelled context the server adds (hook output, Stop feedback).
    User {
        /// The text.
        content: String,
    },
    /// The model's reply: text, tool calls, or both.
    Assistant {
        /// The text.
        content: String,
        /// The tools it asked for.
        tool_calls: Vec<ModelToolCall>,
    },
    /// The result of a tool call, as the model reads it.
    Tool {
        /// The call it answers.
        call_id: String,
        /// The tool's name.
        name: String,
        /// What the model reads.
        content: String,
    },
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelToolCall {
    /// The call's id (generated when the model gave none).
    pub id: String,
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
}

/// What a model answered.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelReply {
    /// The reply's text (without any tool call written into it).
    pub text: String,
    /// The tool calls, whether the model used `tool_calls` or wrote them into its text.
    pub tool_calls: Vec<ModelToolCall>,
    /// Set when the text looked like a tool call that could not be parsed; the agent loop tells
    /// the model what was wrong so it can try again.
    pub malformed_tool_call: Option<String>,
}

/// Receives streamed text as it arrives.
pub type DeltaSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

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
}
