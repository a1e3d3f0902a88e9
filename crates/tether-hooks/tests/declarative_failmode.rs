//! The fail mode never leaks: every way a command hook can fail, under `failMode: allow` and
//! `block`, on each event, through a real run of the agent loop. With `block` the guarded thing
//! does not get through (the tool does not run, its raw result never reaches the model, the
//! answer is rejected); with `allow` the run goes on as if the hook had allowed. Exit 2 is a
//! decision, not a failure: it blocks in both modes. A timed-out hook leaves no process behind.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use futures_util::future::join_all;
use support::*;
use tether_hooks::HookEvent;
use tether_protocol::{HookDecidedBy, RunStatus};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    Exit1,
    Exit2,
    Timeout,
    MissingScript,
    NonExecutableScript,
    InvalidJson,
    StdoutOverCap,
    KilledBySignal,
}

const FAILURES: [Failure; 8] = [
    Failure::Exit1,
    Failure::Exit2,
    Failure::Timeout,
    Failure::MissingScript,
    Failure::NonExecutableScript,
    Failure::InvalidJson,
    Failure::StdoutOverCap,
    Failure::KilledBySignal,
];

const EVENTS: [HookEvent; 3] = [HookEvent::Stop, HookEvent::PostToolUse, HookEvent::PreToolUse];

const EXIT_2_REASON: &str = "blocked by the test hook";
const HOOK_STDOUT: &str = "this is not json";

/// The documented outcome of a failure: which decision, who decided, and the exit code.
fn expected(failure: Failure, block: bool) -> (&'static str, HookDecidedBy, Option<i32>) {
    let fail_mode = if block { "block" } else { "allow" };
    match failure {
        Failure::Exit2 => ("block", HookDecidedBy::Hook, Some(2)),
        Failure::Timeout => (fail_mode, HookDecidedBy::Timeout, None),
        Failure::Exit1 => (fail_mode, HookDecidedBy::FailMode, Some(1)),
        Failure::MissingScript => (fail_mode, HookDecidedBy::FailMode, Some(127)),
        Failure::NonExecutableScript => (fail_mode, HookDecidedBy::FailMode, Some(126)),
        Failure::InvalidJson => (fail_mode, HookDecidedBy::FailMode, Some(0)),
        Failure::StdoutOverCap | Failure::KilledBySignal => (fail_mode, HookDecidedBy::FailMode, None),
    }
}

fn command(failure: Failure, dir: &TestDir, case: usize) -> String {
    match failure {
        Failure::Exit1 => "cat > /dev/null; exit 1".into(),
        Failure::Exit2 => format!("echo '{EXIT_2_REASON}' >&2; exit 2"),
        // The hook and a background child record their pids, then both outlive the timeout.
        Failure::Timeout => format!("sleep 30 & echo \"$$ $!\" >> {}; sleep 30", dir.path(&format!("pids-{case}"))),
        Failure::MissingScript => dir.path("missing/hook.sh"),
        Failure::NonExecutableScript => dir.path("not-executable.sh"),
        Failure::InvalidJson => format!("echo '{HOOK_STDOUT}'"),
        Failure::StdoutOverCap => "head -c 2000000 /dev/zero | tr '\\0' a".into(),
        Failure::KilledBySignal => "kill -9 $$".into(),
    }
}

fn yaml(event: HookEvent, failure: Failure, block: bool, dir: &TestDir, case: usize) -> String {
    let extra = match event {
        HookEvent::Stop => "maxRejections: 1",
        _ => "matcher: '*'",
    };
    let timeout = if failure == Failure::Timeout { 1 } else { 20 };
    let fail_mode = if block { "block" } else { "allow" };
    let command = serde_json::to_string(&command(failure, dir, case)).unwrap();
    format!(
        "hooks:\n  {event}:\n    - type: command\n      {extra}\n      timeout: {timeout}\n      failMode: {fail_mode}\n      command: {command}\n"
    )
}

/// Waits until every process a timed-out hook recorded has exited, then checks that no live
/// process is left in its group.
fn assert_group_gone(pid_file: &str) {
    // On a very loaded machine the hook may be killed before it records anything; then it
    // started nothing either.
    let Ok(recorded) = std::fs::read_to_string(pid_file) else { return };
    for line in recorded.lines() {
        let pids: Vec<i32> = line.split_whitespace().map(|p| p.parse().unwrap()).collect();
        for &pid in &pids {
            let Some(pid) = rustix::process::Pid::from_raw(pid) else { continue };
            // A pidfd becomes readable when the process exits; ESRCH means it is already gone.
            if let Ok(pidfd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
                let mut fds = [rustix::event::PollFd::new(&pidfd, rustix::event::PollFlags::IN)];
                let limit = rustix::event::Timespec { tv_sec: 5, tv_nsec: 0 };
                let ready = rustix::event::poll(&mut fds, Some(&limit)).unwrap();
                assert_eq!(ready, 1, "process {pid:?} of a timed-out hook is still running");
            }
        }
        let group = pids[0];
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            // Fields after the command name: state, ppid, pgrp, …
            let Some(after) = stat.rsplit_once(") ").map(|(_, rest)| rest) else { continue };
            let fields: Vec<&str> = after.split_whitespace().collect();
            let (state, pgrp) = (fields[0], fields[2].parse::<i32>().unwrap_or(0));
            assert!(
                pgrp != group || state == "Z",
                "process {:?} of timed-out hook group {group} is still alive ({state})",
                entry.file_name()
            );
        }
    }
}

