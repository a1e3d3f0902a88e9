//! The Tether agent server: sessions over WebSocket, the agent loop with hooks, model
//! providers, and the `tether` CLI (in `main.rs`).
//!
//! The agent loop ([`AgentLoop`]) is a library API first: give it a [`ChatModel`], optional
//! [`Hooks`], and a [`ToolHost`] that runs tools, and it runs a conversation. [`TetherServer`]
//! uses it for every browser session.

pub mod agent;
mod config;
pub mod declarative;
mod error;
pub mod model;
mod policy;
mod server;
mod session;

pub use agent::hooks::{
    EventEmitter, HookError, HookResult, Hooks, ProviderCall, RunInfo, StopCheck, StopDecision, ToolDecision,
    ToolOutput, ToolUse, TurnEnd, TurnStart,
};
pub use agent::{
    AgentLoop, DEFAULT_MAX_TURNS, DEFAULT_RUN_TIMEOUT, DEFAULT_SYSTEM_PROMPT, MAX_TOOL_RESULT_BYTES, RunOutcome,
    RunSink, ToolHost,
};
pub use config::{
    DEFAULT_MAX_DESCRIPTION_CHARS, DEFAULT_MAX_FRAMES_PER_SECOND, DEFAULT_MAX_PENDING_CALLS, DEFAULT_MAX_SCHEMA_BYTES,
    DEFAULT_MAX_SCHEMA_DEPTH, DEFAULT_MAX_SESSIONS_PER_IP, ServerConfig,
};
pub use declarative::{DeclarativeHooks, HookConfig};
pub use error::ServerError;
pub use model::{
    ChatMessage, ChatModel, ChatRequest, ModelReply, ModelToolCall, OpenAiConfig, OpenAiProvider, ScriptedModel,
};
pub use policy::{RiskFloor, glob_matches};
pub use server::{ServerTool, ServerToolResult, TetherServer};
pub use session::Session;
