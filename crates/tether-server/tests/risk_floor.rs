//! The operator's risk floor: `TOOL_CALL.risk` carries the stricter of the floor and the
//! client's own risk, so a client cannot lower it; a `blocked` tool never gets a `TOOL_CALL`.

mod common;

use std::sync::Arc;

use common::*;
use serde_json::json;
use tether_agent::{AgentLoop, ChatMessage};
use tether_protocol::*;
use tether_server::{RiskFloor, ServerConfig};

fn floors(specs: &[&str]) -> Vec<RiskFloor> {
    specs.iter().map(|spec| spec.parse().unwrap()).collect()
}

fn declared(name: &str, risk: Risk) -> ToolSpec {
    tool(name, "A tool.", json!({"type": "object"})).with_risk(risk)
}

async fn server(specs: &[&str], model: &DirectModel) -> TestServer {
    let config = ServerConfig { risk_floors: floors(specs), ..ServerConfig::default() };
    TestServer::start(config, AgentLoop::new(Arc::new(model.clone()))).await
}

/// Asks the model to call `name`, answers the call, and returns the `TOOL_CALL` frame.
async fn call_of(client: &mut Client, name: &str) -> ToolCall {
    client.say(&format!("call {name}")).await;
    let call = client.tool_call().await;
    assert_eq!(call.name, name);
    client.result(&call.call_id, ResultStatus::Ok, json!("done")).await;
    assert_eq!(client.answer().await.1, RunStatus::Completed);
    call
}

#[tokio::test]
async fn a_client_that_declares_none_still_gets_the_servers_critical_floor() {
    let model = DirectModel::default();
    let server = server(&["delete_account=critical", "cart_*=low"], &model).await;
    let mut client = server.client().await;
    client.hello(None).await;
    let tools = vec![
        declared("delete_account", Risk::None),
        declared("cart_clear", Risk::High),
        declared("product_view", Risk::None),
    ];
    client.context(1, tools).await;
    // The floor raises what the client declared...
    assert_eq!(call_of(&mut client, "delete_account").await.risk, Risk::Critical);
    // ...a floor below the client's own risk changes nothing (the stricter applies)...
    assert_eq!(call_of(&mut client, "cart_clear").await.risk, Risk::High);
    // ...and a tool no floor matches keeps the client's risk.
    assert_eq!(call_of(&mut client, "product_view").await.risk, Risk::None);
}

#[tokio::test]
async fn a_blocked_tool_gets_no_tool_call_and_the_model_reads_the_refusal() {
    let model = DirectModel::default();
    let server = server(&["delete_*=blocked"], &model).await;
    let mut client = server.client().await;
    client.hello(None).await;
    client.context(1, vec![declared("delete_everything", Risk::None)]).await;
    client.say("call delete_everything").await;
    let mut ended = None;
    let (text, status) = loop {
        match client.recv().await {
            ServerFrame::ToolCall(call) => panic!("a blocked tool was sent to the client: {call:?}"),
            ServerFrame::Event(EventFrame { event: RunEvent::ToolExecutionEnd(end), .. }) => ended = Some(end),
            ServerFrame::AgentMessage(m) if m.done => break (m.delta, m.status.unwrap()),
            _ => {}
        }
    };
    assert_eq!(status, RunStatus::Completed, "{text}");
    assert_eq!(ended.unwrap().status, ResultStatus::Blocked);
    let request = model.requests().pop().unwrap();
    let refusal = request.messages.iter().find_map(|m| match m {
        ChatMessage::Tool { content, .. } => Some(content.clone()),
        _ => None,
    });
    let refusal = refusal.expect("the model read a result");
    assert!(refusal.starts_with("[blocked]") && refusal.contains("server's policy"), "{refusal}");
}

#[test]
fn the_flag_syntax_is_pattern_equals_risk() {
    let floor: RiskFloor = "delete_*=blocked".parse().unwrap();
    assert_eq!((floor.pattern.as_str(), floor.risk), ("delete_*", Risk::Blocked));
    assert!(floor.matches("delete_account") && !floor.matches("account_delete"));
    assert_eq!(floor.to_string(), "delete_*=blocked");
    for bad in ["delete_*", "=high", "delete_*=severe", "a b=high"] {
        assert!(bad.parse::<RiskFloor>().is_err(), "{bad}");
    }
    let config = ServerConfig { risk_floors: floors(&["*=low", "cart_clear=critical"]), ..ServerConfig::default() };
    assert_eq!(config.risk_floor("cart_clear"), Risk::Critical);
    assert_eq!(config.risk_floor("anything"), Risk::Low);
}
