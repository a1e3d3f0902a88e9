//! The agent loop as a library: each of the five hooks is obeyed, events fire after hooks and
//! only observe, hook errors and panics end the run cleanly, and `maxTurns` bounds a run.

mod common;

use std::sync::{Arc, Mutex};

use common::ReplayModel;
use serde_json::{Value, json};
use tether_agent::*;
use tether_protocol::{ResultStatus, RunEndEvent, RunEvent, RunStatus, ToolEndEvent, ToolSpec, ToolStartEvent};
use tether_scripted::Page;

/// The script, then "(script ended)" for every further turn.
fn replay(replies: Vec<ModelReply>) -> Arc<ReplayModel> {
    ReplayModel::then(replies, text("(script ended)"))
}

fn text(text: &str) -> ModelReply {
    ModelReply { text: text.into(), ..ModelReply::default() }
}

fn calls(name: &str, arguments: Value) -> ModelReply {
    ModelReply {
        tool_calls: vec![ModelToolCall { id: "m1".into(), name: name.into(), arguments }],
        ..ModelReply::default()
    }
}

/// `book_ticket` and `cart_clear`, both taking a `seat_class` the page validates, each answered
/// with `output`; `book_ticket` is `followUp: false` unless `follow_up`.
fn booking(output: &str, follow_up: bool) -> Page {
    let schema = json!({"type": "object", "properties": {"seat_class": {"enum": ["first", "tourist"]}}});
    let mut tools: Vec<ToolSpec> = ["book_ticket", "cart_clear"]
        .iter()
        .map(|name| ToolSpec::new(*name, "d").with_parameters(schema.clone()))
        .collect();
    tools[0].follow_up = follow_up;
    let output = output.to_string();
    Page::new(tools)
        .checking(|name, args| {
            if args.get("seat_class").is_some_and(|v| v != "first" && v != "tourist") {
                return Err(ToolOutput::new(
                    ResultStatus::InvalidArgs,
                    format!("Validation args \"{name}\": /seat_class: bad"),
                ));
            }
            Ok(())
        })
        .answering(move |_, _| ToolOutput::new(ResultStatus::Ok, output.clone()))
}

struct Recorded {
    events: Mutex<Vec<RunEvent>>,
    text: Mutex<String>,
}

async fn run(agent: &AgentLoop, host: &Page) -> (RunOutcome, Vec<RunEvent>, String) {
    let recorded = Recorded { events: Mutex::new(Vec::new()), text: Mutex::new(String::new()) };
    let on_delta = |delta: &str| recorded.text.lock().unwrap().push_str(delta);
    let on_event = |event: RunEvent| recorded.events.lock().unwrap().push(event);
    let sink = RunSink { on_delta: &on_delta, on_event: &on_event };
    let outcome = agent.run(host, &sink, &"run-1".into(), "book me a seat", Vec::new()).await;
    let events = recorded.events.into_inner().unwrap();
    let text = recorded.text.into_inner().unwrap();
    (outcome, events, text)
}

fn tool_messages(model: &ReplayModel) -> Vec<String> {
    common::tool_results(&model.requests().last().unwrap().messages)
}

#[tokio::test]
async fn a_denied_tool_never_runs_and_the_model_reads_the_reason() {
    let model = replay(vec![calls("book_ticket", json!({"seat_class": "first"})), text("ok, tourist then")]);
    let agent =
        AgentLoop::new(model.clone()).with_hooks(Hooks::new().on_before_tool_execution(|call: ToolUse| async move {
            if call.args["seat_class"] == "first" {
                Ok(ToolDecision::Deny { reason: "Blocked by policy: first class needs a manager's approval.".into() })
            } else {
                Ok(ToolDecision::Allow)
            }
        }));
    let host = booking("booked", true);
    let (outcome, events, _) = run(&agent, &host).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert!(host.ran().is_empty(), "the denied tool ran");
    assert_eq!(tool_messages(&model), ["[denied] Blocked by policy: first class needs a manager's approval."]);
    assert!(
        !events.iter().any(|e| matches!(e, RunEvent::ToolExecutionStart(ToolStartEvent { .. }))),
        "no start event for a tool that never ran"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, RunEvent::ToolExecutionEnd(ToolEndEvent { status: ResultStatus::Denied, .. })))
    );
}

#[tokio::test]
async fn a_mocked_tool_answers_without_running() {
    let model = replay(vec![calls("cart_clear", json!({})), text("done")]);
    let agent = AgentLoop::new(model.clone()).with_hooks(
        Hooks::new().on_before_tool_execution(|_| async { Ok(ToolDecision::Mock { result: json!({"cleared": 0}) }) }),
    );
    let host = booking("real", true);
    run(&agent, &host).await;
    assert!(host.ran().is_empty());
    assert_eq!(tool_messages(&model), ["{\"cleared\":0}"]);
}

