//! Hand-written decoding of what the server sends (`ServerFrame` and `RunEvent`).
//!
//! The browser runtime decodes these frames, and serde's derived decoders cost it about 40 kB
//! of wasm. These decoders read a parsed `serde_json::Value` instead: one shared parser, then
//! a few lines per frame. They accept exactly what the derived encoders write (round-trip tests
//! and the protocol schema hold them to it): camelCase fields, optional fields absent or
//! `null`, unknown fields ignored.

use std::cell::Cell;

use serde::de::{Deserialize, Deserializer, Error as _};
use serde_json::{Map, Value};

use crate::frames::*;
use crate::{Quoted, RunId};

/// The fields of one JSON object, with typed getters that name the frame in their errors.
///
/// A getter that finds a missing or mistyped field records the first such error and returns a
/// placeholder; [`Fields::finish`] then refuses the frame. Frames are built without an early
/// return per field, which in the browser module would mean drop code for every partially
/// built frame (several kilobytes).
struct Fields<'a> {
    map: &'a Map<String, Value>,
    what: &'static str,
    error: Cell<Option<String>>,
}

impl<'a> Fields<'a> {
    fn of(value: &'a Value, what: &'static str) -> Result<Self, String> {
        match value {
            Value::Object(map) => Ok(Fields { map, what, error: Cell::new(None) }),
            _ => Err(format!("{what} must be a JSON object")),
        }
    }

    /// Records the first problem.
    fn fail(&self, message: String) {
        let first = self.error.take().unwrap_or(message);
        self.error.set(Some(first));
    }

    fn wrong(&self, key: &str, expected: &str) {
        self.fail(format!("field `{key}` of {} must be {expected}", self.what));
    }

    /// The frame, unless a getter recorded a problem.
    fn finish<T>(self, built: T) -> Result<T, String> {
        match self.error.into_inner() {
            Some(error) => Err(error),
            None => Ok(built),
        }
    }

    fn optional(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|value| !value.is_null())
    }

    fn required(&self, key: &str) -> &'a Value {
        const MISSING: &Value = &Value::Null;
        self.map.get(key).unwrap_or_else(|| {
            self.fail(format!("missing field `{key}` in {}", self.what));
            MISSING
        })
    }

    fn string(&self, key: &str) -> String {
        match self.required(key) {
            Value::String(text) => text.clone(),
            _ => {
                self.wrong(key, "a string");
                String::new()
            }
        }
    }

    fn opt_string(&self, key: &str) -> Option<String> {
        match self.optional(key)? {
            Value::String(text) => Some(text.clone()),
            _ => {
                self.wrong(key, "a string");
                None
            }
        }
    }

    fn u64(&self, key: &str) -> u64 {
        self.required(key).as_u64().unwrap_or_else(|| {
            self.wrong(key, "a non-negative integer");
            0
        })
    }

    fn u32(&self, key: &str) -> u32 {
        u32::try_from(self.u64(key)).unwrap_or_else(|_| {
            self.wrong(key, "a 32-bit integer");
            0
        })
    }

    fn bool(&self, key: &str) -> bool {
        self.required(key).as_bool().unwrap_or_else(|| {
            self.wrong(key, "a boolean");
            false
        })
    }

    fn value(&self, key: &str) -> Value {
        self.required(key).clone()
    }

    /// A name from a fixed set; `placeholder` stands in when it is not one (the frame is then
    /// refused, so the placeholder is never seen).
    fn name<T>(&self, key: &str, parse: fn(&str) -> Option<T>, placeholder: T) -> T {
        self.required(key).as_str().and_then(parse).unwrap_or_else(|| {
            self.wrong(key, "a known name");
            placeholder
        })
    }

    fn opt_name<T>(&self, key: &str, parse: fn(&str) -> Option<T>) -> Option<T> {
        let name = self.optional(key)?.as_str().and_then(parse);
        if name.is_none() {
            self.wrong(key, "a known name");
        }
        name
    }
}

