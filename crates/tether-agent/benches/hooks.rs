//! In-process cost of the agent loop's hooks: the same run with no hooks and with all five
//! set to no-ops, side by side. Per-hook overhead = (difference) / 8 hook calls per run.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use tether_agent::BoxFuture;
use tether_agent::*;
use tether_protocol::{ResultStatus, RunId, ToolSpec};

/// Calls `ping` once, then answers.
struct PingModel;

impl ChatModel for PingModel {
    fn name(&self) -> &str {
        "ping"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        _: &'a (dyn Fn(&str) + Send + Sync),
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>> {
        let called = request.messages.iter().any(|m| matches!(m, ChatMessage::Tool { .. }));
        Box::pin(async move {
            Ok(if called {
                ModelReply { text: "pong".into(), ..ModelReply::default() }
            } else {
                ModelReply {
                    tool_calls: vec![ModelToolCall { id: "1".into(), name: "ping".into(), arguments: json!({}) }],
                    ..ModelReply::default()
                }
            })
        })
    }
}

struct PingHost;

impl ToolHost for PingHost {
    fn tools(&self) -> Vec<ToolSpec> {
        vec![ToolSpec::new("ping", "Ping.")]
    }
    fn check(&self, _: &str, _: &Value) -> Result<(), ToolOutput> {
        Ok(())
    }
    fn execute<'a>(&'a self, _: CallRef<'a>, _: Value) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async { ToolOutput::new(ResultStatus::Ok, "pong") })
    }
}

fn no_op_hooks() -> Hooks {
    Hooks::new()
        .on_before_turn(|_| async { Ok(()) })
        .on_before_provider_call(|call| async { Ok(call) })
        .on_before_tool_execution(|_| async { Ok(ToolDecision::Allow) })
        .on_after_tool_execution(|_, output| async { Ok(output) })
        .on_after_turn(|_| async { Ok(()) })
}

fn hooks(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let bare = AgentLoop::new(Arc::new(PingModel));
    let hooked = AgentLoop::new(Arc::new(PingModel)).with_hooks(no_op_hooks());
    let on_delta = |_: &str| {};
    let on_event = |_| {};
    let sink = RunSink { on_delta: &on_delta, on_event: &on_event };
    let run_id = RunId::from("r");
    let mut group = c.benchmark_group("agent run (2 turns, 1 tool call)");
    group.bench_function("no hooks", |b| {
        b.iter(|| black_box(runtime.block_on(bare.run(&PingHost, &sink, &run_id, "ping", Vec::new()))));
    });
    group.bench_function("5 no-op hooks (8 hook calls)", |b| {
        b.iter(|| black_box(runtime.block_on(hooked.run(&PingHost, &sink, &run_id, "ping", Vec::new()))));
    });
    group.finish();
}

criterion_group!(benches, hooks);
criterion_main!(benches);
