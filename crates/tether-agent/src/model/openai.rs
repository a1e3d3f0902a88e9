//! An OpenAI-compatible `/v1/chat/completions` provider with streaming (SSE).
//!
//! Works with OpenAI, Ollama, LM Studio, vLLM, llama.cpp's server and proxies. How tools are
//! offered and calls read is the [`ToolMode`]: the provider's own `tools`/`tool_calls`
//! (`native`), a tool list in the prompt and calls read from the reply's text (`text`), or that
//! plus a JSON Schema the provider constrains every reply to (`constrained`); `auto` asks the
//! provider once what works. Tool schemas are normalised before they are sent; a tool whose
//! schema the provider still refuses is left out of the request and reported in
//! [`ModelReply::refused_tools`]. 429 and 5xx answers are retried a bounded number of times;
//! other failures become clear errors.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tether_protocol::{ResultStatus, ToolSpec};

use super::partial::partial_string;
use super::schema::{STEP_KEY, answer_step, call_schema, normalize_schema, reply_schema, signature};
use super::tool_text::{parse_lenient, read_pieces, tidy};
use super::{
    BoxFuture, ChatMessage, ChatModel, ChatRequest, DONE_SO_FAR, DeltaSink, ModelReply, ModelToolCall, NOT_DONE_YET,
    NoteKind, QUESTION_REMINDER, REMINDER, REMINDER_AFTER_REFUSAL, RefusedTool, StepRule, Streams, ToolCallDelta,
    ToolDeltaSink, ToolMode, partial_object, partial_value, result_label,
};
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
    /// How many times a 429 or 5xx answer, or a request that got no answer (not a timeout), is
    /// retried.
    pub max_retries: u32,
    /// Time limit of one request.
    pub timeout: Duration,
    /// Delay before the first retry; doubled each time, with jitter (a provider's
    /// `Retry-After` takes its place, up to [`MAX_RETRY_AFTER`]).
    pub retry_delay: Duration,
    /// How tools are offered and calls read (default [`ToolMode::Auto`]).
    pub tool_mode: ToolMode,
    /// Most tool calls one constrained reply may hold (default 1: one call or the answer).
    pub max_calls_per_reply: usize,
    /// The sampling temperature sent with every request (`None`: the provider's default).
    pub temperature: Option<f64>,
    /// The most tokens one reply may have (`None`: the provider's default).
    pub max_tokens: Option<u32>,
    /// In the `text` and `constrained` modes, list the tools in a system message right before
    /// the run's request instead of in the first one (default on): the conversation before it
    /// stays the same when the page's tools change, so a model server's prompt cache keeps it
    /// (measured: a navigation in a long conversation otherwise re-reads all of it, 25-30 s on a
    /// 2-core CPU). A provider whose chat template refuses a system message there (an HTTP
    /// error) gets the tools in the first one from then on.
    pub late_tools: bool,
    /// The model's context window in tokens (`None`: asked of the provider once, see
    /// [`ChatModel::prompt_budget`]; unknown when it does not say).
    pub context_tokens: Option<u32>,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("max_retries", &self.max_retries)
            .field("tool_mode", &self.tool_mode)
            .finish_non_exhaustive()
    }
}

impl OpenAiConfig {
    /// Defaults for a base URL and model name: 3 retries, 300 s per request (a full context
    /// window read by a small model on a 2-core CPU takes two minutes), tool mode `auto`.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            max_retries: 3,
            timeout: Duration::from_secs(300),
            retry_delay: Duration::from_millis(250),
            tool_mode: ToolMode::Auto,
            max_calls_per_reply: 1,
            temperature: None,
            max_tokens: None,
            late_tools: true,
            context_tokens: None,
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
    /// The mode `auto` settled on (and why), once asked.
    resolved: tokio::sync::Mutex<Option<(ToolMode, String)>>,
    /// Tools the provider refused, by name and schema: the reason.
    refused: Mutex<HashMap<(String, String), String>>,
    /// Whether the tools go in a system message before the run's request
    /// ([`OpenAiConfig::late_tools`]); turned off for good once the provider refuses that.
    late_tools: std::sync::atomic::AtomicBool,
    /// The context window, once known (from the configuration or the provider).
    window: tokio::sync::OnceCell<Option<u32>>,
    /// The provider answered a request for token probabilities without them (or refused it):
    /// [`ChatModel::yes_probability`] asks no more.
    no_logprobs: std::sync::atomic::AtomicBool,
    /// The provider refused token probabilities in a streamed turn ([`StepRule::CallIfLikelier`]):
    /// turns ask for them no more.
    no_step_logprobs: std::sync::atomic::AtomicBool,
}

/// What a request sends besides the conversation.
struct Turn<'a> {
    mode: ToolMode,
    tools: Vec<&'a ToolSpec>,
    answer: Option<&'a Value>,
    /// The tools go in a system message before the run's request.
    late: bool,
    /// The reply must call a tool ([`StepRule::MustCall`]): a constrained schema without the
    /// answer.
    must_call: bool,
    /// Token probabilities are asked for, to weigh the step ([`StepRule::CallIfLikelier`]).
    step_odds: bool,
}

impl OpenAiProvider {
    /// The reply to `prompt` asked alone, one token long, with the probabilities of the
    /// first token's top ten choices; `None` once the provider refused them (then never asked
    /// again).
    async fn first_token(&self, prompt: &str) -> Result<Option<Value>, AgentError> {
        use std::sync::atomic::Ordering;
        if self.no_logprobs.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let body = json!({
            "model": self.config.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": 1,
            "stream": false,
            "logprobs": true,
            "top_logprobs": 10,
        });
        let response = match self.send(&body).await {
            Ok(response) => response,
            Err(AgentError::ProviderStatus { status: 400 | 422, message }) => {
                tracing::info!(%message, "the provider refuses to give token probabilities; checks that need them are off");
                self.no_logprobs.store(true, Ordering::Relaxed);
                return Ok(None);
            }
            Err(error) => return Err(error),
        };
        let text = response.text().await.map_err(|error| AgentError::ProviderUnreachable(describe(&error)))?;
        Ok(Some(serde_json::from_str::<Value>(&text).unwrap_or(Value::Null)))
    }

