//! The browser runtime in headless Chromium against the scripted test peer
//! (`crates/tether-test-peer`, started by `cargo xtask test`, its URL baked in at build time as
//! `TETHER_TEST_PEER`): batching, unmount, current state, approvals, cancellation, the resend
//! of an unacknowledged result after a reconnect and on a live connection, a result the server
//! refuses as unknown, retries against an unreachable server and the report of an invalid URL.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use futures_channel::mpsc;
use futures_util::StreamExt;
use futures_util::future::{Either, select};
use serde_json::{Value, json};
use tether_web::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

fn peer_url() -> String {
    match option_env!("TETHER_TEST_PEER") {
        Some(url) => url.to_string(),
        None => panic!(
            "TETHER_TEST_PEER was not set when this test was built: run the browser tests with `cargo xtask test`"
        ),
    }
}

/// Lets queued microtasks run: registrations made before it are flushed after it.
async fn next_tick() {
    let _ = JsFuture::from(js_sys::Promise::resolve(&wasm_bindgen::JsValue::UNDEFINED)).await;
}

async fn sleep_ms(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        web_sys::window().unwrap().set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms).unwrap();
    });
    let _ = JsFuture::from(promise).await;
}

struct Harness {
    client: Client,
    events: mpsc::UnboundedReceiver<ClientEvent>,
}

impl Harness {
    /// A client for `config` whose events are recorded, not yet connected.
    fn new(config: ClientConfig) -> Harness {
        // Every test is a fresh page: no session kept from the test before (the runtime keeps
        // its session in sessionStorage, for a reload).
        web_sys::window().unwrap().session_storage().unwrap().unwrap().clear().unwrap();
        Harness::after_reload(config)
    }

    /// A client for `config` that finds what the page before it kept in sessionStorage, as the
    /// page after a reload does.
    fn after_reload(config: ClientConfig) -> Harness {
        let client = Client::new(config);
        let (sender, events) = mpsc::unbounded();
        client.subscribe(move |event| {
            let _ = sender.unbounded_send(event.clone());
        });
        Harness { client, events }
    }

    /// A connected client (welcomed by the peer).
    async fn connect() -> Harness {
        let mut config = ClientConfig::new(peer_url());
        config.reconnect_base_ms = 20;
        let mut harness = Harness::new(config);
        harness.client.connect();
        harness.wait_for(|e| matches!(e, ClientEvent::Welcome { .. })).await;
        harness
    }

    /// The next event `pick` accepts (fails the test after 10 s).
    async fn wait_for(&mut self, mut pick: impl FnMut(&ClientEvent) -> bool) -> ClientEvent {
        loop {
            let next = self.events.next();
            let timeout = Box::pin(sleep_ms(10_000));
            match select(next, timeout).await {
                Either::Left((Some(event), _)) if pick(&event) => return event,
                Either::Left((Some(_), _)) => continue,
                Either::Left((None, _)) => panic!("the client stopped reporting events"),
                Either::Right(_) => panic!("timed out waiting for an event"),
            }
        }
    }

    /// Sends a command to the peer and returns its JSON answer.
    async fn ask(&mut self, command: &str) -> Value {
        self.client.send_message(command);
        self.answer().await
    }

    /// The peer's next JSON answer (the events before it are passed over).
    async fn answer(&mut self) -> Value {
        let answer = self.wait_for(|e| matches!(e, ClientEvent::AgentMessage { done: true, .. })).await;
        let ClientEvent::AgentMessage { delta, .. } = answer else { unreachable!() };
        serde_json::from_str(&delta).expect("the peer answers JSON")
    }
}

fn ok_tool(client: &Client, owner: OwnerId, name: &str) {
    client.register(owner, ToolDef::new(name, "A test tool."), |_| async { Ok(json!("ok")) }).unwrap();
}

