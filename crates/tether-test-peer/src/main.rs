//! A scripted stand-in for the server, for the browser runtime's tests (`cargo xtask test`).
//!
//! It speaks the real protocol (HELLO/WELCOME with resume, TOOL_CALL, TOOL_RESULT_ACK, …) and
//! takes orders from the test through `USER_MESSAGE` text, answering with one `AGENT_MESSAGE`
//! (`done: true`) whose text is JSON. Commands:
//!
//! - `call <tool> <json-args>`: sends a TOOL_CALL, answers with the result `{status, content}`.
//!   `call@<risk>` sends the call with that server risk floor (e.g. `call@critical`).
//! - `call-and-drop <tool> <json-args>`: sends a TOOL_CALL; when the result comes, closes the
//!   socket without acknowledging it (the client must resend it after resuming).
//! - `call-and-cancel <tool> <json-args>`: sends a TOOL_CALL, then TOOL_CANCEL, then a call of
//!   `ping`; answers with how many results came for the cancelled call before ping's.
//! - `call-and-refuse <tool> <json-args>`: sends a TOOL_CALL and answers its result with
//!   `ERROR unknown_call` naming the result's frame (no acknowledgement).
//! - `call-and-wait-for-resend <tool> <json-args>`: sends a TOOL_CALL, leaves its result
//!   unacknowledged until the client sends it again on the same connection, then acknowledges;
//!   answers with whether the copy kept the frame id.
//! - `call-then-close <tool> <json-args>`: sends a TOOL_CALL and closes the socket at once; the
//!   call stays pending and is sent again after every resume until a result comes (as the
//!   server asks again for a call it has no result for).
//! - `results <call-id>`: how many TOOL_RESULT frames arrived for a call, and the status and
//!   content of each.
//! - `contexts`: how many CONTEXT_UPDATE frames this session received, and the last tool list.
//!
//! A `USER_MESSAGE` whose id the session read before (the client sends its unanswered messages
//! again after a reconnect) is ignored, as the server ignores it.
//!
//! Usage: `tether-test-peer 127.0.0.1:PORT`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tether_protocol::*;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::Message;

/// What the peer remembers of a session across reconnects.
#[derive(Default)]
struct SessionState {
    contexts: u64,
    last_tools: Vec<String>,
    results: HashMap<CallId, Vec<Value>>,
    /// Calls sent whose result has not come: sent again after a resume.
    pending: Vec<ToolCall>,
    next_call: u64,
    /// The `USER_MESSAGE` ids read: one sent again after a reconnect is ignored, as the server
    /// does.
    messages: Vec<String>,
}

type Sessions = Arc<Mutex<HashMap<String, SessionState>>>;
type Socket = tokio_tungstenite::WebSocketStream<TcpStream>;

async fn send(socket: &mut Socket, frame: &ServerFrame) -> Result<()> {
    socket.send(Message::Text(encode_frame(frame).into())).await?;
    Ok(())
}

async fn next_frame(socket: &mut Socket) -> Option<ClientFrame> {
    while let Some(Ok(message)) = socket.next().await {
        if let Message::Text(text) = message {
            match decode_client_frame(&text, usize::MAX) {
                Ok(frame) => return Some(frame),
                Err(error) => eprintln!("peer: bad frame: {error}"),
            }
        }
    }
    None
}

async fn answer(socket: &mut Socket, run: &str, text: String) -> Result<()> {
    let frame = AgentMessage {
        id: "a".into(),
        run_id: run.into(),
        delta: text,
        done: true,
        status: Some(RunStatus::Completed),
        reset: false,
    };
    send(socket, &ServerFrame::AgentMessage(frame)).await
}

/// Records frames the client sends while the peer waits for something.
fn note(sessions: &Sessions, session: &str, frame: &ClientFrame) {
    let mut sessions = sessions.lock().unwrap();
    let state = sessions.entry(session.to_string()).or_default();
    match frame {
        ClientFrame::ContextUpdate(update) => {
            state.contexts += 1;
            state.last_tools = update.tools.iter().map(|t| t.name.clone()).collect();
        }
        ClientFrame::ToolResult(result) => {
            state.pending.retain(|call| call.call_id != result.call_id);
            let seen = json!({"status": result.status.as_str(), "content": result.content});
            state.results.entry(result.call_id.clone()).or_default().push(seen);
        }
        _ => {}
    }
}