#[tokio::test]
async fn after_tool_execution_decides_what_the_model_reads_and_the_end_event_carries_it() {
    let model = replay(vec![calls("book_ticket", json!({"seat_class": "tourist"})), text("booked")]);
    let agent = AgentLoop::new(model.clone()).with_hooks(Hooks::new().on_after_tool_execution(
        |_, mut output: ToolOutput| async move {
            output.content = output.content.replace("12.345.678", "***");
            Ok(output)
        },
    ));
    let host = booking("Booked for DNI 12.345.678", true);
    let (_, events, _) = run(&agent, &host).await;
    assert_eq!(tool_messages(&model), ["Booked for DNI ***"]);
    let end = events.iter().find_map(|e| match e {
        RunEvent::ToolExecutionEnd(ToolEndEvent { output, .. }) => Some(output.clone()),
        _ => None,
    });
    assert_eq!(end.as_deref(), Some("Booked for DNI ***"));
}

#[tokio::test]
async fn before_provider_call_can_hide_a_tool_and_add_context() {
    let model = replay(vec![calls("cart_clear", json!({})), text("sorry")]);
    let agent = AgentLoop::new(model.clone()).with_hooks(Hooks::new().on_before_provider_call(
        |mut call: ProviderCall| async move {
            call.tools.retain(|t| t.name != "cart_clear");
            call.messages.insert(1, ChatMessage::System { content: "Today is 2026-11-30.".into() });
            Ok(call)
        },
    ));
    let host = booking("cleared", true);
    run(&agent, &host).await;
    let requests = model.requests();
    assert!(requests[0].tools.iter().all(|t| t.name != "cart_clear"));
    assert_eq!(requests[0].messages[1], ChatMessage::System { content: "Today is 2026-11-30.".into() });
    drop(requests);
    assert!(host.ran().is_empty(), "a hidden tool cannot be called");
    assert!(tool_messages(&model)[0].starts_with("[unknown_tool] Unknown tool \"cart_clear\""));
}

#[tokio::test]
async fn invalid_arguments_never_reach_the_hooks_or_the_tool() {
    let model = replay(vec![calls("book_ticket", json!({"seat_class": "royal"})), text("fixing")]);
    let seen = Arc::new(Mutex::new(0));
    let counter = seen.clone();
    let agent = AgentLoop::new(model.clone()).with_hooks(Hooks::new().on_before_tool_execution(move |_| {
        *counter.lock().unwrap() += 1;
        async { Ok(ToolDecision::Allow) }
    }));
    let host = booking("x", true);
    run(&agent, &host).await;
    assert_eq!(*seen.lock().unwrap(), 0);
    assert!(host.ran().is_empty());
    assert!(tool_messages(&model)[0].starts_with("[invalid_args] Validation args \"book_ticket\""));
}

#[tokio::test]
async fn hooks_run_before_their_events_and_turns_are_observed_in_order() {
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let model = replay(vec![calls("book_ticket", json!({})), text("done")]);
    let (l1, l2, l3, l4) = (log.clone(), log.clone(), log.clone(), log.clone());
    let agent = AgentLoop::new(model).with_hooks(
        Hooks::new()
            .on_before_turn(move |t: TurnStart| {
                l1.lock().unwrap().push(format!("hook before_turn {}", t.run.turn));
                async { Ok(()) }
            })
            .on_before_tool_execution(move |_| {
                l2.lock().unwrap().push("hook before_tool_execution".into());
                async { Ok(ToolDecision::Allow) }
            })
            .on_after_tool_execution(move |_, output| {
                l3.lock().unwrap().push("hook after_tool_execution".into());
                async { Ok(output) }
            })
            .on_after_turn(move |t: TurnEnd| {
                l4.lock().unwrap().push(format!("hook after_turn {}", t.run.turn));
                async { Ok(()) }
            }),
    );
    let host = booking("x", true);
    let events_log = log.clone();
    let on_delta = |_: &str| {};
    let on_event = move |event: RunEvent| {
        let kind = serde_json::to_value(&event).unwrap()["kind"].as_str().unwrap().to_string();
        events_log.lock().unwrap().push(format!("event {kind}"));
    };
    let sink = RunSink { on_delta: &on_delta, on_event: &on_event };
    agent.run(&host, &sink, &"r".into(), "go", Vec::new()).await;
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        [
            "event run_start",
            "hook before_turn 1",
            "event turn_start",
            "hook before_tool_execution",
            "event tool_execution_start",
            "hook after_tool_execution",
            "event tool_execution_end",
            "hook after_turn 1",
            "event turn_end",
            "hook before_turn 2",
            "event turn_start",
            "hook after_turn 2",
            "event turn_end",
            "event run_end",
        ]
    );
}

