//! The executor's rules: the order of the steps, the risk policy, timeouts, cancellation and
//! resolvers — and, for any sequence of events, that a high or critical tool never runs
//! without an explicit approval.

use proptest::prelude::*;
use serde_json::{Value, json};
use tether_core::validate::{CompactValidator, NativeRegex};
use tether_core::*;

type Registry = ToolRegistry<(), CompactValidator<NativeRegex>>;

const PAGE: OwnerId = OwnerId(1);

fn registry_with(tools: Vec<ToolDef>) -> Registry {
    let mut registry = ToolRegistry::new(CompactValidator::new(NativeRegex));
    for tool in tools {
        registry.register(PAGE, tool, ()).unwrap();
    }
    registry
}

fn cart_add() -> ToolDef {
    ToolDef::new("cart_add", "Add a product to the cart.").parameters(json!({
        "type": "object",
        "properties": {
            "productId": {"type": "string"},
            "quantity": {"type": "integer", "minimum": 1, "default": 1}
        },
        "required": ["productId"],
        "additionalProperties": false
    }))
}

fn call(call_id: &str, tool: &str, args: Value) -> CallRequest {
    CallRequest { call_id: call_id.into(), tool: tool.into(), args, server_risk: Risk::None }
}

fn finished(step: Option<Step>) -> Outcome {
    match step {
        Some(Step::Finish(outcome)) => outcome,
        other => panic!("expected a finished call, got {other:?}"),
    }
}

#[test]
fn an_unknown_tool_is_an_error_result_naming_the_available_ones() {
    let registry = registry_with(vec![cart_add()]);
    let outcome = finished(Executor::default().start(call("c1", "cart_explode", json!({})), &registry, 0));
    assert_eq!(outcome.status, ResultStatus::UnknownTool);
    assert_eq!(outcome.content, json!("Unknown tool \"cart_explode\". Available tools: cart_add"));
}

#[test]
fn invalid_arguments_are_refused_before_approval_with_every_problem() {
    let registry = registry_with(vec![cart_add().risk(Risk::Critical)]);
    let mut executor = Executor::default();
    let outcome =
        finished(executor.start(call("c1", "cart_add", json!({"quantity": 0, "color": "red"})), &registry, 0));
    assert_eq!(outcome.status, ResultStatus::InvalidArgs);
    let text = outcome.content.as_str().unwrap();
    assert!(text.starts_with("Validation args \"cart_add\": "), "{text}");
    assert!(text.contains("/: \"productId\" is a required property"), "{text}");
    assert!(text.contains("/quantity: 0 is less than the minimum of 1"), "{text}");
    assert!(text.contains("'color' was unexpected"), "{text}");
    assert_eq!(executor.in_flight(), 0, "no approval is pending for an invalid call");
}