#[wasm_bindgen_test]
async fn ten_mounts_in_one_tick_send_one_context_update() {
    let mut h = Harness::connect().await;
    let before = h.ask("contexts").await["contexts"].as_u64().unwrap();
    for n in 0..10 {
        let owner = h.client.new_owner();
        ok_tool(&h.client, owner, &format!("component_{n}"));
    }
    next_tick().await;
    let after = h.ask("contexts").await;
    assert_eq!(after["contexts"].as_u64().unwrap(), before + 1, "ten registrations, one frame");
    assert_eq!(after["tools"].as_array().unwrap().len(), 10);
    // Nothing changed: nothing is sent.
    next_tick().await;
    assert_eq!(h.ask("contexts").await["contexts"].as_u64().unwrap(), before + 1);
}

#[wasm_bindgen_test]
async fn an_unmount_removes_its_tools_but_not_its_globals() {
    let mut h = Harness::connect().await;
    let page = h.client.new_owner();
    for name in ["product_view", "cart_add", "cart_view"] {
        ok_tool(&h.client, page, name);
    }
    h.client
        .register(page, ToolDef::new("navigate", "Go somewhere.").global(true), |_| async { Ok(json!(null)) })
        .unwrap();
    next_tick().await;
    assert_eq!(h.ask("contexts").await["tools"].as_array().unwrap().len(), 4);
    h.client.unregister_owner(page);
    next_tick().await;
    assert_eq!(h.ask("contexts").await["tools"], json!(["navigate"]));
    assert_eq!(h.client.tools().len(), 1);
}

#[wasm_bindgen_test]
async fn a_handler_sees_state_changed_after_registration() {
    let mut h = Harness::connect().await;
    let count = Rc::new(Cell::new(0));
    let seen = count.clone();
    let owner = h.client.new_owner();
    h.client
        .register(owner, ToolDef::new("read_count", "Read the counter."), move |_| {
            let value = seen.get();
            async move { Ok(json!(value)) }
        })
        .unwrap();
    count.set(42);
    next_tick().await;
    let answer = h.ask("call read_count {}").await;
    assert_eq!((answer["status"].as_str(), &answer["content"]), (Some("ok"), &json!(42)));
}

#[wasm_bindgen_test]
async fn a_refused_approval_never_runs_the_handler_and_invalid_calls_are_never_asked() {
    let mut h = Harness::connect().await;
    let runs = Rc::new(Cell::new(0));
    let asked = Rc::new(Cell::new(0));
    let approve = Rc::new(Cell::new(false));
    let (counter, asked_counter, answer_with) = (runs.clone(), asked.clone(), approve.clone());
    h.client.set_approver(Rc::new(move |request: ApprovalRequest| -> LocalFuture<ApprovalDecision> {
        asked_counter.set(asked_counter.get() + 1);
        assert_eq!(request.tool, "cart_clear");
        let decision = if answer_with.get() {
            ApprovalDecision::Approved
        } else {
            ApprovalDecision::Rejected { reason: Some("not now".into()) }
        };
        Box::pin(async move { decision })
    }));
    let owner = h.client.new_owner();
    let def = ToolDef::new("cart_clear", "Empty the cart.").risk(Risk::High).parameters(
        json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "additionalProperties": false}),
    );
    h.client
        .register(owner, def, move |_| {
            counter.set(counter.get() + 1);
            async { Ok(json!("cleared")) }
        })
        .unwrap();
    next_tick().await;

    let answer = h.ask("call cart_clear {}").await;
    assert_eq!(answer["status"], "denied");
    assert!(answer["content"].as_str().unwrap().contains("not now"));
    assert_eq!((runs.get(), asked.get()), (0, 1));

    let answer = h.ask(r#"call cart_clear {"confirm": "yes"}"#).await;
    assert_eq!(answer["status"], "invalid_args");
    assert_eq!(asked.get(), 1, "no approval is asked for an invalid call");

    approve.set(true);
    let answer = h.ask("call cart_clear {}").await;
    assert_eq!((answer["status"].as_str(), runs.get(), asked.get()), (Some("ok"), 1, 2));
}