    /// A provider for `config`.
    pub fn new(config: OpenAiConfig) -> Result<Self, AgentError> {
        // reqwest is built without a bundled crypto provider; ring is the one we ship.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|error| AgentError::Config(format!("cannot build the HTTP client: {error}")))?;
        let late_tools = std::sync::atomic::AtomicBool::new(config.late_tools);
        Ok(OpenAiProvider {
            config,
            client,
            resolved: tokio::sync::Mutex::new(None),
            refused: Mutex::new(HashMap::new()),
            late_tools,
            window: tokio::sync::OnceCell::new(),
            no_logprobs: std::sync::atomic::AtomicBool::new(false),
            no_step_logprobs: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The tool mode requests use, and why. For [`ToolMode::Auto`] the provider is asked once
    /// (the first time; later calls return the answer): a constrained probe (a JSON Schema as
    /// `response_format`), then a native one (`tools`, answered in `tool_calls`); `text` when
    /// neither works. Call it at start to say which mode was chosen.
    pub async fn tool_mode(&self) -> Result<(ToolMode, String), AgentError> {
        if self.config.tool_mode != ToolMode::Auto {
            return Ok((self.config.tool_mode, "chosen by configuration".into()));
        }
        let mut resolved = self.resolved.lock().await;
        if let Some(known) = resolved.as_ref() {
            return Ok(known.clone());
        }
        let known = self.probe().await?;
        tracing::info!(mode = known.0.as_str(), "tool mode auto: {}", known.1);
        *resolved = Some(known.clone());
        Ok(known)
    }

    async fn probe(&self) -> Result<(ToolMode, String), AgentError> {
        let ping = ToolSpec::new("ping", "Answers pong.").with_parameters(json!({"type": "object", "properties": {}}));
        let ask = vec![json!({"role": "user", "content": "Call the ping tool now."})];
        // Only the call is allowed: a provider that honours the schema can answer nothing else,
        // and one that ignores it rarely writes exactly this.
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "const": "ping"},
                "arguments": {"type": "object", "properties": {}, "additionalProperties": false}
            },
            "required": ["name", "arguments"],
            "additionalProperties": false
        });
        let mut body = self.base_body(&ask, false);
        body["max_tokens"] = json!(40);
        body["response_format"] = response_format(&schema);
        match self.send(&body).await {
            Ok(response) => {
                let reply = response.json::<Value>().await.ok();
                let content =
                    reply.as_ref().and_then(|r| r.pointer("/choices/0/message/content")).and_then(Value::as_str);
                let value = content.and_then(|content| serde_json::from_str::<Value>(content.trim()).ok());
                if value.as_ref().is_some_and(|v| v["name"] == "ping" && v["arguments"].is_object()) {
                    return Ok((ToolMode::Constrained, "the provider honours response_format json_schema".into()));
                }
            }
            Err(AgentError::ProviderStatus { status, .. }) if (400..500).contains(&status) && status != 401 => {}
            Err(error) => return Err(error),
        }
        let mut body = self.base_body(&ask, false);
        body["max_tokens"] = json!(40);
        body["tools"] = json!([tool_json(&ping)]);
        if let Ok(response) = self.send(&body).await {
            let reply = response.json::<Value>().await.ok();
            let calls =
                reply.as_ref().and_then(|r| r.pointer("/choices/0/message/tool_calls")).and_then(Value::as_array);
            if calls.is_some_and(|calls| !calls.is_empty()) {
                return Ok((ToolMode::Native, "the provider answers in tool_calls".into()));
            }
        }
        Ok((ToolMode::Text, "the provider neither constrains replies nor fills tool_calls".into()))
    }

    fn base_body(&self, messages: &[Value], stream: bool) -> Value {
        let mut body = json!({"model": self.config.model, "messages": messages, "stream": stream});
        if let Some(temperature) = self.config.temperature {
            body["temperature"] = json!(temperature);
        }
        if let Some(max_tokens) = self.config.max_tokens {
            body["max_tokens"] = json!(max_tokens);
        }
        body
    }

    fn body(&self, request: &ChatRequest, turn: &Turn<'_>) -> Value {
        let messages = match turn.mode {
            ToolMode::Native | ToolMode::Auto => request.messages.iter().map(native_message).collect(),
            ToolMode::Text | ToolMode::Constrained => prompted_messages(request, turn),
        };
        let mut body = self.base_body(&messages, true);
        match turn.mode {
            ToolMode::Native | ToolMode::Auto if !turn.tools.is_empty() => {
                body["tools"] = Value::Array(turn.tools.iter().map(|t| tool_json(t)).collect());
            }
            ToolMode::Constrained if !turn.tools.is_empty() || turn.answer.is_some() => {
                let tools: Vec<ToolSpec> = turn.tools.iter().map(|t| (*t).clone()).collect();
                let must_call = turn.must_call.then(|| call_schema(&tools, self.config.max_calls_per_reply)).flatten();
                let schema =
                    must_call.unwrap_or_else(|| reply_schema(&tools, turn.answer, self.config.max_calls_per_reply));
                body["response_format"] = response_format(&schema);
                if turn.step_odds {
                    body["logprobs"] = json!(true);
                    body["top_logprobs"] = json!(10);
                }
            }
            _ => {}
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

    /// Posts `body`, trying again (exponential backoff with jitter from
    /// [`OpenAiConfig::retry_delay`], at most [`OpenAiConfig::max_retries`] more times) when
    /// nothing came back or the provider was busy (429, 5xx); a `Retry-After` it sends is
    /// honoured, up to [`MAX_RETRY_AFTER`].
    async fn send(&self, body: &Value) -> Result<reqwest::Response, AgentError> {
        let backoff = backon::ExponentialBuilder::default()
            .with_min_delay(self.config.retry_delay)
            .with_factor(2.0)
            .with_max_delay(MAX_RETRY_AFTER)
            .with_jitter()
            .with_max_times(self.config.max_retries as usize);
        let attempt = || self.attempt(body);
        let retries = std::sync::atomic::AtomicU64::new(0);
        let result = backon::Retryable::retry(attempt, backoff)
            .when(|failed: &Failed| failed.again)
            .adjust(|failed: &Failed, next: Option<Duration>| {
                next.map(|next| failed.retry_after.map_or(next, |after| after.min(MAX_RETRY_AFTER)))
            })
            .notify(|failed: &Failed, after: Duration| {
                retries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // A span event of the model call (traces only): why, and how long until the next try.
                let (kind, wait_s) = (failed.error.kind(), after.as_secs_f64());
                tracing::info!(target: crate::SPAN_TARGET, wait_s, "error.type" = %kind, "retry");
                tracing::warn!(error = %failed.error, ?after, "model provider busy or unreachable; retrying");
            })
            .await
            .map_err(|failed| failed.error);
        let retries = retries.into_inner();
        if retries > 0 {
            tracing::Span::current().record("tether.retries", retries);
        }
        result
    }

    /// One try of [`OpenAiProvider::send`].
    async fn attempt(&self, body: &Value) -> Result<reqwest::Response, Failed> {
        let mut request = self
            .client
            .post(self.config.endpoint())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(ordered_json(body));
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        // The trace this call is part of (W3C `traceparent`), when traces are exported.
        #[cfg(feature = "otel")]
        for (name, value) in crate::trace_context() {
            request = request.header(name, value);
        }
        let response = match request.send().await {
            Ok(response) => response,
            // No answer at all (a kept-alive connection the server had closed, a server
            // restarting): nothing was received, so asking again is safe. A timeout is not
            // retried: the model may still be writing.
            Err(error) => {
                let again = !error.is_timeout();
                return Err(Failed {
                    error: AgentError::ProviderUnreachable(describe(&error)),
                    again,
                    retry_after: None,
                });
            }
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let again = status.as_u16() == 429 || status.is_server_error();
        let retry_after =
            response.headers().get(reqwest::header::RETRY_AFTER).and_then(|value| retry_after(value.to_str().ok()?));
        let text = response.text().await.unwrap_or_default();
        let message = self.redact(error_message(&text));
        let error = if is_context_overflow(status.as_u16(), &text) {
            AgentError::ContextOverflow(message)
        } else {
            AgentError::ProviderStatus { status: status.as_u16(), message }
        };
        Err(Failed { error, again, retry_after })
    }

    /// Whether the provider accepts `tools` as this mode sends them: a one-token request.
    async fn accepts(&self, mode: ToolMode, tools: &[&ToolSpec]) -> Result<(), String> {
        let request = ChatRequest {
            messages: vec![ChatMessage::User { content: ".".into() }],
            tools: Vec::new(),
            ..ChatRequest::default()
        };
        let turn =
            Turn { mode, tools: tools.to_vec(), answer: None, late: self.late(), must_call: false, step_odds: false };
        let mut body = self.body(&request, &turn);
        body["stream"] = json!(false);
        body["max_tokens"] = json!(1);
        match self.send(&body).await {
            Err(AgentError::ProviderStatus { status: 400, message }) => Err(message),
            _ => Ok(()),
        }
    }

    /// Finds the tools the provider refuses (after a 400 naming none in particular), by halving.
    async fn find_refused<'t>(&self, mode: ToolMode, tools: &[&'t ToolSpec]) -> Vec<(&'t ToolSpec, String)> {
        let mut refused = Vec::new();
        let mut groups = vec![tools.to_vec()];
        while let Some(group) = groups.pop() {
            if let Err(message) = self.accepts(mode, &group).await {
                if group.len() == 1 {
                    refused.push((group[0], message));
                } else {
                    let (left, right) = group.split_at(group.len() / 2);
                    groups.push(right.to_vec());
                    groups.push(left.to_vec());
                }
            }
        }
        refused
    }

    fn late(&self) -> bool {
        self.late_tools.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn refusal_key(tool: &ToolSpec) -> (String, String) {
        (tool.name.clone(), tool.parameters.to_string())
    }

    /// One model call. What the provider knows of it goes on the current span, the `chat` span
    /// the agent loop opened for it ([`super::chat_span`]): its address, the tool mode, retries,
    /// the model that answered, the token counts and finish reason (docs/observability.md).
    /// Neither the prompt nor the reply is recorded.
    async fn complete_inner(
        &self,
        request: &ChatRequest,
        answer: Option<&Value>,
        rule: StepRule,
        streams: Streams<'_>,
    ) -> Result<ModelReply, AgentError> {
        let span = tracing::Span::current();
        span.record("gen_ai.provider.name", "openai");
        if let Ok(url) = reqwest::Url::parse(&self.config.endpoint()) {
            span.record("server.address", url.host_str().unwrap_or_default());
            span.record("server.port", url.port_or_known_default().unwrap_or_default());
        }
        let (mode, _) = self.tool_mode().await?;
        tracing::Span::current().record("tether.tool_mode", mode.as_str());
        let mut refused_tools = Vec::new();
        let mut tools: Vec<&ToolSpec> = Vec::with_capacity(request.tools.len());
        {
            let known = self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for tool in &request.tools {
                match known.get(&Self::refusal_key(tool)) {
                    Some(reason) => refused_tools.push(RefusedTool { name: tool.name.clone(), reason: reason.clone() }),
                    None => tools.push(tool),
                }
            }
        }
        let sends_schemas = matches!(mode, ToolMode::Native | ToolMode::Constrained);
        let prompted = matches!(mode, ToolMode::Text | ToolMode::Constrained);
        let mut must_call = rule == StepRule::MustCall;
        let mut step_odds = rule == StepRule::CallIfLikelier
            && mode == ToolMode::Constrained
            && answer.is_none()
            && !self.no_logprobs.load(std::sync::atomic::Ordering::Relaxed)
            && !self.no_step_logprobs.load(std::sync::atomic::Ordering::Relaxed);
        loop {
            let response = loop {
                let turn = Turn {
                    mode,
                    tools: tools.clone(),
                    answer,
                    late: self.late(),
                    must_call,
                    step_odds: step_odds && !tools.is_empty(),
                };
                let body = self.body(request, &turn);
                match self.send(&body).await {
                    Ok(response) => break response,
                    // Token probabilities in a streamed turn are not for every provider that gives
                    // them for one token: asked for no more, and the turn is asked again without.
                    Err(AgentError::ProviderStatus { status: 400 | 422, message }) if turn.step_odds => {
                        tracing::info!(%message, "the provider refuses token probabilities in a turn; the step is not weighed");
                        self.no_step_logprobs.store(true, std::sync::atomic::Ordering::Relaxed);
                        step_odds = false;
                    }
                    // Only a request the provider found malformed (a template that takes a system
                    // message only first): never a context overflow, a busy or failing server, or a
                    // missing model.
                    Err(AgentError::ProviderStatus { status, message })
                        if prompted && turn.late && !tools.is_empty() && matches!(status, 400 | 422) =>
                    {
                        // Perhaps the chat template allows a system message only first: try that,
                        // for this request and the later ones.
                        tracing::warn!(status, %message, "the provider refused the tools before the request; they go in the first system message from now on");
                        self.late_tools.store(false, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(AgentError::ProviderStatus { status: 400, message }) if sends_schemas && !tools.is_empty() => {
                        let found = self.find_refused(mode, &tools).await;
                        if found.is_empty() {
                            return Err(AgentError::ProviderStatus { status: 400, message });
                        }
                        let mut known = self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        for (tool, reason) in found {
                            tracing::warn!(tool = tool.name, %reason, "the model provider refuses this tool; it is left out");
                            known.insert(Self::refusal_key(tool), reason.clone());
                            refused_tools.push(RefusedTool { name: tool.name.clone(), reason });
                            tools.retain(|t| !std::ptr::eq(*t, tool));
                        }
                    }
                    Err(error) => return Err(error),
                }
            };
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            let stream_answer = mode == ToolMode::Constrained && answer.is_none();
            let watch = (step_odds && !names.is_empty()).then(|| StepWatch::new(&names));
            match read_response(response, mode, &names, stream_answer, watch, streams, |m| self.redact(m)).await? {
                Read::Reply(mut reply) => {
                    reply.refused_tools = refused_tools;
                    return Ok(reply);
                }
                Read::CallLikelier(odds) => {
                    tracing::info!(
                        tools = odds.tools,
                        answer = odds.answer,
                        "the model began to answer, but its tools together were likelier at the step; asked for the call"
                    );
                    must_call = true;
                    step_odds = false;
                }
            }
        }
    }
}

/// Keys written first, in this order, wherever they appear: grammar-constrained decoders
/// (llama.cpp's server) make the model write an object's properties in the order the schema
/// lists them, and a 1.5B model that must write `arguments` before `name` answers instead of
/// calling (measured: `{"answer": "Two red mugs have been added…"}` with the keys sorted, the
/// right `cart_add` call with `name` first).
/// A constrained reply's step (`next`) comes before everything: see [`STEP_KEY`].
const FIRST_KEYS: [&str; 3] = [STEP_KEY, "name", "arguments"];

/// `value` as JSON text with the keys of [`FIRST_KEYS`] first in every object, the rest in
/// their usual (sorted) order.
pub(crate) fn ordered_json(value: &Value) -> String {
    let mut out = String::new();
    write_ordered(value, &mut out);
    out
}

fn write_ordered(value: &Value, out: &mut String) {
    match value {
        Value::Object(object) => {
            out.push('{');
            let first = FIRST_KEYS.iter().filter_map(|key| object.get_key_value(*key));
            let rest = object.iter().filter(|(key, _)| !FIRST_KEYS.contains(&key.as_str()));
            for (n, (key, item)) in first.chain(rest).enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_ordered(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_ordered(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn response_format(schema: &Value) -> Value {
    json!({"type": "json_schema", "json_schema": {"name": "reply", "strict": false, "schema": schema}})
}

fn tool_json(tool: &ToolSpec) -> Value {
    json!({"type": "function", "function": {
        "name": tool.name, "description": tool.description, "parameters": normalize_schema(&tool.parameters)
    }})
}

/// The longest wait between tries, even when a provider's `Retry-After` asks for more.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// A try that failed: why, whether another may be made, and when the provider said to.
struct Failed {
    error: AgentError,
    again: bool,
    retry_after: Option<Duration>,
}

/// A `Retry-After` value: seconds, or an HTTP date (RFC 9110), as a wait from now.
fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(std::time::SystemTime::now()).unwrap_or_default())
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

/// Whether an error answer says that the request is over the model's context window:
/// llama.cpp's `exceed_context_size_error`, OpenAI's `context_length_exceeded`, or (for
/// providers that give no code) a 400 or 413 whose message speaks of the context length.
fn is_context_overflow(status: u16, body: &str) -> bool {
    if !matches!(status, 400 | 413) {
        return false;
    }
    let value = serde_json::from_str::<Value>(body).ok();
    let field = |key: &str| value.as_ref().and_then(|v| v.pointer(&format!("/error/{key}"))).and_then(Value::as_str);
    if field("type") == Some("exceed_context_size_error") || field("code") == Some("context_length_exceeded") {
        return true;
    }
    let message = field("message").unwrap_or(body).to_lowercase();
    message.contains("context")
        && ["exceed", "length", "too long", "too many tokens", "maximum"].iter().any(|w| message.contains(w))
}

/// The context window a provider reports, in tokens: llama.cpp's `/props`
/// (`default_generation_settings.n_ctx`, per slot), or vLLM's `/v1/models` (`max_model_len`).
async fn ask_window(client: &reqwest::Client, base_url: &str) -> Option<u32> {
    let base = base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let get = |url: String| async move {
        let response = client.get(url).timeout(Duration::from_secs(10)).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        response.json::<Value>().await.ok()
    };
    if let Some(props) = get(format!("{root}/props")).await {
        let n_ctx = props.pointer("/default_generation_settings/n_ctx").or_else(|| props.get("n_ctx"));
        if let Some(n) = n_ctx.and_then(Value::as_u64).filter(|n| *n > 0) {
            return u32::try_from(n).ok();
        }
    }
    let models = get(format!("{root}/v1/models")).await?;
    let first = models.pointer("/data/0")?;
    first.get("max_model_len").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok())
}

/// A message in the provider's own tool format (`tool_calls`, role `tool`).
fn native_message(message: &ChatMessage) -> Value {
    match message {
        ChatMessage::System { content } => json!({"role": "system", "content": content}),
        ChatMessage::User { content } | ChatMessage::Note { content, .. } => {
            json!({"role": "user", "content": content})
        }
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

/// The conversation for the `text` and `constrained` modes: the tools of this turn and how to call
/// them at the end of the system prompt (where models trained for tools expect them: measured on
/// the task benchmark, a list after the last message made a 1.5B model answer instead of acting),
/// the model's replies as it wrote them, tool results as labelled user text.
fn prompted_messages(request: &ChatRequest, turn: &Turn<'_>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(request.messages.len() + 1);
    // For each message of `out`: whether it opens with the user's own words or the app state
    // (where the late tools message may go; `late_tools_position`).
    let mut opens_request: Vec<bool> = Vec::with_capacity(request.messages.len() + 1);
    let push_user = |out: &mut Vec<Value>, opens: &mut Vec<bool>, text: &str, request: bool| match out.last_mut() {
        Some(last) if last["role"] == "user" => {
            let joined = format!("{}\n{text}", last["content"].as_str().unwrap_or_default());
            last["content"] = Value::String(joined);
        }
        _ => {
            out.push(json!({"role": "user", "content": text}));
            opens.push(request);
        }
    };
    for message in &request.messages {
        match message {
            ChatMessage::System { content } => {
                out.push(json!({"role": "system", "content": content}));
                opens_request.push(false);
            }
            ChatMessage::User { content } => push_user(&mut out, &mut opens_request, content, true),
            ChatMessage::Note { kind, content } => {
                push_user(&mut out, &mut opens_request, content, *kind == NoteKind::AppState);
            }
            ChatMessage::Assistant { content, tool_calls } => {
                let text = if content.trim().is_empty() {
                    tool_calls
                        .iter()
                        .map(|c| json!({STEP_KEY: c.name, "arguments": c.arguments}).to_string())
                        .collect::<Vec<_>>()
                        .join("\n")
                } else {
                    content.clone()
                };
                out.push(json!({"role": "assistant", "content": text}));
                opens_request.push(false);
            }
            ChatMessage::Tool { name, content, .. } => {
                push_user(&mut out, &mut opens_request, &format!("{}{content}", result_label(name)), false);
            }
        }
    }
    // After tool results, the user's request again: a small model that just read "added 1 × Blue
    // mug" otherwise answers as if the whole request were done (measured on the task benchmark:
    // "add one blue mug and one red mug" stopped after the first). A note of what changed in the
    // app state may follow the results.
    let changes = |m: &&ChatMessage| matches!(m, ChatMessage::Note { kind: NoteKind::AppStateChanged, .. });
    if let Some(ChatMessage::Tool { status, call_again, .. }) = request.messages.iter().rev().find(|m| !changes(m)) {
        if let Some(at) = request.messages.iter().rposition(ChatMessage::is_users_own) {
            let ChatMessage::User { content: asked } = &request.messages[at] else { unreachable!() };
            push_user(
                &mut out,
                &mut opens_request,
                &reminder(
                    asked,
                    &done_in_run(&request.messages[at..]),
                    refused_by_user(*status, *call_again),
                    request.question,
                ),
                false,
            );
        }
    }
    let instructions = tool_instructions(turn, &listing(request, &turn.tools));
    // Late: right before the run's request (and the app state that precedes it).
    let request_at =
        turn.late.then(|| late_tools_position(&opens_request)).flatten().filter(|_| !turn.tools.is_empty());
    if let (Some(at), false) = (request_at, instructions.is_empty()) {
        out.insert(at, json!({"role": "system", "content": instructions}));
    } else if !instructions.is_empty() {
        match out.first_mut() {
            Some(first) if first["role"] == "system" => {
                let joined = format!("{}\n\n{instructions}", first["content"].as_str().unwrap_or_default());
                first["content"] = Value::String(joined);
            }
            _ => out.insert(0, json!({"role": "system", "content": instructions})),
        }
    }
    out
}

/// Whether a result refused the call for good: the user, a policy or a hook said no (`denied`
/// or `blocked`), or one of the loop's own checks did and named no other call. A check's refusal
/// that asks for another call (the right tool, a value left out, too many calls at once) is not.
fn refused_by_user(status: ResultStatus, call_again: bool) -> bool {
    matches!(status, ResultStatus::Denied | ResultStatus::Blocked) && !call_again
}

/// What follows the tool results of a prompted turn: the request, and what to do next. After a
/// call the user (or a policy) refused (`refused`), the model is told not to look for another way
/// (measured: after "Place my order now." was refused, the 1.5B model tried `cart_clear`, then
/// `cart_add`). After the loop's own check refused a call and asked for another, it is told what
/// is not done yet as after any other result: "do not try another way" after such a refusal kept
/// the 1.5B model from the tool it named (issue 28, "Cancel lunch with Ana").
///
/// After a result that was not refused, it says what the run did so far and asks for what is
/// not done yet (measured with the 1.5B model on "Add one blue mug and one red mug to the cart.",
/// after the blue mug: "If part of it is not done yet and a tool does it, call that tool;
/// otherwise answer." was answered "Added 1 × Blue mug"; with what was done listed and "What the
/// request asks that is not done yet: call the tool for it now." it added the red mug, and it
/// still answered after the single action of five other requests).
///
/// A question's run (`question`) is asked to answer from the results, or to call what shows
/// what they do not: measured with the 1.5B model, "What's in my cart?" after its `cart_view`
/// was answered with the ten items, where the request's frame had it call `cart_view` again.
pub(crate) fn reminder(asked: &str, done: &[String], refused: bool, question: bool) -> String {
    let asked: String = asked.chars().take(300).collect();
    if question && !refused {
        return format!("(The question was: \"{asked}\". {QUESTION_REMINDER})");
    }
    if refused || done.is_empty() {
        let next = if refused { REMINDER_AFTER_REFUSAL } else { REMINDER };
        return format!("(The request was: \"{asked}\". {next})");
    }
    format!("(The request was: \"{asked}\". {DONE_SO_FAR} {}. {NOT_DONE_YET})", done.join("; "))
}

/// The calls of a run (`run`: its messages from the user's request on) that succeeded, as
/// `name {arguments}`.
fn done_in_run(run: &[ChatMessage]) -> Vec<String> {
    let mut done = Vec::new();
    for (n, message) in run.iter().enumerate() {
        let ChatMessage::Assistant { tool_calls, .. } = message else { continue };
        for call in tool_calls {
            let status = run[n..].iter().find_map(|m| match m {
                ChatMessage::Tool { call_id, status, .. } if *call_id == call.id => Some(*status),
                _ => None,
            });
            if status.is_some_and(ResultStatus::is_ok) {
                done.push(format!("{} {}", call.name, call.arguments));
            }
        }
    }
    done
}

/// The tools a prompted turn lists before the run's request: those of the run's first turn
/// ([`ChatRequest::listed_tools`]) less any the provider refuses. Tools that came since are not
/// listed (measured on the task benchmark: a list of them after the run's messages made the 1.5B
/// model call `cart_remove` right after adding what it was asked to add); the result that brought
/// them names them (`The app's tools changed. Tools now: …`), and a constrained turn's schema
/// allows them.
fn listing<'a>(request: &'a ChatRequest, tools: &[&'a ToolSpec]) -> Vec<&'a ToolSpec> {
    let Some(first) = &request.listed_tools else { return tools.to_vec() };
    let sent = |name: &str| tools.iter().any(|tool| tool.name == name);
    let refused = |tool: &ToolSpec| !sent(&tool.name) && request.tools.iter().any(|live| live.name == tool.name);
    first.iter().filter(|tool| !refused(tool)).collect()
}

/// Where the late tools message goes in a prompted conversation: before the last user message
/// that opens with the user's own words (not a tool result, a hook's note or the reminder), or,
/// when that one holds the app state first, still before it; `None` without one. (`opens_request`:
/// for each message, whether it opens so.)
fn late_tools_position(opens_request: &[bool]) -> Option<usize> {
    opens_request.iter().rposition(|&opens| opens)
}

/// The tools `listed` and how to call the tools of this turn, for the prompt.
fn tool_instructions(turn: &Turn<'_>, listed: &[&ToolSpec]) -> String {
    let mut text = String::new();
    if !listed.is_empty() {
        text.push_str("# Tools\n\nYou can call these tools now:\n");
        for tool in listed {
            text.push_str("- ");
            text.push_str(&signature(tool));
            text.push('\n');
        }
    }
    // The way to call a tool comes last (measured on the task benchmark: a list after it made
    // the 1.5B model answer instead of acting). A constrained reply names its step first
    // (`STEP_KEY`); text mode keeps the `name` shape models are trained on.
    let call = format!("{{\"{STEP_KEY}\": \"<tool>\", \"arguments\": {{…}}}}");
    match (turn.mode, turn.tools.is_empty(), turn.answer.is_some()) {
        (ToolMode::Constrained, false, false) => {
            let step = answer_step(turn.tools.iter().map(|t| t.name.as_str()));
            text.push_str(&format!(
                "Reply with one JSON object: {call} to call a tool, or {{\"{STEP_KEY}\": \"{step}\", \"answer\": \"…\"}} to \
                 answer the user."
            ));
        }
        (ToolMode::Constrained, false, true) => {
            text.push_str(&format!("Reply with one JSON object: the JSON answer asked for, or {call} to call a tool."));
        }
        (ToolMode::Constrained, true, true) => text.push_str("Reply with only the JSON answer asked for."),
        (_, false, _) => {
            text.push_str(
                "Answer the user in plain text, or, to call a tool, reply with only {\"name\": \"<tool>\", \"arguments\": {…}}.",
            );
        }
        _ => {}
    }
    text
}

/// Streams text to the client except what may be a tool call written as text, which is held
/// back (from its first `{`, `[`, `` ` `` or `<`) until the reply is complete; then whatever
/// of it is not a call is released. In a constrained turn the answer's string is streamed as it
/// is written.
struct DeltaGate<'a> {
    sink: DeltaSink<'a>,
    /// Receives the calls written into the held text as they are written (text and constrained
    /// modes), for the tools in `tools`.
    calls: Option<(ToolDeltaSink<'a>, &'a [&'a str])>,
    text: String,
    /// What was passed on so far.
    sent: String,
    /// Where holding back began.
    held_from: Option<usize>,
    stream_answer: bool,
    /// How much of the answer's decoded string was passed on.
    answer_sent: usize,
    /// Native mode: the text is never a call.
    pass_through: bool,
}

impl<'a> DeltaGate<'a> {
    fn new(sink: DeltaSink<'a>, mode: ToolMode, stream_answer: bool) -> Self {
        DeltaGate {
            sink,
            calls: None,
            text: String::new(),
            sent: String::new(),
            held_from: None,
            stream_answer,
            answer_sent: 0,
            pass_through: matches!(mode, ToolMode::Native | ToolMode::Auto),
        }
    }

    fn emit(&mut self, text: &str) {
        if !text.is_empty() {
            (self.sink)(text);
            self.sent.push_str(text);
        }
    }

    fn push(&mut self, delta: &str) {
        let start = self.text.len();
        self.text.push_str(delta);
        if self.pass_through {
            self.emit(delta);
            return;
        }
        if self.held_from.is_none() {
            let rest = &self.text[start..];
            match rest.find(['{', '[', '`', '<']) {
                Some(at) => {
                    let free = rest[..at].to_string();
                    self.emit(&free);
                    self.held_from = Some(start + at);
                }
                None => {
                    let free = rest.to_string();
                    self.emit(&free);
                }
            }
        }
        if let (Some((sink, tools)), Some(from)) = (self.calls, self.held_from) {
            stream_written_calls(&self.text[from..], tools, sink);
        }
        if let (true, Some(from)) = (self.stream_answer, self.held_from) {
            if let Some(body) = answer_body(&self.text[from..]) {
                let (decoded, _) = partial_string(body);
                if decoded.len() > self.answer_sent {
                    let new = decoded[self.answer_sent..].to_string();
                    self.answer_sent = decoded.len();
                    self.emit(&new);
                }
            }
        }
    }

    /// Passes on what remains of the user-facing text `shown` (the reply minus its calls).
    fn finish(mut self, shown: &str) -> String {
        if self.pass_through {
            return self.text;
        }
        match shown.strip_prefix(self.sent.as_str()) {
            Some(rest) => {
                // Nothing sent yet: the text starts at its first word.
                let rest = if self.sent.is_empty() { rest.trim_start() } else { rest }.to_string();
                self.emit(&rest);
            }
            None => {
                tracing::warn!("streamed text and the final answer differ; the final answer is in the run's result");
            }
        }
        self.text
    }
}

/// Passes on the calls that the held text `held` (a call written as JSON, perhaps in a fence or
/// a tag; one object or an array of them) holds so far: each `{"name": …, "arguments": {…}}`
/// whose name is complete (its arguments have begun) and names one of `tools`.
fn stream_written_calls(held: &str, tools: &[&str], sink: ToolDeltaSink<'_>) {
    let Some(start) = held.find(['{', '[']) else { return };
    let Some(value) = partial_value(&held[start..]) else { return };
    let calls = match &value {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    for (index, call) in calls.into_iter().enumerate() {
        let name = call.get(STEP_KEY).or_else(|| call.get("name")).and_then(Value::as_str);
        let arguments = call.get("arguments").or_else(|| call.get("parameters")).filter(|a| a.is_object());
        if let (Some(name), Some(arguments)) = (name, arguments) {
            if tools.contains(&name) {
                sink(ToolCallDelta { index, name, partial_args: arguments.clone() });
            }
        }
    }
}

/// The start of the string in `{"next": "answer", "answer": "…` (or `{"answer": "…`), when
/// `text` begins that way.
fn answer_body(text: &str) -> Option<&str> {
    let mut rest = text.trim_start().strip_prefix('{')?.trim_start();
    if let Some(after) = rest.strip_prefix(&format!("\"{STEP_KEY}\"")) {
        // The step: a plain word (`answer`, `reply`), then a comma.
        let after = after.trim_start().strip_prefix(':')?.trim_start().strip_prefix('"')?;
        let end = after.find('"')?;
        if after[..end].contains('\\') {
            return None;
        }
        rest = after[end + 1..].trim_start().strip_prefix(',')?.trim_start();
    }
    let rest = rest.strip_prefix("\"answer\"")?.trim_start().strip_prefix(':')?.trim_start();
    rest.strip_prefix('"')
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Turns what the provider sent into a reply: calls from `tool_calls` (native) or from the text
/// (text, constrained), the text for the user, and the text as written.
fn finish_reply(tools: &[&str], partial: Vec<PartialCall>, gate: DeltaGate<'_>) -> ModelReply {
    let mut tool_calls = Vec::new();
    let mut malformed = None;
    for (n, call) in partial.into_iter().enumerate() {
        let arguments = if call.arguments.trim().is_empty() {
            Ok(json!({}))
        } else {
            parse_lenient(&call.arguments)
                .map_err(|error| format!("the arguments of tool call {:?} are not JSON: {error}", call.name))
        };
        match arguments {
            Ok(arguments) => {
                let id = if call.id.is_empty() { format!("call_{n}") } else { call.id };
                tool_calls.push(ModelToolCall { id: id.into(), name: call.name, arguments });
            }
            Err(reason) => {
                malformed.get_or_insert(reason);
            }
        }
    }
    if gate.pass_through {
        let raw = gate.finish("");
        let malformed = if tool_calls.is_empty() { malformed } else { None };
        return ModelReply {
            text: raw.trim().to_string(),
            tool_calls,
            malformed_tool_call: malformed,
            raw,
            ..Default::default()
        };
    }
    let (shown, calls, text_malformed) = read_pieces(&gate.text, tools);
    let raw = gate.finish(&shown);
    tool_calls.extend(calls.into_iter().enumerate().map(|(n, (name, arguments))| ModelToolCall {
        id: format!("call_text_{n}").into(),
        name,
        arguments,
    }));
    let malformed = if tool_calls.is_empty() { malformed.or(text_malformed) } else { None };
    ModelReply { text: tidy(&shown), tool_calls, malformed_tool_call: malformed, raw, ..Default::default() }
}

/// Records on the current (`chat`) span what a completion, or a streamed chunk of one, says of
/// itself: the model that answered, the finish reason, the token counts.
fn record_reply(reply: &Value) {
    let span = tracing::Span::current();
    if let Some(model) = reply.get("model").and_then(Value::as_str) {
        span.record("gen_ai.response.model", model);
    }
    if let Some(reason) = reply.pointer("/choices/0/finish_reason").and_then(Value::as_str) {
        span.record("gen_ai.response.finish_reasons", reason);
    }
    if let Some(usage) = reply.get("usage").filter(|u| u.is_object()) {
        if let Some(tokens) = usage.get("prompt_tokens").and_then(Value::as_u64) {
            span.record("gen_ai.usage.input_tokens", tokens);
        }
        if let Some(tokens) = usage.get("completion_tokens").and_then(Value::as_u64) {
            span.record("gen_ai.usage.output_tokens", tokens);
        }
    }
}

/// Reads a complete (non-streamed) chat completion.
pub(crate) fn parse_completion(
    body: &Value,
    mode: ToolMode,
    tools: &[&str],
    sink: DeltaSink<'_>,
) -> Result<ModelReply, AgentError> {
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
    let text = message.get("content").and_then(Value::as_str).unwrap_or_default();
    let mut gate = DeltaGate::new(sink, mode, false);
    gate.push(text);
    Ok(finish_reply(tools, partial, gate))
}

/// What a streamed turn came to ([`read_response`]).
enum Read {
    /// The reply, read to its end.
    Reply(ModelReply),
    /// The model began to answer although its tools together were likelier at the step
    /// ([`StepRule::CallIfLikelier`]); the reply was not read further and nothing of it was
    /// passed on.
    CallLikelier(StepOdds),
}

/// The probabilities at a constrained reply's step, from the provider's top tokens there.
#[derive(Debug, Clone, Copy, PartialEq)]
struct StepOdds {
    /// Of the tokens that begin a tool's name (and not the answer's step).
    tools: f64,
    /// Of the tokens that begin the answer's step (and no tool's name).
    answer: f64,
}

/// What [`read_response`] watches for under [`StepRule::CallIfLikelier`]: the step token of a
/// constrained reply, after `{"next": "`.
struct StepWatch<'a> {
    tools: &'a [&'a str],
    answer: &'static str,
    /// What comes before the step, without whitespace: `{"next":"`.
    before_step: String,
    /// The reply's text so far without whitespace, from the tokens' own text; `None` once past
    /// the step (nothing more to watch).
    written: Option<String>,
}

/// Which steps a token of a constrained reply's step may begin.
#[derive(PartialEq)]
enum Begins {
    /// The answer's, and no tool's name.
    Answer,
    /// One tool's name or more, and not the answer's.
    Tool,
    /// Both, or neither: it says nothing of which.
    Either,
}

impl<'a> StepWatch<'a> {
    fn new(tools: &'a [&'a str]) -> Self {
        StepWatch {
            tools,
            answer: answer_step(tools.iter().copied()),
            before_step: format!("{{\"{STEP_KEY}\":\""),
            written: Some(String::new()),
        }
    }

    fn begins(&self, token: &str) -> Begins {
        let begins = |name: &str| !token.is_empty() && name.starts_with(token);
        match (begins(self.answer), self.tools.iter().any(|tool| begins(tool))) {
            (true, false) => Begins::Answer,
            (false, true) => Begins::Tool,
            _ => Begins::Either,
        }
    }

    /// Reads one streamed event's tokens (`choices[0].logprobs.content`): the odds at the step
    /// when the model wrote the answer's step there although its tools were likelier.
    fn read(&mut self, event: &Value) -> Option<StepOdds> {
        for token in event.pointer("/choices/0/logprobs/content").and_then(Value::as_array).into_iter().flatten() {
            let written = self.written.as_mut()?;
            let text = token.get("token").and_then(Value::as_str).unwrap_or_default();
            if *written != self.before_step {
                written.extend(text.chars().filter(|c| !c.is_whitespace()));
                // Past where the step could begin: nothing more to watch.
                if !self.before_step.starts_with(written.as_str()) {
                    self.written = None;
                }
                continue;
            }
            if text.trim().is_empty() {
                // Still before the step.
                continue;
            }
            self.written = None;
            let odds = self.odds(token);
            return (self.begins(text) == Begins::Answer && odds.tools > odds.answer).then_some(odds);
        }
        None
    }

    fn odds(&self, token: &Value) -> StepOdds {
        let mut odds = StepOdds { tools: 0.0, answer: 0.0 };
        for choice in token.get("top_logprobs").and_then(Value::as_array).into_iter().flatten() {
            let (Some(text), Some(logprob)) =
                (choice.get("token").and_then(Value::as_str), choice.get("logprob").and_then(Value::as_f64))
            else {
                continue;
            };
            match self.begins(text) {
                Begins::Answer => odds.answer += logprob.exp(),
                Begins::Tool => odds.tools += logprob.exp(),
                Begins::Either => {}
            }
        }
        odds
    }
}

async fn read_response(
    response: reqwest::Response,
    mode: ToolMode,
    tools: &[&str],
    stream_answer: bool,
    mut watch: Option<StepWatch<'_>>,
    streams: Streams<'_>,
    redact: impl Fn(String) -> String,
) -> Result<Read, AgentError> {
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
        record_reply(&body);
        return parse_completion(&body, mode, tools, streams.text).map(Read::Reply);
    }
    let mut gate = DeltaGate::new(streams.text, mode, stream_answer);
    gate.calls = Some((streams.tool_call, tools));
    let mut partial: Vec<PartialCall> = Vec::new();
    // Server-sent events read by eventsource-stream: `data:` lines of one event joined (a
    // provider may split an event's JSON over several), comments and other fields skipped.
    let mut events = response.bytes_stream().eventsource();
    while let Some(event) = events.next().await {
        let event = event.map_err(|error| match error {
            eventsource_stream::EventStreamError::Transport(error) => AgentError::ProviderUnreachable(describe(&error)),
            other => AgentError::MalformedReply(format!("bad event stream: {other}")),
        })?;
        let data = event.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            break;
        }
        let event: Value = serde_json::from_str(data)
            .map_err(|error| AgentError::MalformedReply(format!("bad stream event: {error}")))?;
        if let Some(message) = event.pointer("/error/message").and_then(Value::as_str) {
            return Err(AgentError::ProviderStatus {
                status: 200,
                message: redact(message.chars().take(300).collect()),
            });
        }
        record_reply(&event);
        // Before the step's token reaches the gate: nothing of an answer asked again is shown.
        if let Some(odds) = watch.as_mut().and_then(|watch| watch.read(&event)) {
            return Ok(Read::CallLikelier(odds));
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
                if tools.contains(&slot.name.as_str()) {
                    if let Some(partial_args) = partial_object(&slot.arguments) {
                        (streams.tool_call)(ToolCallDelta { index, name: &slot.name, partial_args });
                    }
                }
            }
        }
    }
    Ok(Read::Reply(finish_reply(tools, partial, gate)))
}

/// The share of "yes" among the first token's likeliest choices that are "yes" or "no" (any
/// case, spaces around), from an OpenAI-style `choices[0].logprobs.content[0].top_logprobs`.
/// Each label's share of the first token's probability (its top choices, whitespace and case
/// aside), or `None` when none of them is among those choices.
fn label_shares(reply: &Value, labels: &[&str]) -> Option<Vec<f64>> {
    let choices = reply.pointer("/choices/0/logprobs/content/0/top_logprobs")?.as_array()?;
    let mut shares = vec![0.0; labels.len()];
    for choice in choices {
        let (Some(token), Some(logprob)) =
            (choice.get("token").and_then(Value::as_str), choice.get("logprob").and_then(Value::as_f64))
        else {
            continue;
        };
        if let Some(at) = labels.iter().position(|label| label.eq_ignore_ascii_case(token.trim())) {
            shares[at] += logprob.exp();
        }
    }
    let total: f64 = shares.iter().sum();
    (total > 0.0).then(|| shares.iter().map(|share| share / total).collect())
}

fn yes_share(reply: &Value) -> Option<f64> {
    let choices = reply.pointer("/choices/0/logprobs/content/0/top_logprobs")?.as_array()?;
    let (mut yes, mut no) = (0.0, 0.0);
    for choice in choices {
        let (Some(token), Some(logprob)) =
            (choice.get("token").and_then(Value::as_str), choice.get("logprob").and_then(Value::as_f64))
        else {
            continue;
        };
        match token.trim().to_ascii_lowercase().as_str() {
            "yes" => yes += logprob.exp(),
            "no" => no += logprob.exp(),
            _ => {}
        }
    }
    (yes + no > 0.0).then(|| yes / (yes + no))
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
        Box::pin(self.complete_inner(request, None, StepRule::AsWritten, Streams::text(on_delta)))
    }

    fn complete_streaming<'a>(
        &'a self,
        request: &'a ChatRequest,
        streams: Streams<'a>,
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>> {
        Box::pin(self.complete_inner(request, None, StepRule::AsWritten, streams))
    }

    fn complete_step<'a>(
        &'a self,
        request: &'a ChatRequest,
        rule: StepRule,
        streams: Streams<'a>,
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>> {
        Box::pin(self.complete_inner(request, None, rule, streams))
    }

    fn complete_json<'a>(
        &'a self,
        request: &'a ChatRequest,
        answer_schema: &'a Value,
        on_delta: DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>> {
        Box::pin(self.complete_inner(request, Some(answer_schema), StepRule::AsWritten, Streams::text(on_delta)))
    }

    fn yes_probability<'a>(&'a self, prompt: &'a str) -> BoxFuture<'a, Result<Option<f64>, AgentError>> {
        Box::pin(async move {
            let Some(reply) = self.first_token(prompt).await? else { return Ok(None) };
            let probability = yes_share(&reply);
            if probability.is_none() {
                tracing::info!(
                    "the provider gives no token probabilities for yes or no; checks that need them are off"
                );
                self.no_logprobs.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            Ok(probability)
        })
    }

    fn choice_probabilities<'a>(
        &'a self,
        prompt: &'a str,
        labels: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Option<Vec<f64>>, AgentError>> {
        Box::pin(async move {
            let Some(reply) = self.first_token(prompt).await? else { return Ok(None) };
            if reply.pointer("/choices/0/logprobs/content/0/top_logprobs").is_none() {
                tracing::info!("the provider gives no token probabilities; checks that need them are off");
                self.no_logprobs.store(true, std::sync::atomic::Ordering::Relaxed);
                return Ok(None);
            }
            Ok(label_shares(&reply, labels))
        })
    }

    fn prompt_budget(&self) -> BoxFuture<'_, Option<u32>> {
        Box::pin(async move {
            let window = *self
                .window
                .get_or_init(|| async {
                    let window = match self.config.context_tokens {
                        Some(tokens) => Some(tokens),
                        None => ask_window(&self.client, &self.config.base_url).await,
                    };
                    match window {
                        Some(tokens) => tracing::info!(tokens, "the model's context window"),
                        None => tracing::info!(
                            "the provider does not say its context window; a request it finds too long is shortened \
                             then (or set --context-tokens)"
                        ),
                    }
                    window
                })
                .await;
            // Room for the reply: its limit, or 1,024 tokens.
            window.map(|tokens| tokens.saturating_sub(self.config.max_tokens.unwrap_or(1024)))
        })
    }

    fn describe_mode(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(async move {
            match self.tool_mode().await {
                Ok((mode, why)) if self.config.tool_mode == ToolMode::Auto => {
                    Some(format!("tool mode auto: {} ({why})", mode.as_str()))
                }
                Ok((mode, _)) => Some(format!("tool mode {}", mode.as_str())),
                Err(error) => {
                    Some(format!("tool mode auto: the provider could not be asked ({error}); will ask again"))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_in_seconds_or_as_an_http_date() {
        assert_eq!(retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(" 0 "), Some(Duration::ZERO));
        let in_ten = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(10));
        let wait = retry_after(&in_ten).unwrap();
        assert!(wait > Duration::from_secs(8) && wait <= Duration::from_secs(10), "{wait:?}");
        assert_eq!(retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO), "a date past: at once");
        assert_eq!(retry_after("soon"), None);
    }

    #[test]
    fn endpoints_accept_bases_with_and_without_v1() {
        let endpoint = |base: &str| OpenAiConfig::new(base, "m").endpoint();
        assert_eq!(endpoint("http://127.0.0.1:8080"), "http://127.0.0.1:8080/v1/chat/completions");
        assert_eq!(endpoint("https://api.openai.com/v1/"), "https://api.openai.com/v1/chat/completions");
        assert_eq!(endpoint("http://h/v1/chat/completions"), "http://h/v1/chat/completions");
    }

    #[test]
    fn requests_name_the_tool_before_its_arguments() {
        let value =
            json!({"b": [1, {"arguments": {"z": 1, "name": "x"}, "name": "cart_add", "a": null}], "a": "\"q\""});
        let text = ordered_json(&value);
        assert_eq!(text, r#"{"a":"\"q\"","b":[1,{"name":"cart_add","arguments":{"name":"x","z":1},"a":null}]}"#);
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
    }

    #[test]
    fn label_shares_read_each_labels_share_of_the_first_token() {
        let reply = |choices: Value| json!({"choices": [{"logprobs": {"content": [{"top_logprobs": choices}]}}]});
        let shares = label_shares(
            &reply(json!([
                {"token": "A", "logprob": (0.5f64).ln()},
                {"token": " c", "logprob": (0.2f64).ln()},
                {"token": "The", "logprob": (0.2f64).ln()},
                {"token": "a", "logprob": (0.1f64).ln()},
            ])),
            &["A", "B", "C"],
        )
        .unwrap();
        assert!((shares[0] - 0.6 / 0.8).abs() < 1e-9 && shares[1] == 0.0 && (shares[2] - 0.2 / 0.8).abs() < 1e-9);
        assert_eq!(label_shares(&reply(json!([{"token": "Sure", "logprob": -0.1}])), &["A", "B"]), None);
    }

    #[test]
    fn yes_share_reads_the_first_tokens_probabilities() {
        let reply = |choices: Value| json!({"choices": [{"logprobs": {"content": [{"top_logprobs": choices}]}}]});
        let share = yes_share(&reply(json!([
            {"token": "Yes", "logprob": (0.6f64).ln()},
            {"token": " no", "logprob": (0.2f64).ln()},
            {"token": "yes", "logprob": (0.1f64).ln()},
            {"token": "Maybe", "logprob": (0.1f64).ln()},
        ])))
        .unwrap();
        assert!((share - 0.7 / 0.9).abs() < 1e-9, "{share}");
        assert_eq!(yes_share(&reply(json!([{"token": "Perhaps", "logprob": -0.1}]))), None);
        assert_eq!(yes_share(&json!({"choices": [{"message": {"content": "yes"}}]})), None);
    }

    #[test]
    fn the_api_key_never_appears_in_debug_output() {
        let mut config = OpenAiConfig::new("http://h", "m");
        config.api_key = Some("sk-secret-sentinel".into());
        assert!(!format!("{config:?}").contains("sk-secret-sentinel"));
    }

    fn gate_run(mode: ToolMode, stream_answer: bool, deltas: &[&str], tools: &[&str]) -> (ModelReply, String) {
        let streamed = Mutex::new(String::new());
        let sink = |d: &str| streamed.lock().unwrap().push_str(d);
        let mut gate = DeltaGate::new(&sink, mode, stream_answer);
        for delta in deltas {
            gate.push(delta);
        }
        let reply = finish_reply(tools, Vec::new(), gate);
        (reply, streamed.into_inner().unwrap())
    }

    #[test]
    fn prose_streams_calls_are_held_and_nothing_is_lost() {
        let (reply, streamed) = gate_run(
            ToolMode::Text,
            false,
            &["Sure, ", "adding it.\n```json\n{\"name\": \"cart_add\"", ", \"arguments\": {}}\n```\nDone."],
            &["cart_add"],
        );
        assert_eq!(reply.tool_calls.len(), 1);
        assert_eq!(streamed, "Sure, adding it.\n\nDone.");
        assert!(reply.raw.contains("```json"), "the history keeps what the model wrote");
        // JSON that names no listed tool reaches the user whole.
        let (reply, streamed) =
            gate_run(ToolMode::Text, false, &["{\"name\": \"other\",", " \"arguments\": {}}"], &["cart_add"]);
        assert_eq!((reply.tool_calls.len(), streamed.as_str()), (0, "{\"name\": \"other\", \"arguments\": {}}"));
        assert_eq!(reply.text, streamed);
    }

    #[test]
    fn a_constrained_answer_streams_as_it_is_written() {
        let seen = Mutex::new(Vec::new());
        let sink = |d: &str| seen.lock().unwrap().push(d.to_string());
        let mut gate = DeltaGate::new(&sink, ToolMode::Constrained, true);
        for delta in ["{\"ans", "wer\": \"Your cart", " has 2 \\u00", "d7 Red", " mug.\"}"] {
            gate.push(delta);
        }
        let reply = finish_reply(&["cart_add"], Vec::new(), gate);
        assert_eq!(reply.text, "Your cart has 2 × Red mug.");
        assert_eq!(seen.into_inner().unwrap(), ["Your cart", " has 2 ", "× Red", " mug."]);
        assert_eq!(reply.raw, "{\"answer\": \"Your cart has 2 \\u00d7 Red mug.\"}");
    }

    /// A tool with no arguments, for the prompt-shape tests.
    fn cart_add() -> ToolSpec {
        ToolSpec::new("cart_add", "Add.")
    }

    #[test]
    fn a_runs_later_turn_lists_its_first_tools_and_what_changed_after_its_messages() {
        let named = |name: &str, description: &str| ToolSpec {
            name: name.into(),
            description: description.into(),
            ..cart_add()
        };
        let first = vec![named("open_cart", "Open."), named("cart_add", "Add.")];
        let request = ChatRequest {
            messages: vec![
                ChatMessage::System { content: "sys".into() },
                ChatMessage::note(NoteKind::AppState, "[app state] cart: empty\n"),
                ChatMessage::User { content: "open my cart".into() },
                ChatMessage::Assistant {
                    content: "{}".into(),
                    tool_calls: vec![ModelToolCall { id: "1".into(), name: "open_cart".into(), arguments: json!({}) }],
                },
                ChatMessage::tool("1", "open_cart", ResultStatus::Ok, "opened"),
                ChatMessage::note(NoteKind::AppStateChanged, format!("{}- page: cart", crate::CONTEXT_CHANGED_LABEL)),
            ],
            tools: vec![named("open_cart", "Open."), named("checkout", "Pay.")],
            listed_tools: Some(first),
            question: false,
        };
        let tools: Vec<&ToolSpec> = request.tools.iter().collect();
        let turn =
            Turn { mode: ToolMode::Constrained, tools, answer: None, late: true, must_call: false, step_odds: false };
        let messages = prompted_messages(&request, &turn);
        let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "system", "user", "assistant", "user"]);
        // Before the request: the first turn's tools, word for word (a model server's cache keeps it).
        let listed = messages[1]["content"].as_str().unwrap();
        assert!(
            listed.starts_with("# Tools\n\nYou can call these tools now:\n- open_cart(): Open.\n- cart_add(): Add.\n"),
            "{listed}"
        );
        assert!(!listed.contains("checkout"));
        // After the run's messages: the result, what changed, then the request again; the tool
        // that came is not suggested.
        let tail = messages[4]["content"].as_str().unwrap();
        let at = |part: &str| tail.find(part).unwrap_or_else(|| panic!("{part:?} missing from {tail:?}"));
        assert!(at("[result of open_cart] opened") < at("[app state changed] - page: cart"));
        assert!(at("- page: cart") < at("(The request was: \"open my cart\"."));
        assert!(!tail.contains("checkout"));
    }

    #[test]
    fn late_tools_go_before_the_runs_request_and_leave_the_conversation_before_it_alone() {
        let tool = cart_add();
        let request = ChatRequest {
            messages: vec![
                ChatMessage::System { content: "sys".into() },
                ChatMessage::User { content: "hi".into() },
                ChatMessage::Assistant { content: "{\"answer\": \"Hello\"}".into(), tool_calls: vec![] },
                ChatMessage::note(NoteKind::AppState, "[app state] cart: empty\n"),
                ChatMessage::User { content: "add a mug".into() },
            ]
            .into_iter()
            .chain(added_a_mug())
            .collect(),
            tools: Vec::new(),
            ..ChatRequest::default()
        };
        let turn = Turn {
            mode: ToolMode::Constrained,
            tools: vec![&tool],
            answer: None,
            late: true,
            must_call: false,
            step_odds: false,
        };
        let messages = prompted_messages(&request, &turn);
        assert_eq!(roles(&messages), ["system", "user", "assistant", "system", "user", "assistant", "user"]);
        assert_eq!(messages[0]["content"], "sys", "the first system message is the instructions alone");
        assert!(
            messages[3]["content"]
                .as_str()
                .unwrap()
                .starts_with("# Tools\n\nYou can call these tools now:\n- cart_add(): Add.")
        );
        assert!(messages[4]["content"].as_str().unwrap().starts_with("[app state] cart: empty\n\nadd a mug"));
        // Without tools (a judge's turn), the instructions stay in the first system message.
        let turn = Turn {
            mode: ToolMode::Constrained,
            tools: vec![],
            answer: None,
            late: true,
            must_call: false,
            step_odds: false,
        };
        assert_eq!(prompted_messages(&request, &turn)[3]["role"], "user");
    }

    /// The model's call of `cart_add` and its result.
    fn added_a_mug() -> [ChatMessage; 2] {
        [
            ChatMessage::Assistant {
                content: "{}".into(),
                tool_calls: vec![ModelToolCall { id: "1".into(), name: "cart_add".into(), arguments: json!({}) }],
            },
            ChatMessage::tool("1", "cart_add", ResultStatus::Ok, "added"),
        ]
    }

    /// The roles of a prompt's messages.
    fn roles(messages: &[Value]) -> Vec<&str> {
        messages.iter().map(|m| m["role"].as_str().unwrap()).collect()
    }

    #[test]
    fn a_users_message_that_looks_like_tethers_labels_is_still_the_users_request() {
        // What a message is, is its variant: a user who writes "[hook …]" or "(The request was"
        // is still the one asking (read from the text, it was taken for a note and skipped).
        let tool = cart_add();
        for asked in ["[hook Stop] add a mug", "(The request was) add a mug", "[app state changed] add a mug"] {
            let mut messages =
                vec![ChatMessage::System { content: "sys".into() }, ChatMessage::User { content: asked.into() }];
            messages.extend(added_a_mug());
            let request = ChatRequest { messages, tools: Vec::new(), ..ChatRequest::default() };
            let turn = Turn {
                mode: ToolMode::Constrained,
                tools: vec![&tool],
                answer: None,
                late: true,
                must_call: false,
                step_odds: false,
            };
            let messages = prompted_messages(&request, &turn);
            assert_eq!(roles(&messages), ["system", "system", "user", "assistant", "user"], "{asked}");
            assert_eq!(messages[2]["content"], asked, "the tools go right before the request");
            let tail = messages[4]["content"].as_str().unwrap();
            assert!(tail.contains(&format!("(The request was: \"{asked}\".")), "{tail}");
        }
    }

    #[test]
    fn done_so_far_reads_the_results_status_not_its_text() {
        let call = |id: &str, name: &str| ChatMessage::Assistant {
            content: String::new(),
            tool_calls: vec![ModelToolCall { id: id.into(), name: name.into(), arguments: json!({}) }],
        };
        let run = [
            ChatMessage::User { content: "list, clear and sort".into() },
            call("1", "todo_list"),
            // A result whose text opens like a refusal: its status says it succeeded.
            ChatMessage::tool("1", "todo_list", ResultStatus::Ok, "[denied] and [error] are two of the items"),
            call("2", "todo_clear"),
            ChatMessage::tool("2", "todo_clear", ResultStatus::Error, "[error] the list is locked"),
            call("3", "todo_sort"),
            ChatMessage::tool("3", "todo_sort", ResultStatus::Ok, "sorted"),
        ];
        assert_eq!(done_in_run(&run), ["todo_list {}", "todo_sort {}"]);
    }

    #[test]
    fn after_a_refused_call_the_reminder_says_not_to_try_another_way() {
        assert!(reminder("Place my order.", &[], false, false).contains("If part of it is not done yet"));
        let done = ["cart_add {\"productId\":\"mug-blue\"}".to_string()];
        assert_eq!(
            reminder("Add a blue mug and a red mug.", &done, false, false),
            "(The request was: \"Add a blue mug and a red mug.\". Done so far: cart_add {\"productId\":\"mug-blue\"}. \
             What the request asks that is not done yet: call the tool for it now. When everything is done, answer.)"
        );
        let refused = reminder("Place my order.", &done, true, false);
        assert!(refused.contains("That call was refused: do not try it again or another way"), "{refused}");
        // Refused for good: by the user or a policy (`denied`, `blocked`), not by a check that asks for another call.
        assert!(refused_by_user(ResultStatus::Denied, false) && refused_by_user(ResultStatus::Blocked, false));
        assert!(!refused_by_user(ResultStatus::Denied, true), "the loop's own check asks for another call");
        assert!(!refused_by_user(ResultStatus::Error, false) && !refused_by_user(ResultStatus::Ok, false));
    }

    #[test]
    fn a_questions_run_is_asked_to_answer_from_the_results_not_for_what_is_not_done() {
        let done = ["cart_view {}".to_string()];
        let asked = reminder("What's in my cart?", &done, false, true);
        assert_eq!(asked, format!("(The question was: \"What's in my cart?\". {QUESTION_REMINDER})"));
        assert!(!asked.contains(NOT_DONE_YET), "{asked}");
        // A refusal is a refusal in a question's run too.
        assert!(reminder("What's in my cart?", &done, true, true).contains(REMINDER_AFTER_REFUSAL));
    }

    #[test]
    fn after_the_loops_own_refusal_the_reminder_asks_for_what_is_not_done() {
        // "Cancel lunch with Ana." → move_event, refused by the fit check, which names the way
        // on: the reminder must not then tell the model to try no other way.
        let refused = |by_check: bool| {
            let messages = vec![
                ChatMessage::User { content: "Cancel lunch with Ana.".into() },
                ChatMessage::Assistant {
                    content: String::new(),
                    tool_calls: vec![ModelToolCall { id: "1".into(), name: "move_event".into(), arguments: json!({}) }],
                },
                ChatMessage::Tool {
                    call_id: "1".into(),
                    name: "move_event".into(),
                    status: ResultStatus::Denied,
                    call_again: by_check,
                    content: "[denied] Not run: the user's message does not ask for what move_event does.".into(),
                },
            ];
            let request = ChatRequest { messages, tools: Vec::new(), ..ChatRequest::default() };
            let turn = Turn {
                mode: ToolMode::Constrained,
                tools: Vec::new(),
                answer: None,
                late: false,
                must_call: false,
                step_odds: false,
            };
            prompted_messages(&request, &turn).last().unwrap()["content"].as_str().unwrap().to_string()
        };
        let by_check = refused(true);
        assert!(
            by_check.ends_with(&format!("(The request was: \"Cancel lunch with Ana.\". {REMINDER})")),
            "{by_check}"
        );
        let by_user = refused(false);
        assert!(by_user.ends_with(&format!("{REMINDER_AFTER_REFUSAL})")), "{by_user}");
    }

    #[test]
    fn prompted_history_keeps_what_the_model_wrote_and_labels_results() {
        let request = ChatRequest {
            messages: vec![
                ChatMessage::System { content: "sys".into() },
                ChatMessage::User { content: "add a mug".into() },
                ChatMessage::Assistant {
                    content: "{\"name\": \"cart_add\", \"arguments\": {\"productId\": \"mug-red\"}}\nDone.".into(),
                    tool_calls: vec![ModelToolCall {
                        id: "1".into(),
                        name: "cart_add".into(),
                        arguments: json!({"productId": "mug-red"}),
                    }],
                },
                ChatMessage::tool("1", "cart_add", ResultStatus::Ok, "added 1 × Red mug"),
            ],
            tools: Vec::new(),
            ..ChatRequest::default()
        };
        let tool = cart_add();
        let turn = Turn {
            mode: ToolMode::Constrained,
            tools: vec![&tool],
            answer: None,
            late: false,
            must_call: false,
            step_odds: false,
        };
        let messages = prompted_messages(&request, &turn);
        assert_eq!(messages.len(), 4);
        assert_eq!(
            messages[2]["content"],
            "{\"name\": \"cart_add\", \"arguments\": {\"productId\": \"mug-red\"}}\nDone."
        );
        assert_eq!(
            messages[3]["content"],
            "[result of cart_add] added 1 × Red mug\n(The request was: \"add a mug\". Done so far: cart_add \
             {\"productId\":\"mug-red\"}. What the request asks that is not done yet: call the tool for it now. When \
             everything is done, answer.)"
        );
        let system = messages[0]["content"].as_str().unwrap();
        assert!(
            system.starts_with("sys\n\n# Tools\n\nYou can call these tools now:\n- cart_add(): Add.\n"),
            "{system}"
        );
    }
}