/// Waits for the result of `call_id`, noting every other frame. `None` if the socket closed.
async fn wait_result(socket: &mut Socket, sessions: &Sessions, session: &str, call_id: &CallId) -> Option<ToolResult> {
    loop {
        let frame = next_frame(socket).await?;
        note(sessions, session, &frame);
        if let ClientFrame::ToolResult(result) = frame {
            if result.call_id == *call_id {
                return Some(result);
            }
        }
    }
}

fn tool_call(sessions: &Sessions, session: &str, name: &str, args: Value) -> ToolCall {
    let mut sessions = sessions.lock().unwrap();
    let state = sessions.entry(session.to_string()).or_default();
    state.next_call += 1;
    ToolCall {
        id: format!("t{}", state.next_call),
        call_id: format!("{session}-call-{}", state.next_call).into(),
        run_id: "run".into(),
        name: name.into(),
        args,
        risk: Risk::None,
    }
}

async fn connection(stream: TcpStream, sessions: Sessions) -> Result<()> {
    let mut socket = tokio_tungstenite::accept_async(stream).await?;
    let Some(ClientFrame::Hello(hello)) = next_frame(&mut socket).await else { return Ok(()) };
    let (session, resumed) = match hello.resume {
        Some(resume) if sessions.lock().unwrap().contains_key(&resume.session_id) => (resume.session_id, true),
        _ => {
            let id = format!("peer-{}", sessions.lock().unwrap().len() + 1);
            sessions.lock().unwrap().insert(id.clone(), SessionState::default());
            (id, false)
        }
    };
    let welcome = Welcome {
        id: "w".into(),
        protocol_version: PROTOCOL_VERSION,
        session_id: session.clone(),
        resume_token: "token".into(),
        resumed,
        max_active_tools: DEFAULT_MAX_ACTIVE_TOOLS,
        max_frame_bytes: DEFAULT_MAX_FRAME_BYTES as u64,
        capabilities: vec!["tool_result_ack".into(), "resume".into()],
    };
    send(&mut socket, &ServerFrame::Welcome(welcome)).await?;
    let pending = sessions.lock().unwrap().get(&session).map(|state| state.pending.clone()).unwrap_or_default();
    for call in pending {
        send(&mut socket, &ServerFrame::ToolCall(call)).await?;
    }
    while let Some(frame) = next_frame(&mut socket).await {
        note(&sessions, &session, &frame);
        match frame {
            ClientFrame::ToolResult(result) => {
                let ack = ToolResultAck { id: "k".into(), call_id: result.call_id };
                send(&mut socket, &ServerFrame::ToolResultAck(ack)).await?;
            }
            ClientFrame::UserMessage(message) => {
                {
                    let mut sessions = sessions.lock().unwrap();
                    let state = sessions.entry(session.clone()).or_default();
                    if state.messages.contains(&message.id) {
                        continue;
                    }
                    state.messages.push(message.id.clone());
                }
                let mut parts = message.text.splitn(3, ' ');
                let command = parts.next().unwrap_or_default();
                let tool = parts.next().unwrap_or_default();
                let args: Value = serde_json::from_str(parts.next().unwrap_or("{}")).unwrap_or(json!({}));
                // `call@critical` is `call` with a server risk floor.
                let (command, floor) = match command.split_once('@') {
                    Some((command, risk)) => (command, Risk::parse(risk).unwrap_or_default()),
                    None => (command, Risk::None),
                };
                match command {
                    "call" => {
                        let call = ToolCall { risk: floor, ..tool_call(&sessions, &session, tool, args) };
                        send(&mut socket, &ServerFrame::ToolCall(call.clone())).await?;
                        let Some(result) = wait_result(&mut socket, &sessions, &session, &call.call_id).await else {
                            break;
                        };
                        send(
                            &mut socket,
                            &ServerFrame::ToolResultAck(ToolResultAck {
                                id: "k".into(),
                                call_id: call.call_id.clone(),
                            }),
                        )
                        .await?;
                        let text = json!({"callId": call.call_id, "status": result.status.as_str(), "content": result.content});
                        answer(&mut socket, &message.id, text.to_string()).await?;
                    }
                    "call-and-drop" => {
                        let call = tool_call(&sessions, &session, tool, args);
                        send(&mut socket, &ServerFrame::ToolCall(call.clone())).await?;
                        wait_result(&mut socket, &sessions, &session, &call.call_id).await;
                        // Close without acknowledging: the client must resend after resuming.
                        let _ = socket.close(None).await;
                        return Ok(());
                    }
                    "call-and-cancel" => {
                        let call = tool_call(&sessions, &session, tool, args);
                        send(&mut socket, &ServerFrame::ToolCall(call.clone())).await?;
                        let cancel =
                            ToolCancel { id: "x".into(), call_id: call.call_id.clone(), reason: "test cancels".into() };
                        send(&mut socket, &ServerFrame::ToolCancel(cancel)).await?;
                        let ping = tool_call(&sessions, &session, "ping", json!({}));
                        send(&mut socket, &ServerFrame::ToolCall(ping.clone())).await?;
                        let Some(_) = wait_result(&mut socket, &sessions, &session, &ping.call_id).await else { break };
                        let cancelled_results =
                            sessions.lock().unwrap()[&session].results.get(&call.call_id).map_or(0, Vec::len);
                        let text = json!({"callId": call.call_id, "cancelledResults": cancelled_results});
                        answer(&mut socket, &message.id, text.to_string()).await?;
                    }
                    "call-and-refuse" => {
                        let call = tool_call(&sessions, &session, tool, args);
                        send(&mut socket, &ServerFrame::ToolCall(call.clone())).await?;
                        let Some(result) = wait_result(&mut socket, &sessions, &session, &call.call_id).await else {
                            break;
                        };
                        let refusal = ErrorFrame {
                            id: "e".into(),
                            code: ErrorCode::UnknownCall,
                            message: format!("TOOL_RESULT for unknown call {:?}", call.call_id),
                            reply_to: Some(result.id),
                        };
                        send(&mut socket, &ServerFrame::Error(refusal)).await?;
                        answer(&mut socket, &message.id, json!({"callId": call.call_id}).to_string()).await?;
                    }
                    "call-and-wait-for-resend" => {
                        let call = tool_call(&sessions, &session, tool, args);
                        send(&mut socket, &ServerFrame::ToolCall(call.clone())).await?;
                        let Some(first) = wait_result(&mut socket, &sessions, &session, &call.call_id).await else {
                            break;
                        };
                        // No acknowledgement: the client must send the result again by itself.
                        let Some(again) = wait_result(&mut socket, &sessions, &session, &call.call_id).await else {
                            break;
                        };
                        let ack = ToolResultAck { id: "k".into(), call_id: call.call_id.clone() };
                        send(&mut socket, &ServerFrame::ToolResultAck(ack)).await?;
                        let text = json!({"callId": call.call_id, "sameId": first.id == again.id});
                        answer(&mut socket, &message.id, text.to_string()).await?;
                    }
                    "call-then-close" => {
                        let call = tool_call(&sessions, &session, tool, args);
                        sessions.lock().unwrap().entry(session.clone()).or_default().pending.push(call.clone());
                        send(&mut socket, &ServerFrame::ToolCall(call)).await?;
                        let _ = socket.close(None).await;
                        return Ok(());
                    }
                    "results" => {
                        let seen = sessions.lock().unwrap()[&session].results.get(tool).cloned().unwrap_or_default();
                        let text = json!({"results": seen.len(), "seen": seen});
                        answer(&mut socket, &message.id, text.to_string()).await?;
                    }
                    "contexts" => {
                        let (count, tools) = {
                            let sessions = sessions.lock().unwrap();
                            (sessions[&session].contexts, sessions[&session].last_tools.clone())
                        };
                        answer(&mut socket, &message.id, json!({"contexts": count, "tools": tools}).to_string())
                            .await?;
                    }
                    other => {
                        answer(
                            &mut socket,
                            &message.id,
                            json!({"error": format!("unknown command {other}")}).to_string(),
                        )
                        .await?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:0".into());
    let listener = TcpListener::bind(&addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    eprintln!("tether-test-peer listening on ws://{}", listener.local_addr()?);
    let sessions: Sessions = Arc::default();
    loop {
        let (stream, _) = listener.accept().await?;
        let sessions = sessions.clone();
        tokio::spawn(async move {
            if let Err(error) = connection(stream, sessions).await {
                eprintln!("peer: connection ended: {error}");
            }
        });
    }
}
