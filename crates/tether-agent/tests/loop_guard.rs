//! The loop guard and honest answers, with scripted replies shaped like a small model's: a
//! repeated identical call is not run again (the model reads the earlier result), repeats end the
//! run as `loop_detected`, each tool has a per-run limit, a run never ends with an empty answer,
//! the conversation keeps what the model wrote, and a tool the provider refused is reported once.

mod common;

use std::sync::Mutex;

use common::{ReplayModel, call, run, text};
use serde_json::{Value, json};
use tether_agent::*;
use tether_protocol::{ResultStatus, RunEvent, RunStatus, ToolSpec};

/// A cart whose `cart_add` counts what it adds; results say what happened.
#[derive(Default)]
struct Shop {
    executed: Mutex<Vec<(String, Value)>>,
    refused: Mutex<Vec<String>>,
}

impl ToolHost for Shop {
    fn tools(&self) -> Vec<ToolSpec> {
        let add = json!({
            "type": "object",
            "properties": {"productId": {"type": "string"}, "quantity": {"type": "integer", "default": 1}},
            "required": ["productId"]
        });
        vec![ToolSpec::new("cart_add", "Add.").with_parameters(add), ToolSpec::new("cart_view", "View.")]
    }

    fn check(&self, _: &str, _: &Value) -> Result<(), ToolOutput> {
        Ok(())
    }

    fn execute<'a>(&'a self, call: CallRef<'a>, args: Value) -> BoxFuture<'a, ToolOutput> {
        let name = call.name;
        Box::pin(async move {
            let mut executed = self.executed.lock().unwrap();
            executed.push((name.to_string(), args.clone()));
            let items: u64 = executed.iter().map(|(_, a)| a["quantity"].as_u64().unwrap_or(1)).sum();
            let quantity = args["quantity"].as_u64().unwrap_or(1);
            ToolOutput::new(ResultStatus::Ok, format!("added {quantity} × {}; cart: {items} items", args["productId"]))
        })
    }

    fn provider_refused(&self, name: &str, _: &str) {
        self.refused.lock().unwrap().push(name.to_string());
    }
}

fn tool_results(request: &ChatRequest) -> Vec<String> {
    common::tool_results(&request.messages)
}

#[tokio::test]
async fn a_repeated_identical_call_is_not_run_again_and_the_model_reads_the_earlier_result() {
    // The issue's trace: "Add the red mug" and the model calls cart_add again after the result
    // (here once with the default written out: the same call).
    let model = ReplayModel::new(vec![
        call("cart_add", json!({"productId": "mug-red"})),
        call("cart_add", json!({"quantity": 1, "productId": "mug-red"})),
        text("Added the red mug."),
    ]);
    let shop = Shop::default();
    let run = run(&AgentLoop::new(model.clone()), &shop, "Add the red mug to my cart").await;
    assert_eq!((run.outcome.status, run.outcome.answer.as_str()), (RunStatus::Completed, "Added the red mug."));
    assert_eq!(shop.executed.lock().unwrap().len(), 1, "the mug was added once");
    let results = tool_results(&model.requests()[2]);
    assert_eq!(results[0], "added 1 × \"mug-red\"; cart: 1 items");
    assert!(
        results[1].starts_with("[denied] Not run again: cart_add was already called with these arguments")
            && results[1].contains("Its result then: added 1 × \"mug-red\"; cart: 1 items"),
        "{}",
        results[1]
    );
    // Not a refusal for good: the model is not told to say it was refused (it has the result).
    let again: Vec<bool> = model.requests()[2]
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { call_again, .. } => Some(*call_again),
            _ => None,
        })
        .collect();
    assert_eq!(again, [false, true]);
    // The page saw the refusal as the call's end, not as a second run.
    let ends: Vec<ResultStatus> = run
        .events
        .iter()
        .filter_map(|e| match e {
            RunEvent::ToolExecutionEnd(end) => Some(end.status),
            _ => None,
        })
        .collect();
    assert_eq!(ends, [ResultStatus::Ok, ResultStatus::Denied]);
    let starts = run.events.iter().filter(|e| matches!(e, RunEvent::ToolExecutionStart(_))).count();
    assert_eq!(starts, 1);
}

