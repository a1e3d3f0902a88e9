//! An OpenAI-compatible `/v1/chat/completions` provider with streaming (SSE).
//!
//! Works with OpenAI, Ollama, LM Studio, vLLM, llama.cpp's server and proxies. Tool calls are
//! accepted from `tool_calls` and, for the tools the request listed, from the reply's text (see
//! [`extract_tool_calls`]; any other JSON is the answer and reaches the user whole). 429 and
//! 5xx answers are retried a bounded number of times; other failures become clear errors.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use super::tool_text::{ContentToolCalls, extract_tool_calls};
use super::{BoxFuture, ChatMessage, ChatModel, ChatRequest, DeltaSink, ModelReply, ModelToolCall};
use crate::AgentError;

/// Settings of an [`OpenAiProvider`].
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Base URL, e.g. `http://127.0.0.1:8080` or `https://api.openai.com/v1`.
    pub base_url: String,
    /// The `model` field of requests.
    pub model: String,
    /// Bearer token, if the provider needs one. Never logged.
    pub api_key: Option<String>,
    /// How many times a 429 or 5xx answer is retried.
    pub max_retries: u32,
    /// Time limit of one request.
    pub timeout: Duration,
    /// Delay before the first retry; doubled each time.
    pub retry_delay: Duration,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

impl OpenAiConfig {
    /// Defaults for a base URL and model name: 3 retries, 120 s per request.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            max_retries: 3,
            timeout: Duration::from_secs(120),
            retry_delay: Duration::from_millis(250),
        }
    }

    /// The chat completions URL: `/chat/completions` is appended to a base ending in `/v1`,
    /// `/v1/chat/completions` to any other base.
    pub fn endpoint(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        if base.ends_with("/chat/completions") {
            base.to_string()
        } else if base.ends_with("/v1") {
            format!("{base}/chat/completions")
        } else {
            format!("{base}/v1/chat/completions")
        }
    }
}

/// The OpenAI-compatible provider.
#[derive(Debug)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    client: reqwest::Client,
}

impl OpenAiProvider {
    /// A provider for `config`.
    pub fn new(config: OpenAiConfig) -> Result<Self, AgentError> {
        // reqwest is built without a bundled crypto provider; ring is the one we ship.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|error| AgentError::Config(format!("cannot build the HTTP client: {error}")))?;
        Ok(OpenAiProvider { config, client })
    }

    fn body(&self, request: &ChatRequest) -> Value {
        let messages: Vec<Value> = request.messages.iter().map(message_json).collect();
        let mut body = json!({"model": self.config.model, "messages": messages, "stream": true});
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|tool| {
                    json!({"type": "function", "function": {
                        "name": tool.name, "description": tool.description, "parameters": tool.parameters
                    }})
                })
                .collect();
            body["tools"] = Value::Array(tools);
        }
        body
    }

    /// Removes the API key from text that came back from the provider (some echo it in their
    /// error messages), before the text reaches logs, frames or the model.
    fn redact(&self, text: String) -> String {
        match &self.config.api_key {
            Some(key) if key.len() >= 4 && text.contains(key.as_str()) => text.replace(key.as_str(), "[redacted]"),
            _ => text,
        }
    }

    async fn send(&self, body: &Value) -> Result<reqwest::Response, AgentError> {
        let mut delay = self.config.retry_delay;
        let mut attempt = 0;
        loop {
            let mut request = self.client.post(self.config.endpoint()).json(body);
            if let Some(key) = &self.config.api_key {
                request = request.bearer_auth(key);
            }
            let response = request.send().await.map_err(|error| AgentError::ProviderUnreachable(describe(&error)))?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let retryable = status.as_u16() == 429 || status.is_server_error();
            if retryable && attempt < self.config.max_retries {
                attempt += 1;
                tracing::warn!(status = status.as_u16(), attempt, "model provider busy; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
                continue;
            }
            let text = response.text().await.unwrap_or_default();
            let message = self.redact(error_message(&text));
            return Err(AgentError::ProviderStatus { status: status.as_u16(), message });
        }
    }
}

