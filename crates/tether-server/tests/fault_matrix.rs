//! The fault matrix of durable sessions: the real `tether serve`, an OpenAI-compatible model in
//! this process (so that it outlives the servers), and a client over a real socket. While (a) an
//! approval is pending, (b) a client tool is running, (c) the model is streaming, (d) a result
//! is in flight, the server that holds the session is killed (SIGKILL, a crash), terminated
//! (SIGTERM, a deploy) or, with several servers, left running while its client reconnects
//! elsewhere (a load balancer's choice). Two deployments:
//! - one server on a real SQLite file: a second server starts on the same file, the client
//!   resumes there;
//! - three servers on one real Redis (its own, on a free port): the client resumes on the second
//!   (which claims the session from the first, or takes it once the first's lease lapsed) and,
//!   when the first was left running, then on the third.
//!
//! Each time: the run completes, the tool ran once (one call id reached the page), and the model
//! read the tool's result exactly once.

mod common;

use std::sync::{Arc, Mutex};

use axum::response::IntoResponse;
use common::serve::{Serve, Served};
use serde_json::{Value, json};
use tether_protocol::{ClientFrame, ResultStatus, Resume, RunStatus, ServerFrame, ToolCall, ToolResult};
use tokio::sync::Notify;

/// The answer the model gives once it has read the tool's result.
const ANSWER: &str = "The red mug is in your cart.";
/// What the page's `cart_add` returns.
const RESULT: &str = "added 1 x Red mug; cart: 1 item";

type Dir = common::dir::TestDir;

/// The model: asked without a tool result, it calls `cart_add` for the red mug; with one, it
/// answers [`ANSWER`]. With `stall`, its first answer streams a few words and then never ends
/// (the server is stopped while it streams). Records every request.
#[derive(Clone, Default)]
struct Model {
    requests: Arc<Mutex<Vec<Value>>>,
    stall: bool,
    stalled: Arc<Notify>,
}

impl Model {
    async fn start(stall: bool) -> (Model, String) {
        let model = Model { stall, ..Model::default() };
        let serving = model.clone();
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            axum::routing::post(move |body: String| {
                let model = serving.clone();
                async move { model.reply(serde_json::from_str(&body).unwrap()) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (model, base)
    }

    fn reply(&self, body: Value) -> axum::response::Response {
        let results = tool_results(&body);
        let first_answer = {
            let mut requests = self.requests.lock().unwrap();
            let first = results > 0 && !requests.iter().any(|seen| tool_results(seen) > 0);
            requests.push(body);
            first
        };
        if results == 0 {
            let call = json!({"id": "call_1", "type": "function",
                "function": {"name": "cart_add", "arguments": "{\"productId\":\"mug-red\"}"}});
            return completion(&json!({"role": "assistant", "content": null, "tool_calls": [call]}));
        }
        if self.stall && first_answer {
            self.stalled.notify_one();
            let chunk = json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "The red "}}]});
            let first = futures_util::stream::iter([Ok::<_, std::io::Error>(format!("data: {chunk}\n\n"))]);
            let body =
                axum::body::Body::from_stream(futures_util::StreamExt::chain(first, futures_util::stream::pending()));
            return ([(axum::http::header::CONTENT_TYPE, "text/event-stream")], body).into_response();
        }
        completion(&json!({"role": "assistant", "content": ANSWER}))
    }

    /// The request that led to the final answer.
    fn last_request(&self) -> Value {
        self.requests.lock().unwrap().last().cloned().expect("the model was asked")
    }
}

/// How many tool results a request shows the model.
fn tool_results(body: &Value) -> usize {
    body["messages"].as_array().map_or(0, |messages| messages.iter().filter(|m| m["role"] == "tool").count())
}

fn completion(message: &Value) -> axum::response::Response {
    axum::Json(json!({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})).into_response()
}

