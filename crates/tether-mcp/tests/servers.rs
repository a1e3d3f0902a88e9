//! tether-mcp against real MCP servers in real processes: the reference servers
//! `@modelcontextprotocol/server-everything` (over stdio and over streamable HTTP) and
//! `@modelcontextprotocol/server-filesystem` from npm, and `fake-server.mjs` for the faults
//! (a tool error, a crash, a kill -9, a failing start, a hang, garbage on stdout).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use tether_mcp::{McpError, McpOptions, McpServer, McpServerSpec, McpStatus, McpTools};
use tether_protocol::Risk;
use tokio::io::AsyncBufReadExt;

/// Generous: a CI machine with both cores busy starts node slowly.
const READY: Duration = Duration::from_secs(60);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn reference(package: &str) -> String {
    let path = root().join("node_modules/@modelcontextprotocol").join(package).join("dist/index.js");
    assert!(
        path.is_file(),
        "{} is missing: run `npm ci` at the repository root (cargo xtask setup does)",
        path.display()
    );
    path.display().to_string()
}

fn fake(name: &str) -> McpServerSpec {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fake-server.mjs");
    McpServerSpec::command(name, "node", &[script.to_str().unwrap()]).unwrap()
}

fn quick() -> McpOptions {
    McpOptions {
        call_timeout: Duration::from_secs(20),
        connect_timeout: READY,
        backoff_min: Duration::from_millis(50),
        backoff_max: Duration::from_millis(400),
    }
}

async fn started(spec: McpServerSpec, options: McpOptions) -> McpServer {
    let server = McpServer::start(spec, options);
    assert!(server.ready(READY).await, "not running: {:?}", server.status());
    server
}

/// Waits until the server has connected `n` times and runs.
async fn started_times(server: &McpServer, n: u32) {
    let mut changes = server.subscribe();
    tokio::time::timeout(READY, changes.wait_for(|s| s.starts >= n && s.status == McpStatus::Running))
        .await
        .unwrap_or_else(|_| panic!("not restarted: {:?}", server.status()))
        .unwrap();
}

/// Waits until the server has failed `failures` times in a row, and says why it is down.
async fn down_after(server: &McpServer, failures: u32) -> String {
    let mut changes = server.subscribe();
    let down = |s: &tether_mcp::McpSnapshot| matches!(s.status, McpStatus::Down { failures: n, .. } if n >= failures);
    let status = tokio::time::timeout(READY, changes.wait_for(down))
        .await
        .unwrap_or_else(|_| panic!("not down {failures} times: {:?}", server.status()))
        .unwrap()
        .status
        .clone();
    let McpStatus::Down { reason, .. } = status else { unreachable!() };
    reason
}

#[tokio::test]
async fn the_everything_server_over_stdio_offers_its_tools_and_runs_them() {
    let spec = McpServerSpec::command("everything", "node", &[&reference("server-everything"), "stdio"]).unwrap();
    let server = started(spec, quick()).await;
    let tools = server.tools();
    let sum = tools.iter().find(|t| t.spec.name == "everything__get-sum").expect("get-sum is offered");
    assert_eq!((sum.remote.as_str(), sum.spec.risk), ("get-sum", Risk::None), "readOnlyHint: risk none");
    let echo = tools.iter().find(|t| t.spec.name == "everything__echo").expect("echo is offered");
    assert!(
        sum.check(&json!({"a": 2, "b": "three"})).unwrap_err().starts_with("Validation args \"everything__get-sum\": ")
    );

    assert_eq!(server.call("echo", json!({"message": "hello from tether"})).await.unwrap(), "Echo: hello from tether");
    assert!(echo.check(&json!({"message": "x"})).is_ok());
    assert!(server.call("get-sum", json!({"a": 2, "b": 3})).await.unwrap().contains('5'));
    let mut progress = Vec::new();
    let args = json!({"duration": 0.3, "steps": 3});
    let done =
        server.call_with_progress("trigger-long-running-operation", args, None, |p| progress.push(p)).await.unwrap();
    assert!(done.contains("completed"), "{done}");
    assert_eq!(progress, ["1/3", "2/3", "3/3"], "notifications/progress, as the server sent them");
    let image = server.call("get-tiny-image", json!({})).await.unwrap();
    assert!(image.contains("[image image/png, about"), "{image}");
    server.stop();
    let mut changes = server.subscribe();
    changes.wait_for(|s| s.status == McpStatus::Stopped).await.unwrap();
    assert!(matches!(server.call("echo", json!({"message": "x"})).await, Err(McpError::NotRunning { .. })));
}

