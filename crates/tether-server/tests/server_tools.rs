//! Server-side tools: they run in the server process, and win over a client tool of the same
//! name (the client hears about the collision in an EVENT).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use serde_json::json;
use tether_agent::AgentLoop;
use tether_protocol::*;
use tether_scripted::ScriptedModel;
use tether_server::{ServerConfig, ServerTool, TetherServer};

#[tokio::test]
async fn a_server_tool_runs_in_process_and_wins_a_name_collision() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = runs.clone();
    let spec = tool(
        "cart_add",
        "Add a product to the shopping cart (server side).",
        json!({
            "type": "object",
            "properties": {"productId": {"type": "string", "enum": ["mug-red", "mug-blue"]}},
            "required": ["productId"]
        }),
    );
    let server_tool = ServerTool::new(spec, move |args| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"addedOnTheServer": args["productId"]}))
        }
    })
    .unwrap();
    let server = TetherServer::new(ServerConfig::default(), AgentLoop::new(Arc::new(ScriptedModel::default())))
        .with_tool(server_tool);
    let server = TestServer::start_server(server).await;
    let mut client = server.client().await;
    client.hello(None).await;
    client.context(1, storefront_tools()).await;
    let collision = client
        .recv_until(|f| match f {
            ServerFrame::Event(EventFrame { event: RunEvent::ToolCollision(c), .. }) => Some(c.tool.clone()),
            _ => None,
        })
        .await;
    assert_eq!(collision, "cart_add");

    client.say("add the red mug to my cart").await;
    let mut text = String::new();
    loop {
        match client.recv().await {
            ServerFrame::ToolCall(call) => {
                panic!("the client was asked to run {}: the server tool must win", call.name)
            }
            ServerFrame::AgentMessage(message) => {
                text.push_str(&message.delta);
                if message.done {
                    assert_eq!(message.status, Some(RunStatus::Completed));
                    break;
                }
            }
            _ => {}
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(text.contains("addedOnTheServer"), "{text}");
}

#[test]
fn a_server_tool_with_an_invalid_schema_is_refused() {
    let spec = tool("broken", "", json!({"type": 42}));
    let error = ServerTool::new(spec, |_| async { Ok(json!(null)) }).unwrap_err();
    assert!(error.to_string().contains("broken"), "{error}");
}
