//! Declarative hooks through real runs: the context a hook receives (and the transcript behind
//! `execution_summary`), the scrubbed environment and own working directory of command hooks,
//! the Stop rejection loop and `maxRejections` for command hooks, rejections without a reason,
//! PostToolUse on failed tools, `additionalContext` in hook order, PreToolUse blocks, and prompt
//! hooks reading the transcript (and nothing else) through `ReadFile`/`GrepSearch`.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use tether_agent::{ChatMessage, ChatRequest, ModelReply, ModelToolCall, NoteKind};
use tether_protocol::{HookDecidedBy, ResultStatus, RunStatus};
use tether_scripted::Replay;

/// Reads the JSON lines a recording hook appended to `path`.
fn records(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// A Python hook that appends what it received (context, transcript, cwd, environment) to
/// `record`, then prints `answer_code`'s output.
fn recording_script(record: &str, answer_code: &str) -> String {
    format!(
        r#"#!/usr/bin/env python3
import json, os, sys
context = json.load(sys.stdin)
try:
    transcript = open(context["execution_summary"]).read()
except OSError as error:
    transcript = "unreadable: " + str(error)
entry = {{"context": context, "transcript": transcript, "cwd": os.getcwd(), "env": sorted(os.environ)}}
with open({record:?}, "a") as out:
    out.write(json.dumps(entry) + "\n")
{answer_code}
"#
    )
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("        {line}\n")).collect()
}

#[tokio::test]
async fn a_stop_hook_gets_the_context_and_the_transcript_and_the_run_continues_until_it_accepts() {
    require_python3();
    let dir = TestDir::new("stop-context");
    let record = dir.path("stop.jsonl");
    let script = recording_script(
        &record,
        "if context[\"stop_rejection_count\"] == 0:\n    print(json.dumps({\"ok\": False, \"reason\": \"The answer must end with \\\"[DONE]\\\".\"}))",
    );
    let hooks = hooks(&format!("hooks:\n  Stop:\n    - type: command\n      script: |\n{}", indent(&script)));
    let agent = agent(&hooks).with_agent_name("hooked_agent").with_max_turns(5);
    let run = run(&agent, &ShellHost::new(), "hello").await;

    assert_eq!(run.outcome.status, RunStatus::Completed);
    assert!(run.outcome.answer.ends_with("[DONE]"), "{}", run.outcome.answer);
    assert_eq!(run.text, run.outcome.answer, "only the accepted answer is streamed");
    assert_eq!(
        run.hook_messages(),
        ["[hook Stop agent.Stop[0] rejected the answer] The answer must end with \"[DONE]\"."]
    );

    let seen = records(&record);
    assert_eq!(seen.len(), 2);
    let (first, second) = (&seen[0]["context"], &seen[1]["context"]);
    assert_eq!(first["hook_event_name"], "Stop");
    assert_eq!(first["agent_name"], "hooked_agent");
    assert_eq!((first["current_turn"].clone(), first["max_turns"].clone()), (json!(1), json!(5)));
    assert_eq!((first["stop_hook_active"].clone(), first["stop_rejection_count"].clone()), (json!(false), json!(0)));
    assert_eq!((second["stop_hook_active"].clone(), second["stop_rejection_count"].clone()), (json!(true), json!(1)));
    assert_eq!(second["current_turn"], 2);
    assert!(first["final_output"].as_str().unwrap().starts_with("(scripted model) "));
    assert_eq!(second["final_output"], run.outcome.answer.as_str());
    // `execution_summary` is a file with the conversation so far.
    let transcript = seen[0]["transcript"].as_str().unwrap();
    assert!(transcript.contains("[user]\nhello") && transcript.contains(first["final_output"].as_str().unwrap()));
    assert!(seen[1]["transcript"].as_str().unwrap().contains("[hook Stop agent.Stop[0] rejected the answer]"));
    assert!(first["execution_summary"].as_str().unwrap().starts_with(hooks.dir().to_str().unwrap()));

    // A scrubbed environment (nothing of this test process, e.g. CARGO_*), and a working
    // directory of its own under the server's directory.
    assert_eq!(seen[0]["env"], json!(["HOME", "LANG", "PATH", "TMPDIR"]));
    let cwd = seen[0]["cwd"].as_str().unwrap();
    assert!(cwd.starts_with(hooks.dir().join("work").to_str().unwrap()), "{cwd}");
    assert_ne!(seen[0]["cwd"], seen[1]["cwd"], "each call gets its own directory");

    let audits = run.audits();
    assert_eq!(audits.len(), 2);
    assert_eq!((audits[0].decision.as_str(), audits[0].decided_by), ("block", HookDecidedBy::Hook));
    assert_eq!((audits[1].decision.as_str(), audits[1].exit_code), ("allow", Some(0)));
}

