//! Runs the travel-agent example against a real model and prints one JSON line per request:
//! `travel-local BASE_URL TOOL_MODE [REQUEST…]`. The task benchmark checks the lines
//! (bench/tasks/extras.mjs). A crate of its own so that the example keeps no HTTP stack.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use tether_agent::{OpenAiConfig, OpenAiProvider, RunSink, ToolMode};
use tether_protocol::RunEvent;
use travel_agent::{TravelDesk, travel_agent};

#[tokio::main]
#[allow(clippy::print_stdout)]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let base = args.next().context("usage: travel-local BASE_URL TOOL_MODE [REQUEST…]")?;
    let mode: ToolMode = args.next().unwrap_or_else(|| "auto".into()).parse()?;
    let mut requests: Vec<String> = args.collect();
    if requests.is_empty() {
        requests = vec![
            "Book me the most comfortable seat to Mar del Plata on Friday.".into(),
            "Book me a tourist seat on the morning train to Mar del Plata on Friday.".into(),
        ];
    }
    let mut config = OpenAiConfig::new(base, "qwen2.5-coder-1.5b-instruct");
    config.tool_mode = mode;
    config.temperature = Some(0.0);
    config.max_tokens = Some(300);
    let agent = travel_agent(Arc::new(OpenAiProvider::new(config)?));
    for request in requests {
        let desk = TravelDesk::default();
        let calls = Mutex::new(Vec::new());
        let on_delta = |_: &str| {};
        let on_event = |event: RunEvent| {
            if let RunEvent::ToolExecutionEnd(end) = event {
                calls
                    .lock()
                    .expect("calls")
                    .push(json!({"tool": end.tool, "status": end.status.as_str(), "output": end.output}));
            }
        };
        let started = Instant::now();
        let outcome = agent
            .run(&desk, &RunSink { on_delta: &on_delta, on_event: &on_event }, "run-1", &request, Vec::new())
            .await;
        let line = json!({
            "request": request,
            "status": outcome.status.as_str(),
            "answer": outcome.answer,
            "error": outcome.error,
            "turns": outcome.turns,
            "seconds": started.elapsed().as_secs_f64(),
            "bookings": desk.bookings(),
            "calls": calls.into_inner().expect("calls"),
        });
        println!("{line}");
    }
    Ok(())
}