#[tokio::test]
async fn repeated_offences_end_the_run_as_loop_detected_with_a_summary() {
    // Seven identical calls, as with the audit hook in the issue: one runs, two are refused, the
    // run ends.
    let model = ReplayModel::new((0..7).map(|_| call("cart_add", json!({"productId": "tee-black"}))).collect());
    let shop = Shop::default();
    let run = run(&AgentLoop::new(model.clone()), &shop, "add a black t-shirt").await;
    assert_eq!((run.outcome.status, run.outcome.turns), (RunStatus::LoopDetected, 3));
    assert_eq!(shop.executed.lock().unwrap().len(), 1);
    assert_eq!(
        run.outcome.answer,
        "I stopped because the same action was requested again. What was done:\n- cart_add {\"productId\":\"tee-black\"}: added 1 × \"tee-black\"; cart: 1 items"
    );
    assert_eq!(run.streamed, run.outcome.answer, "the page got the summary");
    let Some(RunEvent::RunEnd(end)) = run.events.last() else { panic!("no run_end") };
    assert_eq!(end.status.as_str(), "loop_detected");
    // The summary is the last assistant message: the next run knows what was done.
    assert_eq!(
        run.outcome.messages.last(),
        Some(&ChatMessage::Assistant { content: run.outcome.answer.clone(), tool_calls: vec![] })
    );
}

