//! Every configurable limit over a real socket: the client gets a typed `ERROR` naming the
//! limit, and the session (or the server) stays healthy afterwards.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::json;
use tether_agent::{AgentLoop, ChatMessage, LoopGuard};
use tether_protocol::*;
use tether_scripted::ScriptedModel;
use tether_server::ServerConfig;

fn scripted() -> AgentLoop {
    AgentLoop::new(Arc::new(ScriptedModel::default()))
}

#[tokio::test]
async fn a_frame_over_max_frame_bytes_is_refused_and_the_session_goes_on() {
    let config = ServerConfig { max_frame_bytes: 4096, ..ServerConfig::default() };
    let server = TestServer::start(config, scripted()).await;
    let mut client = server.client().await;
    let welcome = client.hello(None).await;
    assert_eq!(welcome.max_frame_bytes, 4096);
    client.say(&"a".repeat(5000)).await;
    let error = client.error().await;
    assert_eq!(error.code, ErrorCode::FrameTooLarge);
    assert!(error.message.contains("4096"), "{}", error.message);
    run_works(&mut client, 1).await;
}

#[tokio::test]
async fn frames_over_the_rate_are_read_later_with_one_error_and_none_is_lost() {
    let config = ServerConfig { max_frames_per_second: 20, ..ServerConfig::default() };
    let server = TestServer::start(config, scripted()).await;
    let mut client = server.client().await;
    client.hello(None).await;
    // Twice a burst (40) in one go: the second half waits (about 1 s at 20 a second).
    for n in 0..80 {
        client.send_raw(format!(r#"{{"type":"TOOL_PROGRESS","id":"p{n}","callId":"none","message":"flood"}}"#)).await;
    }
    let (mut progress_events, mut errors) = (0, Vec::new());
    while progress_events < 80 {
        match client.recv().await {
            ServerFrame::Error(error) => errors.push(error),
            ServerFrame::Event(_) => progress_events += 1,
            _ => {}
        }
    }
    // One error for the whole flood, and every frame of it read.
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].code, ErrorCode::RateLimited);
    assert!(errors[0].message.contains("20 frames per second"), "{}", errors[0].message);
    assert!(errors[0].message.contains("none is dropped"), "{}", errors[0].message);
    // The session is healthy.
    run_works(&mut client, 1).await;
}

