//! Claude Code's hook format (`settings.json` `hooks`), loaded by its shape and run through real
//! runs: exit 2 and JSON decisions, `permissionDecision` allow/deny/ask, `updatedInput`
//! re-validated, `UserPromptSubmit` and `SessionStart`, the Claude Code input fields, and
//! Tether's fail-closed `failMode` where Claude Code fails open.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use tether_agent::{ChatMessage, NoteKind};
use tether_hooks::{FailMode, HookConfig, HookEvent, HookFormat};
use tether_protocol::RunStatus;

/// A settings document with one matcher group for `event`.
fn settings(event: &str, matcher: &str, hook: &Value) -> String {
    json!({"hooks": {event: [{"matcher": matcher, "hooks": [hook]}]}}).to_string()
}

fn command(command: &str) -> Value {
    json!({"type": "command", "command": command})
}

#[test]
fn a_settings_file_loads_by_its_shape_with_claude_defaults() {
    let text = json!({
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash|ExecuteShellCommand", "hooks": [
                {"type": "command", "command": "exit 0"},
                {"type": "command", "command": "exit 0", "timeout": 120, "failMode": "allow", "statusMessage": "checking"}
            ]}],
            "Stop": [{"hooks": [{"type": "prompt", "prompt": "Is the answer complete? $ARGUMENTS"}]}],
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "exit 0"}]}],
            "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"}]}],
            "Notification": [{"hooks": [{"type": "command", "command": "exit 0"}]}]
        }
    })
    .to_string();
    let config = HookConfig::from_yaml_str(&text, "settings.json").unwrap();
    let hooks = config.hooks();
    assert_eq!(hooks.len(), 5, "{hooks:?}");
    assert!(hooks.iter().all(|h| h.format == HookFormat::ClaudeCode));
    let pre: Vec<_> = hooks.iter().filter(|h| h.event == HookEvent::PreToolUse).collect();
    assert_eq!(pre[0].id, "agent.PreToolUse[0]");
    assert_eq!(pre[1].id, "agent.PreToolUse[1]");
    // Claude Code's default timeout; Tether's failMode, closed by default.
    assert_eq!(pre[0].timeout, Duration::from_secs(60));
    assert_eq!(pre[0].fail_mode, FailMode::Block);
    assert_eq!((pre[1].timeout, pre[1].fail_mode), (Duration::from_secs(120), FailMode::Allow));
    assert!(pre[0].applies_to("Bash") && pre[0].applies_to("ExecuteShellCommand") && !pre[0].applies_to("Read"));
    let warnings = config.warnings().join("\n");
    assert!(
        warnings.contains("permissions") && warnings.contains("Notification") && warnings.contains("statusMessage"),
        "{warnings}"
    );
}

#[test]
fn an_empty_or_missing_matcher_covers_every_tool() {
    for group in [json!({"hooks": [command("exit 0")]}), json!({"matcher": "", "hooks": [command("exit 0")]})] {
        let text = json!({"hooks": {"PostToolUse": [group]}}).to_string();
        let config = HookConfig::from_yaml_str(&text, "settings.json").unwrap();
        assert!(config.hooks()[0].applies_to("anything"));
    }
}

#[test]
fn invalid_settings_are_refused_naming_the_hook_and_field() {
    let refused = |text: String| HookConfig::from_yaml_str(&text, "settings.json").unwrap_err().to_string();
    let message = refused(settings("PreToolUse", "*", &json!({"type": "http", "url": "http://x"})));
    assert!(message.contains("PreToolUse[0].hooks[0]") && message.contains("`url`"), "{message}");
    let message = refused(settings("PreToolUse", "*", &json!({"type": "http"})));
    assert!(message.contains("not supported"), "{message}");
    let message =
        refused(settings("PreToolUse", "*", &json!({"type": "command", "command": "x", "failmode": "allow"})));
    assert!(message.contains("`failmode`"), "a typo must not silently change the policy: {message}");
    let message = refused(settings("PreToolUse", "*", &json!({"type": "command", "command": "x", "timeout": 601})));
    assert!(message.contains("`timeout`"), "{message}");
    let message = refused(settings("PreTooluse", "*", &command("x")));
    assert!(message.contains("PreTooluse"), "{message}");
    let message = refused(settings("PreToolUse", "(", &command("x")));
    assert!(message.contains("regex"), "{message}");
}

