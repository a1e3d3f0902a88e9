//! What the runtime tells the page: [`ClientEvent`]s for subscribers, and the views they carry
//! (a running call's [`Notification`], a finished call's [`CallRecord`], an approval request's
//! [`ApprovalView`], the [`ConnectionState`]).
//!
//! Each has a serde derive (for Rust apps and the tests) and a hand-written `to_value` for the
//! JavaScript API: the derives' code costs the browser module about 10 kB gzip, so the module
//! only uses `to_value`, and the test below holds the two to the same output.

use serde::Serialize;
use serde_json::Value;
use tether_core::ApprovalRequest;
use tether_protocol::{CallId, ErrorCode, JsonObject, ResultStatus, RunId, RunStatus};

/// A `low`-risk call that is running: show the user what happens.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub args: Value,
}

/// The state of the connection to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ConnectionState {
    /// Not connected and not trying.
    Idle,
    /// Opening the socket.
    Connecting,
    /// Welcomed by the server.
    Open,
    /// The socket closed; a reconnect is scheduled.
    Reconnecting,
    /// Closed on purpose.
    Closed,
}

/// A finished tool call, for dev tools.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRecord {
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub tool: String,
    /// How it ended.
    pub status: ResultStatus,
    /// The result or message.
    pub content: Value,
    /// How long the result waited for navigation to settle, in milliseconds.
    pub settle_ms: Option<f64>,
}

/// Something that happened in the client. Subscribe with [`Client::subscribe`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ClientEvent {
    /// The connection changed state.
    #[serde(rename_all = "camelCase")]
    Connection {
        /// The new state.
        state: ConnectionState,
        /// Reconnect attempts since the last success.
        attempt: u32,
    },
    /// The server welcomed the client.
    #[serde(rename_all = "camelCase")]
    Welcome {
        /// The session.
        session_id: String,
        /// The cap the server announced.
        max_active_tools: u32,
        /// Whether the earlier session was resumed.
        resumed: bool,
    },
    /// A `CONTEXT_UPDATE` was sent.
    #[serde(rename_all = "camelCase")]
    ContextSent {
        /// Its revision.
        revision: u64,
        /// The tool names it announced.
        tools: Vec<String>,
    },
    /// A registration was refused (over the cap: `tool.registry.limit`).
    #[serde(rename_all = "camelCase")]
    ToolRefused {
        /// `tool.registry.limit` or `tool.registry.refused`.
        event: String,
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// A tool call arrived.
    #[serde(rename_all = "camelCase")]
    CallStarted {
        /// The call.
        call_id: CallId,
        /// The tool.
        tool: String,
        /// The arguments the server sent.
        args: Value,
    },
    /// The user is asked to approve a call.
    ApprovalRequested {
        /// What the approval UI shows.
        request: ApprovalView,
    },
    /// A tool call finished and its result was sent.
    CallFinished {
        /// The record.
        record: CallRecord,
    },
    /// Streamed answer text.
    #[serde(rename_all = "camelCase")]
    AgentMessage {
        /// The run.
        run_id: RunId,
        /// Text to append.
        delta: String,
        /// Whether the answer is complete.
        done: bool,
        /// How the run ended, when done.
        status: Option<RunStatus>,
        /// The text shown for this run so far is replaced by `delta` (a run the server goes on
        /// with after a restart).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        reset: bool,
    },
    /// The conversation so far, after a reload (the page asked the server for it): the chat
    /// shows these lines first.
    History {
        /// Oldest first, as the server sent them (`{role, text, runId?, status?}`, see
        /// [`tether_protocol::HistoryLine`], whose `from_value` reads one); an agent line without
        /// a status is the run in progress.
        lines: Vec<Value>,
    },
    /// A run event from the server.
    #[serde(rename_all = "camelCase")]
    Run {
        /// The run.
        run_id: Option<RunId>,
        /// What happened: the event's JSON as the server sent it (its `kind` names it;
        /// [`RunEvent::from_value`](tether_protocol::RunEvent::from_value) reads it typed). The
        /// runtime only forwards run events, so it does not decode them.
        event: Value,
    },
    /// The server refused something the client sent.
    ServerError {
        /// The error code.
        code: ErrorCode,
        /// The explanation.
        message: String,
    },
}

/// An approval request as the UI shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalView {
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub tool: String,
    /// Its description.
    pub description: String,
    /// `high` or `critical`.
    pub risk: tether_protocol::Risk,
    /// The arguments the handler will get.
    pub args: Value,
}

impl From<&ApprovalRequest> for ApprovalView {
    fn from(request: &ApprovalRequest) -> Self {
        ApprovalView {
            call_id: request.call_id.clone(),
            tool: request.tool.clone(),
            description: request.description.clone(),
            risk: request.risk,
            args: request.args.clone(),
        }
    }
}

// The JSON shapes the JavaScript API hands out (its TypeScript types document them).

impl Notification {
    /// The notification as JSON: `{callId, tool, args}`.
    pub fn to_value(&self) -> Value {
        JsonObject::new()
            .text("callId", self.call_id.as_str())
            .text("tool", &self.tool)
            .value("args", self.args.clone())
            .build()
    }
}

impl ConnectionState {
    /// The state's name: `idle`, `connecting`, `open`, `reconnecting` or `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Idle => "idle",
            ConnectionState::Connecting => "connecting",
            ConnectionState::Open => "open",
            ConnectionState::Reconnecting => "reconnecting",
            ConnectionState::Closed => "closed",
        }
    }
}

