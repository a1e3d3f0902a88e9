//! Loopback measurements against a real `tether serve` process:
//! - `TOOL_RESULT` → `TOOL_RESULT_ACK` round trip (the server applies the result and answers),
//! - `USER_MESSAGE` → `TOOL_CALL` latency with the built-in model,
//! - how many idle sessions one server holds, and its memory per session.
//!
//! `cargo bench -p tether-server --bench loopback` (SESSIONS=10000 by default).

#[path = "../tests/common/serve.rs"]
mod serve;

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tether_protocol::*;
use tokio_tungstenite::tungstenite::Message;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn send(ws: &mut Socket, frame: ClientFrame) {
    ws.send(Message::Text(encode_frame(&frame).into())).await.unwrap();
}

async fn recv(ws: &mut Socket) -> ServerFrame {
    loop {
        match ws.next().await.unwrap().unwrap() {
            Message::Text(text) => return decode_server_frame(&text, usize::MAX).unwrap(),
            _ => continue,
        }
    }
}

async fn hello(url: &str) -> Socket {
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true).await.unwrap();
    send(
        &mut ws,
        ClientFrame::Hello(Hello { id: "h".into(), protocol_version: PROTOCOL_VERSION, resume: None, client: None }),
    )
    .await;
    while !matches!(recv(&mut ws).await, ServerFrame::Welcome(_)) {}
    ws
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[allow(clippy::print_stdout)]
fn report(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{label}: n={} p50={:.3} ms p95={:.3} ms p99={:.3} ms",
        samples.len(),
        percentile(&samples, 0.5).as_secs_f64() * 1e3,
        percentile(&samples, 0.95).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3
    );
}

#[tokio::main]
#[allow(clippy::print_stdout)]
async fn main() {
    let sessions: usize = std::env::var("SESSIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    // One client address opens every session, and one connection sends thousands of frames a
    // second: lift those two limits for the measurement.
    let served = serve::Serve::new().args(["--max-sessions-per-ip", "0", "--max-frames-per-second", "0"]).start();
    let url = served.url();
    let pid = served.pid();

    // Round trips on one session.
    let mut ws = hello(&url).await;
    let tools = vec![ToolSpec {
        name: "cart_add".into(),
        description: "Add a product to the cart.".into(),
        parameters: json!({"type": "object", "properties": {"productId": {"enum": ["mug-red"]}}}),
        risk: Risk::None,
        global: false,
    }];
    send(
        &mut ws,
        ClientFrame::ContextUpdate(ContextUpdate {
            id: "c".into(),
            revision: 1,
            tools,
            page: None,
            context: Vec::new(),
        }),
    )
    .await;
    let (mut to_call, mut to_ack) = (Vec::new(), Vec::new());
    for n in 0..2000 {
        let started = Instant::now();
        send(
            &mut ws,
            ClientFrame::UserMessage(UserMessage { id: format!("u{n}"), text: "add the red mug to my cart".into() }),
        )
        .await;
        let call = loop {
            if let ServerFrame::ToolCall(call) = recv(&mut ws).await {
                break call;
            }
        };
        to_call.push(started.elapsed());
        let sent = Instant::now();
        let result =
            ToolResult { id: format!("r{n}"), call_id: call.call_id, status: ResultStatus::Ok, content: json!("ok") };
        send(&mut ws, ClientFrame::ToolResult(result)).await;
        loop {
            match recv(&mut ws).await {
                ServerFrame::ToolResultAck(_) => to_ack.push(sent.elapsed()),
                ServerFrame::AgentMessage(m) if m.done => break,
                _ => {}
            }
        }
    }
    report("TOOL_RESULT -> TOOL_RESULT_ACK round trip (loopback)", to_ack);
    report("USER_MESSAGE -> TOOL_CALL (scripted model, one turn)", to_call);

    // Idle sessions.
    let before = rss_kib(pid);
    let started = Instant::now();
    let mut idle = Vec::with_capacity(sessions);
    for batch in 0..sessions.div_ceil(250) {
        let count = 250.min(sessions - batch * 250);
        let opened = futures_util::future::join_all((0..count).map(|_| hello(&url))).await;
        idle.extend(opened);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib(pid);
    println!(
        "idle sessions: {} open in {:.1} s; server RSS {} KiB -> {} KiB: {:.1} KiB per session",
        idle.len(),
        started.elapsed().as_secs_f64(),
        before,
        after,
        (after.saturating_sub(before)) as f64 / idle.len() as f64
    );
    drop(idle);
    drop(served);
}
