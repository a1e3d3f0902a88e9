//! MCP servers as backend tools, through the server: offered beside the page's tools, validated
//! before they reach their server, under the risk floor and the hooks (Claude Code's format
//! here), winning a name collision with a page tool, and a crashed server restarted. Over real
//! sockets, with `crates/tether-mcp/tests/fake-server.mjs` in a real node process, whose own
//! counters (`calls`) say what reached it.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tether_agent::AgentLoop;
use tether_hooks::{DeclarativeHooks, HookConfig};
use tether_mcp::{McpOptions, McpServerSpec, McpStatus, McpTools};
use tether_protocol::*;
use tether_server::{RiskFloor, ServerConfig, TetherServer};

const READY: Duration = Duration::from_secs(60);

fn fake_script() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tether-mcp/tests/fake-server.mjs");
    path.canonicalize().unwrap().display().to_string()
}

async fn fake_tools() -> McpTools {
    let spec = McpServerSpec::command("fake", "node", &[&fake_script()]).unwrap();
    let options = McpOptions { backoff_min: Duration::from_millis(50), ..McpOptions::default() };
    let tools = McpTools::start(vec![spec], options, 64).unwrap();
    assert!(tools.ready(READY).await.is_empty(), "the fake MCP server did not start");
    tools
}

async fn served(config: ServerConfig, agent: AgentLoop, mcp: McpTools) -> TestServer {
    TestServer::start_server(TetherServer::new(config, agent).with_mcp(mcp)).await
}

/// The first `tool_execution_end` event: the call's status and its output.
async fn call_ends(client: &mut Client) -> (ResultStatus, String) {
    client
        .recv_until(|frame| match frame {
            ServerFrame::ToolCall(call) => {
                panic!("the page was asked to run {}: MCP tools run on the server", call.name)
            }
            ServerFrame::Event(EventFrame { event: RunEvent::ToolExecutionEnd(end), .. }) => {
                Some((end.status, end.output.clone()))
            }
            _ => None,
        })
        .await
}

/// Asks the fake server itself how many `tools/call` requests it received (this one included).
async fn calls_at_the_server(client: &mut Client) -> u64 {
    client.say("call fake__calls").await;
    let (status, output) = call_ends(client).await;
    assert_eq!(status, ResultStatus::Ok, "{output}");
    client.answer().await;
    output.parse().unwrap()
}

