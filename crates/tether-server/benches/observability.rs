//! What tracing costs, side by side in one run against three real `tether serve` processes
//! taking turns: trace export off (no `OTEL_*` variable; the metrics are measured as always),
//! export on to a collector that is down (a closed port), and export on to a collector that
//! takes every batch (an OTLP/HTTP receiver in this process). For each: the `USER_MESSAGE` →
//! `TOOL_CALL` and `TOOL_RESULT` → `TOOL_RESULT_ACK` medians, and runs per second of one client.
//!
//! `cargo bench -p tether-server --bench observability` (RUNS=1500 per server by default);
//! docs/observability.md has the figures.

#[path = "../tests/common/serve.rs"]
mod serve;
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use support::{context, hello, one_run, percentile};

/// An OTLP/HTTP receiver that takes every batch and counts the bytes.
async fn collector() -> (String, Arc<AtomicUsize>) {
    let received = Arc::new(AtomicUsize::new(0));
    let counted = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(body.len(), Ordering::Relaxed);
                [(axum::http::header::CONTENT_TYPE, "application/x-protobuf")]
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, received)
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

#[tokio::main]
#[allow(clippy::print_stdout)]
async fn main() {
    let runs: usize = std::env::var("RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500);
    let (collector_url, received) = collector().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let limits = ["--max-sessions-per-ip", "0", "--max-frames-per-second", "0", "--store", "memory"];
    let off = serve::Serve::new().args(limits).start();
    let down = serve::Serve::new().args(limits).env("OTEL_EXPORTER_OTLP_ENDPOINT", &down_url).start();
    let on = serve::Serve::new().args(limits).env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector_url).start();
    let servers = [("export off", &off), ("export on, collector down", &down), ("export on, collector up", &on)];

    // A session holds its whole conversation: a new one every 20 runs, as in the loopback bench.
    const RUNS_PER_SESSION: usize = 20;
    let mut sockets = Vec::new();
    let mut calls = vec![Vec::new(); servers.len()];
    let mut acks = vec![Vec::new(); servers.len()];
    let mut busy = vec![Duration::ZERO; servers.len()];
    for n in 0..runs {
        if n % RUNS_PER_SESSION == 0 {
            sockets.clear();
            for (_, server) in &servers {
                let mut ws = hello(&server.url()).await;
                support::send(&mut ws, context(1)).await;
                sockets.push(ws);
            }
        }
        // Taking turns, in a rotating order, so that every configuration sees the same machine.
        for k in 0..servers.len() {
            let index = (n + k) % servers.len();
            let started = Instant::now();
            let (call, ack) = one_run(&mut sockets[index], n).await;
            busy[index] += started.elapsed();
            calls[index].push(call);
            acks[index].push(ack);
        }
    }

    println!(
        "| tracing | USER_MESSAGE → TOOL_CALL p50 | TOOL_RESULT → ack p50 | runs/s (one client) | vs export off |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let base = runs as f64 / busy[0].as_secs_f64();
    for (index, (label, _)) in servers.iter().enumerate() {
        calls[index].sort();
        acks[index].sort();
        let rate = runs as f64 / busy[index].as_secs_f64();
        println!(
            "| {label} | {:.3} ms | {:.3} ms | {rate:.0} | {:+.1} % |",
            ms(percentile(&calls[index], 0.5)),
            ms(percentile(&acks[index], 0.5)),
            (rate / base - 1.0) * 100.0
        );
    }
    // Export happened while measured (batches of 512 spans leave as they fill); the last
    // partial batch leaves within OTEL_BSP_SCHEDULE_DELAY (5 s).
    tokio::time::sleep(Duration::from_secs(6)).await;
    println!(
        "\n{runs} runs per configuration; the collector received {} bytes of spans",
        received.load(Ordering::Relaxed)
    );
}