#[tokio::test]
async fn a_hook_error_or_panic_ends_the_run_with_a_clear_error() {
    let model = replay(vec![calls("book_ticket", json!({}))]);
    let agent = AgentLoop::new(model)
        .with_hooks(Hooks::new().on_before_tool_execution(|_| async { Err(HookError::from("policy service down")) }));
    let host = booking("x", true);
    let (outcome, events, _) = run(&agent, &host).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(outcome.error.as_deref(), Some("hook before_tool_execution failed: policy service down"));
    assert!(matches!(events.last(), Some(RunEvent::RunEnd(RunEndEvent { status: RunStatus::Failed, .. }))));
    assert!(host.ran().is_empty());

    let model = replay(vec![text("hi")]);
    let agent =
        AgentLoop::new(model).with_hooks(Hooks::new().on_after_turn(|_: TurnEnd| async { panic!("bug in the hook") }));
    let (outcome, _, _) = run(&agent, &host).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(outcome.error.as_deref(), Some("hook after_turn panicked: bug in the hook"));

    let model = replay(vec![text("hi")]);
    let agent = AgentLoop::new(model).with_hooks(
        Hooks::new()
            .on_before_turn(|_: TurnStart| -> std::future::Ready<HookResult<()>> { panic!("before the future") }),
    );
    let (outcome, _, _) = run(&agent, &host).await;
    assert_eq!(outcome.error.as_deref(), Some("hook before_turn panicked: before the future"));
}

#[tokio::test]
async fn max_turns_ends_a_run_that_never_answers() {
    // Without the loop guard (with it, the repeats below end the run earlier: see loop_guard.rs).
    let model = replay((0..20).map(|_| calls("book_ticket", json!({}))).collect());
    let agent = AgentLoop::new(model).with_max_turns(3).with_loop_guard(LoopGuard::off());
    let host = booking("x", true);
    let (outcome, _, streamed) = run(&agent, &host).await;
    assert_eq!((outcome.status, outcome.turns), (RunStatus::MaxTurns, 3));
    assert_eq!(host.ran().len(), 3);
    // Never an empty answer: it says why it stopped and what was done.
    assert!(outcome.answer.starts_with("I stopped at the limit of steps"), "{}", outcome.answer);
    assert_eq!(outcome.answer.matches("- book_ticket: x").count(), 3, "{}", outcome.answer);
    assert_eq!(streamed, outcome.answer);
}

#[tokio::test]
async fn the_stop_gate_can_send_the_answer_back_and_cap_the_run() {
    let model = replay(vec![text("draft one"), text("draft two"), text("draft three")]);
    let agent = AgentLoop::new(model.clone()).with_hooks(Hooks::new().on_stop(|check: StopCheck| async move {
        Ok(if check.rejection_count < 1 {
            StopDecision::Reject { reason: "Add a summary.".into(), hook: "test".into() }
        } else {
            StopDecision::Capped
        })
    }));
    let host = booking("x", true);
    let (outcome, _, streamed) = run(&agent, &host).await;
    assert_eq!(outcome.status, RunStatus::Capped);
    assert_eq!(outcome.answer, "draft two");
    // The rejected answer never left; the model read the reason.
    assert_eq!(streamed, "draft two");
    let last = model.requests().last().unwrap().messages.last().unwrap().clone();
    assert_eq!(last, ChatMessage::note(NoteKind::Hook, "[hook Stop test rejected the answer] Add a summary."));
}

#[tokio::test]
async fn a_malformed_tool_call_is_explained_to_the_model() {
    let broken =
        ModelReply { malformed_tool_call: Some("the tool call is not valid JSON".into()), ..ModelReply::default() };
    let model = replay(vec![broken, text("plain answer")]);
    let agent = AgentLoop::new(model.clone());
    let host = booking("x", true);
    let (outcome, _, _) = run(&agent, &host).await;
    assert_eq!((outcome.status, outcome.answer.as_str()), (RunStatus::Completed, "plain answer"));
    let requests = model.requests();
    let ChatMessage::Note { kind: NoteKind::Hook, content } = requests[1].messages.last().unwrap() else { panic!() };
    assert!(content.contains("could not be read: the tool call is not valid JSON"), "{content}");
}

#[tokio::test]
async fn a_follow_up_false_tool_ends_the_run_after_its_result_without_another_model_turn() {
    let model = replay(vec![calls("book_ticket", json!({"seat_class": "first"})), text("booked, enjoy")]);
    let agent = AgentLoop::new(model.clone());
    let host = booking("seat 12A", false);
    let (outcome, events, text) = run(&agent, &host).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(model.requests().len(), 1, "the model was asked again after a followUp: false tool");
    assert_eq!(host.ran().len(), 1);
    assert_eq!(text, "", "no follow-up answer, and no summary in its place: the result is the answer");
    assert_eq!(outcome.answer, "");
    assert!(
        events.iter().any(|e| matches!(e, RunEvent::ToolExecutionEnd(ToolEndEvent { status: ResultStatus::Ok, .. }))),
        "the result is recorded"
    );
    assert!(matches!(events.last(), Some(RunEvent::RunEnd(RunEndEvent { status: RunStatus::Completed, .. }))));
}

#[tokio::test]
async fn a_follow_up_false_tool_that_fails_validation_is_still_followed_up() {
    let model = replay(vec![calls("book_ticket", json!({"seat_class": "luxury"})), text("that class does not exist")]);
    let agent = AgentLoop::new(model.clone());
    let host = booking("seat 12A", false);
    let (outcome, _, text) = run(&agent, &host).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(model.requests().len(), 2, "a refused call of a followUp: false tool must still be answered");
    assert!(text.contains("that class does not exist"), "{text}");
}
