//! The chat fixtures (`tests/chat/*.json` at the repository root) against the runtime's chat
//! machine: the same files the React package's vitest suite runs against its store.

use std::path::PathBuf;

use serde_json::{Value, json};
use tether_core::ApprovalDecision;
use tether_protocol::{CallId, ErrorCode, ResultStatus, Risk, RunId, RunStatus};
use tether_web::chat::{Chat, ChatLine, Reply};
use tether_web::{ApprovalView, CallRecord, ClientEvent, ConnectionState, Notification};

const URL: &str = "ws://127.0.0.1:9/ws";

fn text(value: &Value, key: &str) -> String {
    value[key].as_str().unwrap_or_else(|| panic!("{key} in {value}")).to_string()
}

/// A `TetherEvent` as the JavaScript API writes it, read back as the runtime's event.
fn client_event(event: &Value) -> ClientEvent {
    let connection = |name: &str| match name {
        "idle" => ConnectionState::Idle,
        "connecting" => ConnectionState::Connecting,
        "open" => ConnectionState::Open,
        "reconnecting" => ConnectionState::Reconnecting,
        "closed" => ConnectionState::Closed,
        other => panic!("connection state {other}"),
    };
    match event["type"].as_str().unwrap() {
        "connection" => ClientEvent::Connection {
            state: connection(&text(event, "state")),
            attempt: event["attempt"].as_u64().unwrap() as u32,
        },
        "welcome" => ClientEvent::Welcome {
            session_id: text(event, "sessionId"),
            max_active_tools: 30,
            resumed: event["resumed"].as_bool().unwrap(),
        },
        "callStarted" => ClientEvent::CallStarted {
            call_id: text(event, "callId").into(),
            tool: text(event, "tool"),
            args: event["args"].clone(),
        },
        "approvalRequested" => {
            let request = &event["request"];
            ClientEvent::ApprovalRequested {
                request: ApprovalView {
                    call_id: text(request, "callId").into(),
                    tool: text(request, "tool"),
                    description: text(request, "description"),
                    risk: Risk::parse(&text(request, "risk")).unwrap(),
                    args: request["args"].clone(),
                },
            }
        }
        "callFinished" => {
            let record = &event["record"];
            ClientEvent::CallFinished {
                record: CallRecord {
                    call_id: text(record, "callId").into(),
                    tool: text(record, "tool"),
                    status: ResultStatus::parse(&text(record, "status")).unwrap(),
                    content: record["content"].clone(),
                    settle_ms: record["settleMs"].as_f64(),
                },
            }
        }
        "agentMessage" => ClientEvent::AgentMessage {
            run_id: text(event, "runId").into(),
            delta: text(event, "delta"),
            done: event["done"].as_bool().unwrap(),
            status: event["status"].as_str().map(|s| RunStatus::parse(s).unwrap()),
            reset: event["reset"].as_bool().unwrap_or(false),
        },
        "history" => ClientEvent::History { lines: event["lines"].as_array().unwrap().clone() },
        "run" => ClientEvent::Run { run_id: event["runId"].as_str().map(RunId::from), event: event["event"].clone() },
        "serverError" => ClientEvent::ServerError {
            code: ErrorCode::parse(&text(event, "code")).unwrap(),
            message: text(event, "message"),
        },
        other => panic!("event type {other}"),
    }
}

/// A line as the fixtures write it.
fn shown(line: &ChatLine) -> Value {
    json!({
        "key": line.key,
        "role": line.role.as_str(),
        "text": line.text,
        "status": line.status.map(RunStatus::as_str),
        "waiting": line.waiting,
        "call": line.call.as_ref().map(|call| json!({
            "callId": call.call_id,
            "tool": call.tool,
            "status": call.status.as_str(),
            "args": call.args,
            "error": call.error,
            "progress": call.progress,
        })),
    })
}