fn serve(store: &str, model: &str) -> Served {
    Serve::new()
        .args([
            "--store",
            store,
            "--model",
            model,
            "--tool-mode",
            "native",
            "--no-question-check",
            "--lease-ms",
            LEASE_MS,
        ])
        .start()
}

/// The servers' lease in the Redis deployment: short, so that a takeover comes soon.
const LEASE_MS: &str = "1000";

/// Where the session lives.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Store {
    /// One server on a SQLite file; a second one on the same file after the fault.
    Sqlite,
    /// Three servers on one Redis.
    Redis,
}

/// The highest frame number the client received (what a page sends as `lastSeq`).
fn last_seq(client: &common::Client) -> Option<u64> {
    client
        .seen
        .iter()
        .filter_map(|text| serde_json::from_str::<Value>(text).ok())
        .filter_map(|frame| frame["id"].as_str()?.strip_prefix('s')?.parse().ok())
        .max()
}

/// How the first server ends.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// SIGKILL: nothing of the process runs after it.
    Kill,
    /// SIGTERM: the server drains; the client is told to reconnect (close 1012).
    Terminate,
    /// It goes on running; the client's connection drops and it reconnects to another server
    /// (several servers only).
    Move,
}

/// When the fault strikes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Moment {
    /// The call waits for the user's approval; the user approves after the restart.
    ApprovalPending,
    /// The handler runs; it finishes once the server is gone, its first send is lost, and the
    /// result goes out again on resume.
    ToolRunning,
    /// The result is in, and the model streams its answer.
    ModelStreaming,
    /// The result was sent and the fault strikes before its acknowledgement.
    ResultInFlight,
}

/// Ends the first server as `fault` says; `late` is what the page sends once the server is gone
/// (lost). The client's socket is closed before the server's exit is awaited, as a browser
/// closes once it reads the close frame.
async fn stop(served: Served, fault: Fault, mut client: common::Client, late: Option<ClientFrame>) -> Option<Served> {
    let mut running = None;
    let exit = match fault {
        Fault::Move => {
            running = Some(served);
            None
        }
        Fault::Kill => {
            served.kill();
            None
        }
        Fault::Terminate => {
            let exit = std::thread::spawn(move || served.terminate());
            let (code, reason) = client.closed().await;
            assert_eq!(code, 1012, "a draining server asks clients to reconnect: {reason}");
            Some(exit)
        }
    };
    if let Some(frame) = late {
        client.send_lossy(frame).await;
    }
    client.kill();
    if let Some(exit) = exit {
        let status = tokio::task::spawn_blocking(move || exit.join().unwrap()).await.unwrap();
        assert!(status.success(), "a drained server exits cleanly: {status}");
    }
    running
}