#[tokio::test]
async fn deny_by_json_or_exit_2_never_runs_the_tool() {
    let deny = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "Not on this server."}});
    for hook in [command(&format!("printf '%s' '{deny}'")), command("echo 'rm is not allowed' >&2; exit 2")] {
        let hooks = hooks(&settings("PreToolUse", "ExecuteShellCommand", &hook));
        let host = ShellHost::new();
        let run = run(&agent(&hooks), &host, "run `rm -rf /tmp/x`").await;
        assert_eq!(host.runs(), 0, "the tool must not run");
        let read = run.tool_messages().join("\n");
        assert!(read.contains("Not on this server.") || read.contains("rm is not allowed"), "{read}");
        assert!(!read.contains(RAW_RESULT));
        assert_eq!(run.audits()[0].decision, "block");
    }
}

#[tokio::test]
async fn a_failing_hook_fails_closed_unless_its_fail_mode_says_allow() {
    // Claude Code lets the call through when a hook exits 1 (or its script is missing); Tether's
    // failMode defaults to block in this format.
    let hooks_closed = hooks(&settings("PreToolUse", "*", &command("exit 1")));
    let host = ShellHost::new();
    let run_closed = run(&agent(&hooks_closed), &host, "run `ls`").await;
    assert_eq!(host.runs(), 0);
    assert!(run_closed.tool_messages()[0].contains("failMode is block"), "{:?}", run_closed.tool_messages());
    let open = json!({"type": "command", "command": "/no/such/script.sh", "failMode": "allow"});
    let hooks_open = hooks(&settings("PreToolUse", "*", &open));
    let host = ShellHost::new();
    run(&agent(&hooks_open), &host, "run `ls`").await;
    assert_eq!(host.runs(), 1);
}

#[tokio::test]
async fn updated_input_is_checked_against_the_schema_and_the_model_is_told() {
    let rewrite = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
        "updatedInput": {"command": "ls -la --color=never"}}});
    let rewriting = hooks(&settings("PreToolUse", "*", &command(&format!("printf '%s' '{rewrite}'"))));
    let host = ShellHost::new();
    let rewritten = run(&agent(&rewriting), &host, "run `ls -la`").await;
    assert_eq!(*host.executed.lock().unwrap(), vec![json!({"command": "ls -la --color=never"})]);
    assert!(rewritten.tool_messages()[0].contains("A hook changed the arguments"), "{:?}", rewritten.tool_messages());

    // Arguments the schema refuses: the tool does not run.
    let invalid = json!({"hookSpecificOutput": {"updatedInput": {"command": 42}}});
    let hooks = hooks(&settings("PreToolUse", "*", &command(&format!("printf '%s' '{invalid}'"))));
    let host = ShellHost::new();
    let run = run(&agent(&hooks), &host, "run `ls -la`").await;
    assert_eq!(host.runs(), 0);
    let read = &run.tool_messages()[0];
    assert!(read.contains("not valid") && read.contains("/command must be a string"), "{read}");
}

#[tokio::test]
async fn the_azure_format_gains_updated_input_too() {
    let yaml = r#"
hooks:
  PreToolUse:
    - type: command
      matcher: "*"
      command: 'printf "%s" "{\"decision\": \"allow\", \"hookSpecificOutput\": {\"updatedInput\": {\"command\": \"echo safe\"}}}"'
"#;
    let hooks = hooks(yaml);
    let host = ShellHost::new();
    run(&agent(&hooks), &host, "run `rm -rf /`").await;
    assert_eq!(*host.executed.lock().unwrap(), vec![json!({"command": "echo safe"})]);
}