#[tokio::test]
async fn mcp_tools_are_offered_beside_the_page_tools_and_run_on_the_server() {
    let model = DirectModel::default();
    let server = served(ServerConfig::default(), AgentLoop::new(Arc::new(model.clone())), fake_tools().await).await;
    let mut client = server.client().await;
    client.hello(None).await;
    client.context(1, storefront_tools()).await;
    client.say(r#"call fake__echo_count {"count": 2}"#).await;
    assert_eq!(call_ends(&mut client).await, (ResultStatus::Ok, "count=2".into()));
    let (answer, status) = client.answer().await;
    assert_eq!((answer.as_str(), status), ("done: count=2", RunStatus::Completed));

    let offered: Vec<String> = model.requests().last().unwrap().tools.iter().map(|t| t.name.clone()).collect();
    assert!(
        offered.contains(&"fake__echo_count".to_string()) && offered.contains(&"cart_add".to_string()),
        "{offered:?}"
    );
    let health = server.health().await;
    assert_eq!(health["mcp"], json!([{"name": "fake", "status": "running", "reason": null, "tools": 12, "starts": 1}]));
}

#[tokio::test]
async fn invalid_arguments_never_reach_the_mcp_server() {
    let agent = AgentLoop::new(Arc::new(DirectModel::default()));
    let server = served(ServerConfig::default(), agent, fake_tools().await).await;
    let mut client = server.client().await;
    client.hello(None).await;
    client.say(r#"call fake__echo_count {"count": 0}"#).await;
    let (status, output) = call_ends(&mut client).await;
    assert_eq!(status, ResultStatus::InvalidArgs);
    assert!(output.starts_with("Validation args \"fake__echo_count\": "), "{output}");
    client.answer().await;
    assert_eq!(calls_at_the_server(&mut client).await, 1, "only the `calls` call reached the server");
}

#[tokio::test]
async fn the_risk_floor_blocks_an_mcp_tool_and_one_that_needs_approval_is_not_run() {
    let config = ServerConfig {
        risk_floors: vec!["fake__fail=blocked".parse::<RiskFloor>().unwrap(), "fake__echo_*=high".parse().unwrap()],
        ..ServerConfig::default()
    };
    let server = served(config, AgentLoop::new(Arc::new(DirectModel::default())), fake_tools().await).await;
    let mut client = server.client().await;
    client.hello(None).await;
    client.say("call fake__fail").await;
    assert_eq!(call_ends(&mut client).await.0, ResultStatus::Blocked);
    client.answer().await;
    client.say(r#"call fake__echo_count {"count": 1}"#).await;
    let (status, output) = call_ends(&mut client).await;
    assert_eq!(status, ResultStatus::Denied);
    assert!(output.contains("nobody is asked to approve") && output.contains("risk floor high"), "{output}");
    client.answer().await;
    assert_eq!(calls_at_the_server(&mut client).await, 1, "neither refused call reached the server");
}

#[tokio::test]
async fn claude_code_hooks_deny_and_rewrite_mcp_calls() {
    let settings = json!({"hooks": {"PreToolUse": [
        {"matcher": "fake__fail", "hooks": [{"type": "command", "command": "echo 'not this one' >&2; exit 2"}]},
        {"matcher": "fake__echo_count", "hooks": [{"type": "command", "command":
            r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"count": 5}}}'"#}]}
    ]}});
    let model: Arc<dyn tether_agent::ChatModel> = Arc::new(DirectModel::default());
    let config = HookConfig::from_yaml_str(&settings.to_string(), "settings.json").unwrap();
    let hooks = DeclarativeHooks::new(config, model.clone()).unwrap();
    let agent = AgentLoop::new(model).with_hooks(hooks.hooks());
    let server = served(ServerConfig::default(), agent, fake_tools().await).await;
    let mut client = server.client().await;
    client.hello(None).await;
    client.say("call fake__fail").await;
    let (status, output) = call_ends(&mut client).await;
    assert_ne!(status, ResultStatus::Ok);
    assert!(output.contains("not this one"), "{output}");
    client.answer().await;
    client.say(r#"call fake__echo_count {"count": 1}"#).await;
    let (status, output) = call_ends(&mut client).await;
    // The server ran the rewritten call; the model is told the arguments were changed.
    assert_eq!(status, ResultStatus::Ok);
    assert!(output.ends_with("count=5") && output.contains("A hook changed the arguments"), "{output}");
    client.answer().await;
    assert_eq!(calls_at_the_server(&mut client).await, 2, "the denied call did not reach the server");
}

#[tokio::test]
async fn an_mcp_tool_wins_a_name_collision_with_a_page_tool() {
    let agent = AgentLoop::new(Arc::new(DirectModel::default()));
    let server = served(ServerConfig::default(), agent, fake_tools().await).await;
    let mut client = server.client().await;
    client.hello(None).await;
    client
        .context(1, vec![tool("fake__ping_pid", "The page's own tool of that name.", json!({"type": "object"}))])
        .await;
    let collision = client
        .recv_until(|f| match f {
            ServerFrame::Event(EventFrame { event: RunEvent::ToolCollision(c), .. }) => Some(c.tool.clone()),
            _ => None,
        })
        .await;
    assert_eq!(collision, "fake__ping_pid");
    client.say("call fake__ping_pid").await;
    let (status, output) = call_ends(&mut client).await;
    assert_eq!(status, ResultStatus::Ok);
    assert!(output.parse::<u32>().is_ok(), "the MCP server's pid: {output}");
}

#[tokio::test]
async fn a_crashed_mcp_server_is_a_clear_error_and_comes_back() {
    let mcp = fake_tools().await;
    let mut changes = mcp.servers()[0].subscribe();
    let server = served(ServerConfig::default(), AgentLoop::new(Arc::new(DirectModel::default())), mcp).await;
    let mut client = server.client().await;
    client.hello(None).await;
    client.say("call fake__crash").await;
    let (status, output) = call_ends(&mut client).await;
    assert_eq!(status, ResultStatus::Error);
    assert!(output.contains("MCP server \"fake\"") && output.contains("closed"), "{output}");
    client.answer().await;
    tokio::time::timeout(READY, changes.wait_for(|s| s.starts == 2 && s.status == McpStatus::Running))
        .await
        .expect("restarted")
        .unwrap();
    assert_eq!(calls_at_the_server(&mut client).await, 1, "a new process counts from zero");
    assert_eq!(server.health().await["mcp"][0]["starts"], 2);
}

#[tokio::test]
async fn an_mcp_calls_progress_reaches_the_chat_and_a_stopped_run_cancels_its_call() {
    let agent = AgentLoop::new(Arc::new(DirectModel::default()));
    let server = served(ServerConfig::default(), agent, fake_tools().await).await;
    let mut client = server.client().await;
    client.hello(None).await;
    client.say("call fake__progress").await;
    let mut progress = Vec::new();
    let (status, output) = loop {
        match client.recv().await {
            ServerFrame::Event(EventFrame { event: RunEvent::ToolProgress(p), .. }) => progress.push(p.message),
            ServerFrame::Event(EventFrame { event: RunEvent::ToolExecutionEnd(end), .. }) => {
                break (end.status, end.output);
            }
            _ => {}
        }
    };
    assert_eq!((status, output.as_str()), (ResultStatus::Ok, "delivered"));
    assert_eq!(progress, ["packing", "shipping"], "notifications/progress as tool_progress events");
    client.answer().await;

    client.say("call fake__hang").await;
    let run_id = client
        .recv_until(|frame| match frame {
            ServerFrame::Event(EventFrame { run_id, event: RunEvent::ToolExecutionStart(_), .. }) => run_id.clone(),
            _ => None,
        })
        .await;
    let id = client.id();
    client.send(ClientFrame::StopRun(StopRun { id, run_id: Some(run_id) })).await;
    assert_eq!(client.answer().await.1, RunStatus::Aborted);
    client.say("call fake__cancels").await;
    assert_eq!(call_ends(&mut client).await, (ResultStatus::Ok, "1".into()), "the server heard the cancellation");
}

#[tokio::test]
async fn tether_serve_attaches_mcp_servers_given_by_flag() {
    let (base, requests) = recording_provider(|_| json!({"role": "assistant", "content": "Hello."})).await;
    let served = serve::Serve::new()
        .args([
            "--model",
            &base,
            "--tool-mode",
            "native",
            "--no-question-check",
            "--mcp",
            &format!("fake=node {}", fake_script()),
        ])
        .start();
    let health = served.health().await;
    assert_eq!(health["mcp"][0]["status"], "running", "{health}");
    let mut client = Client::connect(&served.url()).await;
    client.hello(None).await;
    client.say("hello").await;
    client.answer().await;
    let body = requests.lock().unwrap().last().cloned().unwrap();
    let names: Vec<&str> =
        body["tools"].as_array().unwrap().iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert_eq!(names.iter().filter(|n| n.starts_with("fake__")).count(), 12, "{names:?}");
    let value: &Value = &body["tools"][0]["function"]["parameters"];
    assert!(value.is_object());
}

#[test]
fn tether_serve_refuses_a_bad_mcp_flag() {
    let output = serve::Serve::new().args(["--mcp", "files"]).run_to_end();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("expected NAME=COMMAND or NAME=URL"), "{stderr}");
    let output = serve::Serve::new().args(["--mcp", "a=node x", "--mcp", "a=node y"]).run_to_end();
    assert!(String::from_utf8_lossy(&output.stderr).contains("two MCP servers are named \"a\""));
}
