//! Runs the travel-agent example against a real model and prints one JSON line per request:
//! `travel-local BASE_URL TOOL_MODE [--conversation] [REQUEST…]`. Each request is a run of its own,
//! or, with `--conversation`, the next message of one conversation with one travel desk. The task
//! benchmark reads the lines (bench/tasks/run.mjs). A crate of its own so that the example keeps no
//! HTTP stack.

use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde_json::{Value, json};
use tether_agent::{BoxFuture, CallRef, OpenAiConfig, OpenAiProvider, RunSink, ToolHost, ToolMode, ToolOutput};
use tether_protocol::{RunEvent, ToolSpec};
use travel_agent::{TravelDesk, travel_agent};

/// The desk, recording every call that passed its check (whatever the policy hooks then decided:
/// what the model tried to do).
struct Recorded<'a> {
    desk: &'a TravelDesk,
    calls: Mutex<Vec<Value>>,
}

impl ToolHost for Recorded<'_> {
    fn tools(&self) -> Vec<ToolSpec> {
        self.desk.tools()
    }

    fn check(&self, name: &str, args: &Value) -> Result<(), ToolOutput> {
        self.desk.check(name, args)?;
        self.calls.lock().expect("calls").push(json!({"name": name, "args": args}));
        Ok(())
    }

    fn execute<'a>(&'a self, call: CallRef<'a>, args: Value) -> BoxFuture<'a, ToolOutput> {
        self.desk.execute(call, args)
    }
}

fn now_ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or_default()
}

#[tokio::main]
#[allow(clippy::print_stdout)]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let base = args.next().context("usage: travel-local BASE_URL TOOL_MODE [--conversation] [REQUEST…]")?;
    let mode: ToolMode = args.next().unwrap_or_else(|| "auto".into()).parse()?;
    let mut requests: Vec<String> = args.collect();
    let conversation = requests.first().is_some_and(|r| r == "--conversation");
    if conversation {
        requests.remove(0);
    }
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
    // As `tether serve` does for OpenAI-compatible models: a question changes nothing.
    let agent = travel_agent(Arc::new(OpenAiProvider::new(config)?))
        .with_question_check(true)
        .with_fit_check(Some(tether_agent::DEFAULT_FIT_THRESHOLD));
    let mut desk = TravelDesk::default();
    let mut history = Vec::new();
    for (n, request) in requests.into_iter().enumerate() {
        if !conversation {
            desk = TravelDesk::default();
            history = Vec::new();
        }
        let booked_before = desk.bookings().len();
        let host = Recorded { desk: &desk, calls: Mutex::new(Vec::new()) };
        let ends = Mutex::new(Vec::new());
        let on_delta = |_: &str| {};
        let on_event = |event: RunEvent| {
            if let RunEvent::ToolExecutionEnd(end) = event {
                ends.lock()
                    .expect("ends")
                    .push(json!({"tool": end.tool, "status": end.status.as_str(), "output": end.output}));
            }
        };
        let started = Instant::now();
        let started_ms = now_ms();
        let run_id = format!("run-{n}");
        let outcome =
            agent.run(&host, &RunSink { on_delta: &on_delta, on_event: &on_event }, &run_id, &request, history).await;
        history = outcome.messages.clone();
        let line = json!({
            "request": request,
            "status": outcome.status.as_str(),
            "answer": outcome.answer,
            "error": outcome.error,
            "turns": outcome.turns,
            "seconds": started.elapsed().as_secs_f64(),
            "startedMs": started_ms,
            "endedMs": now_ms(),
            "bookings": desk.bookings()[booked_before..].to_vec(),
            "calls": host.calls.into_inner().expect("calls"),
            "ends": ends.into_inner().expect("ends"),
        });
        println!("{line}");
    }
    Ok(())
}