#[tokio::test]
async fn ask_escalates_the_call_to_the_users_approval() {
    let ask = json!({"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "Shell commands need a human."}});
    let hooks = hooks(&settings("PreToolUse", "*", &command(&format!("printf '%s' '{ask}'"))));
    let host = ShellHost::new();
    let approved = run(&agent(&hooks), &host, "run `ls`").await;
    assert_eq!(*host.approvals_asked.lock().unwrap(), vec!["Shell commands need a human.".to_string()]);
    assert_eq!(host.runs(), 1, "approved: it runs");
    assert_eq!(approved.audits()[0].decision, "ask");
    let mut refusing = ShellHost::new();
    refusing.user_approves = false;
    let refused = run(&agent(&hooks), &refusing, "run `ls`").await;
    assert_eq!(refusing.runs(), 0);
    assert!(refused.tool_messages()[0].contains("The user refused."));
}

#[tokio::test]
async fn hooks_receive_claude_codes_input_and_environment() {
    let dir = TestDir::new("claude-input");
    let input = dir.path("input.json");
    let env = dir.path("env.txt");
    let hook = command(&format!("cat > {input}; printf '%s' \"$CLAUDE_PROJECT_DIR\" > {env}"));
    let hooks = hooks(&settings("PreToolUse", "*", &hook));
    run(&agent(&hooks), &ShellHost::new(), "run `ls`").await;
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(&input).unwrap()).unwrap();
    assert_eq!(seen["hook_event_name"], "PreToolUse");
    assert_eq!(seen["tool_name"], "ExecuteShellCommand");
    assert_eq!(seen["tool_input"], json!({"command": "ls"}));
    for field in ["session_id", "transcript_path", "cwd", "tool_use_id", "permission_mode"] {
        assert!(seen[field].is_string(), "{field} missing in {seen}");
    }
    let transcript = std::fs::read_to_string(seen["transcript_path"].as_str().unwrap()).unwrap();
    assert!(transcript.contains("run `ls`"), "{transcript}");
    let project = std::fs::read_to_string(&env).unwrap();
    assert_eq!(project, std::env::current_dir().unwrap().display().to_string());
}

#[tokio::test]
async fn post_tool_use_blocks_the_result_and_adds_context() {
    let output = json!({"decision": "block", "reason": "Output withheld.", "hookSpecificOutput": {"additionalContext": "Audit logged."}});
    let hooks = hooks(&settings("PostToolUse", "*", &command(&format!("printf '%s' '{output}'"))));
    let host = ShellHost::new();
    let run = run(&agent(&hooks), &host, "run `ls`").await;
    assert_eq!(host.runs(), 1, "PostToolUse runs after the tool");
    let read = run.model_read();
    assert!(read.contains("Output withheld.") && !read.contains(RAW_RESULT), "{read}");
    assert!(run.hook_messages().iter().any(|m| m.contains("Audit logged.")), "{:?}", run.hook_messages());
}

#[tokio::test]
async fn a_stop_hook_sends_the_answer_back_with_its_reason() {
    let dir = TestDir::new("claude-stop");
    let marker = dir.path("stopped-once");
    // Rejects the first answer only (a hook must not loop forever: `stop_hook_active`).
    let script = format!(
        "input=$(cat); if [ ! -e {marker} ]; then touch {marker}; printf '%s' '{{\"decision\": \"block\", \"reason\": \"Say which files.\"}}'; fi"
    );
    let hooks = hooks(&settings("Stop", "", &command(&script)));
    let run = run(&agent(&hooks), &ShellHost::new(), "hello").await;
    assert_eq!(run.outcome.status, RunStatus::Completed);
    let feedback = run.hook_messages();
    assert!(feedback.iter().any(|m| m.contains("Say which files.")), "{feedback:?}");
    assert_eq!(run.audits().iter().map(|a| a.decision.as_str()).collect::<Vec<_>>(), ["block", "allow"]);
}

#[tokio::test]
async fn user_prompt_submit_refuses_or_adds_context() {
    let hooks_block = hooks(&settings("UserPromptSubmit", "", &command("echo 'No secrets in prompts.' >&2; exit 2")));
    let host = ShellHost::new();
    let refused = run(&agent(&hooks_block), &host, "my password is hunter2, run `ls`").await;
    assert_eq!(refused.outcome.status, RunStatus::Refused);
    assert!(refused.outcome.answer.contains("No secrets in prompts."), "{}", refused.outcome.answer);
    assert!(refused.text.contains("No secrets in prompts."), "the user reads why");
    assert_eq!(host.runs(), 0);
    assert!(!refused.model_read().contains("hunter2"), "the message is not kept");

    let hooks_context = hooks(&settings("UserPromptSubmit", "", &command("echo 'The user is on the staff plan.'")));
    let run = run(&agent(&hooks_context), &ShellHost::new(), "hello").await;
    let messages = &run.outcome.messages;
    let user = messages.iter().position(|m| matches!(m, ChatMessage::User { content } if content == "hello")).unwrap();
    match &messages[user + 1] {
        ChatMessage::Note { kind: NoteKind::Hook, content } => {
            assert!(content.contains("The user is on the staff plan.") && content.starts_with("[hook "), "{content}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn session_start_context_comes_only_when_the_conversation_starts() {
    let hooks = hooks(&settings("SessionStart", "startup", &command("echo 'Store hours: 9-17.'")));
    let agent = agent(&hooks);
    let host = ShellHost::new();
    let first = run(&agent, &host, "hello").await;
    assert!(first.hook_messages().iter().any(|m| m.contains("Store hours")), "{:?}", first.hook_messages());
    // The next message continues the conversation: no second SessionStart.
    let events = std::sync::Mutex::new(Vec::new());
    let on_delta = |_: &str| {};
    let on_event = |event| events.lock().unwrap().push(event);
    let sink = tether_agent::RunSink { on_delta: &on_delta, on_event: &on_event };
    let second = agent.run(&host, &sink, &"run-2".into(), "again", first.outcome.messages.clone()).await;
    let count = second
        .messages
        .iter()
        .filter(|m| matches!(m, ChatMessage::Note { content, .. } if content.contains("Store hours")))
        .count();
    assert_eq!(count, 1, "SessionStart ran once");
}