fn run(path: &PathBuf) {
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let name = path.file_name().unwrap().to_string_lossy();
    let mut chat = Chat::new(URL);
    let mut sent: Vec<String> = Vec::new();
    // How the approval dialogs were answered, in order: what the toolkit resolves them with.
    let mut answered: Vec<Value> = Vec::new();
    let answer = |answered: &mut Vec<Value>, call_id: &CallId, decision: &ApprovalDecision| {
        let (answer, reason) = match decision {
            ApprovalDecision::Approved => ("approved", None),
            ApprovalDecision::Rejected { reason } => ("rejected", reason.clone()),
            ApprovalDecision::Dismissed => ("dismissed", None),
        };
        answered.push(json!({"callId": call_id, "answer": answer, "reason": reason}));
    };
    for (n, step) in fixture["steps"].as_array().unwrap().iter().enumerate() {
        let at = format!("{name}, step {n}");
        if let Some(event) = step.get("event") {
            let event = client_event(event);
            // As the client does: a call approved already with these arguments asks nothing.
            if let ClientEvent::ApprovalRequested { request } = &event {
                if chat.take_pre_approved(&request.call_id, &request.tool, &request.args) {
                    answer(&mut answered, &request.call_id, &ApprovalDecision::Approved);
                    continue;
                }
            }
            // As the client does: a dialog the chat no longer waits for is dismissed.
            let waiting: Vec<CallId> = chat.approvals().iter().map(|a| a.call_id.clone()).collect();
            chat.event(&event);
            for call_id in waiting.iter().filter(|id| !chat.approvals().iter().any(|a| &a.call_id == *id)) {
                answer(&mut answered, call_id, &ApprovalDecision::Dismissed);
            }
        } else if let Some(notice) = step.get("notify") {
            chat.notified(&Notification {
                call_id: text(notice, "callId").into(),
                tool: text(notice, "tool"),
                args: notice["args"].clone(),
            });
        } else if let Some(message) = step.get("user") {
            match chat.user_message(message.as_str().unwrap()) {
                Reply::Send(text) => sent.push(text),
                Reply::Answers { approvals, .. } => {
                    for (call_id, decision) in &approvals {
                        answer(&mut answered, call_id, decision);
                    }
                }
                Reply::Nothing => {}
            }
        } else if let Some(call_id) = step.get("approve") {
            let call_id = CallId::from(call_id.as_str().unwrap());
            chat.answer_approval(&call_id, &ApprovalDecision::Approved);
            answer(&mut answered, &call_id, &ApprovalDecision::Approved);
        } else if let Some(reject) = step.get("reject") {
            let decision = ApprovalDecision::Rejected { reason: reject["reason"].as_str().map(String::from) };
            let call_id = CallId::from(text(reject, "callId"));
            chat.answer_approval(&call_id, &decision);
            answer(&mut answered, &call_id, &decision);
        } else if let Some(edit) = step.get("approveWith") {
            let call_id = CallId::from(text(edit, "callId"));
            if let Some(decision) = chat.approve_with_args(&call_id, edit["args"].clone()) {
                answer(&mut answered, &call_id, &decision);
            }
        } else if let Some(expect) = step.get("expect") {
            if let Some(lines) = expect.get("lines") {
                let actual: Vec<Value> = chat.lines().iter().map(shown).collect();
                assert_eq!(&Value::Array(actual), lines, "{at}: lines");
            }
            if let Some(running) = expect.get("running") {
                assert_eq!(chat.running(), running.as_bool().unwrap(), "{at}: running");
            }
            if let Some(approvals) = expect.get("approvals") {
                let actual: Vec<&str> = chat.approvals().iter().map(|a| a.call_id.as_str()).collect();
                assert_eq!(json!(actual), *approvals, "{at}: approvals");
            }
            if let Some(errors) = expect.get("errors") {
                let actual: Vec<&str> = chat.errors().iter().map(|e| e.message.as_str()).collect();
                assert_eq!(json!(actual), *errors, "{at}: errors");
            }
            if let Some(expected) = expect.get("answered") {
                assert_eq!(json!(answered), *expected, "{at}: answered");
            }
            if let Some(expected) = expect.get("sent") {
                assert_eq!(json!(sent), *expected, "{at}: sent");
            }
        } else {
            panic!("{at}: unknown step {step}");
        }
    }
}

#[test]
fn the_chat_fixtures_hold_for_the_runtime_chat() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/chat");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 7, "the fixtures in {}", dir.display());
    for path in &paths {
        run(path);
    }
}

#[test]
fn the_chat_keeps_its_last_lines_and_errors() {
    let mut chat = Chat::new(URL);
    chat.event(&ClientEvent::Connection { state: ConnectionState::Open, attempt: 0 });
    for n in 0..(tether_web::chat::KEPT + 5) {
        let _ = chat.user_message(&format!("message {n}"));
        chat.event(&ClientEvent::AgentMessage {
            run_id: format!("r{n}").into(),
            delta: "ok".into(),
            done: true,
            status: Some(RunStatus::Completed),
            reset: false,
        });
    }
    assert_eq!(chat.lines().len(), tether_web::chat::KEPT);
    assert_eq!(chat.lines().last().unwrap().key, format!("r{}", tether_web::chat::KEPT + 4));
    // An outage whose entry scrolled out of the list starts a new entry.
    chat.event(&ClientEvent::Connection { state: ConnectionState::Reconnecting, attempt: 1 });
    for n in 0..tether_web::chat::KEPT {
        chat.error(&tether_web::WebError::Protocol(format!("frame {n}")));
    }
    assert_eq!(chat.errors().len(), tether_web::chat::KEPT);
    assert!(chat.errors().iter().all(|e| e.kind == tether_web::chat::ErrorKind::Protocol));
    chat.event(&ClientEvent::Connection { state: ConnectionState::Reconnecting, attempt: 2 });
    let last = chat.errors().last().unwrap();
    assert_eq!(last.kind, tether_web::chat::ErrorKind::Connection);
    assert!(last.message.contains("lost the connection"), "{}", last.message);
    assert_eq!(chat.errors()[0].message, "unreadable frame from the server: frame 1");
}
