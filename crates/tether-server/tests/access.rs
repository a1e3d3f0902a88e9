//! Who may connect: the origin allowlist, tokens, and resuming only with the resume token.
//! A refused connection gets `ERROR unauthorized` and a close frame (1008) saying why.

mod common;

use std::sync::Arc;

use common::*;
use serde_json::json;
use tether_agent::AgentLoop;
use tether_protocol::*;
use tether_scripted::ScriptedModel;
use tether_server::ServerConfig;

fn scripted() -> AgentLoop {
    AgentLoop::new(Arc::new(ScriptedModel::default()))
}

/// Expects the refusal: an `ERROR unauthorized`, then a close frame with code 1008.
async fn refused(client: &mut Client) -> String {
    let error = client.error().await;
    assert_eq!(error.code, ErrorCode::Unauthorized, "{}", error.message);
    let (code, reason) = client.closed().await;
    assert_eq!(code, 1008);
    assert!(error.message.contains(&reason), "{} / {reason}", error.message);
    reason
}

#[tokio::test]
async fn a_page_on_another_site_is_refused_with_a_reason() {
    let server = TestServer::start(ServerConfig::default(), scripted()).await;
    let mut evil = Client::connect_with(&server.url(), &[("Origin", "https://evil.example")]).await;
    let reason = refused(&mut evil).await;
    assert!(reason.contains("origin https://evil.example is not allowed"), "{reason}");
    assert_eq!(server.server.session_count(), 0);
}

#[tokio::test]
async fn the_own_origin_localhost_and_clients_without_origin_are_allowed_by_default() {
    let server = TestServer::start(ServerConfig::default(), scripted()).await;
    let own = format!("http://{}", server.addr);
    for origin in [own.as_str(), "http://localhost:5173", "http://127.0.0.1:3000"] {
        let mut client = Client::connect_with(&server.url(), &[("Origin", origin)]).await;
        client.hello(None).await;
    }
    // Not a browser (no Origin header): not checked here; tokens are what protect such clients.
    server.client().await.hello(None).await;
    assert_eq!(server.server.session_count(), 4);
}

#[tokio::test]
async fn allowed_origins_replace_the_localhost_default_and_keep_the_own_origin() {
    let config = ServerConfig { allowed_origins: vec!["https://*.example.com".into()], ..ServerConfig::default() };
    let server = TestServer::start(config, scripted()).await;
    let mut shop = Client::connect_with(&server.url(), &[("Origin", "https://shop.example.com")]).await;
    shop.hello(None).await;
    let own = format!("http://{}", server.addr);
    Client::connect_with(&server.url(), &[("Origin", own.as_str())]).await.hello(None).await;
    let mut local = Client::connect_with(&server.url(), &[("Origin", "http://localhost:5173")]).await;
    refused(&mut local).await;
}

#[tokio::test]
async fn with_tokens_configured_a_client_needs_one_in_the_header_or_the_url() {
    let config = ServerConfig { auth_tokens: vec!["t0k3n-one".into(), "t0k3n-two".into()], ..ServerConfig::default() };
    let server = TestServer::start(config, scripted()).await;

    let mut none = server.client().await;
    let reason = refused(&mut none).await;
    assert!(reason.contains("a token is required"), "{reason}");

    let mut wrong = Client::connect_with(&server.url(), &[("Authorization", "Bearer nope")]).await;
    let reason = refused(&mut wrong).await;
    assert_eq!(reason, "the token is not valid");
    assert!(!reason.contains("nope"));

    let mut header = Client::connect_with(&server.url(), &[("Authorization", "Bearer t0k3n-two")]).await;
    header.hello(None).await;
    let mut query = Client::connect(&format!("{}?token=t0k3n-one", server.url())).await;
    query.hello(None).await;
    query.context(1, storefront_tools()).await;
    query.say("add the red mug to my cart").await;
    let call = query.tool_call().await;
    query.result(&call.call_id, ResultStatus::Ok, json!("ok")).await;
    assert_eq!(query.answer().await.1, RunStatus::Completed);
    assert_eq!(server.server.session_count(), 2);
}

#[tokio::test]
async fn a_guessed_session_id_gets_nothing_of_that_session() {
    let server = TestServer::start(ServerConfig::default(), scripted()).await;
    let mut owner = server.client().await;
    owner.hello(None).await;
    owner.context(1, storefront_tools()).await;
    owner.say("add the red mug to my cart").await;
    let call = owner.tool_call().await;
    let resume = owner.resume_info();
    // The owner's connection drops while the call waits for its result.
    owner.kill();

    // Someone who knows (or guessed) the session id, but not the token.
    let mut intruder = server.client().await;
    let id = intruder.id();
    let guess = Resume { session_id: resume.session_id.clone(), token: "0".repeat(32), last_seq: None, history: false };
    intruder
        .send(ClientFrame::Hello(Hello { id, protocol_version: PROTOCOL_VERSION, resume: Some(guess), client: None }))
        .await;
    let mut welcome = None;
    while welcome.is_none() {
        match intruder.recv().await {
            ServerFrame::Error(error) => {
                assert_eq!((error.code, error.reply_to.as_deref()), (ErrorCode::Unauthorized, Some("c1")));
            }
            ServerFrame::Welcome(w) => welcome = Some(w),
            ServerFrame::ToolCall(c) => panic!("the intruder got the owner's call: {c:?}"),
            other => panic!("the intruder got a frame of the owner's session: {other:?}"),
        }
    }
    let welcome = welcome.unwrap();
    assert!(!welcome.resumed);
    assert_ne!(welcome.session_id, resume.session_id);
    assert_ne!(welcome.resume_token, resume.token);
    // It cannot answer the owner's call either.
    intruder.result(&call.call_id, ResultStatus::Ok, json!("hijacked")).await;
    assert_eq!(intruder.error().await.code, ErrorCode::UnknownCall);

    // The owner comes back with the token: the call is still there and its answer counts.
    let mut back = server.client().await;
    assert!(back.hello(Some(resume)).await.resumed);
    let resent = back.tool_call().await;
    assert_eq!(resent.call_id, call.call_id);
    back.result(&call.call_id, ResultStatus::Ok, json!("the real result")).await;
    let (text, status) = back.answer().await;
    assert_eq!(status, RunStatus::Completed);
    assert!(text.contains("the real result") && !text.contains("hijacked"), "{text}");
}