#[tokio::test]
async fn the_same_call_in_one_reply_runs_once() {
    let mut twice = call("cart_add", json!({"productId": "mug-red"}));
    twice.tool_calls.push(twice.tool_calls[0].clone());
    let model = ReplayModel::new(vec![twice, text("ok")]);
    let shop = Shop::default();
    let run = run(&AgentLoop::new(model), &shop, "add a red mug").await;
    assert_eq!(run.outcome.status, RunStatus::Completed);
    assert_eq!(shop.executed.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn each_tool_has_a_per_run_call_limit() {
    let model = ReplayModel::new(vec![
        call("cart_add", json!({"productId": "a"})),
        call("cart_add", json!({"productId": "b"})),
        call("cart_add", json!({"productId": "c"})),
        call("cart_view", json!({})),
        text("done"),
    ]);
    let guard = LoopGuard { max_calls_per_tool: 2, ..LoopGuard::default() };
    let shop = Shop::default();
    let run = run(&AgentLoop::new(model.clone()).with_loop_guard(guard), &shop, "add a, b and c").await;
    assert_eq!(run.outcome.status, RunStatus::Completed);
    let ran: Vec<String> = shop.executed.lock().unwrap().iter().map(|(_, a)| a["productId"].to_string()).collect();
    assert_eq!(ran, ["\"a\"", "\"b\"", "null"], "c was refused; cart_view ran");
    let results = tool_results(&model.requests()[4]);
    assert_eq!(
        results[2],
        "[denied] Not run: cart_add was called 2 times in this request, the most allowed. Answer the user."
    );
}

#[tokio::test]
async fn with_the_guard_off_repeats_run() {
    let model = ReplayModel::new(vec![
        call("cart_add", json!({"productId": "a"})),
        call("cart_add", json!({"productId": "a"})),
        text("two"),
    ]);
    let shop = Shop::default();
    let run = run(&AgentLoop::new(model).with_loop_guard(LoopGuard::off()), &shop, "add a twice").await;
    assert_eq!((run.outcome.status, shop.executed.lock().unwrap().len()), (RunStatus::Completed, 2));
}

#[tokio::test]
async fn an_empty_answer_after_tool_calls_becomes_a_summary_of_what_was_done() {
    let model = ReplayModel::new(vec![call("cart_add", json!({"productId": "mug-red", "quantity": 2})), text("")]);
    let shop = Shop::default();
    let run = run(&AgentLoop::new(model), &shop, "two red mugs").await;
    assert_eq!(run.outcome.status, RunStatus::Completed);
    assert_eq!(
        run.outcome.answer,
        "What was done:\n- cart_add {\"productId\":\"mug-red\",\"quantity\":2}: added 2 × \"mug-red\"; cart: 2 items"
    );
    assert_eq!(run.streamed, run.outcome.answer);
}

#[tokio::test]
async fn an_empty_reply_without_tool_calls_is_asked_again_once() {
    let model = ReplayModel::new(vec![text(""), text("Hello!")]);
    let run = run(&AgentLoop::new(model.clone()), &Shop::default(), "hi").await;
    assert_eq!((run.outcome.status, run.outcome.answer.as_str()), (RunStatus::Completed, "Hello!"));
    let second = &model.requests()[1];
    assert!(
        matches!(second.messages.last(), Some(ChatMessage::Note { kind: NoteKind::Hook, content }) if content == "[hook loop guard] Your reply was empty. Answer the user."),
        "{:?}",
        second.messages.last()
    );
    // No empty assistant message was recorded.
    assert!(!second.messages.iter().any(|m| matches!(m, ChatMessage::Assistant { content, .. } if content.is_empty())));
    // Twice empty: still an answer.
    let model = ReplayModel::new(vec![text(""), text("  ")]);
    let again = self::run(&AgentLoop::new(model), &Shop::default(), "hi").await;
    assert_eq!(again.outcome.answer, "I have no answer to give.");
}

#[tokio::test]
async fn the_conversation_keeps_what_the_model_wrote() {
    // The issue's trace: a call followed by text. The call runs, the text is kept as written.
    let written = "{\"name\": \"cart_add\", \"arguments\": {\"productId\": \"tee-black\"}}\nDone.";
    let reply = ModelReply {
        text: "Done.".into(),
        raw: written.into(),
        tool_calls: vec![ModelToolCall {
            id: "x".into(),
            name: "cart_add".into(),
            arguments: json!({"productId": "tee-black"}),
        }],
        ..ModelReply::default()
    };
    let model = ReplayModel::new(vec![reply, text("The black T-shirt is in your cart.")]);
    let shop = Shop::default();
    let run = run(&AgentLoop::new(model.clone()), &shop, "add the black t-shirt").await;
    assert_eq!(shop.executed.lock().unwrap().len(), 1);
    let assistant: Vec<&ChatMessage> =
        run.outcome.messages.iter().filter(|m| matches!(m, ChatMessage::Assistant { .. })).collect();
    assert!(
        matches!(assistant[0], ChatMessage::Assistant { content, tool_calls } if content == written && tool_calls.len() == 1)
    );
    assert_eq!(run.streamed, "Done.\n\nThe black T-shirt is in your cart.");
}

#[tokio::test]
async fn an_unreadable_reply_is_kept_as_written_and_twice_unreadable_is_the_answer() {
    let broken = "```json\n{\"name\": \"cart_add\", \"arguments\": {\"productId\": }\n```";
    let unreadable = || ModelReply {
        raw: broken.into(),
        malformed_tool_call: Some("the tool call is not valid JSON".into()),
        ..ModelReply::default()
    };
    let model = ReplayModel::new(vec![unreadable(), unreadable()]);
    let run = run(&AgentLoop::new(model.clone()), &Shop::default(), "add").await;
    let second = &model.requests()[1];
    assert!(second.messages.iter().any(|m| matches!(m, ChatMessage::Assistant { content, .. } if content == broken)));
    assert_eq!((run.outcome.status, run.outcome.answer.as_str()), (RunStatus::Completed, broken));
}

#[tokio::test]
async fn a_tool_the_provider_refused_is_reported_once_per_run_and_the_run_goes_on() {
    let refused = || vec![RefusedTool { name: "cart_view".into(), reason: "HTTP 400: bad schema".into() }];
    let first = ModelReply { refused_tools: refused(), ..call("cart_add", json!({"productId": "a"})) };
    let second = ModelReply { refused_tools: refused(), ..text("added") };
    let model = ReplayModel::new(vec![first, second]);
    let shop = Shop::default();
    let run = run(&AgentLoop::new(model), &shop, "add a").await;
    assert_eq!((run.outcome.status, run.outcome.answer.as_str()), (RunStatus::Completed, "added"));
    assert_eq!(*shop.refused.lock().unwrap(), ["cart_view"]);
}

#[tokio::test]
async fn the_loop_guard_is_the_first_hook_and_tool_hooks_see_the_tool_and_the_calls_that_ran() {
    // An operator's hook after the guard: it sees each call with the tool as offered and the
    // calls of the run that ran before it; a repeat never reaches it (the guard denied it first).
    let model = ReplayModel::new(vec![
        call("cart_add", json!({"productId": "mug-red"})),
        call("cart_add", json!({"productId": "mug-red", "quantity": 1})),
        call("cart_view", json!({})),
        text("Done."),
    ]);
    // Per call: the tool's name, its description as offered, the calls that ran before it.
    type Seen = Vec<(String, Option<String>, Vec<EarlierCall>)>;
    let seen: std::sync::Arc<Mutex<Seen>> = Default::default();
    let record = seen.clone();
    let hooks = Hooks::new().on_before_tool_execution(move |call: ToolUse| {
        let tool = call.tool.as_ref().map(|t| t.description.clone());
        record.lock().unwrap().push((call.name.clone(), tool, call.earlier.to_vec()));
        async { Ok(ToolDecision::Allow) }
    });
    let shop = Shop::default();
    let run = run(&AgentLoop::new(model).with_hooks(hooks), &shop, "Add the red mug, then show my cart").await;
    assert_eq!(run.outcome.status, RunStatus::Completed);
    let seen = seen.lock().unwrap();
    let added = EarlierCall {
        name: "cart_add".into(),
        args: json!({"productId": "mug-red"}),
        result: "added 1 × \"mug-red\"; cart: 1 items".into(),
    };
    assert_eq!(
        *seen,
        [
            ("cart_add".to_string(), Some("Add.".to_string()), vec![]),
            ("cart_view".to_string(), Some("View.".to_string()), vec![added])
        ]
    );
    // The page saw the repeat end too (denied), as every call the model asked for.
    let ends = run.events.iter().filter(|e| matches!(e, RunEvent::ToolExecutionEnd(_))).count();
    assert_eq!(ends, 3);
}

#[test]
fn the_guard_alone_decides_from_the_calls_that_ran() {
    let tool = ToolSpec::new("cart_add", "Add.").with_parameters(json!({
        "type": "object",
        "properties": {"productId": {"type": "string"}, "quantity": {"type": "integer", "default": 1}}
    }));
    let earlier = |calls: &[(&str, Value)]| -> std::sync::Arc<[EarlierCall]> {
        calls
            .iter()
            .map(|(name, args)| EarlierCall { name: (*name).into(), args: args.clone(), result: "ok".into() })
            .collect()
    };
    let use_of = |args: Value, before: std::sync::Arc<[EarlierCall]>| ToolUse {
        run: RunInfo {
            run_id: "r1".into(),
            agent_name: "t".into(),
            turn: 1,
            max_turns: 10,
            events: EventEmitter::default(),
        },
        call_id: "c".into(),
        name: "cart_add".into(),
        args,
        tool: Some(tool.clone()),
        earlier: before,
    };
    let guard = LoopGuard { max_calls_per_tool: 2, ..LoopGuard::default() };
    // The default written out, keys in another order: the same call.
    let repeat = use_of(json!({"quantity": 1, "productId": "a"}), earlier(&[("cart_add", json!({"productId": "a"}))]));
    assert!(
        matches!(guard.decide(&repeat), ToolDecision::Deny { reason } if reason.starts_with("Not run again: cart_add"))
    );
    let other = use_of(json!({"productId": "a", "quantity": 2}), earlier(&[("cart_add", json!({"productId": "a"}))]));
    assert_eq!(guard.decide(&other), ToolDecision::Allow);
    let third = use_of(
        json!({"productId": "c"}),
        earlier(&[("cart_add", json!({"productId": "a"})), ("cart_add", json!({"productId": "b"}))]),
    );
    assert!(
        matches!(guard.decide(&third), ToolDecision::Deny { reason } if reason == "Not run: cart_add was called 2 times in this request, the most allowed. Answer the user.")
    );
    // Another tool's calls do not count, and repeats may be allowed.
    let after_view = use_of(json!({"productId": "a"}), earlier(&[("cart_view", json!({}))]));
    assert_eq!(guard.decide(&after_view), ToolDecision::Allow);
    // A guard that refuses nothing adds no hook (no span per call).
    assert!(format!("{:?}", LoopGuard::off().hooks()).contains("before_tool_execution: false"));
    assert!(format!("{:?}", guard.hooks()).contains("before_tool_execution: true"));
    let allowed = LoopGuard { refuse_repeats: false, ..LoopGuard::default() };
    assert_eq!(allowed.decide(&repeat), ToolDecision::Allow);
}

#[tokio::test]
async fn a_checkpoint_written_before_the_calls_that_ran_were_kept_still_refuses_a_repeat() {
    // The loop guard's memory as a checkpoint of an older server wrote it: results by the tool's
    // name and the arguments' JSON, NUL between.
    let checkpoint: RunCheckpoint = serde_json::from_value(json!({
        "runId": "r1", "request": "add a red mug", "runStart": 0, "turns": 1,
        "messages": [
            {"role": "user", "content": "add a red mug"},
            {"role": "assistant", "content": "", "toolCalls": [{"id": "c1", "name": "cart_add", "arguments": {"productId": "mug-red"}}]},
            {"role": "tool", "callId": "c1", "name": "cart_add", "content": "added 1 × \"mug-red\"; cart: 1 items"}
        ],
        "seen": {"cart_add\u{0}{\"productId\":\"mug-red\",\"quantity\":1}": "added 1 × \"mug-red\"; cart: 1 items"},
        "callsPerTool": {"cart_add": 1}, "repeats": 0, "done": [], "refusalsReported": [], "succeeded": [],
        "refusals": [], "claimNudged": false, "echoNudged": false, "nudgedEmpty": false, "rejections": 0,
        "unreadableInARow": 0
    }))
    .unwrap();
    let model = ReplayModel::new(vec![call("cart_add", json!({"productId": "mug-red"})), text("Added.")]);
    let shop = Shop::default();
    let sink = RunSink { on_delta: &|_| {}, on_event: &|_| {} };
    // (The claim check off: the old checkpoint's "succeeded" is empty, so "Added." would be a claim.)
    let agent =
        AgentLoop::new(model.clone()).with_loop_guard(LoopGuard { check_claims: false, ..LoopGuard::default() });
    let outcome = agent.resume(&shop, &sink, checkpoint, std::future::pending()).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert!(shop.executed.lock().unwrap().is_empty(), "the repeat did not run");
    let results = tool_results(&model.requests()[1]);
    assert!(results.last().unwrap().starts_with("[denied] Not run again: cart_add"), "{results:?}");
}