/// Sets a flag when the handler's future is dropped (aborted).
struct DropFlag(Rc<Cell<bool>>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

fn register_slow(client: &Client, owner: OwnerId, dropped: &Rc<Cell<bool>>) {
    let dropped = dropped.clone();
    client
        .register(owner, ToolDef::new("slow", "Never finishes."), move |_| {
            let flag = DropFlag(dropped.clone());
            async move {
                let _flag = flag;
                futures_util::future::pending::<()>().await;
                Ok(json!("unreachable"))
            }
        })
        .unwrap();
}

#[wasm_bindgen_test]
async fn tool_cancel_aborts_the_handler_and_sends_no_result() {
    let mut h = Harness::connect().await;
    let owner = h.client.new_owner();
    let dropped = Rc::new(Cell::new(false));
    register_slow(&h.client, owner, &dropped);
    ok_tool(&h.client, owner, "ping");
    next_tick().await;
    h.client.send_message("call-and-cancel slow {}");
    let finished = h.wait_for(|e| matches!(e, ClientEvent::CallFinished { record } if record.tool == "slow")).await;
    let ClientEvent::CallFinished { record } = finished else { unreachable!() };
    assert_eq!(record.status, ResultStatus::Cancelled);
    assert_eq!(h.answer().await["cancelledResults"], 0);
    assert!(dropped.get(), "the handler's future was dropped");
}

#[wasm_bindgen_test]
async fn an_unmount_aborts_the_call_in_flight() {
    let mut h = Harness::connect().await;
    let owner = h.client.new_owner();
    let dropped = Rc::new(Cell::new(false));
    register_slow(&h.client, owner, &dropped);
    next_tick().await;
    h.client.send_message("call slow {}");
    h.wait_for(|e| matches!(e, ClientEvent::CallStarted { tool, .. } if tool == "slow")).await;
    next_tick().await;
    assert!(!dropped.get());
    h.client.unregister_owner(owner);
    // The aborted future is dropped when its task runs next, in this tick.
    next_tick().await;
    assert!(dropped.get(), "unmount aborts the handler");
    let answer = h.wait_for(|e| matches!(e, ClientEvent::AgentMessage { done: true, .. })).await;
    let ClientEvent::AgentMessage { delta, .. } = answer else { unreachable!() };
    let answer: Value = serde_json::from_str(&delta).unwrap();
    assert_eq!(answer["status"], "cancelled");
}

#[wasm_bindgen_test]
async fn after_a_reconnect_an_unacknowledged_result_is_resent_once() {
    let mut h = Harness::connect().await;
    let owner = h.client.new_owner();
    let runs = Rc::new(RefCell::new(0));
    let counter = runs.clone();
    h.client
        .register(owner, ToolDef::new("echo", "Echo."), move |args| {
            *counter.borrow_mut() += 1;
            async move { Ok(args) }
        })
        .unwrap();
    next_tick().await;
    h.client.send_message(r#"call-and-drop echo {"n": 1}"#);
    let started = h.wait_for(|e| matches!(e, ClientEvent::CallStarted { .. })).await;
    let ClientEvent::CallStarted { call_id, .. } = started else { unreachable!() };
    // The peer closes without acknowledging; the client reconnects and resumes.
    h.wait_for(|e| matches!(e, ClientEvent::Welcome { resumed: true, .. })).await;
    let answer = h.ask(&format!("results {call_id}")).await;
    assert_eq!(answer["results"], 2, "sent once, resent once after the reconnect");
    assert_eq!(h.client.unacknowledged_results(), 0, "the resend was acknowledged");
    assert_eq!(*runs.borrow(), 1, "the handler ran once");
}

#[wasm_bindgen_test]
async fn a_result_computed_before_a_reload_is_delivered_after_it_and_never_recomputed() {
    // The first page: it does not reconnect soon, so it is still away when the reload comes.
    let mut config = ClientConfig::new(peer_url());
    config.reconnect_base_ms = 600_000;
    let mut first = Harness::new(config);
    first.client.connect();
    first.wait_for(|e| matches!(e, ClientEvent::Welcome { .. })).await;
    let (finish, finished) = futures_channel::oneshot::channel::<()>();
    let finished = Rc::new(RefCell::new(Some(finished)));
    let owner = first.client.new_owner();
    first
        .client
        .register(owner, ToolDef::new("echo", "Echo."), move |_| {
            let finished = finished.borrow_mut().take();
            async move {
                if let Some(finished) = finished {
                    let _ = finished.await;
                }
                Ok(json!({"ranOn": "the first page"}))
            }
        })
        .unwrap();
    next_tick().await;
    // The peer sends the call and closes at once: the result is computed while the page is away.
    first.client.send_message("call-then-close echo {}");
    let started = first.wait_for(|e| matches!(e, ClientEvent::CallStarted { .. })).await;
    let ClientEvent::CallStarted { call_id, .. } = started else { unreachable!() };
    first.wait_for(|e| matches!(e, ClientEvent::Connection { state: ConnectionState::Reconnecting, .. })).await;
    let _ = finish.send(());
    first.wait_for(|e| matches!(e, ClientEvent::CallFinished { .. })).await;
    assert_eq!(first.client.unacknowledged_results(), 1);
    // The reload: the first page is gone; the next one runs the same tool, counting its runs.
    first.client.disconnect();
    drop(first);
    let mut config = ClientConfig::new(peer_url());
    config.reconnect_base_ms = 20;
    let mut second = Harness::after_reload(config);
    let runs = Rc::new(Cell::new(0));
    let counter = runs.clone();
    let owner = second.client.new_owner();
    second
        .client
        .register(owner, ToolDef::new("echo", "Echo."), move |_| {
            counter.set(counter.get() + 1);
            async { Ok(json!({"ranOn": "the second page"})) }
        })
        .unwrap();
    second.client.connect();
    second.wait_for(|e| matches!(e, ClientEvent::Welcome { resumed: true, .. })).await;
    // The peer asks for the call again after the resume (as the server does for a call it has no
    // result for); the kept result answers it.
    let answer = second.ask(&format!("results {call_id}")).await;
    let seen = answer["seen"].as_array().expect("the results the peer received");
    assert!(!seen.is_empty(), "the result reached the server after the reload: {answer}");
    for result in seen {
        assert_eq!(result, &json!({"status": "ok", "content": {"ranOn": "the first page"}}), "{answer}");
    }
    assert_eq!(runs.get(), 0, "the handler did not run again");
}

#[wasm_bindgen_test]
async fn a_result_the_server_refuses_as_an_unknown_call_leaves_the_outbox() {
    let mut h = Harness::connect().await;
    let owner = h.client.new_owner();
    ok_tool(&h.client, owner, "echo");
    next_tick().await;
    h.client.send_message("call-and-refuse echo {}");
    let refusal = h.wait_for(|e| matches!(e, ClientEvent::ServerError { .. })).await;
    assert!(matches!(refusal, ClientEvent::ServerError { code: ErrorCode::UnknownCall, .. }));
    h.wait_for(|e| matches!(e, ClientEvent::AgentMessage { done: true, .. })).await;
    // The server will never take it: kept, it would be resent after every reconnect forever.
    assert_eq!(h.client.unacknowledged_results(), 0);
}

#[wasm_bindgen_test]
async fn a_result_left_unacknowledged_on_a_live_connection_is_sent_again() {
    let mut h = Harness::connect().await;
    let owner = h.client.new_owner();
    let runs = Rc::new(Cell::new(0));
    let counter = runs.clone();
    h.client
        .register(owner, ToolDef::new("echo", "Echo."), move |args| {
            counter.set(counter.get() + 1);
            async move { Ok(args) }
        })
        .unwrap();
    next_tick().await;
    h.client.send_message(r#"call-and-wait-for-resend echo {"n": 1}"#);
    // The peer answers only once the result came a second time on this connection (after about
    // 3 s), and acknowledges that copy.
    let answer = h
        .wait_for(|e| {
            assert!(!matches!(e, ClientEvent::Welcome { .. }), "no reconnect: the same connection");
            matches!(e, ClientEvent::AgentMessage { done: true, .. })
        })
        .await;
    let ClientEvent::AgentMessage { delta, .. } = answer else { unreachable!() };
    let answer: Value = serde_json::from_str(&delta).unwrap();
    assert_eq!(answer["sameId"], true, "the copy is the same frame: an ERROR naming it names the result");
    assert_eq!((runs.get(), h.client.unacknowledged_results()), (1, 0));
}

#[wasm_bindgen_test]
async fn the_servers_risk_floor_wins_over_a_lower_declared_risk() {
    let mut h = Harness::connect().await;
    let asked = Rc::new(RefCell::new(Vec::new()));
    let seen = asked.clone();
    h.client.set_approver(Rc::new(move |request: ApprovalRequest| -> LocalFuture<ApprovalDecision> {
        seen.borrow_mut().push(request.risk);
        Box::pin(async { ApprovalDecision::Rejected { reason: Some("not today".into()) } })
    }));
    let runs = Rc::new(Cell::new(0));
    let counter = runs.clone();
    let owner = h.client.new_owner();
    // Declared harmless by the page; the server says critical.
    h.client
        .register(owner, ToolDef::new("delete_account", "Delete the account.").risk(Risk::None), move |_| {
            counter.set(counter.get() + 1);
            async { Ok(json!("deleted")) }
        })
        .unwrap();
    next_tick().await;
    let answer = h.ask("call@critical delete_account {}").await;
    assert_eq!(answer["status"], "denied");
    assert_eq!(*asked.borrow(), vec![Risk::Critical], "the user was asked, at the server's level");
    assert_eq!(runs.get(), 0);
    // Without a floor the declared risk applies: no approval.
    let answer = h.ask("call delete_account {}").await;
    assert_eq!((answer["status"].as_str(), runs.get(), asked.borrow().len()), (Some("ok"), 1, 1));
}

#[wasm_bindgen_test]
async fn a_server_that_cannot_be_reached_is_retried_until_disconnect() {
    // Nothing listens on port 9 of this machine: each attempt closes, and the client retries.
    let mut config = ClientConfig::new("ws://127.0.0.1:9/ws");
    config.reconnect_base_ms = 5;
    config.reconnect_max_ms = 10;
    let mut h = Harness::new(config);
    h.client.connect();
    h.wait_for(
        |e| matches!(e, ClientEvent::Connection { state: ConnectionState::Reconnecting, attempt } if *attempt >= 3),
    )
    .await;
    h.client.disconnect();
    assert_eq!(h.client.connection_state(), ConnectionState::Closed);
    // No attempt starts after the disconnect.
    sleep_ms(50).await;
    assert_eq!(h.client.connection_state(), ConnectionState::Closed);
}

#[wasm_bindgen_test]
async fn an_invalid_url_is_reported_to_the_error_callback() {
    // Browsers refuse other schemes than ws(s) and http(s) when the socket is created.
    let mut config = ClientConfig::new("ftp://127.0.0.1/ws");
    config.reconnect_base_ms = 5;
    let client = Client::new(config);
    let errors = Rc::new(RefCell::new(Vec::new()));
    let seen = errors.clone();
    client.on_error(move |error| seen.borrow_mut().push(error.to_string()));
    client.connect();
    let first = errors.borrow().first().cloned().expect("the failure is reported at once");
    assert!(first.starts_with("connection problem: cannot open ftp://127.0.0.1/ws: "), "{first}");
    assert_eq!(client.connection_state(), ConnectionState::Reconnecting);
    client.disconnect();
}
