//! Hand-written decoding of what the server sends (`ServerFrame` and `RunEvent`).
//!
//! The browser runtime decodes these frames, and serde's derived decoders cost it about 40 kB
//! of wasm. These decoders read a parsed `serde_json::Value` instead: one shared parser, then
//! a few lines per frame. They accept exactly what the derived encoders write (round-trip tests
//! and the protocol schema hold them to it): camelCase fields, optional fields absent or
//! `null`, unknown fields ignored.

use serde::de::{Deserialize, Deserializer, Error as _};
use serde_json::{Map, Value};

use crate::Quoted;
use crate::frames::*;

/// The fields of one JSON object, with typed getters that name the frame in their errors.
struct Fields<'a> {
    map: &'a Map<String, Value>,
    what: &'static str,
}

impl<'a> Fields<'a> {
    fn of(value: &'a Value, what: &'static str) -> Result<Self, String> {
        match value {
            Value::Object(map) => Ok(Fields { map, what }),
            _ => Err(format!("{what} must be a JSON object")),
        }
    }

    fn wrong(&self, key: &str, expected: &str) -> String {
        format!("field `{key}` of {} must be {expected}", self.what)
    }

    fn optional(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|value| !value.is_null())
    }

    fn required(&self, key: &str) -> Result<&'a Value, String> {
        self.map.get(key).ok_or_else(|| format!("missing field `{key}` in {}", self.what))
    }

    fn string(&self, key: &str) -> Result<String, String> {
        self.required(key)?.as_str().map(String::from).ok_or_else(|| self.wrong(key, "a string"))
    }

    fn opt_string(&self, key: &str) -> Result<Option<String>, String> {
        self.optional(key).map(|v| v.as_str().map(String::from).ok_or_else(|| self.wrong(key, "a string"))).transpose()
    }

    fn u64(&self, key: &str) -> Result<u64, String> {
        self.required(key)?.as_u64().ok_or_else(|| self.wrong(key, "a non-negative integer"))
    }

    fn u32(&self, key: &str) -> Result<u32, String> {
        u32::try_from(self.u64(key)?).map_err(|_| self.wrong(key, "a 32-bit integer"))
    }

    fn bool(&self, key: &str) -> Result<bool, String> {
        self.required(key)?.as_bool().ok_or_else(|| self.wrong(key, "a boolean"))
    }

    fn value(&self, key: &str) -> Result<Value, String> {
        self.required(key).cloned()
    }

    fn name<T>(&self, key: &str, parse: fn(&str) -> Option<T>) -> Result<T, String> {
        self.required(key)?.as_str().and_then(parse).ok_or_else(|| self.wrong(key, "a known name"))
    }

    fn opt_name<T>(&self, key: &str, parse: fn(&str) -> Option<T>) -> Result<Option<T>, String> {
        self.optional(key)
            .map(|v| v.as_str().and_then(parse).ok_or_else(|| self.wrong(key, "a known name")))
            .transpose()
    }
}