impl CallRecord {
    /// The record as JSON: `{callId, tool, status, content, settleMs}`.
    pub fn to_value(&self) -> Value {
        JsonObject::new()
            .text("callId", self.call_id.as_str())
            .text("tool", &self.tool)
            .text("status", self.status.as_str())
            .value("content", self.content.clone())
            .value("settleMs", self.settle_ms.map_or(Value::Null, Value::from))
            .build()
    }
}

impl ApprovalView {
    /// The request as JSON: `{callId, tool, description, risk, args}`.
    pub fn to_value(&self) -> Value {
        JsonObject::new()
            .text("callId", self.call_id.as_str())
            .text("tool", &self.tool)
            .text("description", &self.description)
            .text("risk", self.risk.as_str())
            .value("args", self.args.clone())
            .build()
    }
}

impl ClientEvent {
    /// The event as JSON, tagged by `type` (see `TetherEvent` in the TypeScript declarations).
    pub fn to_value(&self) -> Value {
        let object = JsonObject::new();
        match self {
            ClientEvent::Connection { state, attempt } => {
                object.text("type", "connection").text("state", state.as_str()).value("attempt", Value::from(*attempt))
            }
            ClientEvent::Welcome { session_id, max_active_tools, resumed } => object
                .text("type", "welcome")
                .text("sessionId", session_id)
                .value("maxActiveTools", Value::from(*max_active_tools))
                .value("resumed", Value::Bool(*resumed)),
            ClientEvent::ContextSent { revision, tools } => object
                .text("type", "contextSent")
                .value("revision", Value::from(*revision))
                .value("tools", Value::from(tools.clone())),
            ClientEvent::ToolRefused { event, tool, reason } => {
                object.text("type", "toolRefused").text("event", event).text("tool", tool).text("reason", reason)
            }
            ClientEvent::CallStarted { call_id, tool, args } => object
                .text("type", "callStarted")
                .text("callId", call_id.as_str())
                .text("tool", tool)
                .value("args", args.clone()),
            ClientEvent::ApprovalRequested { request } => {
                object.text("type", "approvalRequested").value("request", request.to_value())
            }
            ClientEvent::CallFinished { record } => {
                object.text("type", "callFinished").value("record", record.to_value())
            }
            ClientEvent::AgentMessage { run_id, delta, done, status, reset } => object
                .text("type", "agentMessage")
                .text("runId", run_id.as_str())
                .text("delta", delta)
                .value("done", Value::Bool(*done))
                .value("status", status.map_or(Value::Null, |status| Value::from(status.as_str())))
                .maybe("reset", reset.then_some(Value::Bool(true))),
            ClientEvent::History { lines } => {
                object.text("type", "history").value("lines", Value::Array(lines.clone()))
            }
            ClientEvent::Run { run_id, event } => object
                .text("type", "run")
                .value("runId", Value::from(run_id.clone().map(RunId::into_string)))
                .value("event", event.clone()),
            ClientEvent::ServerError { code, message } => {
                object.text("type", "serverError").text("code", code.as_str()).text("message", message)
            }
        }
        .build()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::*;

    #[wasm_bindgen_test]
    fn hand_written_views_match_the_serde_derives() {
        let record = CallRecord {
            call_id: "c1".into(),
            tool: "cart_add".into(),
            status: ResultStatus::Ok,
            content: json!({"count": 1}),
            settle_ms: Some(12.5),
        };
        let view = ApprovalView {
            call_id: "c2".into(),
            tool: "checkout".into(),
            description: "Pay".into(),
            risk: tether_protocol::Risk::Critical,
            args: json!({}),
        };
        let events = [
            ClientEvent::Connection { state: ConnectionState::Reconnecting, attempt: 3 },
            ClientEvent::Welcome { session_id: "s".into(), max_active_tools: 30, resumed: true },
            ClientEvent::ContextSent { revision: 7, tools: vec!["a".into(), "b".into()] },
            ClientEvent::ToolRefused { event: "tool.registry.limit".into(), tool: "t".into(), reason: "cap".into() },
            ClientEvent::CallStarted { call_id: "c".into(), tool: "t".into(), args: json!([1, "x"]) },
            ClientEvent::ApprovalRequested { request: view.clone() },
            ClientEvent::CallFinished { record: CallRecord { settle_ms: None, ..record.clone() } },
            ClientEvent::CallFinished { record },
            ClientEvent::AgentMessage {
                run_id: "r".into(),
                delta: "hi".into(),
                done: true,
                status: Some(RunStatus::Completed),
                reset: false,
            },
            ClientEvent::AgentMessage { run_id: "r".into(), delta: "".into(), done: false, status: None, reset: true },
            ClientEvent::History {
                lines: vec![
                    json!({"role": "user", "text": "hi"}),
                    json!({"role": "agent", "text": "Hello", "runId": "r", "status": "completed"}),
                ],
            },
            ClientEvent::Run {
                run_id: Some("r".into()),
                event: json!({"kind": "run_end", "status": "failed", "turns": 2, "error": "x"}),
            },
            ClientEvent::Run { run_id: None, event: json!({"kind": "turn_start", "turn": 1}) },
            ClientEvent::ServerError { code: ErrorCode::MalformedFrame, message: "bad".into() },
        ];
        for event in events {
            assert_eq!(event.to_value(), serde_json::to_value(&event).unwrap(), "{event:?}");
        }
        let notification = Notification { call_id: "c".into(), tool: "t".into(), args: json!({"q": null}) };
        assert_eq!(notification.to_value(), serde_json::to_value(&notification).unwrap());
        assert_eq!(view.to_value(), serde_json::to_value(&view).unwrap());
    }
}
