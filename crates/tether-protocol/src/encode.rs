//! Hand-written encoding of what the browser runtime writes: [`ClientFrame`]s and, for its
//! JavaScript subscribers, [`RunEvent`]s.
//!
//! serde's derived encoders, driven into `serde_json::Value`, cost the browser module about
//! 10 kB; these functions build the same values directly. Tests hold them to the derived
//! encoders (which the server uses), field for field.

use serde_json::{Map, Value};

use crate::frames::*;

/// A JSON object from its fields, in order; `None` fields are left out (as the derived
/// encoders' `skip_serializing_if` does).
pub fn json_object(fields: Vec<(&str, Option<Value>)>) -> Value {
    let mut map = Map::new();
    for (key, value) in fields {
        if let Some(value) = value {
            map.insert(key.to_string(), value);
        }
    }
    Value::Object(map)
}

fn text(value: &str) -> Option<Value> {
    Some(Value::String(value.to_string()))
}

fn opt_text(value: Option<&String>) -> Option<Value> {
    value.map(|value| Value::String(value.clone()))
}

impl ToolSpec {
    /// The tool as a JSON value, as `CONTEXT_UPDATE` carries it.
    pub fn to_value(&self) -> Value {
        json_object(vec![
            ("name", text(&self.name)),
            ("description", text(&self.description)),
            ("parameters", Some(self.parameters.clone())),
            ("risk", text(self.risk.as_str())),
            ("global", self.global.then_some(Value::Bool(true))),
        ])
    }
}

impl ClientFrame {
    /// The frame as a JSON value, exactly as [`encode_frame`](crate::encode_frame) writes it.
    ///
    /// The browser runtime writes the text with the browser's `JSON.stringify`, so the wasm
    /// module carries no JSON writer of its own.
    pub fn to_value(&self) -> Value {
        let (kind, id, mut fields) = match self {
            ClientFrame::Hello(hello) => {
                let resume = hello.resume.as_ref().map(|resume| {
                    json_object(vec![
                        ("sessionId", text(&resume.session_id)),
                        ("token", text(&resume.token)),
                        ("lastSeq", resume.last_seq.map(Value::from)),
                    ])
                });
                let fields = vec![
                    ("protocolVersion", Some(Value::from(hello.protocol_version))),
                    ("resume", resume),
                    ("client", opt_text(hello.client.as_ref())),
                ];
                ("HELLO", &hello.id, fields)
            }
            ClientFrame::ContextUpdate(update) => {
                let page = update.page.as_ref().map(|page| {
                    json_object(vec![
                        ("url", text(&page.url)),
                        ("title", (!page.title.is_empty()).then(|| Value::String(page.title.clone()))),
                    ])
                });
                let fields = vec![
                    ("revision", Some(Value::from(update.revision))),
                    ("tools", Some(Value::Array(update.tools.iter().map(ToolSpec::to_value).collect()))),
                    ("page", page),
                ];
                ("CONTEXT_UPDATE", &update.id, fields)
            }
            ClientFrame::UserMessage(message) => ("USER_MESSAGE", &message.id, vec![("text", text(&message.text))]),
            ClientFrame::ToolResult(result) => {
                let fields = vec![
                    ("callId", text(&result.call_id)),
                    ("status", text(result.status.as_str())),
                    ("content", Some(result.content.clone())),
                ];
                ("TOOL_RESULT", &result.id, fields)
            }
            ClientFrame::ToolProgress(progress) => {
                let fields = vec![("callId", text(&progress.call_id)), ("message", text(&progress.message))];
                ("TOOL_PROGRESS", &progress.id, fields)
            }
        };
        fields.insert(0, ("type", text(kind)));
        fields.insert(1, ("id", text(id)));
        json_object(fields)
    }
}

impl RunEvent {
    /// The event as a JSON value, as `EVENT` frames carry it.
    pub fn to_value(&self) -> Value {
        let (kind, fields) = match self {
            RunEvent::RunStart(event) => ("run_start", vec![("text", text(&event.text))]),
            RunEvent::TurnStart(event) => ("turn_start", vec![("turn", Some(Value::from(event.turn)))]),
            RunEvent::ToolExecutionStart(event) => (
                "tool_execution_start",
                vec![("callId", text(&event.call_id)), ("tool", text(&event.tool)), ("args", Some(event.args.clone()))],
            ),
            RunEvent::ToolExecutionEnd(event) => (
                "tool_execution_end",
                vec![
                    ("callId", text(&event.call_id)),
                    ("tool", text(&event.tool)),
                    ("status", text(event.status.as_str())),
                    ("output", text(&event.output)),
                ],
            ),
            RunEvent::TurnEnd(event) => {
                ("turn_end", vec![("turn", Some(Value::from(event.turn))), ("reply", text(&event.reply))])
            }
            RunEvent::RunEnd(event) => (
                "run_end",
                vec![
                    ("status", text(event.status.as_str())),
                    ("turns", Some(Value::from(event.turns))),
                    ("error", opt_text(event.error.as_ref())),
                ],
            ),
            RunEvent::ToolCollision(event) => ("tool_collision", vec![("tool", text(&event.tool))]),
            RunEvent::ToolProgress(event) => {
                ("tool_progress", vec![("callId", text(&event.call_id)), ("message", text(&event.message))])
            }
            RunEvent::Hook(audit) => (
                "hook",
                vec![
                    ("hookId", text(&audit.hook_id)),
                    ("level", text(&audit.level)),
                    ("hookEvent", text(&audit.hook_event)),
                    ("decision", text(&audit.decision)),
                    ("reason", opt_text(audit.reason.as_ref())),
                    ("durationMs", Some(Value::from(audit.duration_ms))),
                    ("exitCode", audit.exit_code.map(Value::from)),
                    ("decidedBy", text(audit.decided_by.as_str())),
                ],
            ),
        };
        let mut fields = fields;
        fields.insert(0, ("kind", text(kind)));
        json_object(fields)
    }
}