fn describe(error: &reqwest::Error) -> String {
    // reqwest's errors name the URL but never headers, so the API key cannot leak here.
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

fn error_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.pointer("/error/message").and_then(Value::as_str).map(String::from));
    let text = from_json.unwrap_or_else(|| body.to_string());
    text.chars().take(300).collect()
}

fn message_json(message: &ChatMessage) -> Value {
    match message {
        ChatMessage::System { content } => json!({"role": "system", "content": content}),
        ChatMessage::User { content } => json!({"role": "user", "content": content}),
        ChatMessage::Assistant { content, tool_calls } if tool_calls.is_empty() => {
            json!({"role": "assistant", "content": content})
        }
        ChatMessage::Assistant { content, tool_calls } => {
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|call| {
                    json!({"id": call.id, "type": "function", "function": {
                        "name": call.name, "arguments": call.arguments.to_string()
                    }})
                })
                .collect();
            let content = if content.is_empty() { Value::Null } else { Value::String(content.clone()) };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        ChatMessage::Tool { call_id, content, .. } => {
            json!({"role": "tool", "tool_call_id": call_id, "content": content})
        }
    }
}

/// Streams text to the client unless it may be a tool call written as text, which is held
/// back until the reply is complete.
struct DeltaGate<'a> {
    sink: DeltaSink<'a>,
    text: String,
    decided: Option<bool>,
}

impl<'a> DeltaGate<'a> {
    fn new(sink: DeltaSink<'a>) -> Self {
        DeltaGate { sink, text: String::new(), decided: None }
    }

    fn push(&mut self, delta: &str) {
        self.text.push_str(delta);
        match self.decided {
            Some(true) => (self.sink)(delta),
            Some(false) => {}
            None => {
                let trimmed = self.text.trim_start();
                if let Some(first) = trimmed.chars().next() {
                    let may_be_call = matches!(first, '{' | '[' | '`' | '<');
                    self.decided = Some(!may_be_call);
                    if !may_be_call {
                        (self.sink)(&self.text);
                    }
                }
            }
        }
    }

    /// Releases held text that turned out not to be a tool call.
    fn finish(self, was_call: bool) -> String {
        if self.decided == Some(false) && !was_call {
            (self.sink)(&self.text);
        }
        self.text
    }
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

fn finish_reply(
    text: &str,
    listed: &[&str],
    partial: Vec<PartialCall>,
    gate_finish: impl FnOnce(bool) -> String,
) -> Result<ModelReply, AgentError> {
    let mut tool_calls = Vec::new();
    for (n, call) in partial.into_iter().enumerate() {
        let arguments = if call.arguments.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(&call.arguments).map_err(|error| {
                AgentError::MalformedReply(format!("arguments of tool call {:?} are not JSON: {error}", call.name))
            })?
        };
        let id = if call.id.is_empty() { format!("call_{n}") } else { call.id };
        tool_calls.push(ModelToolCall { id, name: call.name, arguments });
    }
    if !tool_calls.is_empty() {
        let text = gate_finish(false);
        return Ok(ModelReply { text, tool_calls, malformed_tool_call: None });
    }
    match extract_tool_calls(text, listed) {
        ContentToolCalls::Calls(calls) => {
            gate_finish(true);
            let tool_calls = calls
                .into_iter()
                .enumerate()
                .map(|(n, (name, arguments))| ModelToolCall { id: format!("call_text_{n}"), name, arguments })
                .collect();
            Ok(ModelReply { text: String::new(), tool_calls, malformed_tool_call: None })
        }
        ContentToolCalls::Malformed(reason) => {
            gate_finish(true);
            Ok(ModelReply { text: String::new(), tool_calls: Vec::new(), malformed_tool_call: Some(reason) })
        }
        ContentToolCalls::None => {
            Ok(ModelReply { text: gate_finish(false), tool_calls: Vec::new(), malformed_tool_call: None })
        }
    }
}

