//! A Tether server of your own: the agent loop with a policy hook, serving the WebSocket at /ws
//! and the pages of ./dist (e.g. a built examples/todo-react) on http://127.0.0.1:8787, where the
//! page's chat talks to this agent.
//!
//! `cargo run -p tether-server --example own_server` (from the Tether checkout).

use std::sync::Arc;

use tether_agent::{AgentLoop, Hooks, ToolDecision};
use tether_scripted::ScriptedModel;
use tether_server::{ServerConfig, TetherServer};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Policy is code, not a request in the prompt: this hook runs before every tool call.
    let hooks = Hooks::new().on_before_tool_execution(|call| async move {
        let shouting = call.args["title"].as_str().is_some_and(|t| t.len() > 3 && t == t.to_uppercase());
        Ok(if call.name == "todo_add" && shouting {
            ToolDecision::Deny { reason: "Blocked by policy: no shouting on the list. Ask in lower case.".into() }
        } else {
            ToolDecision::Allow
        })
    });
    // ScriptedModel is the built-in model; an OpenAiProvider talks to a real one.
    let agent = AgentLoop::new(Arc::new(ScriptedModel::default())).with_hooks(hooks);
    let server = TetherServer::new(ServerConfig::default(), agent).with_static_dir("dist");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8787").await?;
    eprintln!("Open http://127.0.0.1:8787 and talk to the agent in the chat (Ctrl-C stops).");
    server.serve(listener, async { tokio::signal::ctrl_c().await.unwrap_or_default() }).await?;
    Ok(())
}
