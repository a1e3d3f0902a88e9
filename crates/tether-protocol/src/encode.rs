//! Hand-written encoding of what the browser runtime writes: [`ClientFrame`]s, and the
//! [`JsonObject`] builder its JavaScript views use.
//!
//! serde's derived encoders, driven into `serde_json::Value`, cost the browser module about
//! 10 kB; these functions build the same values directly. Tests hold them to the derived
//! encoders (which the server uses), field for field.

use serde_json::{Map, Value};

use crate::RunId;
use crate::frames::*;

/// Builds a JSON object field by field.
///
/// One call per field keeps the encoders small in the browser module (building a list of
/// fields first costs more code at every call site).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct JsonObject(Map<String, Value>);

impl JsonObject {
    /// An empty object.
    pub fn new() -> Self {
        JsonObject(Map::new())
    }

    /// Adds a field.
    pub fn value(mut self, key: &str, value: Value) -> Self {
        self.0.insert(key.to_string(), value);
        self
    }

    /// Adds a string field.
    pub fn text(self, key: &str, value: &str) -> Self {
        self.value(key, Value::String(value.to_string()))
    }

    /// Adds a field when there is a value (as `skip_serializing_if = "Option::is_none"` does).
    pub fn maybe(self, key: &str, value: Option<Value>) -> Self {
        match value {
            Some(value) => self.value(key, value),
            None => self,
        }
    }

    /// Adds a string field when there is a value.
    pub fn maybe_text(self, key: &str, value: Option<&str>) -> Self {
        match value {
            Some(value) => self.text(key, value),
            None => self,
        }
    }

    /// The finished object.
    pub fn build(self) -> Value {
        Value::Object(self.0)
    }
}

impl ToolSpec {
    /// The tool as a JSON value, as `CONTEXT_UPDATE` carries it.
    pub fn to_value(&self) -> Value {
        JsonObject::new()
            .text("name", &self.name)
            .text("description", &self.description)
            .value("parameters", self.parameters.clone())
            .text("risk", self.risk.as_str())
            .maybe("global", self.global.then_some(Value::Bool(true)))
            .maybe("followUp", (!self.follow_up).then_some(Value::Bool(false)))
            .build()
    }
}

impl ContextEntry {
    /// The entry as a JSON value, as `CONTEXT_UPDATE` carries it.
    pub fn to_value(&self) -> Value {
        JsonObject::new()
            .text("key", &self.key)
            .text("description", &self.description)
            .value("value", self.value.clone())
            .build()
    }
}

impl ClientFrame {
    /// The frame as a JSON value, exactly as [`encode_frame`](crate::encode_frame) writes it.
    ///
    /// The browser runtime writes the text with the browser's `JSON.stringify`, so the wasm
    /// module carries no JSON writer of its own.
    pub fn to_value(&self) -> Value {
        let object = JsonObject::new().text("type", self.type_name()).text("id", self.id());
        match self {
            ClientFrame::Hello(hello) => {
                let resume = hello.resume.as_ref().map(|resume| {
                    JsonObject::new()
                        .text("sessionId", &resume.session_id)
                        .text("token", &resume.token)
                        .maybe("lastSeq", resume.last_seq.map(Value::from))
                        .maybe("history", resume.history.then_some(Value::Bool(true)))
                        .build()
                });
                object
                    .value("protocolVersion", Value::from(hello.protocol_version))
                    .maybe("resume", resume)
                    .maybe_text("client", hello.client.as_deref())
            }
            ClientFrame::ContextUpdate(update) => {
                let page = update.page.as_ref().map(|page| {
                    let title = (!page.title.is_empty()).then_some(page.title.as_str());
                    JsonObject::new().text("url", &page.url).maybe_text("title", title).build()
                });
                let context = (!update.context.is_empty())
                    .then(|| Value::Array(update.context.iter().map(ContextEntry::to_value).collect()));
                object
                    .value("revision", Value::from(update.revision))
                    .value("tools", Value::Array(update.tools.iter().map(ToolSpec::to_value).collect()))
                    .maybe("page", page)
                    .maybe("context", context)
            }
            ClientFrame::UserMessage(message) => object.text("text", &message.text),
            ClientFrame::ToolResult(result) => object
                .text("callId", result.call_id.as_str())
                .text("status", result.status.as_str())
                .value("content", result.content.clone()),
            ClientFrame::ToolProgress(progress) => {
                object.text("callId", progress.call_id.as_str()).text("message", &progress.message)
            }
            ClientFrame::StopRun(stop) => object.maybe_text("runId", stop.run_id.as_ref().map(RunId::as_str)),
        }
        .build()
    }
}