#[tokio::test]
async fn max_rejections_caps_command_stop_hooks_too() {
    let hooks = hooks(
        "hooks:\n  Stop:\n    - type: command\n      maxRejections: 2\n      command: \"echo 'Not good enough.' >&2; exit 2\"\n",
    );
    let run = run(&agent(&hooks), &ShellHost::new(), "hello").await;
    assert_eq!(run.outcome.status, RunStatus::Capped);
    assert_eq!(run.outcome.turns, 3);
    assert_eq!(run.hook_messages().len(), 2, "two rejections went back to the model");
    assert!(run.hook_messages().iter().all(|m| m.ends_with("] Not good enough.")));
    assert!(!run.outcome.answer.is_empty() && run.text == run.outcome.answer, "the last answer is delivered");
    assert_eq!(run.audits().len(), 3);
}

#[tokio::test]
async fn a_rejection_without_a_reason_counts_as_approval_with_a_warning_naming_the_hook() {
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    for command in ["exit 2", "echo '{\"ok\": false}'", "echo '{\"decision\": \"block\", \"reason\": \"  \"}'"] {
        let hooks = hooks(&format!("hooks:\n  Stop:\n    - {{type: command, command: {command:?}}}\n"));
        let run = run(&agent(&hooks), &ShellHost::new(), "hello").await;
        assert_eq!(run.outcome.status, RunStatus::Completed, "{command}");
        assert!(run.hook_messages().is_empty(), "{command}");
        assert_eq!(run.audits()[0].decision, "allow", "{command}");
    }
    let logged = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let warnings: Vec<&str> = logged.lines().filter(|l| l.contains("WARN") && l.contains("without a reason")).collect();
    assert_eq!(warnings.len(), 3, "{logged}");
    assert!(warnings.iter().all(|w| w.contains("agent.Stop[0]")), "{logged}");
}

#[tokio::test]
async fn post_tool_use_runs_for_failed_tools_with_tool_succeeded_false() {
    require_python3();
    let dir = TestDir::new("post-failed");
    let record = dir.path("post.jsonl");
    let script = recording_script(&record, "");
    let yaml = format!(
        "hooks:\n  PostToolUse:\n    - type: command\n      matcher: '*'\n      script: |\n{}",
        indent(&script)
    );
    let hooks = hooks(&yaml);
    run(&agent(&hooks), &ShellHost::with_status(ResultStatus::Error), "run `false`").await;
    run(&agent(&hooks), &ShellHost::new(), "run `true`").await;
    let seen = records(&record);
    assert_eq!(seen.len(), 2);
    let (failed, succeeded) = (&seen[0]["context"], &seen[1]["context"]);
    assert_eq!(failed["hook_event_name"], "PostToolUse");
    assert_eq!(failed["tool_name"], "ExecuteShellCommand");
    assert_eq!(failed["tool_input"], json!({"command": "false"}));
    assert_eq!(failed["tool_result"], RAW_RESULT);
    assert_eq!(failed["tool_succeeded"], false);
    assert_eq!(succeeded["tool_succeeded"], true);
    assert!(seen[0]["transcript"].as_str().unwrap().contains("[tool ExecuteShellCommand"));
}