struct Row {
    event: HookEvent,
    failure: Failure,
    fail_mode: &'static str,
    decision: String,
    decided_by: HookDecidedBy,
    exit_code: Option<i32>,
    outcome: String,
}

async fn one_case(event: HookEvent, failure: Failure, block: bool, dir: &TestDir, case: usize) -> Row {
    let label = format!("{event} × {failure:?} × failMode {}", if block { "block" } else { "allow" });
    let hooks = hooks(&yaml(event, failure, block, dir, case));
    let agent = agent(&hooks).with_max_turns(6);
    let host = ShellHost::new();
    let message = if event == HookEvent::Stop { "hello" } else { "run `echo hi`" };
    let run = run(&agent, &host, message).await;
    let audits = run.audits();
    let first = audits.first().unwrap_or_else(|| panic!("{label}: no audit record"));
    let (decision, decided_by, exit_code) = expected(failure, block);
    assert_eq!(first.hook_id, format!("agent.{event}[0]"), "{label}");
    assert_eq!(first.hook_event, event.as_str(), "{label}");
    assert_eq!(first.decision, decision, "{label}: {first:?}");
    assert_eq!(first.decided_by, decided_by, "{label}: {first:?}");
    assert_eq!(first.exit_code, exit_code, "{label}: {first:?}");
    let blocked = decision == "block";
    let model_read = run.model_read();
    // Whatever happened, the hook's raw output never reaches the model.
    assert!(!model_read.contains(HOOK_STDOUT), "{label}: the hook's stdout leaked");
    let expected_reason = if failure == Failure::Exit2 { EXIT_2_REASON } else { "failMode is block" };

    let outcome = match event {
        HookEvent::Stop => {
            if blocked {
                assert_eq!(run.outcome.status, RunStatus::Capped, "{label}");
                let rejections = run.hook_messages();
                assert_eq!(rejections.len(), 1, "{label}: {rejections:?}");
                assert!(rejections[0].contains(expected_reason), "{label}: {rejections:?}");
                assert!(!run.outcome.answer.is_empty(), "{label}: a capped run delivers the last answer");
                "answer rejected; after maxRejections the run ends `capped`".to_string()
            } else {
                assert_eq!(run.outcome.status, RunStatus::Completed, "{label}");
                assert!(run.hook_messages().is_empty(), "{label}: {:?}", run.outcome.messages);
                "answer delivered, run `completed`".to_string()
            }
        }
        HookEvent::PostToolUse | HookEvent::PreToolUse => {
            assert_eq!(run.outcome.status, RunStatus::Completed, "{label}");
            let tool_messages = run.tool_messages();
            assert_eq!(tool_messages.len(), 1, "{label}: {tool_messages:?}");
            let ran = if event == HookEvent::PostToolUse { 1 } else { usize::from(!blocked) };
            assert_eq!(host.runs(), ran, "{label}: tool runs");
            if blocked {
                assert!(!model_read.contains(RAW_RESULT), "{label}: the raw tool result leaked");
                assert!(tool_messages[0].starts_with("[denied] "), "{label}: {tool_messages:?}");
                assert!(tool_messages[0].contains(expected_reason), "{label}: {tool_messages:?}");
                if event == HookEvent::PreToolUse {
                    "tool never runs; the model reads the reason".to_string()
                } else {
                    "the model reads the reason, not the result".to_string()
                }
            } else {
                assert_eq!(tool_messages[0], RAW_RESULT, "{label}");
                "tool result delivered".to_string()
            }
        }
        HookEvent::UserPromptSubmit | HookEvent::SessionStart => unreachable!("the Azure format has no {event} hooks"),
    };
    if failure == Failure::Timeout {
        assert_group_gone(&dir.path(&format!("pids-{case}")));
    }
    Row {
        event,
        failure,
        fail_mode: if block { "block" } else { "allow" },
        decision: first.decision.clone(),
        decided_by: first.decided_by,
        exit_code: first.exit_code,
        outcome,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_failure_under_both_fail_modes_on_every_event() {
    let dir = TestDir::new("failmode");
    let script = dir.0.join("not-executable.sh");
    std::fs::write(&script, "#!/bin/bash\necho '{\"decision\":\"allow\"}'\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();

    let mut cases = Vec::new();
    for event in EVENTS {
        for failure in FAILURES {
            for block in [false, true] {
                cases.push((event, failure, block));
            }
        }
    }
    let started = std::time::Instant::now();
    let rows = join_all(
        cases.iter().enumerate().map(|(case, &(event, failure, block))| one_case(event, failure, block, &dir, case)),
    )
    .await;
    assert_eq!(rows.len(), 48);
    assert!(started.elapsed() < Duration::from_secs(30), "the table took {:?}", started.elapsed());

    // The table as run, for docs/hooks.md.
    eprintln!("| event | failure | failMode | decision | decided by | exit code | outcome |");
    eprintln!("|---|---|---|---|---|---|---|");
    for row in rows {
        let decided_by = match row.decided_by {
            HookDecidedBy::Hook => "hook",
            HookDecidedBy::Timeout => "timeout",
            HookDecidedBy::FailMode => "failMode",
        };
        let exit = row.exit_code.map_or("—".to_string(), |c| c.to_string());
        eprintln!(
            "| {} | {:?} | {} | {} | {decided_by} | {exit} | {} |",
            row.event, row.failure, row.fail_mode, row.decision, row.outcome
        );
    }
}