#[tokio::test]
async fn a_tool_result_sent_in_a_flood_over_the_rate_is_applied_not_dropped() {
    let config = ServerConfig { max_frames_per_second: 10, ..ServerConfig::default() };
    let server = TestServer::start(config, scripted()).await;
    let mut client = server.client().await;
    client.hello(None).await;
    client.context(1, storefront_tools()).await;
    client.say("add the red mug to my cart").await;
    let call = client.tool_call().await;
    // The burst (20) is spent, then the result: over the rate.
    for n in 0..25 {
        client.send_raw(format!(r#"{{"type":"TOOL_PROGRESS","id":"p{n}","callId":"none","message":"flood"}}"#)).await;
    }
    client.result(&call.call_id, ResultStatus::Ok, json!("added in a flood")).await;
    client.ack_or_error(&call.call_id).await.expect("the result is acknowledged");
    let (text, status) = client.answer().await;
    assert_eq!(status, RunStatus::Completed);
    assert!(text.contains("added in a flood"), "the run read the result: {text}");
}

#[tokio::test]
async fn a_schema_over_max_schema_bytes_is_refused_and_the_previous_list_kept() {
    let config = ServerConfig { max_schema_bytes: 512, ..ServerConfig::default() };
    let server = TestServer::start(config, scripted()).await;
    let mut client = server.client().await;
    let welcome = client.hello(None).await;
    client.context(1, storefront_tools()).await;
    let values: Vec<String> = (0..100).map(|n| format!("product-{n}")).collect();
    let big = tool("pick", "Pick a product.", json!({"type": "object", "properties": {"id": {"enum": values}}}));
    client.context(2, vec![big]).await;
    let error = client.error().await;
    assert_eq!((error.code, error.reply_to.as_deref()), (ErrorCode::LimitExceeded, Some("c3")));
    assert!(error.message.contains("max_schema_bytes") && error.message.contains("pick"), "{}", error.message);
    let session = server.server.session(&welcome.session_id).unwrap();
    assert_eq!((session.client_tools().len(), session.revision()), (3, 1));
    run_works(&mut client, 3).await;
}

#[tokio::test]
async fn a_schema_over_max_schema_depth_is_refused_and_the_previous_list_kept() {
    let config = ServerConfig { max_schema_depth: 6, ..ServerConfig::default() };
    let server = TestServer::start(config, scripted()).await;
    let mut client = server.client().await;
    let welcome = client.hello(None).await;
    client.context(1, storefront_tools()).await;
    let mut schema = json!({"type": "string"});
    for _ in 0..4 {
        schema = json!({"type": "object", "properties": {"inner": schema}});
    }
    // Four objects, each with `properties` and the property itself: 8 levels.
    client.context(2, vec![tool("deep", "Deep arguments.", schema)]).await;
    let error = client.error().await;
    assert_eq!(error.code, ErrorCode::LimitExceeded);
    assert!(error.message.contains("max_schema_depth") && error.message.contains("deep"), "{}", error.message);
    assert_eq!(server.server.session(&welcome.session_id).unwrap().client_tools().len(), 3);
    run_works(&mut client, 3).await;
}

#[tokio::test]
async fn a_description_over_max_description_chars_is_refused_and_one_at_the_limit_accepted() {
    let config = ServerConfig { max_description_chars: 100, ..ServerConfig::default() };
    let server = TestServer::start(config, scripted()).await;
    let mut client = server.client().await;
    let welcome = client.hello(None).await;
    // Characters, not bytes: 100 two-byte characters are at the limit.
    client.context(1, vec![tool("ok_tool", &"é".repeat(100), json!({"type": "object"}))]).await;
    client.context(2, vec![tool("long_tool", &"a".repeat(101), json!({"type": "object"}))]).await;
    let error = client.error().await;
    assert_eq!((error.code, error.reply_to.as_deref()), (ErrorCode::LimitExceeded, Some("c3")));
    assert!(error.message.contains("max_description_chars"), "{}", error.message);
    let session = server.server.session(&welcome.session_id).unwrap();
    assert_eq!(session.client_tools()[0].name, "ok_tool");
    run_works(&mut client, 3).await;
}

#[tokio::test]
async fn sessions_over_max_sessions_per_ip_are_refused_and_the_others_keep_working() {
    let config = ServerConfig { max_sessions_per_ip: 2, ..ServerConfig::default() };
    let server = TestServer::start(config, scripted()).await;
    let mut first = server.client().await;
    let mut second = server.client().await;
    first.hello(None).await;
    second.hello(None).await;
    let mut third = server.client().await;
    let id = third.id();
    third.send(ClientFrame::Hello(Hello { id, protocol_version: PROTOCOL_VERSION, resume: None, client: None })).await;
    let error = third.error().await;
    assert_eq!((error.code, error.reply_to.as_deref()), (ErrorCode::LimitExceeded, Some("c1")));
    assert!(error.message.contains("max_sessions_per_ip"), "{}", error.message);
    assert_eq!(third.closed().await, (1008, "too many sessions from this address".to_string()));
    assert_eq!(server.server.session_count(), 2);
    // The existing sessions are untouched, and resuming one is not a new session.
    run_works(&mut first, 1).await;
    let resume = second.resume_info();
    second.kill();
    let mut back = server.client().await;
    assert!(back.hello(Some(resume)).await.resumed);
    run_works(&mut back, 1).await;
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_limit_counts_the_forwarded_client_addresses() {
    // One session per address; every connection comes from 127.0.0.1, the "proxy".
    let trusted = ServerConfig {
        max_sessions_per_ip: 1,
        trusted_proxies: vec!["127.0.0.1".parse().unwrap()],
        ..ServerConfig::default()
    };
    let server = TestServer::start(trusted, scripted()).await;
    let mut alice = Client::connect_with(&server.url(), &[("X-Forwarded-For", "203.0.113.7")]).await;
    alice.hello(None).await;
    // Another client behind the same proxy is not refused: it is another address.
    let mut bob = Client::connect_with(&server.url(), &[("X-Forwarded-For", "198.51.100.2")]).await;
    bob.hello(None).await;
    assert_eq!(server.server.session_count(), 2);
    // A second session of the same client is; an entry the client wrote before it does not help.
    let mut again = Client::connect_with(&server.url(), &[("X-Forwarded-For", "10.9.9.9, 203.0.113.7")]).await;
    let id = again.id();
    again.send(ClientFrame::Hello(Hello { id, protocol_version: PROTOCOL_VERSION, resume: None, client: None })).await;
    assert_eq!(again.error().await.code, ErrorCode::LimitExceeded);
    run_works(&mut alice, 1).await;

    // Without the proxy trusted, the header is the client's own words: one address, one session.
    let untrusted = ServerConfig { max_sessions_per_ip: 1, ..ServerConfig::default() };
    let server = TestServer::start(untrusted, scripted()).await;
    let mut first = Client::connect_with(&server.url(), &[("X-Forwarded-For", "203.0.113.7")]).await;
    first.hello(None).await;
    let mut forged = Client::connect_with(&server.url(), &[("X-Forwarded-For", "198.51.100.2")]).await;
    let id = forged.id();
    forged.send(ClientFrame::Hello(Hello { id, protocol_version: PROTOCOL_VERSION, resume: None, client: None })).await;
    assert_eq!(forged.error().await.code, ErrorCode::LimitExceeded);
}

#[tokio::test]
async fn calls_over_max_pending_calls_are_not_run_and_the_model_reads_why() {
    let model = DirectModel::default();
    let config = ServerConfig { max_pending_calls: 2, ..ServerConfig::default() };
    // The five calls are identical; the loop guard (tested in tether-agent) is off so that this
    // limit alone decides.
    let agent = AgentLoop::new(Arc::new(model.clone())).with_loop_guard(LoopGuard::off());
    let server = TestServer::start(config, agent).await;
    let mut client = server.client().await;
    client.hello(None).await;
    client.context(1, vec![tool("ping", "Ping.", json!({"type": "object"}))]).await;
    client.say("call ping x5").await;
    let error = client.error().await;
    assert_eq!(error.code, ErrorCode::LimitExceeded);
    assert!(
        error.message.contains("max_pending_calls") && error.message.contains("3 were not run"),
        "{}",
        error.message
    );
    let mut calls = 0;
    let status = loop {
        match client.recv().await {
            ServerFrame::ToolCall(call) => {
                calls += 1;
                client.result(&call.call_id, ResultStatus::Ok, json!(format!("pong {calls}"))).await;
            }
            ServerFrame::AgentMessage(m) if m.done => break m.status.unwrap(),
            _ => {}
        }
    };
    assert_eq!((calls, status), (2, RunStatus::Completed));
    let last = model.requests().pop().unwrap();
    let results: Vec<String> = last
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 5);
    assert_eq!(&results[..2], ["pong 1", "pong 2"]);
    assert!(results[2..].iter().all(|r| r.starts_with("[denied] Not run")), "{results:?}");
}

#[tokio::test]
async fn a_run_at_max_turns_ends_with_a_limit_error_and_the_next_run_starts() {
    // The model repeats one call; the loop guard is off so that the turn limit alone decides.
    let agent = AgentLoop::new(Arc::new(DirectModel::default())).with_max_turns(2).with_loop_guard(LoopGuard::off());
    let server = TestServer::start(ServerConfig::default(), agent).await;
    let mut client = server.client().await;
    client.hello(None).await;
    client.context(1, vec![tool("ping", "Ping.", json!({"type": "object"}))]).await;
    client.say("loop ping").await;
    let (mut calls, mut error) = (0, None);
    let status = loop {
        match client.recv().await {
            ServerFrame::ToolCall(call) => {
                calls += 1;
                client.result(&call.call_id, ResultStatus::Ok, json!("pong")).await;
            }
            ServerFrame::Error(e) => error = Some(e),
            ServerFrame::AgentMessage(m) if m.done => break m.status.unwrap(),
            _ => {}
        }
    };
    assert_eq!((calls, status), (2, RunStatus::MaxTurns));
    // The error comes before the run's last frame.
    let error = error.expect("a limit error");
    assert_eq!((error.code, error.reply_to.as_deref()), (ErrorCode::LimitExceeded, Some("c3")));
    assert!(error.message.contains("2 turns"), "{}", error.message);
    client.say("call ping").await;
    let call = client.tool_call().await;
    client.result(&call.call_id, ResultStatus::Ok, json!("pong")).await;
    assert_eq!(client.answer().await, ("done: pong".to_string(), RunStatus::Completed));
}

#[tokio::test]
async fn a_run_over_its_wall_time_ends_with_a_limit_error_and_the_next_run_starts() {
    let agent = scripted().with_run_timeout(Duration::from_millis(300));
    let server = TestServer::start(ServerConfig::default(), agent).await;
    let mut client = server.client().await;
    client.hello(None).await;
    client.context(1, storefront_tools()).await;
    client.say("add the red mug to my cart").await;
    let call = client.tool_call().await;
    // The client never answers: the run's wall-time limit ends it and the call is cancelled.
    let (mut status, mut error, mut cancel) = (None, None, None);
    while status.is_none() || error.is_none() || cancel.is_none() {
        match client.recv().await {
            ServerFrame::AgentMessage(m) if m.done => status = m.status,
            ServerFrame::Error(e) => error = Some(e),
            ServerFrame::ToolCancel(c) => cancel = Some(c),
            _ => {}
        }
    }
    assert_eq!(status, Some(RunStatus::TimedOut));
    assert_eq!(cancel.unwrap().call_id, call.call_id);
    let error = error.unwrap();
    assert_eq!(error.code, ErrorCode::LimitExceeded);
    assert!(error.message.contains("0.3 s"), "{}", error.message);
    client.say("add the blue mug to my cart").await;
    let next = client.tool_call().await;
    assert_eq!(next.args, json!({"productId": "mug-blue"}));
}
