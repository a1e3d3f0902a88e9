//! What an operator sees, through the real `tether serve`: the spans of a run as an OTLP
//! collector receives them (decoded with the official `opentelemetry-proto` types), the W3C
//! `traceparent` the model provider receives, `/metrics` behind the operator token, and Debian's
//! `prometheus` scraping it.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::response::IntoResponse;
use common::serve::Serve;
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use serde_json::{Value, json};
use tether_protocol::{ResultStatus, Risk, RunStatus};

/// How long anything here may take before the test fails saying what it waited for.
const WAIT: Duration = Duration::from_secs(60);

/// An OTLP/HTTP trace receiver on a port of its own: every span it was sent, and a wake-up per
/// export.
struct Collector {
    url: String,
    spans: Arc<Mutex<Vec<Span>>>,
    arrived: Arc<tokio::sync::Notify>,
}

impl Collector {
    async fn start() -> Collector {
        let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
        let arrived = Arc::new(tokio::sync::Notify::new());
        let (kept, told) = (spans.clone(), arrived.clone());
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let (kept, told) = (kept.clone(), told.clone());
                async move {
                    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
                    let received = request
                        .resource_spans
                        .into_iter()
                        .inspect(|resource| {
                            let attributes = &resource.resource.as_ref().expect("a resource").attributes;
                            let name = attributes.iter().find(|kv| kv.key == "service.name").expect("service.name");
                            assert_eq!(text(name.value.as_ref()), "tether");
                        })
                        .flat_map(|resource| resource.scope_spans)
                        .flat_map(|scope| scope.spans);
                    kept.lock().unwrap().extend(received);
                    told.notify_waiters();
                    let reply = ExportTraceServiceResponse::default().encode_to_vec();
                    ([(axum::http::header::CONTENT_TYPE, "application/x-protobuf")], reply).into_response()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Collector { url, spans, arrived }
    }

    /// Waits until the spans received satisfy `done`, and returns them.
    async fn until(&self, what: &str, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let next = self.arrived.notified();
            tokio::pin!(next);
            next.as_mut().enable();
            {
                let spans = self.spans.lock().unwrap();
                if done(&spans) {
                    return spans.clone();
                }
            }
            if tokio::time::timeout_at(deadline, next).await.is_err() {
                panic!(
                    "no {what} within {WAIT:?}: {:#?}",
                    self.spans.lock().unwrap().iter().map(|s| &s.name).collect::<Vec<_>>()
                );
            }
        }
    }
}

fn text(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(n)) => n.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// A span's attributes, as text.
fn attributes(span: &Span) -> HashMap<String, String> {
    span.attributes.iter().map(|kv| (kv.key.clone(), text(kv.value.as_ref()))).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A model provider that is busy (503) the first time, then asks for `cart_add`, then for
/// `cart_clear`, then answers; each reply with the token counts it "used". Records the
/// `traceparent` of every request.
async fn provider() -> (String, Arc<Mutex<Vec<String>>>) {
    let traceparents: Arc<Mutex<Vec<String>>> = Arc::default();
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = traceparents.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
            let (seen, requests) = (seen.clone(), requests.clone());
            async move {
                if let Some(parent) = headers.get("traceparent") {
                    seen.lock().unwrap().push(parent.to_str().unwrap().to_string());
                }
                if requests.fetch_add(1, Ordering::SeqCst) == 0 {
                    return (axum::http::StatusCode::SERVICE_UNAVAILABLE, "busy").into_response();
                }
                let body: Value = serde_json::from_str(&body).unwrap();
                let results = body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").count();
                let call = |name: &str, args: Value| {
                    json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
                        "function": {"name": name, "arguments": args.to_string()}}]})
                };
                let (message, finish) = match results {
                    0 => (call("cart_add", json!({"productId": "mug-red"})), "tool_calls"),
                    1 => (call("cart_clear", json!({})), "tool_calls"),
                    _ => (
                        json!({"role": "assistant", "content": "Added the red mug; the cart was not cleared."}),
                        "stop",
                    ),
                };
                axum::Json(json!({
                    "model": "test-model-v1",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": {"prompt_tokens": 100 + results, "completion_tokens": 10 + results},
                }))
                .into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, traceparents)
}