impl RunEvent {
    /// Decodes an event from its JSON value.
    pub fn from_value(value: &Value) -> Result<RunEvent, String> {
        let f = Fields::of(value, "an event")?;
        let kind = f.string("kind")?;
        Ok(match kind.as_str() {
            "run_start" => RunEvent::RunStart(RunStartEvent { text: f.string("text")? }),
            "turn_start" => RunEvent::TurnStart(TurnStartEvent { turn: f.u32("turn")? }),
            "tool_execution_start" => RunEvent::ToolExecutionStart(ToolStartEvent {
                call_id: f.string("callId")?,
                tool: f.string("tool")?,
                args: f.value("args")?,
            }),
            "tool_execution_end" => RunEvent::ToolExecutionEnd(ToolEndEvent {
                call_id: f.string("callId")?,
                tool: f.string("tool")?,
                status: f.name("status", ResultStatus::parse)?,
                output: f.string("output")?,
            }),
            "turn_end" => RunEvent::TurnEnd(TurnEndEvent { turn: f.u32("turn")?, reply: f.string("reply")? }),
            "run_end" => RunEvent::RunEnd(RunEndEvent {
                status: f.name("status", RunStatus::parse)?,
                turns: f.u32("turns")?,
                error: f.opt_string("error")?,
            }),
            "tool_collision" => RunEvent::ToolCollision(ToolCollisionEvent { tool: f.string("tool")? }),
            "tool_progress" => RunEvent::ToolProgress(ToolProgressEvent {
                call_id: f.string("callId")?,
                message: f.string("message")?,
            }),
            "hook" => RunEvent::Hook(HookAudit {
                hook_id: f.string("hookId")?,
                level: f.string("level")?,
                hook_event: f.string("hookEvent")?,
                decision: f.string("decision")?,
                reason: f.opt_string("reason")?,
                duration_ms: f.required("durationMs")?.as_f64().ok_or_else(|| f.wrong("durationMs", "a number"))?,
                exit_code: f
                    .optional("exitCode")
                    .map(|v| {
                        v.as_i64().and_then(|n| i32::try_from(n).ok()).ok_or_else(|| f.wrong("exitCode", "an integer"))
                    })
                    .transpose()?,
                decided_by: f.name("decidedBy", HookDecidedBy::parse)?,
            }),
            other => return Err(format!("unknown event kind {}", Quoted(other))),
        })
    }
}

impl ServerFrame {
    /// Decodes a server frame from its JSON value.
    pub fn from_value(value: &Value) -> Result<ServerFrame, String> {
        let f = Fields::of(value, "a frame")?;
        let kind = f.string("type")?;
        let id = f.string("id")?;
        Ok(match kind.as_str() {
            "WELCOME" => {
                let capabilities = f.required("capabilities")?;
                let capabilities = capabilities
                    .as_array()
                    .and_then(|items| items.iter().map(|c| c.as_str().map(String::from)).collect::<Option<Vec<_>>>())
                    .ok_or_else(|| f.wrong("capabilities", "an array of strings"))?;
                ServerFrame::Welcome(Welcome {
                    id,
                    protocol_version: f.u32("protocolVersion")?,
                    session_id: f.string("sessionId")?,
                    resume_token: f.string("resumeToken")?,
                    resumed: f.bool("resumed")?,
                    max_active_tools: f.u32("maxActiveTools")?,
                    max_frame_bytes: f.u64("maxFrameBytes")?,
                    capabilities,
                })
            }
            "TOOL_CALL" => ServerFrame::ToolCall(ToolCall {
                id,
                call_id: f.string("callId")?,
                run_id: f.string("runId")?,
                name: f.string("name")?,
                args: f.value("args")?,
                risk: f.opt_name("risk", Risk::parse)?.unwrap_or_default(),
            }),
            "TOOL_CANCEL" => {
                ServerFrame::ToolCancel(ToolCancel { id, call_id: f.string("callId")?, reason: f.string("reason")? })
            }
            "TOOL_RESULT_ACK" => ServerFrame::ToolResultAck(ToolResultAck { id, call_id: f.string("callId")? }),
            "AGENT_MESSAGE" => ServerFrame::AgentMessage(AgentMessage {
                id,
                run_id: f.string("runId")?,
                delta: f.string("delta")?,
                done: f.bool("done")?,
                status: f.opt_name("status", RunStatus::parse)?,
            }),
            "EVENT" => ServerFrame::Event(EventFrame {
                id,
                run_id: f.opt_string("runId")?,
                event: RunEvent::from_value(f.required("event")?)?,
            }),
            "ERROR" => ServerFrame::Error(ErrorFrame {
                id,
                code: f.name("code", ErrorCode::parse)?,
                message: f.string("message")?,
                reply_to: f.opt_string("replyTo")?,
            }),
            other => return Err(format!("unknown server frame type {}", Quoted(other))),
        })
    }
}

impl<'de> Deserialize<'de> for ServerFrame {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        ServerFrame::from_value(&Value::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

impl<'de> Deserialize<'de> for RunEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        RunEvent::from_value(&Value::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}
