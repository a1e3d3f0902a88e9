//! The page's tools as an MCP server (`--expose-mcp`): an MCP client (rmcp's, over streamable
//! HTTP) reaches a session's live tools only with the code its page put in its context; every
//! call is a `TOOL_CALL` to the page, answered by the page (here a test client on a real
//! WebSocket); a context update tells the MCP client the list changed; removing the entry ends
//! the pairing; the entry never reaches the model.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tether_agent::AgentLoop;
use tether_protocol::*;
use tether_server::{PAIRING_KEY, ServerConfig, TetherServer};
use tokio::sync::Notify;

const CODE: &str = "pairing-code-for-tests-0123456789";

#[derive(Clone, Default)]
struct Listener {
    changed: Arc<Notify>,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("expose-test", "1"))
    }
}

async fn mcp_client(
    server: &TestServer,
    code: &str,
    listener: Listener,
) -> Result<RunningService<RoleClient, Listener>, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = format!("{}/mcp", server.url().replace("ws://", "http://").trim_end_matches("/ws"));
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(code);
    let transport = StreamableHttpClientTransport::from_config(config);
    listener.serve(transport).await.map_err(|e| e.to_string())
}

fn pairing(code: &str) -> ContextEntry {
    ContextEntry { key: PAIRING_KEY.into(), description: "MCP pairing".into(), value: json!({"code": code}) }
}

async fn page_context(client: &mut Client, revision: u64, tools: Vec<ToolSpec>, context: Vec<ContextEntry>) {
    let id = client.id();
    client.send(ClientFrame::ContextUpdate(ContextUpdate { id, revision, tools, page: None, context })).await;
}

async fn exposing(model: DirectModel) -> TestServer {
    let config = ServerConfig { expose_mcp: true, ..ServerConfig::default() };
    TestServer::start_server(TetherServer::new(config, AgentLoop::new(Arc::new(model)))).await
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else { panic!("arguments are an object") };
    CallToolRequestParams::new(name.to_string()).with_arguments(args)
}