#[tokio::test]
async fn every_additional_context_is_injected_in_hook_order_and_block_replaces_the_result() {
    let context = |text: &str| {
        format!("echo '{{\"decision\":\"allow\",\"hookSpecificOutput\":{{\"additionalContext\":\"{text}\"}}}}'")
    };
    let yaml = format!(
        "kind: ExtendedAgent\nspec:\n  hooks:\n    PostToolUse:\n      - {{type: command, matcher: '*', command: {:?}}}\n---\nhooks:\n  PostToolUse:\n    - {{type: command, matcher: '*', command: {:?}}}\n    - {{type: command, matcher: 'ExecuteShellCommand', command: {:?}}}\n    - {{type: command, matcher: 'Bash', command: 'echo never runs >&2; exit 2'}}\n",
        r#"echo '{"decision":"block","reason":"Policy says no.","hookSpecificOutput":{"additionalContext":"third"}}'"#,
        context("first"),
        context("second"),
    );
    let hooks = hooks(&yaml);
    let run = run(&agent(&hooks), &ShellHost::new(), "run `ls`").await;
    assert_eq!(run.tool_messages(), ["[denied] Policy says no."]);
    assert!(!run.model_read().contains(RAW_RESULT));
    // Right after the tool result, one labelled message per hook, in hook order (agent level first).
    let messages = &run.outcome.messages;
    let at = messages.iter().position(|m| matches!(m, ChatMessage::Tool { .. })).unwrap();
    let following: Vec<&str> = messages[at + 1..at + 4]
        .iter()
        .map(|m| match m {
            ChatMessage::Note { kind: NoteKind::Hook, content } => content.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        following,
        [
            "[hook PostToolUse agent.PostToolUse[0] added context] first",
            "[hook PostToolUse agent.PostToolUse[1] added context] second",
            "[hook PostToolUse custom_agent.PostToolUse[0] added context] third",
        ]
    );
    let ids: Vec<String> = run.audits().iter().map(|a| format!("{} {}", a.hook_id, a.level)).collect();
    assert_eq!(
        ids,
        ["agent.PostToolUse[0] agent", "agent.PostToolUse[1] agent", "custom_agent.PostToolUse[0] custom_agent"]
    );
}

#[tokio::test]
async fn a_pre_tool_use_block_means_the_tool_never_runs_and_the_model_reads_the_reason() {
    require_python3();
    let pre = r#"python3 -c 'import json,sys; c=json.load(sys.stdin); bad="rm" in c["tool_input"]["command"]; print(json.dumps({"decision": "block" if bad else "allow", "reason": "No deleting.", "hookSpecificOutput": {"additionalContext": "pre-checked"}}))'"#;
    let yaml = format!(
        "hooks:\n  PreToolUse:\n    - {{type: command, matcher: 'ExecuteShellCommand', command: {pre:?}}}\n  PostToolUse:\n    - {{type: command, matcher: '*', command: 'exit 0'}}\n"
    );
    let hooks = hooks(&yaml);
    let host = ShellHost::new();
    let blocked = run(&agent(&hooks), &host, "run `rm -rf /srv`").await;
    assert_eq!(host.runs(), 0);
    assert_eq!(blocked.tool_messages(), ["[denied] No deleting."]);
    assert!(blocked.outcome.answer.contains("No deleting."), "{}", blocked.outcome.answer);
    assert_eq!(blocked.hook_messages(), ["[hook PreToolUse agent.PreToolUse[0] added context] pre-checked"]);
    let events: Vec<String> = blocked.audits().iter().map(|a| a.hook_event.clone()).collect();
    assert_eq!(events, ["PreToolUse"], "PostToolUse does not run for a call that never ran");

    let allowed = run(&agent(&hooks), &host, "run `ls`").await;
    assert_eq!(host.runs(), 1);
    assert_eq!(allowed.tool_messages(), [RAW_RESULT]);
    let events: Vec<String> = allowed.audits().iter().map(|a| a.hook_event.clone()).collect();
    assert_eq!(events, ["PreToolUse", "PostToolUse"]);
}

fn text_reply(text: &str) -> ModelReply {
    ModelReply { text: text.into(), ..ModelReply::default() }
}

#[tokio::test]
async fn a_prompt_hook_reads_the_transcript_and_only_the_transcript() {
    let judge = Replay::responding(|request: &ChatRequest| {
        let Some(ChatMessage::User { content: prompt }) = request.messages.get(1) else { panic!("no prompt") };
        if request.messages.len() == 2 {
            let json = prompt.strip_prefix("Context:\n").and_then(|p| p.strip_suffix("\n\nJudge it.")).unwrap();
            let context: Value = serde_json::from_str(json).unwrap();
            let path = context["execution_summary"].as_str().unwrap().to_string();
            let call =
                |id: &str, name: &str, arguments: Value| ModelToolCall { id: id.into(), name: name.into(), arguments };
            return ModelReply {
                tool_calls: vec![
                    call("a", "ReadFile", json!({"path": path})),
                    call("b", "GrepSearch", json!({"pattern": "mug", "path": path})),
                    call("c", "ReadFile", json!({"path": "/etc/hostname"})),
                ],
                ..ModelReply::default()
            };
        }
        text_reply("```json\n{\"ok\": true}\n```")
    });
    let yaml = "hooks:\n  Stop:\n    - type: prompt\n      prompt: \"Context:\\n$ARGUMENTS\\n\\nJudge it.\"\n";
    let hooks = hooks_judged_by(yaml, judge.clone());
    let run = run(&agent(&hooks), &ShellHost::new(), "tell me about the red mug").await;
    assert_eq!(run.outcome.status, RunStatus::Completed);
    assert_eq!(run.audits()[0].decided_by, HookDecidedBy::Hook);

    let requests = judge.requests();
    let prompt = match &requests[0].messages[1] {
        ChatMessage::User { content } => content.clone(),
        other => panic!("{other:?}"),
    };
    assert!(prompt.starts_with("Context:\n{") && prompt.ends_with("}\n\nJudge it.") && !prompt.contains("$ARGUMENTS"));
    let tools: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["ReadFile", "GrepSearch"]);
    let results: Vec<&str> = requests[1]
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert!(results[0].contains("[user]\ntell me about the red mug"), "{}", results[0]);
    assert!(results[1].contains(": tell me about the red mug"), "{}", results[1]);
    assert!(results[2].starts_with("[error] Only the transcript file"), "{}", results[2]);
}