/// A file in a directory of this test's own.
fn write(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tether-observability-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// An HTTP client (reqwest's TLS needs a crypto provider, even for plain HTTP).
fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// `GET path` on `addr` with these headers: the status and the body.
async fn get(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut request = http().get(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("GET");
    (response.status().as_u16(), response.text().await.unwrap())
}

/// The value of the sample `name{labels}` (labels as written, in order) in an OpenMetrics text.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Tools of the test page: adding asks the user first (risk high).
fn page_tools() -> Vec<tether_protocol::ToolSpec> {
    let mut add = common::tool(
        "cart_add",
        "Adds a product to the cart.",
        json!({"type": "object", "properties": {"productId": {"type": "string"}}, "required": ["productId"]}),
    );
    add.risk = Risk::High;
    let clear = common::tool("cart_clear", "Empties the cart.", json!({"type": "object", "properties": {}}));
    vec![add, clear]
}

#[tokio::test]
async fn a_runs_spans_reach_an_otlp_collector_as_one_tree_and_metrics_count_it() {
    let collector = Collector::start().await;
    let (base, traceparents) = provider().await;
    let deny = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "Clearing the cart is not allowed here."}});
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "cart_clear",
        "hooks": [{"type": "command", "command": format!("printf '%s' '{deny}'")}]}]}});
    let hooks = write("deny-clear.json", &settings.to_string());
    let store = write("sessions.sqlite", "");
    std::fs::remove_file(&store).unwrap();
    let served = Serve::new()
        .args(["--model", base.as_str(), "--model-name", "test-model", "--tool-mode", "native"])
        .args(["--no-question-check", "--context-tokens", "8192", "--operator-token-env", "OPERATOR_TOKEN"])
        .args([std::ffi::OsStr::new("--hooks"), hooks.as_os_str()])
        .args(["--store".to_string(), format!("sqlite:{}", store.display())])
        .env("OPERATOR_TOKEN", "op-secret")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .start();

    let mut client = common::Client::connect(&served.url()).await;
    let welcome = client.hello(None).await;
    client.context(1, page_tools()).await;
    client.say("put the red mug in my cart, then empty it").await;
    let call = client.tool_call().await;
    assert_eq!((call.name.as_str(), call.risk), ("cart_add", Risk::High));
    // The page asked the user, who approved: the handler ran.
    client.result(&call.call_id, ResultStatus::Ok, json!("added 1 x Red mug")).await;
    let (answer, status) = client.answer().await;
    assert_eq!(status, RunStatus::Completed, "{answer}");

    let spans =
        collector.until("invoke_agent span", |spans| spans.iter().any(|s| s.name.starts_with("invoke_agent"))).await;
    let root = spans.iter().find(|s| s.name == "invoke_agent tether").expect("the run's span");
    let trace = root.trace_id.clone();
    let run: Vec<&Span> = spans.iter().filter(|s| s.trace_id == trace).collect();
    let by_id: HashMap<&[u8], &Span> = run.iter().map(|s| (s.span_id.as_slice(), *s)).collect();
    let parent = |span: &Span| by_id.get(span.parent_span_id.as_slice()).map(|p| p.name.clone());
    // The tree, as text, for the failure message (and the closing note).
    let tree: Vec<String> = run.iter().map(|s| format!("{} <- {:?} {:?}", s.name, parent(s), attributes(s))).collect();

    // The tree, indented, as an operator's trace view shows it (`-- --nocapture` prints it).
    fn show(span: &Span, run: &[&Span], depth: usize, out: &mut String) {
        let a = attributes(span);
        let keys = [
            "tether.run.outcome",
            "tether.run.turns",
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "gen_ai.response.finish_reasons",
            "tether.retries",
            "tether.tool.location",
            "tether.tool.risk",
            "tether.tool.outcome",
            "tether.hook.name",
            "tether.hook.decision",
            "tether.store",
        ];
        let shown: Vec<String> = keys.iter().filter_map(|k| a.get(*k).map(|v| format!("{k}={v}"))).collect();
        let ms = span.end_time_unix_nano.saturating_sub(span.start_time_unix_nano) / 1_000_000;
        out.push_str(&format!("{}{} ({ms} ms) {}\n", "  ".repeat(depth), span.name, shown.join(" ")));
        for event in &span.events {
            out.push_str(&format!("{}  · {}\n", "  ".repeat(depth), event.name));
        }
        let mut children: Vec<&&Span> = run.iter().filter(|s| s.parent_span_id == span.span_id).collect();
        children.sort_by_key(|s| s.start_time_unix_nano);
        for child in children {
            show(child, run, depth + 1, out);
        }
    }
    let mut shown = String::new();
    show(root, &run, 0, &mut shown);
    eprintln!("{shown}");

    assert!(root.parent_span_id.is_empty(), "the run is the trace's root");
    let a = attributes(root);
    assert_eq!(a["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(a["gen_ai.conversation.id"], welcome.session_id);
    assert_eq!(a["gen_ai.request.model"], "test-model");
    assert_eq!(a["tether.run.outcome"], "completed");
    assert_eq!(a["tether.run.turns"], "3");

    let chats: Vec<&&Span> = run.iter().filter(|s| s.name == "chat test-model").collect();
    assert_eq!(chats.len(), 3, "one chat span per model call: {tree:#?}");
    for (n, chat) in chats.iter().enumerate() {
        let a = attributes(chat);
        assert_eq!(parent(chat).as_deref(), Some("invoke_agent tether"), "{tree:#?}");
        assert_eq!(chat.kind, SpanKind::Client as i32);
        assert_eq!(a["gen_ai.provider.name"], "openai");
        assert_eq!(a["tether.purpose"], "turn");
        assert_eq!(a["server.address"], "127.0.0.1");
        assert_eq!(a["gen_ai.response.model"], "test-model-v1");
        assert_eq!(a["tether.tool_mode"], "native");
        assert_eq!(a["gen_ai.usage.input_tokens"], (100 + n).to_string(), "{tree:#?}");
        assert_eq!(a["gen_ai.usage.output_tokens"], (10 + n).to_string());
        let finish = if n < 2 { "tool_calls" } else { "stop" };
        assert_eq!(a["gen_ai.response.finish_reasons"], finish);
    }
    let retried: Vec<_> = chats.iter().filter_map(|s| attributes(s).get("tether.retries").cloned()).collect();
    assert_eq!(retried, ["1"], "the first call was retried once after the 503: {tree:#?}");

    let tool = |name: &str| {
        let span = run
            .iter()
            .find(|s| s.name == format!("execute_tool {name}"))
            .unwrap_or_else(|| panic!("{name}: {tree:#?}"));
        assert_eq!(parent(span).as_deref(), Some("invoke_agent tether"));
        ((**span).clone(), attributes(span))
    };
    let (added, a) = tool("cart_add");
    assert_eq!(a["gen_ai.tool.name"], "cart_add");
    assert_eq!(a["gen_ai.tool.call.id"], call.call_id.as_str());
    assert_eq!(a["tether.tool.location"], "page");
    assert_eq!(a["tether.tool.risk"], "high");
    assert_eq!(a["tether.tool.outcome"], "ok");
    let events: Vec<&str> = added.events.iter().map(|e| e.name.as_str()).collect();
    assert!(events.iter().any(|e| e.contains("asks the user to approve")), "{events:?}");
    assert!(events.iter().any(|e| e.contains("approval wait ended")), "{events:?}");
    let (cleared, a) = tool("cart_clear");
    assert_eq!(a["tether.tool.outcome"], "refused_by_hook");
    assert_eq!(a["error.type"], "refused_by_hook");
    // Under the refused call: the loop guard's hook (the first, named), then the operator's.
    let hooks: Vec<(Option<String>, String)> = run
        .iter()
        .filter(|s| s.parent_span_id == cleared.span_id && s.name == "hook before_tool_execution")
        .map(|s| {
            let a = attributes(s);
            (a.get("tether.hook.name").cloned(), a["tether.hook.decision"].clone())
        })
        .collect();
    assert_eq!(hooks, [(Some("loop_guard".into()), "allow".into()), (None, "deny".into())], "{tree:#?}");
    assert!(run.iter().any(|s| s.name == "tether.store.write"), "the run's store writes are in its trace: {tree:#?}");

    // The provider was told which trace each request is part of: the chat span's.
    let chat_ids: Vec<String> = chats.iter().map(|s| hex(&s.span_id)).collect();
    let sent = traceparents.lock().unwrap().clone();
    assert_eq!(sent.len(), 4, "one traceparent per request, the retried one too: {sent:?}");
    for parent in &sent {
        let parts: Vec<&str> = parent.split('-').collect();
        assert_eq!(parts[1], hex(&trace), "{parent}");
        assert!(chat_ids.contains(&parts[2].to_string()), "{parent} is not a chat span's");
    }

    // Private by default: neither the user's words nor the answer is in any span.
    for span in &spans {
        for value in attributes(span).values() {
            assert!(!value.contains("red mug in my cart") && !value.contains("Added the red mug"), "{value}");
        }
    }

    // /metrics, behind the operator token.
    let (status, _) = get(&served.addr, "/metrics", &[]).await;
    assert_eq!(status, 401);
    let (status, _) = get(&served.addr, "/metrics", &[("authorization", "Bearer wrong")]).await;
    assert_eq!(status, 401);
    let (status, metrics) = get(&served.addr, "/metrics", &[("authorization", "Bearer op-secret")]).await;
    assert_eq!(status, 200);
    let expect = |series: &str, value: f64| {
        assert_eq!(sample(&metrics, series), Some(value), "{series} in:\n{metrics}");
    };
    expect("tether_runs_started_total", 1.0);
    expect(r#"tether_runs_ended_total{outcome="completed"}"#, 1.0);
    expect("tether_sessions_live", 1.0);
    expect(
        r#"gen_ai_client_operation_duration_seconds_count{gen_ai_operation_name="chat",gen_ai_request_model="test-model",error_type=""}"#,
        3.0,
    );
    expect(
        r#"gen_ai_client_token_usage_sum{gen_ai_operation_name="chat",gen_ai_request_model="test-model",gen_ai_token_type="input"}"#,
        303.0,
    );
    expect(r#"tether_tool_call_duration_seconds_count{gen_ai_tool_name="cart_add",outcome="ok"}"#, 1.0);
    expect(r#"tether_tool_call_duration_seconds_count{gen_ai_tool_name="cart_clear",outcome="refused_by_hook"}"#, 1.0);
    expect(r#"tether_approvals_total{outcome="granted"}"#, 1.0);
    expect(r#"tether_hook_decisions_total{point="before_tool_execution",decision="deny",hook=""}"#, 1.0);
    // Each call's loop guard, and the operator's hook for the call it let through.
    expect(r#"tether_hook_decisions_total{point="before_tool_execution",decision="allow",hook="loop_guard"}"#, 2.0);
    expect(r#"tether_hook_decisions_total{point="before_tool_execution",decision="allow",hook=""}"#, 1.0);
    assert!(
        sample(&metrics, r#"tether_store_write_duration_seconds_count{store="sqlite",outcome="ok"}"#).unwrap_or(0.0)
            >= 1.0,
        "{metrics}"
    );
    expect("tether_spans_dropped_total", 0.0);

    // The console's data: the session, and the run as a timeline, behind the same token.
    assert_eq!(get(&served.addr, "/console/api/sessions", &[]).await.0, 401);
    let token = [("authorization", "Bearer op-secret")];
    let (status, sessions) = get(&served.addr, "/console/api/sessions", &token).await;
    assert_eq!(status, 200);
    let sessions: Value = serde_json::from_str(&sessions).unwrap();
    assert_eq!(sessions["sessions"][0]["id"], welcome.session_id.as_str());
    assert_eq!(sessions["sessions"][0]["runs"], 1);
    assert_eq!(sessions["stored"], 1, "the SQLite store holds the session");
    let path = format!("/console/api/runs?session={}", welcome.session_id);
    let (_, runs) = get(&served.addr, &path, &token).await;
    let runs: Value = serde_json::from_str(&runs).unwrap();
    let run = &runs["runs"][0];
    assert_eq!(run["outcome"], "completed");
    assert_eq!(run["turns"], 3);
    assert_eq!((run["inputTokens"].as_u64(), run["outputTokens"].as_u64()), (Some(303), Some(33)));
    let entries: Vec<(String, String)> = run["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] != "store" && e["kind"] != "hook")
        .map(|e| (e["kind"].as_str().unwrap().to_string(), e["name"].as_str().unwrap().to_string()))
        .collect();
    let expected = [
        ("event", "retry"),
        ("chat", "test-model"),
        ("event", "the page asks the user to approve the call"),
        ("event", "the approval wait ended"),
        ("tool", "cart_add"),
        ("chat", "test-model"),
        ("tool", "cart_clear"),
        ("chat", "test-model"),
    ];
    let expected: Vec<(String, String)> = expected.iter().map(|(k, n)| ((*k).into(), (*n).into())).collect();
    assert_eq!(entries, expected, "{run:#}");
    let refused = run["entries"].as_array().unwrap().iter().find(|e| e["name"] == "cart_clear").unwrap();
    assert_eq!(refused["attributes"]["tether.tool.outcome"], "refused_by_hook");
}

#[tokio::test]
async fn with_trace_content_the_spans_hold_what_was_said_and_done() {
    let collector = Collector::start().await;
    let served = Serve::new()
        .args(["--trace-content"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .start();
    let mut client = common::Client::connect(&served.url()).await;
    client.hello(None).await;
    common::run_works(&mut client, 1).await;
    let spans =
        collector.until("invoke_agent span", |spans| spans.iter().any(|s| s.name.starts_with("invoke_agent"))).await;
    let run = attributes(spans.iter().find(|s| s.name.starts_with("invoke_agent")).unwrap());
    let input: Value = serde_json::from_str(&run["gen_ai.input.messages"]).unwrap();
    assert_eq!(input, json!([{"role": "user", "parts": [{"type": "text", "content": "add the red mug to my cart"}]}]));
    let output: Value = serde_json::from_str(&run["gen_ai.output.messages"]).unwrap();
    assert_eq!(output[0]["role"], "assistant");
    assert!(!output[0]["parts"][0]["content"].as_str().unwrap().is_empty());
    let call = attributes(spans.iter().find(|s| s.name == "execute_tool cart_add").unwrap());
    assert_eq!(call["gen_ai.tool.call.arguments"], r#"{"productId":"mug-red"}"#);
    assert_eq!(call["gen_ai.tool.call.result"], "added 1 x Red mug; cart: 1 item");
}

#[tokio::test]
async fn an_mcp_call_carries_its_spans_trace_context_to_the_mcp_server() {
    let collector = Collector::start().await;
    // The model calls the fake MCP server's `trace` tool, which answers with the `traceparent`
    // its request carried in `_meta`; then it answers.
    let (base, _) = common::recording_provider(|body| {
        if body["messages"].as_array().unwrap().iter().any(|m| m["role"] == "tool") {
            json!({"role": "assistant", "content": "Done."})
        } else {
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "t", "type": "function",
                "function": {"name": "fake__trace", "arguments": "{}"}}]})
        }
    })
    .await;
    let fake = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tether-mcp/tests/fake-server.mjs");
    let served = Serve::new()
        .args(["--model", base.as_str(), "--model-name", "test-model", "--tool-mode", "native"])
        .args(["--no-question-check", "--context-tokens", "8192", "--trace-content"])
        .args(["--mcp".to_string(), format!("fake=node {}", fake.display())])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .start();
    let mut client = common::Client::connect(&served.url()).await;
    client.hello(None).await;
    client.context(1, page_tools()).await;
    client.say("what is the trace?").await;
    let (answer, status) = client.answer().await;
    assert_eq!(status, RunStatus::Completed, "{answer}");
    let spans =
        collector.until("execute_tool span", |spans| spans.iter().any(|s| s.name == "execute_tool fake__trace")).await;
    let call = spans.iter().find(|s| s.name == "execute_tool fake__trace").unwrap();
    let a = attributes(call);
    assert_eq!(a["tether.tool.location"], "mcp");
    assert_eq!(a["tether.tool.outcome"], "ok");
    let received = &a["gen_ai.tool.call.result"];
    assert_eq!(received, &format!("00-{}-{}-01", hex(&call.trace_id), hex(&call.span_id)), "what the MCP server got");
}

#[tokio::test]
async fn nothing_is_exported_without_an_endpoint_or_with_the_sdk_disabled_and_runs_are_unaffected() {
    let collector = Collector::start().await;
    for env in [vec![], vec![("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url.as_str()), ("OTEL_SDK_DISABLED", "true")]] {
        let mut serve = Serve::new().capture_logs();
        for (name, value) in &env {
            serve = serve.env(name, value);
        }
        let served = serve.start();
        let mut client = common::Client::connect(&served.url()).await;
        client.hello(None).await;
        common::run_works(&mut client, 1).await;
        let logs = served.stop_and_read_logs();
        assert!(!logs.contains("exporting over OTLP"), "{env:?}: {logs}");
        // The log lines say what happened in words; the spans' fields stay out of them.
        assert!(logs.contains("client connected"), "{logs}");
        assert!(!logs.contains("invoke_agent") && !logs.contains("gen_ai."), "{env:?}: {logs}");
    }
    assert!(collector.spans.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_collector_that_is_down_never_slows_or_fails_a_run() {
    // A port nothing listens on: every export fails; the runs go on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let served = Serve::new()
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &url)
        .env("OTEL_BSP_SCHEDULE_DELAY", "50")
        .env("OTEL_BSP_MAX_QUEUE_SIZE", "4")
        .start();
    let mut client = common::Client::connect(&served.url()).await;
    client.hello(None).await;
    client.context(1, common::storefront_tools()).await;
    for _ in 0..3 {
        common::add_the_red_mug(&mut client).await;
    }
    let (_, metrics) = get(&served.addr, "/metrics", &[]).await;
    expect_runs(&metrics, 3.0);
}

fn expect_runs(metrics: &str, runs: f64) {
    assert_eq!(sample(metrics, r#"tether_runs_ended_total{outcome="completed"}"#), Some(runs), "{metrics}");
}

/// A `prometheus` of the test's own, scraping `/metrics` every second with the operator token.
struct Prometheus {
    child: std::process::Child,
    addr: String,
    _dir: common::dir::TestDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(target: &str, token: &str) -> Prometheus {
        let dir = common::dir::TestDir::new("prometheus");
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - job_name: tether\n    \
             authorization: {{credentials: {token}}}\n    static_configs: [{{targets: ['{target}']}}]\n"
        );
        std::fs::write(dir.file("prometheus.yml"), config).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = format!("127.0.0.1:{port}");
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", dir.file("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.file("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("prometheus (Debian's package; `cargo xtask test` installs it)");
        Prometheus { child, addr, _dir: dir }
    }

    /// The value of an instant query, once it has one.
    async fn value(&self, query: &str) -> Option<f64> {
        let query: String = form_urlencoded::byte_serialize(query.as_bytes()).collect();
        let url = format!("http://{}/api/v1/query?query={query}", self.addr);
        let response = http().get(url).send().await.ok()?;
        let body: Value = serde_json::from_str(&response.text().await.ok()?).ok()?;
        body.pointer("/data/result/0/value/1")?.as_str()?.parse().ok()
    }
}

#[tokio::test]
async fn prometheus_scrapes_metrics_with_the_operator_token_and_counts_the_runs() {
    let served =
        Serve::new().args(["--operator-token-env", "OPERATOR_TOKEN"]).env("OPERATOR_TOKEN", "scrape-me").start();
    let mut client = common::Client::connect(&served.url()).await;
    client.hello(None).await;
    client.context(1, common::storefront_tools()).await;
    for _ in 0..2 {
        common::add_the_red_mug(&mut client).await;
    }
    let prometheus = Prometheus::start(&served.addr, "scrape-me");
    let query = r#"sum(tether_runs_ended_total{outcome="completed"})"#;
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut interval = tokio::time::interval(Duration::from_millis(250));
    loop {
        interval.tick().await;
        if prometheus.value(query).await == Some(2.0) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "prometheus never read 2 completed runs from /metrics");
    }
    // The scrape target is up: the token was accepted.
    assert_eq!(prometheus.value(r#"up{job="tether"}"#).await, Some(1.0));
}