/// Reads a complete (non-streamed) chat completion.
pub(crate) fn parse_completion(body: &Value, listed: &[&str], sink: DeltaSink<'_>) -> Result<ModelReply, AgentError> {
    let message = body
        .pointer("/choices/0/message")
        .ok_or_else(|| AgentError::MalformedReply("no choices[0].message in the reply".into()))?;
    let mut partial = Vec::new();
    for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let arguments = match call.pointer("/function/arguments") {
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        partial.push(PartialCall {
            id: call.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
            name: call.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_string(),
            arguments,
        });
    }
    let text = message.get("content").and_then(Value::as_str).unwrap_or_default().to_string();
    let mut gate = DeltaGate::new(sink);
    gate.push(&text);
    finish_reply(&text, listed, partial, |was_call| gate.finish(was_call))
}

impl ChatModel for OpenAiProvider {
    fn name(&self) -> &str {
        &self.config.model
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_delta: DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>> {
        Box::pin(async move {
            let body = self.body(request);
            // Tool calls written as text count only for these.
            let listed: Vec<&str> = request.tools.iter().map(|tool| tool.name.as_str()).collect();
            let response = self.send(&body).await?;
            let is_stream = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
            if !is_stream {
                let body: Value = response
                    .json()
                    .await
                    .map_err(|error| AgentError::MalformedReply(format!("the reply is not JSON: {error}")))?;
                return parse_completion(&body, &listed, on_delta);
            }
            let mut gate = DeltaGate::new(on_delta);
            let mut partial: Vec<PartialCall> = Vec::new();
            let mut buffer = Vec::new();
            let mut stream = response.bytes_stream();
            let mut done = false;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|error| AgentError::ProviderUnreachable(describe(&error)))?;
                buffer.extend_from_slice(&chunk);
                while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buffer.drain(..=end).collect();
                    let line = String::from_utf8_lossy(&line);
                    let Some(data) = line.trim().strip_prefix("data:") else { continue };
                    let data = data.trim();
                    if data == "[DONE]" {
                        done = true;
                        break;
                    }
                    let event: Value = serde_json::from_str(data)
                        .map_err(|error| AgentError::MalformedReply(format!("bad stream event: {error}")))?;
                    if let Some(message) = event.pointer("/error/message").and_then(Value::as_str) {
                        return Err(AgentError::ProviderStatus {
                            status: 200,
                            message: self.redact(message.chars().take(300).collect()),
                        });
                    }
                    let Some(delta) = event.pointer("/choices/0/delta") else { continue };
                    if let Some(text) = delta.get("content").and_then(Value::as_str) {
                        gate.push(text);
                    }
                    for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                        let index = call.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                        if index > 64 {
                            return Err(AgentError::MalformedReply("more than 64 tool calls in one reply".into()));
                        }
                        while partial.len() <= index {
                            partial.push(PartialCall::default());
                        }
                        let slot = &mut partial[index];
                        if let Some(id) = call.get("id").and_then(Value::as_str) {
                            slot.id = id.to_string();
                        }
                        if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                            slot.name.push_str(name);
                        }
                        if let Some(arguments) = call.pointer("/function/arguments").and_then(Value::as_str) {
                            slot.arguments.push_str(arguments);
                        }
                    }
                }
                if done {
                    break;
                }
            }
            let text = gate.text.clone();
            finish_reply(&text, &listed, partial, |was_call| gate.finish(was_call))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_accept_bases_with_and_without_v1() {
        let endpoint = |base: &str| OpenAiConfig::new(base, "m").endpoint();
        assert_eq!(endpoint("http://127.0.0.1:8080"), "http://127.0.0.1:8080/v1/chat/completions");
        assert_eq!(endpoint("https://api.openai.com/v1/"), "https://api.openai.com/v1/chat/completions");
        assert_eq!(endpoint("http://h/v1/chat/completions"), "http://h/v1/chat/completions");
    }

    #[test]
    fn the_api_key_never_appears_in_debug_output() {
        let mut config = OpenAiConfig::new("http://h", "m");
        config.api_key = Some("sk-secret-sentinel".into());
        assert!(!format!("{config:?}").contains("sk-secret-sentinel"));
    }
}
