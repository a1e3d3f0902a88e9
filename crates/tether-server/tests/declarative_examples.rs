//! The examples in `examples/hooks/`, each shown end to end: through the agent loop with the
//! scripted model, and `extended-agent.yaml` through the real `tether serve --hooks` binary over a
//! WebSocket (a Stop rejection and a PostToolUse block).

mod common;
#[path = "../../tether-hooks/tests/support/mod.rs"]
mod declarative_support;

use common::serve::{Serve, Served};
use declarative_support::*;
use serde_json::{Value, json};
use tether_protocol::{HookDecidedBy, ResultStatus, RunStatus, ServerFrame};

#[tokio::test]
async fn stop_prompt_marker_sends_the_answer_back_until_it_ends_with_the_marker() {
    let hooks = example("stop-prompt-marker.yaml");
    let run = run(&agent(&hooks), &ShellHost::new(), "hello").await;
    assert_eq!(run.outcome.status, RunStatus::Completed);
    assert!(run.outcome.answer.ends_with("=== RESPONSE COMPLETE ==="), "{}", run.outcome.answer);
    let feedback = run.hook_messages();
    assert_eq!(feedback.len(), 1, "{feedback:?}");
    assert!(feedback[0].starts_with("[hook Stop agent.Stop[0] rejected the answer]"), "{feedback:?}");
    let audits = run.audits();
    assert_eq!(audits.iter().map(|a| a.decision.as_str()).collect::<Vec<_>>(), ["block", "allow"]);
    assert!(audits.iter().all(|a| a.decided_by == HookDecidedBy::Hook && a.exit_code.is_none()));
}

#[tokio::test]
async fn post_tool_use_policy_blocks_dangerous_shell_commands() {
    require_python3();
    let hooks = example("post-tool-use-policy.yaml");
    for command in ["rm -rf /srv/data", "sudo ls /root", "chmod 777 /srv", "cd /tmp && rm -fr cache"] {
        let host = ShellHost::new();
        let run = run(&agent(&hooks), &host, &format!("run `{command}`")).await;
        let read = run.tool_messages();
        assert!(read[0].starts_with("[denied] Blocked by policy: "), "{command}: {read:?}");
        assert!(!run.model_read().contains(RAW_RESULT), "{command}: the result leaked");
        assert_eq!(run.audits()[0].decision, "block");
    }
    for command in ["ls -la", "rm notes.txt", "chmod 755 bin/tool"] {
        let run = run(&agent(&hooks), &ShellHost::new(), &format!("run `{command}`")).await;
        assert_eq!(run.tool_messages(), [RAW_RESULT], "{command}");
        assert_eq!(run.audits()[0].decision, "allow");
    }
}

#[tokio::test]
async fn claude_settings_deny_ask_rewrite_and_refuse_a_prompt() {
    require_jq();
    let hooks = example("claude-settings.json");
    // deny: the tool never runs, the model reads the reason.
    let host = ShellHost::new();
    let denied = run(&agent(&hooks), &host, "run `rm -rf /srv/data`").await;
    assert_eq!(host.runs(), 0);
    assert!(denied.tool_messages()[0].contains("(rm -rf) are not allowed"), "{:?}", denied.tool_messages());
    // ask: the call goes to the user's approval, whatever the tool's risk (here none).
    let host = ShellHost::new();
    run(&agent(&hooks), &host, "run `sudo ls /root`").await;
    assert_eq!(*host.approvals_asked.lock().unwrap(), ["sudo runs as root: the user must approve."]);
    assert_eq!(host.runs(), 1);
    // updatedInput: the command runs under `timeout 30`, and the model is told of the change.
    let host = ShellHost::new();
    let rewritten = run(&agent(&hooks), &host, "run `ls -la`").await;
    assert_eq!(*host.executed.lock().unwrap(), [json!({"command": "timeout 30 ls -la"})]);
    assert!(rewritten.tool_messages()[0].contains("A hook changed the arguments"), "{:?}", rewritten.tool_messages());
    // UserPromptSubmit, exit 2: the message never reaches the model and the run says why.
    let host = ShellHost::new();
    let refused = run(&agent(&hooks), &host, "use the key sk-abcdefghijklmnopqrstuvwx and run `ls`").await;
    assert_eq!(refused.outcome.status, RunStatus::Refused);
    assert!(!refused.model_read().contains("sk-abcdefgh"), "the message reached the model");
    assert!(refused.outcome.answer.contains("looks like it contains an API key"), "{}", refused.outcome.answer);
    assert_eq!(host.runs(), 0);
}