fn text(result: &rmcp::model::CallToolResult) -> String {
    let json = serde_json::to_value(result).unwrap();
    json["content"][0]["text"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_paired_mcp_client_calls_the_pages_tools_through_the_page() {
    let model = DirectModel::default();
    let server = exposing(model.clone()).await;
    let mut page = server.client().await;
    page.hello(None).await;
    assert!(mcp_client(&server, CODE, Listener::default()).await.is_err(), "not paired yet: refused");

    page_context(&mut page, 1, storefront_tools(), vec![pairing(CODE)]).await;
    // Each frame is handled in order: once the page hears back on a later frame, the update is in.
    page.say("hello").await;
    page.answer().await;
    let seen = model.requests().last().unwrap().messages.iter().map(|m| format!("{m:?}")).collect::<String>();
    assert!(!seen.contains(CODE) && !seen.contains(PAIRING_KEY), "the pairing never reaches the model");

    let listener = Listener::default();
    let mcp = mcp_client(&server, CODE, listener.clone()).await.expect("paired");
    let listed: Vec<String> = mcp.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    let expected: Vec<String> = storefront_tools().iter().map(|t| t.name.clone()).collect();
    assert_eq!(listed, expected, "exactly the page's live tools");
    assert!(
        mcp_client(&server, "another-code-0123456789", Listener::default()).await.is_err(),
        "a wrong code is refused"
    );

    // A call runs in the page: the page gets the TOOL_CALL, and its answer is the result.
    let peer = mcp.peer().clone();
    let pending = tokio::spawn(async move { peer.call_tool(call("cart_add", json!({"productId": "mug-red"}))).await });
    let tool_call = page.tool_call().await;
    assert_eq!((tool_call.name.as_str(), &tool_call.args), ("cart_add", &json!({"productId": "mug-red"})));
    page.result(&tool_call.call_id, ResultStatus::Ok, json!("1 red mug in the cart")).await;
    // A second answer for the same call changes nothing (exactly once).
    page.result(&tool_call.call_id, ResultStatus::Ok, json!("applied twice")).await;
    let result = pending.await.unwrap().unwrap();
    assert_eq!((text(&result), result.is_error), ("1 red mug in the cart".to_string(), Some(false)));

    // Invalid arguments never reach the page.
    let invalid = mcp.call_tool(call("cart_add", json!({"productId": "teapot"}))).await.unwrap();
    assert_eq!(invalid.is_error, Some(true));
    assert!(text(&invalid).contains("Validation args \"cart_add\""), "{}", text(&invalid));

    // The page's tools change: the client is told, and lists the new ones.
    page_context(&mut page, 2, vec![tool("size_guide", "The sizes.", json!({"type": "object"}))], vec![pairing(CODE)])
        .await;
    tokio::time::timeout(Duration::from_secs(10), listener.changed.notified()).await.expect("tools/list_changed");
    let listed: Vec<String> = mcp.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    assert_eq!(listed, ["size_guide"]);

    // The user ends the pairing: the client is refused from then on.
    page_context(&mut page, 3, vec![], vec![]).await;
    page.say("hello").await;
    page.answer().await;
    let refused = mcp.call_tool(call("size_guide", json!({}))).await;
    assert!(refused.is_err(), "unpaired: refused, not {refused:?}");
}

#[tokio::test]
async fn a_server_without_expose_mcp_has_no_mcp_endpoint_and_says_so_to_the_page() {
    let server = TestServer::start_server(TetherServer::new(
        ServerConfig::default(),
        AgentLoop::new(Arc::new(DirectModel::default())),
    ))
    .await;
    let mut page = server.client().await;
    page.hello(None).await;
    page_context(&mut page, 1, storefront_tools(), vec![pairing(CODE)]).await;
    let error = page.error().await;
    assert_eq!(error.code, ErrorCode::Unauthorized);
    assert!(error.message.contains("--expose-mcp"), "{}", error.message);
    assert!(mcp_client(&server, CODE, Listener::default()).await.is_err());
}

#[tokio::test]
async fn a_malformed_pairing_entry_is_refused_and_pairs_nothing() {
    let server = exposing(DirectModel::default()).await;
    let mut page = server.client().await;
    page.hello(None).await;
    page_context(&mut page, 1, storefront_tools(), vec![pairing("short")]).await;
    let error = page.error().await;
    assert!(error.message.contains("at least 16 characters"), "{}", error.message);
    assert!(mcp_client(&server, "short", Listener::default()).await.is_err());
}

#[tokio::test]
async fn the_operators_floor_applies_to_a_paired_clients_calls() {
    let config = ServerConfig {
        expose_mcp: true,
        risk_floors: vec!["open_cart=blocked".parse().unwrap(), "cart_*=high".parse().unwrap()],
        ..ServerConfig::default()
    };
    let server =
        TestServer::start_server(TetherServer::new(config, AgentLoop::new(Arc::new(DirectModel::default())))).await;
    let mut page = server.client().await;
    page.hello(None).await;
    page_context(&mut page, 1, storefront_tools(), vec![pairing(CODE)]).await;
    page.say("hello").await;
    page.answer().await;
    let mcp = mcp_client(&server, CODE, Listener::default()).await.expect("paired");
    let tools = mcp.list_all_tools().await.unwrap();
    let cart_add = serde_json::to_value(tools.iter().find(|t| t.name == "cart_add").unwrap()).unwrap();
    assert_eq!(
        (&cart_add["annotations"]["destructiveHint"], &cart_add["_meta"]["tether/risk"]),
        (&json!(true), &json!("high"))
    );

    let blocked = mcp.call_tool(call("open_cart", json!({}))).await.unwrap();
    assert!(blocked.is_error == Some(true) && text(&blocked).starts_with("blocked: "), "{}", text(&blocked));
    // The call goes to the page at the floor's risk, so the page asks the user first.
    let peer = mcp.peer().clone();
    let pending = tokio::spawn(async move { peer.call_tool(call("cart_add", json!({"productId": "mug-blue"}))).await });
    let tool_call = page.tool_call().await;
    assert_eq!((tool_call.name.as_str(), tool_call.risk), ("cart_add", Risk::High), "blocked never reached the page");
    page.result(&tool_call.call_id, ResultStatus::Denied, json!("The user said no.")).await;
    let denied = pending.await.unwrap().unwrap();
    assert_eq!((text(&denied), denied.is_error), ("denied: The user said no.".to_string(), Some(true)));
}

/// The official Python SDK's client, from the virtual environment `cargo xtask setup` makes.
fn python_sdk() -> std::path::PathBuf {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/python-mcp/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run `cargo xtask setup` (it installs the MCP Python SDK)",
        python.display()
    );
    python
}

#[tokio::test]
async fn the_official_python_sdk_client_calls_a_paired_pages_tool() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let server = exposing(DirectModel::default()).await;
    let mut page = server.client().await;
    page.hello(None).await;
    page_context(&mut page, 1, storefront_tools(), vec![pairing(CODE)]).await;
    page.say("hello").await;
    page.answer().await;
    let url = format!("{}/mcp", server.url().replace("ws://", "http://").trim_end_matches("/ws"));
    // The e2e suite's client: one JSON command per line on stdin, one JSON answer per line out.
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e/mcp_driver.py");
    let mut python = tokio::process::Command::new(python_sdk())
        .arg(script)
        .args([url.as_str(), CODE])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut commands = python.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(python.stdout.take().unwrap()).lines();
    let mut next =
        async || -> Value { serde_json::from_str(&lines.next_line().await.unwrap().expect("a line")).unwrap() };
    assert_eq!(next().await, json!({"ready": true}));
    commands.write_all(b"{\"op\": \"list\"}\n").await.unwrap();
    let listed = next().await;
    let names: Vec<&str> = listed["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["product_view", "cart_add", "open_cart"]);
    let call = json!({"op": "call", "tool": "cart_add", "args": {"productId": "tee-black", "quantity": 2}});
    commands.write_all(format!("{call}\n").as_bytes()).await.unwrap();
    let tool_call = page.tool_call().await;
    assert_eq!(tool_call.args, json!({"productId": "tee-black", "quantity": 2}));
    page.result(&tool_call.call_id, ResultStatus::Ok, json!("2 black T-shirts in the cart")).await;
    assert_eq!(next().await, json!({"isError": false, "text": "2 black T-shirts in the cart"}));
    drop(commands);
    assert!(python.wait().await.unwrap().success());
}