impl RunEvent {
    /// Decodes an event from its JSON value.
    pub fn from_value(value: &Value) -> Result<RunEvent, String> {
        let f = Fields::of(value, "an event")?;
        let kind = f.string("kind");
        let event = match kind.as_str() {
            "run_start" => RunEvent::RunStart(RunStartEvent { text: f.string("text") }),
            "turn_start" => RunEvent::TurnStart(TurnStartEvent { turn: f.u32("turn") }),
            "tool_execution_start" => RunEvent::ToolExecutionStart(ToolStartEvent {
                call_id: f.string("callId").into(),
                tool: f.string("tool"),
                args: f.value("args"),
            }),
            "tool_execution_end" => RunEvent::ToolExecutionEnd(ToolEndEvent {
                call_id: f.string("callId").into(),
                tool: f.string("tool"),
                status: f.name("status", ResultStatus::parse, ResultStatus::Ok),
                output: f.string("output"),
            }),
            "turn_end" => RunEvent::TurnEnd(TurnEndEvent { turn: f.u32("turn"), reply: f.string("reply") }),
            "run_end" => RunEvent::RunEnd(RunEndEvent {
                status: f.name("status", RunStatus::parse, RunStatus::Completed),
                turns: f.u32("turns"),
                error: f.opt_string("error"),
            }),
            "tool_collision" => RunEvent::ToolCollision(ToolCollisionEvent { tool: f.string("tool") }),
            "tool_progress" => RunEvent::ToolProgress(ToolProgressEvent {
                call_id: f.string("callId").into(),
                message: f.string("message"),
            }),
            "tool_call_delta" => RunEvent::ToolCallDelta(ToolCallDeltaEvent {
                call_id: f.string("callId").into(),
                tool: f.string("tool"),
                partial_args: f.value("partialArgs"),
            }),
            "navigate" => RunEvent::Navigate(NavigateEvent {
                call_id: f.string("callId").into(),
                tool: f.string("tool"),
                url: f.string("url"),
            }),
            "hook" => RunEvent::Hook(HookAudit {
                hook_id: f.string("hookId"),
                level: f.string("level"),
                hook_event: f.string("hookEvent"),
                decision: f.string("decision"),
                reason: f.opt_string("reason"),
                duration_ms: f.required("durationMs").as_f64().unwrap_or_else(|| {
                    f.wrong("durationMs", "a number");
                    0.0
                }),
                exit_code: f.optional("exitCode").and_then(|v| {
                    let code = v.as_i64().and_then(|n| i32::try_from(n).ok());
                    if code.is_none() {
                        f.wrong("exitCode", "an integer");
                    }
                    code
                }),
                decided_by: f.name("decidedBy", HookDecidedBy::parse, HookDecidedBy::Hook),
            }),
            // A missing or mistyped `kind` was recorded first and is the better message.
            other => return Err(f.error.take().unwrap_or_else(|| format!("unknown event kind {}", Quoted(other)))),
        };
        f.finish(event)
    }
}

/// What the `event` of an `EVENT` frame is decoded into.
pub trait EventPayload: Sized {
    /// Reads the event from its JSON value.
    fn from_event_value(value: &Value) -> Result<Self, String>;
}

impl EventPayload for RunEvent {
    fn from_event_value(value: &Value) -> Result<Self, String> {
        RunEvent::from_value(value)
    }
}

/// The event as the server sent it: for a receiver that only forwards events. It is checked
/// to be an object with a string `kind`, nothing more.
impl EventPayload for Value {
    fn from_event_value(value: &Value) -> Result<Self, String> {
        let f = Fields::of(value, "an event")?;
        f.string("kind");
        f.finish(value.clone())
    }
}

impl ServerFrame {
    /// Decodes a server frame from its JSON value, events typed.
    pub fn from_value(value: &Value) -> Result<ServerFrame, String> {
        ServerFrame::decode_value(value)
    }
}

/// What the lines of a `HISTORY` frame are decoded into.
pub trait LinePayload: Sized {
    /// Reads one line from its JSON value.
    fn from_line_value(value: &Value) -> Result<Self, String>;
}

impl LinePayload for HistoryLine {
    fn from_line_value(value: &Value) -> Result<Self, String> {
        HistoryLine::from_value(value)
    }
}

/// The line as the server sent it: for a receiver that only forwards lines (the browser
/// runtime hands them to the page as they came). It is checked to be an object, nothing more.
impl LinePayload for Value {
    fn from_line_value(value: &Value) -> Result<Self, String> {
        Fields::of(value, "a history line")?.finish(value.clone())
    }
}

