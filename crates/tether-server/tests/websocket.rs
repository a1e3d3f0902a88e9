//! The server over a real socket: handshake, bad input, tool calls across reconnects, and
//! session isolation. Every bad input gets a typed ERROR and the session stays usable.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::json;
use tether_agent::AgentLoop;
use tether_protocol::*;
use tether_scripted::ScriptedModel;
use tether_server::ServerConfig;

fn scripted() -> AgentLoop {
    AgentLoop::new(Arc::new(ScriptedModel::default()))
}

async fn server() -> TestServer {
    TestServer::start(ServerConfig::default(), scripted()).await
}

/// A welcomed client with the storefront's tools, in a run waiting for its `cart_add` call.
async fn waiting_for_cart_add(server: &TestServer) -> (Client, ToolCall) {
    let mut client = server.client().await;
    client.hello(None).await;
    client.context(1, storefront_tools()).await;
    client.say("add the red mug to my cart").await;
    let call = client.tool_call().await;
    assert_eq!(call.name, "cart_add");
    (client, call)
}

#[tokio::test]
async fn hello_gets_a_welcome_with_the_session_and_the_cap() {
    let server = server().await;
    let mut client = server.client().await;
    let welcome = client.hello(None).await;
    assert!(welcome.session_id.starts_with("s-"));
    assert_eq!(welcome.max_active_tools, 30);
    assert_eq!(welcome.protocol_version, PROTOCOL_VERSION);
    assert!(!welcome.resumed);
    assert!(welcome.resume_token.len() >= 32);
    assert!(welcome.capabilities.iter().any(|c| c == "tool_result_ack"));
    assert!(server.server.session(&welcome.session_id).is_some());
}

#[tokio::test]
async fn frames_before_hello_are_refused_and_hello_still_works() {
    let server = server().await;
    let mut client = server.client().await;
    client.say("hi").await;
    let error = client.error().await;
    assert_eq!(error.code, ErrorCode::HandshakeRequired);
    assert_eq!(error.reply_to.as_deref(), Some("c1"));
    client.hello(None).await;
}

