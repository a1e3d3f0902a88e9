//! What the agent-loop tests share: a model that answers from a script, streaming each reply in
//! small pieces (as a provider does), and records what it was asked; replies as a small model
//! writes them; one run with what it streamed and the events it reported.

#![allow(dead_code, unreachable_pub)]

use std::sync::Mutex;

use serde_json::{Value, json};
use tether_agent::{AgentLoop, ChatMessage, ModelReply, ModelToolCall, RunOutcome, RunSink, ToolHost};
use tether_protocol::RunEvent;

/// What the tool results among `messages` said, in order.
pub fn tool_results(messages: &[ChatMessage]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

/// A reply that is only text.
pub fn text(text: &str) -> ModelReply {
    ModelReply { text: text.into(), raw: text.into(), ..ModelReply::default() }
}

/// A reply that calls `name` with `arguments`, written as a small model writes it.
pub fn call(name: &str, arguments: Value) -> ModelReply {
    let raw = json!({"name": name, "arguments": &arguments}).to_string();
    ModelReply {
        tool_calls: vec![ModelToolCall { id: "m".into(), name: name.into(), arguments }],
        raw,
        ..ModelReply::default()
    }
}

/// One run: how it ended, the text streamed to the user, the events reported.
pub struct Run {
    pub outcome: RunOutcome,
    pub streamed: String,
    pub events: Vec<RunEvent>,
}

/// Runs `agent` over `host` for `message` in a new conversation (run `r1`).
pub async fn run(agent: &AgentLoop, host: &dyn ToolHost, message: &str) -> Run {
    let streamed = Mutex::new(String::new());
    let events = Mutex::new(Vec::new());
    let on_delta = |delta: &str| streamed.lock().unwrap().push_str(delta);
    let on_event = |event: RunEvent| events.lock().unwrap().push(event);
    let outcome =
        agent.run(host, &RunSink { on_delta: &on_delta, on_event: &on_event }, &"r1".into(), message, Vec::new()).await;
    Run { outcome, streamed: streamed.into_inner().unwrap(), events: events.into_inner().unwrap() }
}

/// The fake model of every test here: answers from a script (streaming each reply word by word)
/// and records every request.
pub use tether_scripted::Replay as ReplayModel;