impl HistoryLine {
    /// Decodes a history line from its JSON value.
    pub fn from_value(value: &Value) -> Result<HistoryLine, String> {
        let line = Fields::of(value, "a history line")?;
        let built = HistoryLine {
            role: line.name("role", HistoryRole::parse, HistoryRole::Agent),
            text: line.string("text"),
            run_id: line.opt_string("runId").map(RunId::from),
            status: line.opt_name("status", RunStatus::parse),
        };
        line.finish(built)
    }
}

impl<E: EventPayload, L: LinePayload> ServerFrameOf<E, L> {
    /// Decodes a server frame from its JSON value, reading the events of `EVENT` frames as `E`
    /// and the lines of `HISTORY` frames as `L` (`ServerFrameOf::<Value, Value>::decode_value`
    /// leaves both as sent).
    pub fn decode_value(value: &Value) -> Result<ServerFrameOf<E, L>, String> {
        let f = Fields::of(value, "a frame")?;
        let kind = f.string("type");
        let id = f.string("id");
        let frame = match kind.as_str() {
            "WELCOME" => {
                let capabilities = f
                    .required("capabilities")
                    .as_array()
                    .and_then(|items| items.iter().map(|c| c.as_str().map(String::from)).collect::<Option<Vec<_>>>());
                if capabilities.is_none() {
                    f.wrong("capabilities", "an array of strings");
                }
                ServerFrameOf::Welcome(Welcome {
                    id,
                    protocol_version: f.u32("protocolVersion"),
                    session_id: f.string("sessionId"),
                    resume_token: f.string("resumeToken"),
                    resumed: f.bool("resumed"),
                    max_active_tools: f.u32("maxActiveTools"),
                    max_frame_bytes: f.u64("maxFrameBytes"),
                    capabilities: capabilities.unwrap_or_default(),
                })
            }
            "TOOL_CALL" => ServerFrameOf::ToolCall(ToolCall {
                id,
                call_id: f.string("callId").into(),
                run_id: f.string("runId").into(),
                name: f.string("name"),
                args: f.value("args"),
                risk: f.opt_name("risk", Risk::parse).unwrap_or_default(),
            }),
            "TOOL_CANCEL" => ServerFrameOf::ToolCancel(ToolCancel {
                id,
                call_id: f.string("callId").into(),
                reason: f.string("reason"),
            }),
            "TOOL_RESULT_ACK" => ServerFrameOf::ToolResultAck(ToolResultAck { id, call_id: f.string("callId").into() }),
            "AGENT_MESSAGE" => ServerFrameOf::AgentMessage(AgentMessage {
                id,
                run_id: f.string("runId").into(),
                delta: f.string("delta"),
                done: f.bool("done"),
                status: f.opt_name("status", RunStatus::parse),
                reset: f.optional("reset").is_some_and(|v| v == &Value::Bool(true)),
            }),
            "HISTORY" => {
                let mut lines = Vec::new();
                match f.required("lines").as_array() {
                    Some(items) => {
                        for item in items {
                            match L::from_line_value(item) {
                                Ok(line) => lines.push(line),
                                Err(error) => f.fail(error),
                            }
                        }
                    }
                    None => f.wrong("lines", "an array"),
                }
                ServerFrameOf::History(History { id, lines })
            }
            "EVENT" => match E::from_event_value(f.required("event")) {
                Ok(event) => {
                    ServerFrameOf::Event(EventFrame { id, run_id: f.opt_string("runId").map(RunId::from), event })
                }
                // The first problem wins: a bad `id`, or a missing `event` (recorded by `required`).
                Err(error) => return Err(f.error.take().unwrap_or(error)),
            },
            "ERROR" => ServerFrameOf::Error(ErrorFrame {
                id,
                code: f.name("code", ErrorCode::parse, ErrorCode::Internal),
                message: f.string("message"),
                reply_to: f.opt_string("replyTo"),
            }),
            other => {
                return Err(f.error.take().unwrap_or_else(|| format!("unknown server frame type {}", Quoted(other))));
            }
        };
        f.finish(frame)
    }
}

impl<'de, E: EventPayload, L: LinePayload> Deserialize<'de> for ServerFrameOf<E, L> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        ServerFrameOf::decode_value(&Value::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

impl<'de> Deserialize<'de> for RunEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        RunEvent::from_value(&Value::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}
