//! Round trip of a trivial command hook: spawn in its own process group with a scrubbed
//! environment and a fresh working directory, the context JSON on stdin, a JSON decision on
//! stdout, exit 0, the group killed and the directory removed. Reports the median and p99 over
//! a few hundred calls (goal: median ≤ 10 ms). Run with `cargo bench -p tether-hooks --bench command`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tether_hooks::{DeclarativeHooks, HookConfig};
use tether_scripted::ScriptedModel;

/// Calls one hook `runs` times (after a short warm-up) and returns the sorted durations.
async fn measure(hooks: &DeclarativeHooks, hook_id: &str, runs: usize) -> Vec<Duration> {
    let context = json!({
        "hook_event_name": "PostToolUse",
        "agent_name": "bench",
        "current_turn": 1,
        "max_turns": 10,
        "execution_summary": "/dev/null",
        "tool_name": "ExecuteShellCommand",
        "tool_input": {"command": "ls -la"},
        "tool_result": "total 0",
        "tool_succeeded": true
    });
    for _ in 0..10 {
        hooks.call(hook_id, &context).await.expect("hook exists");
    }
    let mut durations = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let verdict = hooks.call(hook_id, &context).await.expect("hook exists");
        durations.push(started.elapsed());
        assert!(verdict.failure.is_none(), "the benchmark hook failed: {verdict:?}");
    }
    durations.sort();
    durations
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index]
}

#[allow(clippy::print_stdout)]
fn main() {
    let yaml = r#"
hooks:
  PostToolUse:
    - type: command
      matcher: "*"
      command: 'read -r -d "" context; echo "{\"decision\": \"allow\"}"'
    - type: command
      matcher: "*"
      script: |
        #!/usr/bin/env python3
        import json, sys
        json.load(sys.stdin)
        print(json.dumps({"decision": "allow"}))
"#;
    let config = HookConfig::from_yaml_str(yaml, "bench.yaml").expect("valid hooks");
    let hooks = DeclarativeHooks::new(config, Arc::new(ScriptedModel::default())).expect("hooks start");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let cases =
        [("agent.PostToolUse[0]", "bash -c (inline command)", 300), ("agent.PostToolUse[1]", "python3 script", 100)];
    println!("command hook round trip (spawn, JSON in, JSON out, exit 0, cleanup):");
    for (hook_id, label, runs) in cases {
        let durations = runtime.block_on(measure(&hooks, hook_id, runs));
        println!(
            "  {label:<28} runs {runs:>4}  median {:>7.2} ms  p99 {:>7.2} ms  min {:>7.2} ms",
            percentile(&durations, 0.5).as_secs_f64() * 1000.0,
            percentile(&durations, 0.99).as_secs_f64() * 1000.0,
            durations[0].as_secs_f64() * 1000.0,
        );
    }
}