async fn fault(moment: Moment, fault: Fault, kind: Store) {
    let dir = Dir::new(&format!("faults-{moment:?}-{fault:?}-{kind:?}"));
    let (model, base) = Model::start(moment == Moment::ModelStreaming).await;
    let redis =
        (kind == Store::Redis).then(|| common::redis::Redis::start(&format!("faults-{moment:?}-{fault:?}"), &[]));
    let store = redis.as_ref().map_or_else(|| dir.sqlite_store(), common::redis::Redis::url);
    let first = serve(&store, &base);
    // The other two servers of the Redis deployment, up from the start.
    let mut others: Vec<Served> =
        if redis.is_some() { vec![serve(&store, &base), serve(&store, &base)] } else { Vec::new() };
    let mut client = common::Client::connect(&first.url()).await;
    client.hello(None).await;
    client.context(1, common::storefront_tools()).await;
    client.say("add the red mug to my cart").await;
    let call: ToolCall = client.tool_call().await;
    assert_eq!((call.name.as_str(), &call.args), ("cart_add", &json!({"productId": "mug-red"})));
    let mut calls = vec![call.call_id.clone()];

    // What the page does before the fault, and whether it still owes the result after it.
    let owes_result = match moment {
        Moment::ApprovalPending | Moment::ToolRunning => true,
        Moment::ModelStreaming => {
            client.result(&call.call_id, ResultStatus::Ok, json!(RESULT)).await;
            assert!(client.ack_or_error(&call.call_id).await.is_ok());
            tokio::time::timeout(common::WAIT, model.stalled.notified()).await.expect("the model was asked to answer");
            false
        }
        Moment::ResultInFlight => {
            client.result(&call.call_id, ResultStatus::Ok, json!(RESULT)).await;
            // Unsure whether it arrived: the page resends it after the restart.
            true
        }
    };
    let resume = Resume { last_seq: last_seq(&client), ..client.resume_info() };
    // With the tool running, the handler finishes once the server is gone: the page's first try
    // is lost.
    let late = (moment == Moment::ToolRunning).then(|| {
        let id = client.id();
        ClientFrame::ToolResult(ToolResult {
            id,
            call_id: call.call_id.clone(),
            status: ResultStatus::Ok,
            content: json!(RESULT),
        })
    });
    let _first = stop(first, fault, client, late).await;

    let second = if others.is_empty() { serve(&store, &base) } else { others.remove(0) };
    let mut client = common::Client::connect(&second.url()).await;
    let welcome = client.hello(Some(resume.clone())).await;
    assert!(welcome.resumed, "the session came back from the store");
    if fault == Fault::Move {
        // And on to the third server, the first and second still running.
        // The page's last frame number: from this connection, or still the one from before.
        let resume = Resume { last_seq: last_seq(&client).max(resume.last_seq), ..resume.clone() };
        client.kill();
        let third = others.remove(0);
        client = common::Client::connect(&third.url()).await;
        others.push(third);
        assert!(client.hello(Some(resume)).await.resumed, "the session moved on again");
    }
    if owes_result {
        client.result(&call.call_id, ResultStatus::Ok, json!(RESULT)).await;
        assert!(client.ack_or_error(&call.call_id).await.is_ok(), "the restarted server knows the call");
    }
    // Every frame this connection brought, in order (the replay too, which may hold the whole
    // answer when the run finished on a server the client had left).
    let mut answer = String::new();
    let mut read = 0;
    let status = loop {
        let mut done = None;
        for text in &client.seen[read..] {
            match tether_protocol::decode_server_frame(text, usize::MAX).unwrap() {
                ServerFrame::AgentMessage(message) => {
                    assert_eq!(message.run_id, call.run_id, "the same run goes on");
                    if message.reset {
                        answer.clear();
                    }
                    answer.push_str(&message.delta);
                    if message.done {
                        done = Some(message.status);
                    }
                }
                ServerFrame::ToolCall(again) if !calls.contains(&again.call_id) => calls.push(again.call_id.clone()),
                _ => {}
            }
        }
        read = client.seen.len();
        if let Some(status) = done {
            break status;
        }
        client.recv().await;
    };
    assert_eq!(status, Some(RunStatus::Completed), "answer: {answer}");
    assert_eq!(answer, ANSWER);
    assert_eq!(calls, std::slice::from_ref(&call.call_id), "the tool ran once");
    let last = model.last_request();
    assert_eq!(tool_results(&last), 1, "the model read the result once: {last:#}");
    let result = last["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap();
    assert!(result["content"].as_str().unwrap().contains(RESULT), "{result:#}");
}

#[tokio::test]
async fn killed_while_an_approval_is_pending() {
    fault(Moment::ApprovalPending, Fault::Kill, Store::Sqlite).await;
}

#[tokio::test]
async fn killed_while_a_client_tool_runs() {
    fault(Moment::ToolRunning, Fault::Kill, Store::Sqlite).await;
}

#[tokio::test]
async fn killed_while_the_model_streams() {
    fault(Moment::ModelStreaming, Fault::Kill, Store::Sqlite).await;
}

#[tokio::test]
async fn killed_while_a_result_is_in_flight() {
    fault(Moment::ResultInFlight, Fault::Kill, Store::Sqlite).await;
}

#[tokio::test]
async fn terminated_while_an_approval_is_pending() {
    fault(Moment::ApprovalPending, Fault::Terminate, Store::Sqlite).await;
}

#[tokio::test]
async fn terminated_while_a_client_tool_runs() {
    fault(Moment::ToolRunning, Fault::Terminate, Store::Sqlite).await;
}

#[tokio::test]
async fn terminated_while_the_model_streams() {
    fault(Moment::ModelStreaming, Fault::Terminate, Store::Sqlite).await;
}

#[tokio::test]
async fn terminated_while_a_result_is_in_flight() {
    fault(Moment::ResultInFlight, Fault::Terminate, Store::Sqlite).await;
}

#[tokio::test]
async fn redis_killed_while_an_approval_is_pending() {
    fault(Moment::ApprovalPending, Fault::Kill, Store::Redis).await;
}

#[tokio::test]
async fn redis_killed_while_a_client_tool_runs() {
    fault(Moment::ToolRunning, Fault::Kill, Store::Redis).await;
}

#[tokio::test]
async fn redis_killed_while_the_model_streams() {
    fault(Moment::ModelStreaming, Fault::Kill, Store::Redis).await;
}

#[tokio::test]
async fn redis_killed_while_a_result_is_in_flight() {
    fault(Moment::ResultInFlight, Fault::Kill, Store::Redis).await;
}

#[tokio::test]
async fn redis_terminated_while_an_approval_is_pending() {
    fault(Moment::ApprovalPending, Fault::Terminate, Store::Redis).await;
}

#[tokio::test]
async fn redis_terminated_while_a_client_tool_runs() {
    fault(Moment::ToolRunning, Fault::Terminate, Store::Redis).await;
}

#[tokio::test]
async fn redis_terminated_while_the_model_streams() {
    fault(Moment::ModelStreaming, Fault::Terminate, Store::Redis).await;
}

#[tokio::test]
async fn redis_terminated_while_a_result_is_in_flight() {
    fault(Moment::ResultInFlight, Fault::Terminate, Store::Redis).await;
}

#[tokio::test]
async fn redis_moved_elsewhere_while_an_approval_is_pending() {
    fault(Moment::ApprovalPending, Fault::Move, Store::Redis).await;
}

#[tokio::test]
async fn redis_moved_elsewhere_while_a_client_tool_runs() {
    fault(Moment::ToolRunning, Fault::Move, Store::Redis).await;
}

#[tokio::test]
async fn redis_moved_elsewhere_while_the_model_streams() {
    fault(Moment::ModelStreaming, Fault::Move, Store::Redis).await;
}

#[tokio::test]
async fn redis_moved_elsewhere_while_a_result_is_in_flight() {
    fault(Moment::ResultInFlight, Fault::Move, Store::Redis).await;
}

/// Two servers on a Redis of the test's own, and a client on the first whose `cart_add` call
/// waits for its result.
async fn waiting_on_two_servers(name: &str) -> (Model, common::redis::Redis, Served, Served, common::Client, ToolCall) {
    let (model, base) = Model::start(false).await;
    let redis = common::redis::Redis::start(name, &[]);
    let (a, b) = (serve(&redis.url(), &base), serve(&redis.url(), &base));
    let mut client = common::Client::connect(&a.url()).await;
    client.hello(None).await;
    client.context(1, common::storefront_tools()).await;
    client.say("add the red mug to my cart").await;
    let call = client.tool_call().await;
    (model, redis, a, b, client, call)
}

/// Redis restarted (AOF) while a call waits for the page: the session's owner goes on, the
/// result is applied once, and another server reads the whole session back afterwards.
#[tokio::test]
async fn redis_restarted_mid_run_loses_nothing() {
    let (model, mut redis, _a, b, mut client, call) = waiting_on_two_servers("faults-redis-restart").await;
    redis.restart();
    client.result(&call.call_id, ResultStatus::Ok, json!(RESULT)).await;
    assert!(client.ack_or_error(&call.call_id).await.is_ok());
    let (answer, status) = client.answer().await;
    assert_eq!((answer.as_str(), status), (ANSWER, RunStatus::Completed));
    assert!(!client.seen.iter().any(|frame| frame.contains("\"ERROR\"")), "no store error: {:?}", client.seen);
    let resume = Resume { last_seq: last_seq(&client), ..client.resume_info() };
    client.kill();
    // Another server has all of it: the conversation goes on there, the result read once.
    let mut client = common::Client::connect(&b.url()).await;
    assert!(client.hello(Some(resume)).await.resumed);
    client.say("and is it in the cart?").await;
    assert_eq!(client.answer().await, (ANSWER.to_string(), RunStatus::Completed));
    let last = model.last_request();
    assert_eq!(tool_results(&last), 1, "{last:#}");
    assert_eq!(last["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "user").count(), 2);
}

/// Redis gone for longer than the lease: the owner holds the session's replies until Redis is
/// back and says so once (another server may read the session back, and must find what the
/// client was told); a client that comes to another server is refused with a clear error and
/// "try again later" (close 1013); once Redis is back, the replies leave, and the session moves
/// to the other server with everything, nothing applied twice.
#[tokio::test]
async fn redis_gone_longer_than_the_lease_is_refused_clearly_and_loses_nothing() {
    let (model, mut redis, _a, b, mut client, call) = waiting_on_two_servers("faults-redis-gone").await;
    redis.kill();
    // Longer than the lease: every heartbeat has lapsed.
    tokio::time::sleep(std::time::Duration::from_millis(LEASE_MS.parse::<u64>().unwrap() * 2)).await;

    let mut newcomer = common::Client::connect(&b.url()).await;
    newcomer
        .send(ClientFrame::Hello(tether_protocol::Hello {
            id: "h".into(),
            protocol_version: tether_protocol::PROTOCOL_VERSION,
            resume: None,
            client: None,
        }))
        .await;
    let error = newcomer.error().await;
    assert!(error.message.contains("connect again later") && error.message.contains("Redis"), "{}", error.message);
    assert_eq!(newcomer.closed().await.0, 1013, "try again later");

    client.result(&call.call_id, ResultStatus::Ok, json!(RESULT)).await;
    let error = client.error().await;
    assert!(error.message.contains("its replies wait until the store is back"), "{}", error.message);
    assert!(!client.seen.iter().any(|frame| frame.contains("TOOL_RESULT_ACK")), "no reply before it is stored");
    redis.restart();
    assert!(client.ack_or_error(&call.call_id).await.is_ok(), "stored, then acknowledged");
    assert_eq!(client.answer().await, (ANSWER.to_string(), RunStatus::Completed));
    let told = client.seen.iter().filter(|frame| frame.contains("cannot store this session")).count();
    assert_eq!(told, 1, "told once: {:?}", client.seen);

    let resume = Resume { last_seq: last_seq(&client), ..client.resume_info() };
    client.kill();
    let mut client = common::Client::connect(&b.url()).await;
    assert!(client.hello(Some(resume)).await.resumed, "the session moved with everything");
    client.say("and is it in the cart?").await;
    let mut calls = 0;
    let (answer, status) = loop {
        match client.recv().await {
            ServerFrame::ToolCall(_) => calls += 1,
            ServerFrame::AgentMessage(m) if m.done => break (m.delta, m.status),
            _ => {}
        }
    };
    assert_eq!((calls, status), (0, Some(RunStatus::Completed)), "no call again: {answer}");
    let last = model.last_request();
    assert_eq!(tool_results(&last), 1, "the result read once: {last:#}");
    assert_eq!(last["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "user").count(), 2);
}