#[test]
fn defaults_are_applied_before_the_handler_and_the_approval_see_the_arguments() {
    let registry = registry_with(vec![cart_add(), cart_add().risk(Risk::High)]);
    let mut executor = Executor::default();
    match executor.start(call("c1", "cart_add", json!({"productId": "mug-red"})), &registry, 0) {
        Some(Step::AskApproval(request)) => {
            assert_eq!(request.args, json!({"productId": "mug-red", "quantity": 1}));
            assert_eq!(request.risk, Risk::High);
            assert_eq!(request.description, "Add a product to the cart.");
        }
        other => panic!("{other:?}"),
    }
    match executor.approval_decided(&"c1".into(), ApprovalDecision::Approved, 5) {
        Some(Step::Run { args, notify, deadline_ms, .. }) => {
            assert_eq!(args, json!({"productId": "mug-red", "quantity": 1}));
            assert!(!notify);
            assert_eq!(deadline_ms, 5 + DEFAULT_HANDLER_TIMEOUT_MS);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_risk_level_does_what_the_policy_says() {
    let registry = registry_with(vec![
        ToolDef::new("none", ""),
        ToolDef::new("low", "").risk(Risk::Low),
        ToolDef::new("high", "").risk(Risk::High),
        ToolDef::new("critical", "").risk(Risk::Critical),
        ToolDef::new("blocked", "").risk(Risk::Blocked),
    ]);
    let mut executor = Executor::default();
    assert!(matches!(
        executor.start(call("1", "none", json!({})), &registry, 0),
        Some(Step::Run { notify: false, .. })
    ));
    assert!(matches!(executor.start(call("2", "low", json!({})), &registry, 0), Some(Step::Run { notify: true, .. })));
    assert!(matches!(executor.start(call("3", "high", json!({})), &registry, 0), Some(Step::AskApproval(_))));
    assert!(matches!(executor.start(call("4", "critical", json!({})), &registry, 0), Some(Step::AskApproval(_))));
    let outcome = finished(executor.start(call("5", "blocked", json!({})), &registry, 0));
    assert_eq!(outcome.status, ResultStatus::Blocked);
}

#[test]
fn the_server_floor_raises_a_client_declared_risk() {
    let registry = registry_with(vec![ToolDef::new("delete_account", "")]);
    let mut executor = Executor::default();
    let request = CallRequest { server_risk: Risk::Critical, ..call("c1", "delete_account", json!({})) };
    match executor.start(request, &registry, 0) {
        Some(Step::AskApproval(request)) => assert_eq!(request.risk, Risk::Critical),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_refusal_dismissal_or_timeout_is_denied_with_a_reason_and_the_handler_never_runs() {
    let registry = registry_with(vec![ToolDef::new("cart_clear", "").risk(Risk::High)]);
    let mut executor = Executor::default();
    for (n, decision) in [
        ApprovalDecision::Rejected { reason: Some("I changed my mind".into()) },
        ApprovalDecision::Rejected { reason: None },
        ApprovalDecision::Dismissed,
    ]
    .into_iter()
    .enumerate()
    {
        let id = CallId::from(format!("c{n}"));
        executor.start(call(id.as_str(), "cart_clear", json!({})), &registry, 0).unwrap();
        let outcome = finished(executor.approval_decided(&id, decision, 1));
        assert_eq!(outcome.status, ResultStatus::Denied);
        assert!(outcome.content.as_str().unwrap().contains("cart_clear"));
        assert_eq!(executor.handler_done(&id, Ok(json!("ran anyway"))), None);
    }
    executor.start(call("late", "cart_clear", json!({})), &registry, 0).unwrap();
    assert_eq!(executor.next_deadline(), Some(DEFAULT_APPROVAL_TIMEOUT_MS));
    assert!(executor.poll_timeouts(DEFAULT_APPROVAL_TIMEOUT_MS - 1).is_empty());
    let steps = executor.poll_timeouts(DEFAULT_APPROVAL_TIMEOUT_MS);
    let outcome = finished(steps.into_iter().next());
    assert_eq!(outcome.status, ResultStatus::Denied);
    assert!(outcome.content.as_str().unwrap().contains("Nobody approved"));
    assert_eq!(
        executor.approval_decided(&"late".into(), ApprovalDecision::Approved, DEFAULT_APPROVAL_TIMEOUT_MS + 1),
        None
    );
}

#[test]
fn a_slow_handler_times_out_with_the_tools_own_timeout() {
    let registry = registry_with(vec![ToolDef::new("slow", "").timeout_ms(250)]);
    let mut executor = Executor::default();
    assert!(matches!(
        executor.start(call("c1", "slow", json!({})), &registry, 1000),
        Some(Step::Run { deadline_ms: 1250, .. })
    ));
    assert_eq!(executor.next_deadline(), Some(1250));
    let outcome = finished(executor.poll_timeouts(1250).into_iter().next());
    assert_eq!(outcome.status, ResultStatus::Timeout);
    assert_eq!(executor.handler_done(&"c1".into(), Ok(json!(1))), None, "a late result is ignored");
}

#[test]
fn cancellation_finishes_a_call_in_any_phase_once() {
    let registry = registry_with(vec![ToolDef::new("a", ""), ToolDef::new("b", "").risk(Risk::Critical)]);
    let mut executor = Executor::default();
    executor.start(call("run", "a", json!({})), &registry, 0).unwrap();
    executor.start(call("ask", "b", json!({})), &registry, 0).unwrap();
    let outcome = finished(executor.cancel(&"run".into(), "run aborted"));
    assert_eq!(outcome.status, ResultStatus::Cancelled);
    assert!(outcome.content.as_str().unwrap().contains("run aborted"));
    assert_eq!(executor.cancel(&"run".into(), "again"), None);
    let steps = executor.cancel_tools(&["b".to_string()], "its component unmounted");
    assert_eq!(steps.len(), 1);
    assert_eq!(executor.in_flight(), 0);
}

#[test]
fn a_repeated_call_id_never_runs_twice() {
    let registry = registry_with(vec![ToolDef::new("a", "")]);
    let mut executor = Executor::default();
    assert!(executor.start(call("c1", "a", json!({})), &registry, 0).is_some());
    assert_eq!(executor.start(call("c1", "a", json!({})), &registry, 0), None, "in flight");
    executor.handler_done(&"c1".into(), Ok(json!("done"))).unwrap();
    assert_eq!(executor.start(call("c1", "a", json!({})), &registry, 0), None, "already finished");
}

#[test]
fn handler_errors_become_error_results() {
    let registry = registry_with(vec![ToolDef::new("a", "")]);
    let mut executor = Executor::default();
    executor.start(call("c1", "a", json!({})), &registry, 0).unwrap();
    let outcome = finished(executor.handler_done(&"c1".into(), Err("out of stock".into())));
    assert_eq!((outcome.status, outcome.content), (ResultStatus::Error, json!("out of stock")));
}

#[test]
fn resolver_hooks_run_after_approval_around_the_handler() {
    let mut registry = registry_with(vec![]);
    let results = registry.register_resolver(
        PAGE,
        "cart",
        vec![
            (ToolDef::new("view", ""), ()),
            (ToolDef::new("remove", "").risk(Risk::High).parameters(json!({"required": ["id"]})), ()),
        ],
    );
    assert!(results.iter().all(Result::is_ok));
    let mut executor = Executor::default();

    // Invalid: refused before any approval and before any hook.
    let outcome = finished(executor.start(call("c0", "cart_remove", json!({})), &registry, 0));
    assert_eq!(outcome.status, ResultStatus::InvalidArgs);

    // Approval first, then before-hook, handler, after-hook, result.
    assert!(matches!(
        executor.start(call("c1", "cart_remove", json!({"id": "x"})), &registry, 0),
        Some(Step::AskApproval(_))
    ));
    match executor.approval_decided(&"c1".into(), ApprovalDecision::Approved, 0) {
        Some(Step::BeforeHook { resolver, tool, .. }) => {
            assert_eq!((resolver.as_str(), tool.as_str()), ("cart", "cart_remove"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        executor.handler_done(&"c1".into(), Ok(json!(1))),
        None,
        "the handler cannot finish before it was started"
    );
    assert!(matches!(executor.before_hook_done(&"c1".into(), HookOutcome::Continue), Some(Step::Run { .. })));
    assert!(matches!(executor.handler_done(&"c1".into(), Ok(json!({"removed": "x"}))), Some(Step::AfterHook { .. })));
    let outcome = finished(executor.after_hook_done(&"c1".into()));
    assert_eq!((outcome.status, outcome.content), (ResultStatus::Ok, json!({"removed": "x"})));

    // The before-hook can refuse; the error-hook sees handler failures.
    assert!(matches!(executor.start(call("c2", "cart_view", json!({})), &registry, 0), Some(Step::BeforeHook { .. })));
    let outcome = finished(executor.before_hook_done(&"c2".into(), HookOutcome::Refuse("cart is locked".into())));
    assert_eq!((outcome.status, outcome.content), (ResultStatus::Denied, json!("cart is locked")));
    executor.start(call("c3", "cart_view", json!({})), &registry, 0).unwrap();
    executor.before_hook_done(&"c3".into(), HookOutcome::Continue).unwrap();
    assert!(matches!(executor.handler_done(&"c3".into(), Err("boom".into())), Some(Step::ErrorHook { .. })));
    let outcome = finished(executor.after_hook_done(&"c3".into()));
    assert_eq!((outcome.status, outcome.content), (ResultStatus::Error, json!("boom")));
}

type Ids = std::collections::HashSet<CallId>;

/// Asserts the safety rules on one step.
fn check(
    step: &Option<Step>,
    approved: &Ids,
    effective: &std::collections::HashMap<CallId, Risk>,
    invalid: &Ids,
) -> Result<(), TestCaseError> {
    match step {
        Some(Step::Run { call_id, .. }) | Some(Step::BeforeHook { call_id, .. }) => {
            let risk = *effective.get(call_id).unwrap_or(&Risk::None);
            prop_assert!(risk != Risk::Blocked, "blocked call {} ran", call_id);
            if risk >= Risk::High {
                prop_assert!(approved.contains(call_id), "{} ran without approval", call_id);
            }
            prop_assert!(!invalid.contains(call_id), "invalid call {} ran", call_id);
        }
        Some(Step::AskApproval(request)) => {
            prop_assert!(!invalid.contains(&request.call_id), "approval asked for an invalid call");
        }
        _ => {}
    }
    Ok(())
}

/// One thing that can happen to an executor.
#[derive(Debug, Clone)]
enum Event {
    Start { call: usize, tool: usize, server_risk: Risk, valid: bool },
    Decide { call: usize, decision: u8 },
    HookDone { call: usize, refuse: bool },
    HandlerDone { call: usize, ok: bool },
    AfterHookDone { call: usize },
    Cancel { call: usize },
    Tick { ms: u64 },
}

fn event() -> impl Strategy<Value = Event> {
    let call = 0..6usize;
    prop_oneof![
        (call.clone(), 0..5usize, prop::sample::select(Risk::ALL.to_vec()), any::<bool>())
            .prop_map(|(call, tool, server_risk, valid)| Event::Start { call, tool, server_risk, valid }),
        (call.clone(), 0..3u8).prop_map(|(call, decision)| Event::Decide { call, decision }),
        (call.clone(), any::<bool>()).prop_map(|(call, refuse)| Event::HookDone { call, refuse }),
        (call.clone(), any::<bool>()).prop_map(|(call, ok)| Event::HandlerDone { call, ok }),
        call.clone().prop_map(|call| Event::AfterHookDone { call }),
        call.prop_map(|call| Event::Cancel { call }),
        (0..400_000u64).prop_map(|ms| Event::Tick { ms }),
    ]
}

proptest! {
    /// Whatever happens, a tool whose effective risk is high or critical reaches `Run` only
    /// after an explicit `Approved` for that call, `blocked` never runs, and invalid
    /// arguments never reach an approval or a hook.
    #[test]
    fn no_approval_no_run(events in prop::collection::vec(event(), 1..60)) {
        let mut registry = ToolRegistry::new(CompactValidator::new(NativeRegex));
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let risks = [Risk::None, Risk::Low, Risk::High, Risk::Critical, Risk::Blocked];
        for (n, risk) in risks.iter().enumerate() {
            registry.register(PAGE, ToolDef::new(format!("t{n}"), "").risk(*risk).parameters(schema.clone()), ()).unwrap();
        }
        registry.register_resolver(PAGE, "r", vec![(ToolDef::new("x", "").risk(Risk::Critical).parameters(schema), ())]);
        let mut executor = Executor::default();
        let mut now = 0;
        let mut approved = std::collections::HashSet::new();
        let mut effective = std::collections::HashMap::new();
        let mut invalid = std::collections::HashSet::new();
        for event in events {
            match event {
                Event::Start { call, tool, server_risk, valid } => {
                    let id = CallId::from(format!("c{call}"));
                    let name = if tool == 4 && call % 2 == 0 { "r_x".to_string() } else { format!("t{tool}") };
                    let declared = registry.get(&name).unwrap().spec().risk;
                    if executor.phase(&id).is_none() {
                        effective.insert(id.clone(), declared.max(server_risk));
                        if !valid { invalid.insert(id.clone()); }
                    }
                    let args = if valid { json!({"n": 1}) } else { json!({"n": "one"}) };
                    let step = executor.start(CallRequest { call_id: id, tool: name, args, server_risk }, &registry, now);
                    check(&step, &approved, &effective, &invalid)?;
                }
                Event::Decide { call, decision } => {
                    let id = CallId::from(format!("c{call}"));
                    let decision = match decision {
                        0 => ApprovalDecision::Approved,
                        1 => ApprovalDecision::Rejected { reason: None },
                        _ => ApprovalDecision::Dismissed,
                    };
                    if decision == ApprovalDecision::Approved && executor.phase(&id) == Some(Phase::AwaitingApproval) {
                        approved.insert(id.clone());
                    }
                    let step = executor.approval_decided(&id, decision, now);
                    check(&step, &approved, &effective, &invalid)?;
                }
                Event::HookDone { call, refuse } => {
                    let outcome = if refuse { HookOutcome::Refuse("no".into()) } else { HookOutcome::Continue };
                    let step = executor.before_hook_done(&format!("c{call}").into(), outcome);
                    check(&step, &approved, &effective, &invalid)?;
                }
                Event::HandlerDone { call, ok } => {
                    let result = if ok { Ok(json!(1)) } else { Err("failed".into()) };
                    let step = executor.handler_done(&format!("c{call}").into(), result);
                    check(&step, &approved, &effective, &invalid)?;
                }
                Event::AfterHookDone { call } => {
                    let step = executor.after_hook_done(&format!("c{call}").into());
                    check(&step, &approved, &effective, &invalid)?;
                }
                Event::Cancel { call } => {
                    let step = executor.cancel(&format!("c{call}").into(), "test");
                    prop_assert!(matches!(step, None | Some(Step::Finish(_))));
                }
                Event::Tick { ms } => {
                    now += ms;
                    for step in executor.poll_timeouts(now) {
                        prop_assert!(matches!(step, Step::Finish(_)));
                    }
                }
            }
        }
    }
}
