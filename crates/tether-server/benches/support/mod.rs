//! What the loopback benches share: a client over a real WebSocket, one storefront run, and
//! percentiles.

// Each bench uses only some of these.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use tether_protocol::*;
use tokio_tungstenite::tungstenite::Message;

pub(crate) type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub(crate) async fn send(ws: &mut Socket, frame: ClientFrame) {
    ws.send(Message::Text(encode_frame(&frame).into())).await.unwrap();
}

pub(crate) async fn recv(ws: &mut Socket) -> ServerFrame {
    loop {
        match ws.next().await.unwrap().unwrap() {
            Message::Text(text) => return decode_server_frame(&text, usize::MAX).unwrap(),
            _ => continue,
        }
    }
}

pub(crate) async fn hello(url: &str) -> Socket {
    welcomed(url).await.0
}

/// A new session: its socket and WELCOME.
pub(crate) async fn welcomed(url: &str) -> (Socket, Welcome) {
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true).await.unwrap();
    send(
        &mut ws,
        ClientFrame::Hello(Hello { id: "h".into(), protocol_version: PROTOCOL_VERSION, resume: None, client: None }),
    )
    .await;
    loop {
        if let ServerFrame::Welcome(welcome) = recv(&mut ws).await {
            return (ws, welcome);
        }
    }
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[allow(clippy::print_stdout)]
pub(crate) fn report(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{label}: n={} p50={:.3} ms p95={:.3} ms p99={:.3} ms",
        samples.len(),
        percentile(&samples, 0.5).as_secs_f64() * 1e3,
        percentile(&samples, 0.95).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3
    );
}

pub(crate) fn cart_tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new("cart_add", "Add a product to the cart.")
            .with_parameters(json!({"type": "object", "properties": {"productId": {"enum": ["mug-red"]}}})),
    ]
}

pub(crate) fn context(revision: u64) -> ClientFrame {
    ClientFrame::ContextUpdate(ContextUpdate {
        id: format!("c{revision}"),
        revision,
        tools: cart_tools(),
        page: None,
        context: Vec::new(),
    })
}

/// One run on `ws`: `USER_MESSAGE` → `TOOL_CALL` (the first duration), `TOOL_RESULT` →
/// `TOOL_RESULT_ACK` (the second), then the run's end.
pub(crate) async fn one_run(ws: &mut Socket, n: usize) -> (Duration, Duration) {
    let started = Instant::now();
    send(ws, ClientFrame::UserMessage(UserMessage { id: format!("u{n}"), text: "add the red mug to my cart".into() }))
        .await;
    let call = loop {
        if let ServerFrame::ToolCall(call) = recv(ws).await {
            break call;
        }
    };
    let to_call = started.elapsed();
    let sent = Instant::now();
    let result =
        ToolResult { id: format!("r{n}"), call_id: call.call_id, status: ResultStatus::Ok, content: json!("ok") };
    send(ws, ClientFrame::ToolResult(result)).await;
    let mut to_ack = None;
    loop {
        match recv(ws).await {
            ServerFrame::ToolResultAck(_) => to_ack = Some(sent.elapsed()),
            ServerFrame::AgentMessage(m) if m.done => break,
            _ => {}
        }
    }
    (to_call, to_ack.expect("the result was acknowledged"))
}

/// A HELLO that resumes `id` with `token`; whether the server resumed it.
pub(crate) async fn resume(url: &str, id: &str, token: &str) -> bool {
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, None, true).await.unwrap();
    let resume = Resume { session_id: id.into(), token: token.into(), last_seq: None, history: false };
    let hello = Hello { id: "h".into(), protocol_version: PROTOCOL_VERSION, resume: Some(resume), client: None };
    send(&mut ws, ClientFrame::Hello(hello)).await;
    loop {
        if let ServerFrame::Welcome(welcome) = recv(&mut ws).await {
            return welcome.resumed;
        }
    }
}