#[tokio::test]
async fn the_everything_server_over_streamable_http() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut child = tokio::process::Command::new("node")
        .args([&reference("server-everything"), "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // It says on stderr when it listens.
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::time::timeout(READY, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("listening on port") {
                return;
            }
        }
        panic!("the HTTP server exited before listening");
    })
    .await
    .expect("the HTTP server did not start");
    let server = started(McpServerSpec::url("web", &format!("http://127.0.0.1:{port}/mcp")).unwrap(), quick()).await;
    assert!(server.tools().iter().any(|t| t.spec.name == "web__get-sum"));
    assert!(server.call("get-sum", json!({"a": 20, "b": 22})).await.unwrap().contains("42"));
    child.kill().await.unwrap();
}

#[tokio::test]
async fn the_filesystem_server_reads_inside_its_root_and_refuses_outside() {
    let dir = std::env::temp_dir().join(format!("tether-mcp-fs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    std::fs::write(dir.join("note.txt"), "buy milk").unwrap();
    let spec =
        McpServerSpec::command("files", "node", &[&reference("server-filesystem"), dir.to_str().unwrap()]).unwrap();
    let server = started(spec, quick()).await;
    let tools = server.tools();
    let risk = |name: &str| tools.iter().find(|t| t.spec.name == name).map(|t| t.spec.risk);
    assert_eq!(risk("files__read_text_file"), Some(Risk::None));
    assert_eq!(risk("files__write_file"), Some(Risk::Low), "not read-only: low (a floor can raise it)");

    let inside = dir.join("note.txt");
    assert_eq!(server.call("read_text_file", json!({"path": inside})).await.unwrap(), "buy milk");
    let outside = server.call("read_text_file", json!({"path": "/etc/hostname"})).await.unwrap_err();
    assert!(matches!(outside, McpError::ToolFailed { .. }), "{outside:?}");
    assert!(outside.to_string().to_lowercase().contains("access denied"), "{outside}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_changed_tool_list_is_followed() {
    let server = started(fake("fake"), quick()).await;
    assert!(!server.tools().iter().any(|t| t.spec.name == "fake__extra"));
    let mut changes = server.subscribe();
    assert_eq!(server.call("add_tool", json!({})).await.unwrap(), "added");
    tokio::time::timeout(READY, changes.wait_for(|s| s.tools.iter().any(|t| t.spec.name == "fake__extra")))
        .await
        .expect("notifications/tools/list_changed was not followed")
        .unwrap();
    assert_eq!(server.starts(), 1, "followed on the same connection");
}

#[tokio::test]
async fn a_tool_error_is_the_models_to_read() {
    let server = started(fake("fake"), quick()).await;
    let error = server.call("fail", json!({})).await.unwrap_err();
    assert_eq!(error.to_string(), "\"fail\" on the MCP server \"fake\" reported an error: the disk is full");
}

#[tokio::test]
async fn a_crashed_or_killed_server_is_restarted() {
    let server = started(fake("fake"), quick()).await;
    let first: i32 = server.call("ping_pid", json!({})).await.unwrap().parse().unwrap();
    let error = server.call("crash", json!({})).await.unwrap_err();
    assert!(matches!(error, McpError::Call { .. }), "{error:?}");
    assert!(error.to_string().contains("closed"), "{error}");
    started_times(&server, 2).await;
    let second: i32 = server.call("ping_pid", json!({})).await.unwrap().parse().unwrap();
    assert_ne!(first, second, "a new process");

    nix::sys::signal::kill(nix::unistd::Pid::from_raw(second), nix::sys::signal::Signal::SIGKILL).unwrap();
    started_times(&server, 3).await;
    let third: i32 = server.call("ping_pid", json!({})).await.unwrap().parse().unwrap();
    assert!(third != second && third != first);
}

#[tokio::test]
async fn a_server_that_fails_to_start_is_retried_with_backoff() {
    let state = std::env::temp_dir().join(format!("tether-mcp-starts-{}", std::process::id()));
    let _ = std::fs::remove_file(&state);
    let mut spec = fake("flaky");
    // node reads the environment: the first two starts exit at once.
    if let tether_mcp::McpTarget::Command { program, args } = &mut spec.target {
        let script = args.remove(0);
        *args = vec![
            "FAKE_MCP_FAIL_STARTS=2".into(),
            format!("FAKE_MCP_STATE={}", state.display()),
            program.clone(),
            script,
        ];
        *program = "env".into();
    }
    let server = McpServer::start(spec.clone(), quick());
    let reason = down_after(&server, 1).await;
    assert!(reason.contains("fails on purpose"), "the child's stderr explains: {reason}");
    assert!(server.ready(READY).await, "{:?}", server.status());
    assert_eq!(std::fs::read_to_string(&state).unwrap(), "3", "two failed starts, then one that runs");
    assert_eq!(server.starts(), 1);
    std::fs::remove_file(&state).unwrap();

    let missing = McpServer::start(McpServerSpec::command("gone", "/nonexistent/mcp-server", &[]).unwrap(), quick());
    let reason = down_after(&missing, 2).await;
    assert!(reason.contains("cannot start"), "{reason}");
}

#[tokio::test]
async fn a_call_that_hangs_times_out_and_is_cancelled_at_the_server() {
    let options = McpOptions { call_timeout: Duration::from_millis(600), ..quick() };
    let server = started(fake("fake"), options).await;
    let error = server.call("hang", json!({})).await.unwrap_err();
    assert!(matches!(error, McpError::Timeout { .. }), "{error:?}");
    // Counted at the other end: the server received `notifications/cancelled`.
    assert_eq!(server.call("cancels", json!({})).await.unwrap(), "1");
    assert_eq!(server.starts(), 1, "a server that still answers is not restarted");

    // A process that stops answering altogether is restarted.
    let error = server.call("freeze", json!({})).await.unwrap_err();
    assert!(matches!(error, McpError::Timeout { .. }), "{error:?}");
    started_times(&server, 2).await;
    assert_eq!(server.call("cancels", json!({})).await.unwrap(), "0", "a new process");
}

#[tokio::test]
async fn garbage_on_stdout_is_a_clear_error_and_the_server_recovers() {
    let options = McpOptions { call_timeout: Duration::from_secs(2), ..quick() };
    let server = started(fake("fake"), options).await;
    let error = server.call("garbage", json!({})).await.unwrap_err();
    assert!(matches!(error, McpError::Timeout { .. } | McpError::Call { .. }), "{error:?}");
    assert!(error.to_string().contains("\"garbage\""), "{error}");
    let mut changes = server.subscribe();
    tokio::time::timeout(READY, changes.wait_for(|s| s.status == McpStatus::Running)).await.unwrap().unwrap();
    assert!(server.call("ping_pid", json!({})).await.unwrap().parse::<u32>().is_ok());
}

#[tokio::test]
async fn servers_share_one_limit_and_need_their_own_names() {
    let tools = McpTools::start(vec![fake("a"), fake("b")], quick(), 14).unwrap();
    assert!(tools.ready(READY).await.is_empty());
    let offered = tools.tools();
    assert_eq!(offered.len(), 14, "the limit is over all servers");
    assert!(offered[..12].iter().all(|t| t.server == "a") && offered[12..].iter().all(|t| t.server == "b"));
    assert!(tools.find("b__add_tool").is_some() && tools.find("b__echo_count").is_none());
    let call = tools.find("a__echo_count").unwrap();
    assert_eq!(tools.call(&call, json!({"count": 3})).await.unwrap(), "count=3");
    assert!(
        matches!(McpTools::start(vec![fake("a"), fake("a")], quick(), 12), Err(McpError::DuplicateName(name)) if name == "a")
    );
}