#[tokio::test]
async fn another_protocol_version_is_refused_with_a_typed_error() {
    let server = server().await;
    let mut client = server.client().await;
    client.send_text(r#"{"type":"HELLO","id":"h","protocolVersion":999}"#).await;
    let error = client.error().await;
    assert_eq!(error.code, ErrorCode::UnsupportedVersion);
}

#[tokio::test]
async fn bad_frames_get_typed_errors_and_the_session_goes_on() {
    let server = server().await;
    let mut client = server.client().await;
    let welcome = client.hello(None).await;

    client.send_text("{not json").await;
    assert_eq!(client.error().await.code, ErrorCode::MalformedFrame);

    client.send_text(r#"{"type":"SELF_DESTRUCT","id":"x1"}"#).await;
    let error = client.error().await;
    assert_eq!((error.code, error.reply_to.as_deref()), (ErrorCode::UnknownFrameType, Some("x1")));

    client.send_text(r#"{"type":"TOOL_RESULT","id":"x2","callId":"c"}"#).await;
    assert_eq!(client.error().await.code, ErrorCode::MalformedFrame);

    let huge = format!(r#"{{"type":"USER_MESSAGE","id":"x3","text":"{}"}}"#, "a".repeat(DEFAULT_MAX_FRAME_BYTES + 10));
    client.send_text(huge).await;
    assert_eq!(client.error().await.code, ErrorCode::FrameTooLarge);

    // Still usable: the tools arrive and a run works.
    client.context(1, storefront_tools()).await;
    client.say("add the red mug to my cart").await;
    let call = client.tool_call().await;
    assert_eq!((call.name.as_str(), &call.args), ("cart_add", &json!({"productId": "mug-red"})));
    assert_eq!(server.server.session(&welcome.session_id).unwrap().client_tools().len(), 3);
}

#[tokio::test]
async fn an_update_over_the_cap_is_refused_and_the_previous_list_kept() {
    let server = TestServer::start(ServerConfig { max_active_tools: 3, ..ServerConfig::default() }, scripted()).await;
    let mut client = server.client().await;
    let welcome = client.hello(None).await;
    assert_eq!(welcome.max_active_tools, 3);
    client.context(1, storefront_tools()).await;
    let mut four = storefront_tools();
    four.push(tool("extra", "", json!({"type": "object"})));
    client.context(2, four).await;
    let error = client.error().await;
    assert_eq!((error.code, error.reply_to.as_deref()), (ErrorCode::ToolCapExceeded, Some("c3")));
    let session = server.server.session(&welcome.session_id).unwrap();
    assert_eq!(session.client_tools().len(), 3);
    assert_eq!(session.revision(), 1);
}

#[tokio::test]
async fn an_invalid_tool_is_refused_and_the_previous_list_kept() {
    let server = server().await;
    let mut client = server.client().await;
    let welcome = client.hello(None).await;
    client.context(1, storefront_tools()).await;
    client.context(2, vec![tool("bad name!", "", json!({}))]).await;
    assert_eq!(client.error().await.code, ErrorCode::InvalidTool);
    client.context(3, vec![tool("odd", "", json!({"type": "no-such-type"}))]).await;
    let error = client.error().await;
    assert_eq!(error.code, ErrorCode::InvalidTool);
    assert!(error.message.contains("odd"), "{}", error.message);
    assert_eq!(server.server.session(&welcome.session_id).unwrap().client_tools().len(), 3);
}

#[tokio::test]
async fn a_storefront_run_completes_end_to_end_with_events_in_order() {
    let server = server().await;
    let mut client = server.client().await;
    client.hello(None).await;
    client.context(1, storefront_tools()).await;
    client.say("add the red mug to my cart").await;
    let mut kinds = Vec::new();
    let call = client
        .recv_until(|f| match f {
            ServerFrame::Event(e) => {
                kinds.push(serde_json::to_value(&e.event).unwrap()["kind"].as_str().unwrap().to_string());
                None
            }
            ServerFrame::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .await;
    client.result(&call.call_id, ResultStatus::Ok, json!({"cart": {"mug-red": 1}})).await;
    let mut text = String::new();
    let status = client
        .recv_until(|f| match f {
            ServerFrame::Event(e) => {
                kinds.push(serde_json::to_value(&e.event).unwrap()["kind"].as_str().unwrap().to_string());
                None
            }
            ServerFrame::AgentMessage(m) => {
                text.push_str(&m.delta);
                m.done.then(|| m.status.unwrap())
            }
            _ => None,
        })
        .await;
    assert_eq!(status, RunStatus::Completed);
    assert!(text.starts_with("(scripted model) Done: cart_add"), "{text}");
    // The call's arguments as the model wrote them (several deltas) come before it runs.
    kinds.dedup_by(|a, b| a == "tool_call_delta" && b == "tool_call_delta");
    assert_eq!(
        kinds,
        [
            "run_start",
            "turn_start",
            "tool_call_delta",
            "tool_execution_start",
            "tool_execution_end",
            "turn_end",
            "turn_start",
            "turn_end",
            "run_end"
        ]
    );
}

#[tokio::test]
async fn a_second_message_during_a_run_is_refused() {
    let server = server().await;
    let (mut client, call) = waiting_for_cart_add(&server).await;
    client.say("and the blue one").await;
    assert_eq!(client.error().await.code, ErrorCode::RunInProgress);
    client.result(&call.call_id, ResultStatus::Ok, json!("ok")).await;
    assert_eq!(client.answer().await.1, RunStatus::Completed);
    // After the run, a new message starts a new run.
    client.say("add the blue mug to my cart").await;
    assert_eq!(client.tool_call().await.args, json!({"productId": "mug-blue"}));
}

#[tokio::test]
async fn results_for_unknown_or_foreign_calls_are_refused() {
    let server = server().await;
    let mut alice = server.client().await;
    let mut bob = server.client().await;
    alice.hello(None).await;
    bob.hello(None).await;
    alice.context(1, storefront_tools()).await;
    alice.say("add the red mug to my cart").await;
    let alice_call = alice.tool_call().await;

    bob.result(&"no-such-call".into(), ResultStatus::Ok, json!(1)).await;
    assert_eq!(bob.error().await.code, ErrorCode::UnknownCall);
    // Bob cannot answer Alice's call, even knowing its id.
    bob.result(&alice_call.call_id, ResultStatus::Ok, json!("hijacked")).await;
    assert_eq!(bob.error().await.code, ErrorCode::UnknownCall);

    alice.result(&alice_call.call_id, ResultStatus::Ok, json!("real")).await;
    let (text, status) = alice.answer().await;
    assert_eq!(status, RunStatus::Completed);
    assert!(text.contains("real") && !text.contains("hijacked"), "{text}");
}

#[tokio::test]
async fn a_result_sent_twice_is_applied_once_and_acknowledged_twice() {
    let server = server().await;
    let (mut client, call) = waiting_for_cart_add(&server).await;
    client.result(&call.call_id, ResultStatus::Ok, json!("first")).await;
    client.result(&call.call_id, ResultStatus::Ok, json!("second")).await;
    let mut acks = 0;
    let mut ends = 0;
    let mut text = String::new();
    loop {
        match client.recv().await {
            ServerFrame::ToolResultAck(ack) => {
                assert_eq!(ack.call_id, call.call_id);
                acks += 1;
            }
            ServerFrame::Event(EventFrame {
                event: RunEvent::ToolExecutionEnd(ToolEndEvent { output, .. }), ..
            }) => {
                ends += 1;
                assert_eq!(output, "first");
            }
            ServerFrame::AgentMessage(m) => {
                text.push_str(&m.delta);
                if m.done {
                    break;
                }
            }
            ServerFrame::Error(e) => panic!("a duplicate must not be an error: {e:?}"),
            _ => {}
        }
    }
    // The second ACK may come before or after the answer; wait for it if needed.
    while acks < 2 {
        if let ServerFrame::ToolResultAck(_) = client.recv().await {
            acks += 1;
        }
    }
    assert_eq!((acks, ends), (2, 1));
    assert!(text.contains("first") && !text.contains("second"));
}

#[tokio::test]
async fn a_call_survives_a_dropped_socket_and_its_result_is_used_once() {
    let server = server().await;
    let (client, call) = waiting_for_cart_add(&server).await;
    let resume = client.resume_info();
    client.kill();

    let mut again = server.client().await;
    let welcome = again.hello(Some(resume.clone())).await;
    assert!(welcome.resumed);
    assert_eq!(welcome.session_id, resume.session_id);
    // The server resends the call the client may have missed.
    let resent = again.tool_call().await;
    assert_eq!(resent.call_id, call.call_id);
    again.context(2, storefront_tools()).await;
    again.result(&call.call_id, ResultStatus::Ok, json!("added once")).await;
    again.result(&call.call_id, ResultStatus::Ok, json!("added twice")).await;
    let (text, status) = again.answer().await;
    assert_eq!(status, RunStatus::Completed);
    assert!(text.contains("added once") && !text.contains("added twice"), "{text}");
}

#[tokio::test]
async fn a_result_after_its_call_timed_out_is_acknowledged_as_late_not_refused() {
    let config = ServerConfig { tool_result_timeout: Duration::from_millis(300), ..ServerConfig::default() };
    let server = TestServer::start(config, scripted()).await;
    let (mut client, call) = waiting_for_cart_add(&server).await;
    let cancel = client
        .recv_until(|frame| match frame {
            ServerFrame::ToolCancel(cancel) => Some(cancel.clone()),
            _ => None,
        })
        .await;
    assert_eq!((cancel.call_id.as_str(), cancel.reason.as_str()), (call.call_id.as_str(), "no result in time"));
    // The handler had run all the same: its result comes late. Acknowledged, so the client's
    // outbox empties; not applied (the run read the timeout).
    client.result(&call.call_id, ResultStatus::Ok, json!("added late")).await;
    let ack = client.ack_or_error(&call.call_id).await.expect("acknowledged, not refused");
    assert_eq!(ack.call_id, call.call_id);
    let stats = server.health().await["stats"].clone();
    assert_eq!((stats["resultsLate"].as_u64(), stats["resultsApplied"].as_u64()), (Some(1), Some(0)), "{stats}");
}

#[tokio::test]
async fn a_result_after_its_run_ended_is_acknowledged_as_late_not_refused() {
    let agent = scripted().with_run_timeout(Duration::from_millis(300));
    let server = TestServer::start(ServerConfig::default(), agent).await;
    let (mut client, call) = waiting_for_cart_add(&server).await;
    let cancel = client
        .recv_until(|frame| match frame {
            ServerFrame::ToolCancel(cancel) => Some(cancel.clone()),
            _ => None,
        })
        .await;
    assert_eq!((cancel.call_id.as_str(), cancel.reason.as_str()), (call.call_id.as_str(), "the run ended"));
    client.result(&call.call_id, ResultStatus::Ok, json!("added late")).await;
    client.ack_or_error(&call.call_id).await.expect("acknowledged, not refused");
    // A copy of it again: still acknowledged, never applied.
    client.result(&call.call_id, ResultStatus::Ok, json!("added late")).await;
    client.ack_or_error(&call.call_id).await.expect("acknowledged, not refused");
    let stats = server.health().await["stats"].clone();
    assert_eq!((stats["resultsLate"].as_u64(), stats["resultsApplied"].as_u64()), (Some(2), Some(0)), "{stats}");
}

#[tokio::test]
async fn a_wrong_resume_token_gets_a_new_session_not_the_old_one() {
    let server = server().await;
    let mut client = server.client().await;
    let first = client.hello(None).await;
    let mut intruder = server.client().await;
    let welcome = intruder
        .hello(Some(Resume {
            session_id: first.session_id.clone(),
            token: "guess".into(),
            last_seq: None,
            history: false,
        }))
        .await;
    assert!(!welcome.resumed);
    assert_ne!(welcome.session_id, first.session_id);
}

#[tokio::test]
async fn two_sessions_in_parallel_never_cross() {
    let server = server().await;
    let mut alice = server.client().await;
    let mut bob = server.client().await;
    alice.hello(None).await;
    bob.hello(None).await;
    alice.context(1, storefront_tools()).await;
    let mut bob_tools = storefront_tools();
    bob_tools.retain(|t| t.name != "cart_add");
    bob.context(1, bob_tools).await;
    alice.say("add the red mug to my cart").await;
    bob.say("add the blue mug to my cart").await;
    let alice_call = alice.tool_call().await;
    assert_eq!(alice_call.args, json!({"productId": "mug-red"}));
    // Bob has no cart_add: the model may not call Alice's tool for him, and he never sees her calls.
    loop {
        match bob.recv().await {
            ServerFrame::ToolCall(call) => {
                assert_ne!(call.name, "cart_add");
                assert_ne!(call.call_id, alice_call.call_id);
                bob.result(&call.call_id, ResultStatus::Ok, json!("bob's page")).await;
            }
            ServerFrame::AgentMessage(m) if m.done => {
                assert_eq!(m.status, Some(RunStatus::Completed));
                break;
            }
            _ => {}
        }
    }
    alice.result(&alice_call.call_id, ResultStatus::Ok, json!("alice's cart")).await;
    let (text, _) = alice.answer().await;
    assert!(text.contains("alice's cart"));
}

#[tokio::test]
async fn healthz_answers() {
    let server = server().await;
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("\"status\":\"ok\""));
}

#[tokio::test]
async fn frames_lost_with_a_dying_socket_are_replayed_after_the_last_one_processed() {
    let server = server().await;
    let (client, call) = waiting_for_cart_add(&server).await;
    let call_seq: u64 = call.id.trim_start_matches('s').parse().expect("session frames are numbered s<n>");
    // Pretend the TOOL_CALL died with the socket: resume saying the last frame processed came before it.
    let resume = Resume { last_seq: Some(call_seq - 1), ..client.resume_info() };
    client.kill();
    let mut again = server.client().await;
    assert!(again.hello(Some(resume.clone())).await.resumed);
    let mut calls = 0;
    let replayed = again
        .recv_until(|f| match f {
            ServerFrame::ToolCall(c) => {
                calls += 1;
                Some(c.clone())
            }
            _ => None,
        })
        .await;
    assert_eq!((replayed.id.as_str(), replayed.call_id.as_str()), (call.id.as_str(), call.call_id.as_str()));
    // Answer, and let the socket die before the answer is read.
    again.result(&call.call_id, ResultStatus::Ok, json!("added")).await;
    let ack_seq = again
        .recv_until(|f| match f {
            ServerFrame::ToolResultAck(ack) => ack.id.trim_start_matches('s').parse::<u64>().ok(),
            _ => None,
        })
        .await;
    assert!(ack_seq > call_seq);
    again.kill();
    // Everything after the TOOL_CALL comes again, in order, including the run's last frame.
    let mut third = server.client().await;
    third.hello(Some(Resume { last_seq: Some(call_seq), ..resume })).await;
    let mut seqs = Vec::new();
    let (text, status) = loop {
        let frame = third.recv().await;
        if let ServerFrame::ToolCall(c) = &frame {
            panic!("the TOOL_CALL was answered; it must not come again: {c:?}");
        }
        seqs.push(frame.seq().expect("numbered"));
        if let ServerFrame::AgentMessage(m) = &frame
            && m.done
        {
            break (m.delta.clone(), m.status);
        }
    };
    assert_eq!(status, Some(RunStatus::Completed), "{text}");
    assert_eq!(seqs.first(), Some(&(call_seq + 1)), "the replay starts right after the last frame processed");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "in order, none missing: {seqs:?}");
    assert_eq!(calls, 1, "the pending call was not sent twice");
}
