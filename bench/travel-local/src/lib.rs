//! What the benchmark helpers share: their arguments (`BASE_URL TOOL_MODE [--conversation]
//! [REQUEST…]`), the model as `tether serve` talks to it, and the run of one request with the
//! fields of its JSON line that do not depend on the app.

use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};
use tether_agent::{AgentLoop, ChatMessage, OpenAiConfig, OpenAiProvider, RunSink, ToolHost, ToolMode};
use tether_protocol::RunEvent;

/// A helper's command line.
pub struct Cli {
    /// The model server (OpenAI-compatible).
    pub base: String,
    /// How tools reach the model.
    pub mode: ToolMode,
    /// The requests are one conversation with one app, not each a fresh one.
    pub conversation: bool,
    /// The user's messages, in order.
    pub requests: Vec<String>,
}

/// Reads the command line; `name` is the helper's, for the usage line.
pub fn cli(name: &str) -> Result<Cli> {
    let mut args = std::env::args().skip(1);
    let base = args.next().with_context(|| format!("usage: {name} BASE_URL TOOL_MODE [--conversation] [REQUEST…]"))?;
    let mode: ToolMode = args.next().unwrap_or_else(|| "auto".into()).parse()?;
    let mut requests: Vec<String> = args.collect();
    let conversation = requests.first().is_some_and(|r| r == "--conversation");
    if conversation {
        requests.remove(0);
    }
    Ok(Cli { base, mode, conversation, requests })
}

/// The local model as the task benchmark's `tether serve` talks to it: temperature 0, at most
/// 300 tokens a reply.
pub fn model(cli: &Cli) -> Result<Arc<OpenAiProvider>> {
    let mut config = OpenAiConfig::new(cli.base.clone(), "qwen2.5-coder-1.5b-instruct");
    config.tool_mode = cli.mode;
    config.temperature = Some(0.0);
    config.max_tokens = Some(300);
    Ok(Arc::new(OpenAiProvider::new(config)?))
}

/// `agent` with the checks `tether serve` turns on for OpenAI-compatible models. The better-fit
/// check's ratio can be set as `tether serve --better-fit-ratio` sets it, by the environment
/// variable `TETHER_BETTER_FIT_RATIO` (0: off), and the look-up turned off as `--no-look-up`
/// does by `TETHER_LOOK_UP=0`, so that a benchmark can compare.
pub fn as_served(agent: AgentLoop) -> AgentLoop {
    let agent = agent
        .with_question_check(true)
        .with_fit_check(Some(tether_agent::DEFAULT_FIT_THRESHOLD))
        .with_look_up(std::env::var("TETHER_LOOK_UP").as_deref() != Ok("0"));
    match std::env::var("TETHER_BETTER_FIT_RATIO").ok().and_then(|ratio| ratio.parse::<f64>().ok()) {
        Some(ratio) => agent.with_better_fit_check((ratio > 0.0).then_some(ratio)),
        None => agent,
    }
}

fn now_ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or_default()
}

/// Runs `request` (the `n`th) on `host` after `history`: the conversation after it, and the
/// fields of its JSON line that every app has (the request, status, answer, error, turns,
/// seconds, its start and end in Unix milliseconds, and `ends`: each tool execution's end).
pub async fn run_one(
    agent: &AgentLoop,
    host: &dyn ToolHost,
    n: usize,
    request: &str,
    history: Vec<ChatMessage>,
) -> (Vec<ChatMessage>, Map<String, Value>) {
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
    let sink = RunSink { on_delta: &on_delta, on_event: &on_event };
    let outcome = agent.run(host, &sink, &format!("run-{n}").into(), request, history).await;
    let line = json!({
        "request": request,
        "status": outcome.status.as_str(),
        "answer": outcome.answer,
        "error": outcome.error,
        "turns": outcome.turns,
        "seconds": started.elapsed().as_secs_f64(),
        "startedMs": started_ms,
        "endedMs": now_ms(),
        "ends": ends.into_inner().expect("ends"),
    });
    let Value::Object(line) = line else { unreachable!("a JSON object") };
    (outcome.messages, line)
}