#[tokio::test]
async fn a_prompt_hook_that_answers_anything_else_or_times_out_is_decided_by_its_fail_mode() {
    let rambling = || Replay::responding(|_: &ChatRequest| text_reply("Looks fine to me!"));
    let allow = hooks_judged_by("hooks:\n  Stop:\n    - {prompt: 'Is it good?'}\n", rambling());
    let run_allowed = run(&agent(&allow), &ShellHost::new(), "hello").await;
    assert_eq!(run_allowed.outcome.status, RunStatus::Completed);
    assert_eq!(run_allowed.audits()[0].decided_by, HookDecidedBy::FailMode);

    let block = hooks_judged_by(
        "hooks:\n  Stop:\n    - {prompt: 'Is it good?', failMode: block, maxRejections: 1}\n",
        rambling(),
    );
    let run_blocked = run(&agent(&block), &ShellHost::new(), "hello").await;
    assert_eq!(run_blocked.outcome.status, RunStatus::Capped);
    let feedback = run_blocked.hook_messages();
    assert!(feedback[0].contains("failMode is block") && !feedback[0].contains("Looks fine"), "{feedback:?}");

    let slow = Replay::responding_after(Duration::from_secs(30), |_: &ChatRequest| {
        text_reply("{\"ok\": false, \"reason\": \"too late\"}")
    });
    let timed = hooks_judged_by("hooks:\n  Stop:\n    - {prompt: 'Is it good?', timeout: 1}\n", slow);
    let run_timed = run(&agent(&timed), &ShellHost::new(), "hello").await;
    assert_eq!(run_timed.outcome.status, RunStatus::Completed);
    let audit = &run_timed.audits()[0];
    assert_eq!((audit.decision.as_str(), audit.decided_by), ("allow", HookDecidedBy::Timeout));
}