#[tokio::test]
async fn post_tool_use_audit_logs_to_stderr_and_injects_additional_context() {
    require_python3();
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let hooks = example("post-tool-use-audit.yaml");
    let ok = run(&agent(&hooks), &ShellHost::new(), "run `uptime`").await;
    assert_eq!(
        ok.hook_messages(),
        [
            "[hook PostToolUse agent.PostToolUse[0] added context] [AUDIT] Tool 'ExecuteShellCommand' succeeded; the call was logged."
        ]
    );
    assert_eq!(ok.tool_messages(), [RAW_RESULT], "auditing does not change the result");
    let failed = run(&agent(&hooks), &ShellHost::with_status(ResultStatus::Error), "run `false`").await;
    assert!(failed.hook_messages()[0].contains("'ExecuteShellCommand' failed"), "{:?}", failed.hook_messages());

    let logged = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert!(logged.contains("[audit] turn 1: ExecuteShellCommand succeeded"), "{logged}");
    assert!(logged.contains("[audit] turn 1: ExecuteShellCommand failed"), "{logged}");
}

#[tokio::test]
async fn stop_command_jq_rejects_with_exit_2_until_the_answer_ends_right() {
    require_jq();
    let hooks = example("stop-command-jq.yaml");
    let run = run(&agent(&hooks), &ShellHost::new(), "hello").await;
    assert_eq!(run.outcome.status, RunStatus::Completed);
    assert!(run.outcome.answer.ends_with("Task complete."), "{}", run.outcome.answer);
    assert_eq!(
        run.hook_messages(),
        ["[hook Stop agent.Stop[0] rejected the answer] Your answer must end with \"Task complete.\""]
    );
    let audits = run.audits();
    assert_eq!((audits[0].decision.as_str(), audits[0].exit_code), ("block", Some(2)));
    assert_eq!((audits[1].decision.as_str(), audits[1].exit_code), ("allow", Some(0)));
}

#[tokio::test]
async fn two_levels_run_agent_level_hooks_first() {
    let hooks = example("two-levels.yaml");
    assert_eq!(hooks.agent_name(), Some("two_level_agent"));
    let run = run(&agent(&hooks), &ShellHost::new(), "run `ls`").await;
    assert_eq!(
        run.hook_messages(),
        [
            "[hook PostToolUse agent.PostToolUse[0] added context] agent-level audit",
            "[hook PostToolUse custom_agent.PostToolUse[0] added context] custom-agent-level audit",
        ]
    );
}

/// The server's own directory for hooks (scripts, transcripts, working directories).
fn hooks_dir(served: &Served) -> Option<std::path::PathBuf> {
    let prefix = format!("tether-hooks-{}-", served.pid());
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .find(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .map(|entry| entry.path())
}

fn serve(hooks_file: &str) -> Served {
    Serve::new()
        .args(["--hooks", hooks_file])
        // A secret in the server's environment, which hooks must never see.
        .env("TETHER_TEST_PROVIDER_KEY", "sk-not-for-hooks")
        .start()
}

fn shell_tool() -> tether_protocol::ToolSpec {
    common::tool(
        "ExecuteShellCommand",
        "Runs a shell command and returns its output.",
        json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
    )
}

#[tokio::test]
async fn tether_serve_with_hooks_blocks_a_tool_result_and_rejects_an_answer_over_a_websocket() {
    require_python3();
    let file = examples_dir().join("extended-agent.yaml");
    let served = serve(file.to_str().unwrap());
    let mut client = common::Client::connect(&served.url()).await;
    client.hello(None).await;
    client.context(1, vec![shell_tool()]).await;
    client.say("run `sudo rm -rf /var/lib/app`").await;
    let call = client.tool_call().await;
    assert_eq!(
        (call.name.as_str(), &call.args),
        ("ExecuteShellCommand", &json!({"command": "sudo rm -rf /var/lib/app"}))
    );
    client.result(&call.call_id, ResultStatus::Ok, json!(RAW_RESULT)).await;

    let mut events: Vec<Value> = Vec::new();
    let mut answer = String::new();
    let status = client
        .recv_until(|frame| {
            let text = serde_json::to_string(frame).unwrap();
            assert!(!text.contains(RAW_RESULT), "the blocked result reached the client: {text}");
            match frame {
                ServerFrame::Event(event) => {
                    events.push(serde_json::to_value(&event.event).unwrap());
                    None
                }
                ServerFrame::AgentMessage(message) => {
                    answer.push_str(&message.delta);
                    message.done.then(|| message.status.unwrap())
                }
                _ => None,
            }
        })
        .await;

    // The PostToolUse policy replaced the result: the model read the reason.
    let end = events.iter().find(|e| e["kind"] == "tool_execution_end").expect("a tool_execution_end event");
    assert_eq!(end["status"], "denied");
    assert!(end["output"].as_str().unwrap().starts_with("Blocked: the command matches"), "{end}");
    // The Stop hook rejected the first answer; the run went on and completed.
    assert_eq!(status, RunStatus::Completed);
    assert!(answer.ends_with("Task complete."), "{answer}");
    assert!(answer.contains("Blocked: the command matches"), "{answer}");
    // One audit EVENT per hook call, in order.
    let audits: Vec<(String, String, String)> = events
        .iter()
        .filter(|e| e["kind"] == "hook")
        .map(|e| {
            (
                e["hookId"].as_str().unwrap().to_string(),
                e["decision"].as_str().unwrap().to_string(),
                e["decidedBy"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        ("custom_agent.PostToolUse[0]", "block", "hook"),
        ("custom_agent.Stop[0]", "block", "hook"),
        ("custom_agent.Stop[0]", "allow", "hook"),
    ];
    assert_eq!(audits, expected.map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())));
    let levels: Vec<&Value> = events.iter().filter(|e| e["kind"] == "hook").map(|e| &e["level"]).collect();
    assert!(levels.iter().all(|level| *level == "custom_agent"));

    // The server's hooks directory exists while it runs and is removed when it stops.
    let dir = hooks_dir(&served).expect("the server's hooks directory");
    assert!(dir.join("transcripts").read_dir().unwrap().next().is_some(), "the run's transcript was written");
    client.close().await;
    // Stopped as Ctrl-C would: it exits cleanly.
    let status = served.interrupt();
    assert!(status.success(), "{status:?}");
    assert!(!dir.exists(), "{} was left behind", dir.display());
}

#[test]
fn tether_serve_refuses_to_start_with_an_invalid_hooks_file() {
    let dir = std::env::temp_dir().join(format!("tether-bad-hooks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.yaml");
    std::fs::write(
        &file,
        "hooks:\n  PostToolUse:\n    - {type: command, matcher: '*', command: 'exit 0', timeout: 301}\n",
    )
    .unwrap();
    let output = Serve::new().args([std::ffi::OsStr::new("--hooks"), file.as_os_str()]).run_to_end();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("agent.PostToolUse[0]") && stderr.contains("`timeout`"), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).is_empty(), "it must not start listening");
}
