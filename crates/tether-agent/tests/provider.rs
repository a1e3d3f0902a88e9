//! The OpenAI-compatible provider against a local mock server: the recorded replies of a small
//! model, streaming, retries, and every kind of failure as a clear error.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tether_agent::*;
use tether_protocol::{ResultStatus, ToolSpec};

mod recorded;
use recorded::{Mock, assert_sent_as_recorded, local_provider, replay_or_record, storefront_home};

type Handler = Arc<dyn Fn(usize, &HeaderMap, &Value) -> Response + Send + Sync>;

async fn mock(handler: Handler) -> Mock {
    let requests: Arc<Mutex<Vec<(HeaderMap, Value)>>> = Arc::default();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |headers: HeaderMap, body: String| {
            let (handler, seen, count) = (handler.clone(), seen.clone(), count.clone());
            async move {
                let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let n = count.fetch_add(1, Ordering::SeqCst);
                let response = handler(n, &headers, &body);
                seen.lock().unwrap().push((headers, body));
                response
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Mock { base, requests, raw: Arc::default() }
}

fn provider(base: &str) -> OpenAiProvider {
    provider_in(base, ToolMode::Native)
}

fn provider_in(base: &str, mode: ToolMode) -> OpenAiProvider {
    let mut config = OpenAiConfig::new(base, "qwen2.5-coder-1.5b-instruct-q4_k_m");
    config.retry_delay = Duration::from_millis(5);
    config.tool_mode = mode;
    OpenAiProvider::new(config).unwrap()
}

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/model-replies/{name}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The fixture's request as our conversation types.
fn request_of(fixture: &Value) -> ChatRequest {
    let messages = fixture["request"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m["role"].as_str().unwrap() {
            "user" => ChatMessage::User { content: m["content"].as_str().unwrap().into() },
            "tool" => ChatMessage::tool(
                m["tool_call_id"].as_str().unwrap(),
                String::new(),
                ResultStatus::Ok,
                m["content"].as_str().unwrap(),
            ),
            "assistant" => ChatMessage::Assistant {
                content: m["content"].as_str().unwrap_or_default().into(),
                tool_calls: m["tool_calls"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| ModelToolCall {
                        id: c["id"].as_str().unwrap().into(),
                        name: c["function"]["name"].as_str().unwrap().into(),
                        arguments: serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap(),
                    })
                    .collect(),
            },
            other => panic!("role {other}"),
        })
        .collect();
    let tools = fixture["request"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            ToolSpec::new(t["function"]["name"].as_str().unwrap(), t["function"]["description"].as_str().unwrap())
                .with_parameters(t["function"]["parameters"].clone())
        })
        .collect();
    ChatRequest { messages, tools, ..ChatRequest::default() }
}

async fn complete(provider: &OpenAiProvider, request: &ChatRequest) -> (Result<ModelReply, AgentError>, String) {
    let streamed = Mutex::new(String::new());
    let on_delta = |d: &str| streamed.lock().unwrap().push_str(d);
    let reply = provider.complete(request, &on_delta).await;
    (reply, streamed.into_inner().unwrap())
}

/// A recording: the fixture, the tool called, the arguments expected.
type Recording = (&'static str, &'static str, fn() -> Value);

/// The fixtures recorded with `tools` in the request (the provider's native tool calling): the
/// model wrote every call into its text.
const NATIVE_RECORDINGS: [Recording; 5] = [
    ("cart_tool_call", "cart_add", || json!({"productId": "mug-red", "quantity": 2})),
    ("trains_tool_call", "book_ticket", || json!({"train": 12345, "seat_class": "first"})),
    ("after_refusal", "book_ticket", || json!({"train": 412, "seat_class": "tourist"})),
    ("after_tool_result", "book_ticket", || json!({"train": 412, "seat_class": "first"})),
    ("no_tool_needed", "find_trains", || json!({"to": "New York", "date": "2023-10-05"})),
];

#[tokio::test]
async fn recorded_small_model_replies_become_the_right_tool_calls_when_read_as_text() {
    for (name, tool, args) in NATIVE_RECORDINGS {
        let recorded = fixture(name);
        let response = recorded["response"].clone();
        let mock = mock(Arc::new(move |_, _, _| axum::Json(response.clone()).into_response())).await;
        let request = request_of(&recorded);
        let (reply, streamed) = complete(&provider_in(&mock.base, ToolMode::Text), &request).await;
        let reply = reply.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(reply.tool_calls.len(), 1, "{name}");
        assert_eq!((reply.tool_calls[0].name.as_str(), &reply.tool_calls[0].arguments), (tool, &args()), "{name}");
        assert_eq!(streamed, "", "{name}: a tool call written as text must not reach the user");
        let content = recorded["response"]["choices"][0]["message"]["content"].as_str().unwrap();
        assert_eq!(reply.raw, content, "{name}: the conversation keeps what the model wrote");
        // Text mode lists the tools in the prompt, not in `tools`.
        let sent = mock.requests.lock().unwrap()[0].1.clone();
        assert!(sent.get("tools").is_none(), "{name}");
        let system = sent["messages"][0]["content"].as_str().unwrap().to_string();
        assert!(system.contains(&format!("- {tool}(")), "{name}: {system}");
    }
}

#[tokio::test]
async fn in_native_mode_only_tool_calls_are_calls_and_the_request_is_as_recorded() {
    for (name, _, _) in NATIVE_RECORDINGS {
        let recorded = fixture(name);
        let response = recorded["response"].clone();
        let mock = mock(Arc::new(move |_, _, _| axum::Json(response.clone()).into_response())).await;
        let request = request_of(&recorded);
        let (reply, streamed) = complete(&provider_in(&mock.base, ToolMode::Native), &request).await;
        let reply = reply.unwrap_or_else(|e| panic!("{name}: {e}"));
        // What a client reading only `tool_calls` gets from this model: no call, the JSON as text.
        let content = recorded["response"]["choices"][0]["message"]["content"].as_str().unwrap();
        assert!(reply.tool_calls.is_empty(), "{name}");
        assert_eq!((reply.text.as_str(), streamed.as_str()), (content.trim(), content), "{name}");
        // What we sent is what the model was recorded answering.
        let sent = mock.requests.lock().unwrap()[0].1.clone();
        assert_eq!(normalized(&sent["messages"]), normalized(&recorded["request"]["messages"]), "{name}");
        assert_eq!(sent["tools"], recorded["request"]["tools"], "{name}");
        assert_eq!(sent["model"], recorded["request"]["model"], "{name}");
    }
}

/// Messages with each tool call's `arguments` string parsed, so that equal JSON compares equal.
fn normalized(messages: &Value) -> Value {
    let mut messages = messages.clone();
    for message in messages.as_array_mut().unwrap() {
        for call in message.get_mut("tool_calls").and_then(Value::as_array_mut).into_iter().flatten() {
            let arguments = call["function"]["arguments"].as_str().unwrap().to_string();
            call["function"]["arguments"] = serde_json::from_str(&arguments).unwrap();
        }
    }
    messages
}

fn sse(events: &[Value]) -> Response {
    let mut body = String::new();
    for event in events {
        body.push_str(&format!("data: {event}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], body).into_response()
}

#[tokio::test]
async fn streamed_text_arrives_as_deltas_and_streamed_tool_calls_are_assembled() {
    let mock = mock(Arc::new(|n, _, _| {
        if n == 0 {
            sse(&[
                json!({"choices": [{"delta": {"content": "Your cart "}}]}),
                json!({"choices": [{"delta": {"content": "has one mug."}}]}),
            ])
        } else {
            sse(&[
                json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_9", "function": {"name": "cart_", "arguments": "{\"productId\":"}}]}}]}),
                json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "add", "arguments": "\"mug-red\"}"}}]}}]}),
            ])
        }
    }))
    .await;
    let provider = provider(&mock.base);
    let (reply, streamed) = complete(&provider, &ChatRequest::default()).await;
    let reply = reply.unwrap();
    assert_eq!((reply.text.as_str(), streamed.as_str()), ("Your cart has one mug.", "Your cart has one mug."));
    let (reply, _) = complete(&provider, &ChatRequest::default()).await;
    let reply = reply.unwrap();
    assert_eq!(reply.tool_calls[0].name, "cart_add");
    assert_eq!(reply.tool_calls[0].arguments, json!({"productId": "mug-red"}));
    assert_eq!(mock.requests.lock().unwrap()[0].1["stream"], true);
}

#[tokio::test]
async fn an_event_stream_is_read_as_the_standard_says_whatever_its_line_breaks_and_extras() {
    // One event's JSON over two `data:` lines (joined by a line break, which JSON allows between
    // tokens), CRLF line ends, a comment (a keep-alive), an `event:` and an `id:` field, an
    // event with no data, and `data:` without the space: all as the SSE standard reads them.
    let body = "data: {\"choices\": [{\"delta\":\r\ndata: {\"content\": \"Your cart \"}}]}\r\n\r\n\
                : keep-alive\r\n\r\n\
                event: message\nid: 7\ndata:{\"choices\": [{\"delta\": {\"content\": \"has one mug.\"}}]}\n\n\
                event: ping\n\n\
                data: [DONE]\n\n";
    let mock = mock(Arc::new(move |_, _, _| ([("content-type", "text/event-stream")], body).into_response())).await;
    let (reply, streamed) = complete(&provider(&mock.base), &ChatRequest::default()).await;
    assert_eq!(reply.unwrap().text, "Your cart has one mug.");
    assert_eq!(streamed, "Your cart has one mug.");
}

#[tokio::test]
async fn a_streamed_json_block_is_held_back_and_becomes_a_tool_call() {
    let mock = mock(Arc::new(|_, _, _| {
        sse(&[
            json!({"choices": [{"delta": {"content": "```json\n{\"name\": \"cart_view\","}}]}),
            json!({"choices": [{"delta": {"content": " \"arguments\": {}}\n```"}}]}),
        ])
    }))
    .await;
    let request = ChatRequest {
        messages: vec![],
        tools: vec![spec("cart_view", json!({"type": "object"}))],
        ..ChatRequest::default()
    };
    let (reply, streamed) = complete(&provider_in(&mock.base, ToolMode::Text), &request).await;
    let reply = reply.unwrap();
    assert_eq!(streamed, "");
    assert_eq!(reply.tool_calls[0].name, "cart_view");
}

/// The tool calls passed on while written: (index, name, arguments so far).
async fn complete_streaming(
    provider: &OpenAiProvider,
    request: &ChatRequest,
) -> (Result<ModelReply, AgentError>, Vec<(usize, String, Value)>) {
    let written = Mutex::new(Vec::new());
    let on_call = |delta: ToolCallDelta<'_>| {
        written.lock().unwrap().push((delta.index, delta.name.to_string(), delta.partial_args));
    };
    let reply = provider.complete_streaming(request, Streams { text: &|_| {}, tool_call: &on_call }).await;
    (reply, written.into_inner().unwrap())
}

#[tokio::test]
async fn native_tool_call_arguments_are_passed_on_as_they_stream() {
    let mock = mock(Arc::new(|_, _, _| {
        sse(&[
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "cart_", "arguments": ""}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "add", "arguments": "{\"productId\":"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": " \"mug-"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "red\", \"quantity\": 2}"}}]}}]}),
        ])
    }))
    .await;
    let request = ChatRequest { tools: vec![tool("cart_add")], ..ChatRequest::default() };
    let (reply, written) = complete_streaming(&provider(&mock.base), &request).await;
    assert_eq!(reply.unwrap().tool_calls[0].arguments, json!({"productId": "mug-red", "quantity": 2}));
    let args: Vec<&Value> = written.iter().map(|(_, _, args)| args).collect();
    assert_eq!(args, [&json!({}), &json!({"productId": "mug-"}), &json!({"productId": "mug-red", "quantity": 2})]);
    assert!(written.iter().all(|(index, name, _)| *index == 0 && name == "cart_add"), "{written:?}");
}

#[tokio::test]
async fn a_call_written_as_text_is_passed_on_as_it_is_written_and_nothing_of_it_reaches_the_user() {
    let mock = mock(Arc::new(|_, _, _| {
        sse(&[
            json!({"choices": [{"delta": {"content": "{\"name\": \"cart_a"}}]}),
            json!({"choices": [{"delta": {"content": "dd\", \"arguments\": {\"productId\": \"mug"}}]}),
            json!({"choices": [{"delta": {"content": "-red\"}}"}}]}),
        ])
    }))
    .await;
    let request = ChatRequest { tools: vec![tool("cart_add"), tool("cart_a")], ..ChatRequest::default() };
    let streamed = Mutex::new(String::new());
    let written = Mutex::new(Vec::new());
    let on_text = |d: &str| streamed.lock().unwrap().push_str(d);
    let on_call = |delta: ToolCallDelta<'_>| written.lock().unwrap().push((delta.name.to_string(), delta.partial_args));
    let provider = provider_in(&mock.base, ToolMode::Constrained);
    let reply = provider.complete_streaming(&request, Streams { text: &on_text, tool_call: &on_call }).await.unwrap();
    assert_eq!(reply.tool_calls[0].name, "cart_add");
    assert_eq!(streamed.into_inner().unwrap(), "");
    // The half-written name "cart_a" (another tool's name) is never taken for the call: a call
    // is passed on once its arguments have begun.
    assert_eq!(
        written.into_inner().unwrap(),
        [
            ("cart_add".to_string(), json!({"productId": "mug"})),
            ("cart_add".to_string(), json!({"productId": "mug-red"}))
        ]
    );
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec::new(name, String::new())
}

#[tokio::test]
async fn json_that_names_no_listed_tool_is_the_answer_and_reaches_the_user_whole() {
    // Held back while it might be a call, then released in full: nothing of it is lost.
    let answer = "```json\n{\"name\": \"Ada\", \"arguments\": {\"age\": 36}}\n```";
    let (first, second) = answer.split_at(20);
    let (first, second) = (first.to_string(), second.to_string());
    let mock = mock(Arc::new(move |n, _, _| {
        if n == 0 {
            sse(&[
                json!({"choices": [{"delta": {"content": first}}]}),
                json!({"choices": [{"delta": {"content": second}}]}),
            ])
        } else {
            // Not streamed: a call of a tool this request did not list.
            axum::Json(json!({"choices": [{"message": {"content": "{\"name\": \"cart_clear\", \"arguments\": {}}"}}]}))
                .into_response()
        }
    }))
    .await;
    let provider = provider(&mock.base);
    let request = ChatRequest {
        messages: Vec::new(),
        tools: vec![tool("cart_view"), tool("cart_add")],
        ..ChatRequest::default()
    };
    let (reply, streamed) = complete(&provider, &request).await;
    let reply = reply.unwrap();
    assert!(reply.tool_calls.is_empty() && reply.malformed_tool_call.is_none(), "{reply:?}");
    assert_eq!((reply.text.as_str(), streamed.as_str()), (answer, answer));
    let (reply, streamed) = complete(&provider, &request).await;
    let reply = reply.unwrap();
    assert!(reply.tool_calls.is_empty(), "cart_clear was not offered: {reply:?}");
    assert_eq!(streamed, "{\"name\": \"cart_clear\", \"arguments\": {}}");
}

#[tokio::test]
async fn busy_answers_are_retried_a_bounded_number_of_times() {
    let mock = mock(Arc::new(|n, _, _| {
        if n < 2 {
            (StatusCode::TOO_MANY_REQUESTS, "slow down").into_response()
        } else {
            axum::Json(json!({"choices": [{"message": {"role": "assistant", "content": "fine"}}]})).into_response()
        }
    }))
    .await;
    let (reply, _) = complete(&provider(&mock.base), &ChatRequest::default()).await;
    assert_eq!(reply.unwrap().text, "fine");
    assert_eq!(mock.requests.lock().unwrap().len(), 3);

    let mock = self::mock(Arc::new(|_, _, _| {
        (StatusCode::BAD_GATEWAY, "{\"error\":{\"message\":\"upstream down\"}}").into_response()
    }))
    .await;
    let (reply, _) = complete(&provider(&mock.base), &ChatRequest::default()).await;
    assert_eq!(reply.unwrap_err(), AgentError::ProviderStatus { status: 502, message: "upstream down".into() });
    assert_eq!(mock.requests.lock().unwrap().len(), 4, "1 try + 3 retries");
}

#[tokio::test]
async fn a_busy_providers_retry_after_is_honoured() {
    // The retry delay is 5 ms; the provider asks for a second: the retry waits for it.
    let arrived: Arc<Mutex<Vec<std::time::Instant>>> = Arc::default();
    let seen = arrived.clone();
    let mock = mock(Arc::new(move |n, _, _| {
        seen.lock().unwrap().push(std::time::Instant::now());
        if n == 0 {
            (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")], "slow down").into_response()
        } else {
            axum::Json(json!({"choices": [{"message": {"role": "assistant", "content": "fine"}}]})).into_response()
        }
    }))
    .await;
    let (reply, _) = complete(&provider(&mock.base), &ChatRequest::default()).await;
    assert_eq!(reply.unwrap().text, "fine");
    let arrived = arrived.lock().unwrap();
    assert_eq!(arrived.len(), 2);
    assert!(arrived[1] - arrived[0] >= Duration::from_secs(1), "retried after {:?}", arrived[1] - arrived[0]);
}

#[tokio::test]
async fn client_errors_are_not_retried_and_say_why() {
    let mock = mock(Arc::new(|_, _, _| {
        (StatusCode::BAD_REQUEST, "{\"error\":{\"message\":\"model not found\"}}").into_response()
    }))
    .await;
    let (reply, _) = complete(&provider(&mock.base), &ChatRequest::default()).await;
    let error = reply.unwrap_err();
    assert_eq!(error.to_string(), "model provider returned HTTP 400: model not found");
    assert_eq!(mock.requests.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn malformed_bodies_and_unreachable_providers_are_clear_errors() {
    let mock =
        mock(Arc::new(|_, _, _| ([("content-type", "application/json")], "not json at all").into_response())).await;
    let (reply, _) = complete(&provider(&mock.base), &ChatRequest::default()).await;
    assert!(matches!(reply, Err(AgentError::MalformedReply(_))), "{reply:?}");

    let mock = self::mock(Arc::new(|_, _, _| axum::Json(json!({"nothing": true})).into_response())).await;
    let (reply, _) = complete(&provider(&mock.base), &ChatRequest::default()).await;
    assert!(matches!(reply, Err(AgentError::MalformedReply(_))), "{reply:?}");

    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let (reply, _) = complete(&provider(&format!("http://{closed}")), &ChatRequest::default()).await;
    assert!(matches!(reply, Err(AgentError::ProviderUnreachable(_))), "{reply:?}");
}

#[tokio::test]
async fn a_request_that_got_no_answer_is_sent_again() {
    // A provider that closes the first connection after reading the request, without a word
    // (what llama.cpp's server does to a kept-alive connection it dropped), then answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let served = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut requests = 0;
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buffer = vec![0; 65536];
            let _ = socket.read(&mut buffer).await.unwrap();
            requests += 1;
            if requests == 1 {
                drop(socket);
                continue;
            }
            let body = r#"{"choices": [{"message": {"content": "hi"}}]}"#;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            socket.write_all(format!("{head}{body}").as_bytes()).await.unwrap();
            return requests;
        }
    });
    let (reply, _) = complete(&provider(&base), &ChatRequest::default()).await;
    assert_eq!(reply.unwrap().text, "hi");
    assert_eq!(served.await.unwrap(), 2, "asked once, then again");
}

#[tokio::test]
async fn the_api_key_is_sent_as_a_bearer_token() {
    let mock =
        mock(Arc::new(|_, _, _| axum::Json(json!({"choices": [{"message": {"content": "hi"}}]})).into_response()))
            .await;
    let mut config = OpenAiConfig::new(&mock.base, "m");
    config.api_key = Some("sk-test-123".into());
    let provider = OpenAiProvider::new(config).unwrap();
    let (reply, _) = complete(&provider, &ChatRequest::default()).await;
    assert_eq!(reply.unwrap().text, "hi");
    let headers = &mock.requests.lock().unwrap()[0].0;
    assert_eq!(headers["authorization"], "Bearer sk-test-123");
}

#[tokio::test]
async fn a_provider_failure_ends_the_run_with_a_clear_error() {
    let mock = mock(Arc::new(|_, _, _| {
        (StatusCode::UNAUTHORIZED, "{\"error\":{\"message\":\"invalid api key\"}}").into_response()
    }))
    .await;
    let agent = AgentLoop::new(Arc::new(provider(&mock.base)));
    let no_tools = tether_scripted::Page::new(Vec::new());
    let on_delta = |_: &str| {};
    let on_event = |_| {};
    let outcome = agent
        .run(&no_tools, &RunSink { on_delta: &on_delta, on_event: &on_event }, &"r".into(), "hi", Vec::new())
        .await;
    assert_eq!(outcome.status, tether_protocol::RunStatus::Failed);
    assert_eq!(outcome.error.as_deref(), Some("model provider returned HTTP 401: invalid api key"));
}

fn spec(name: &str, parameters: Value) -> ToolSpec {
    ToolSpec::new(name, format!("The {name} tool.")).with_parameters(parameters)
}

fn conversation(user: &str) -> Vec<ChatMessage> {
    vec![ChatMessage::System { content: DEFAULT_SYSTEM_PROMPT.into() }, ChatMessage::User { content: user.into() }]
}

#[tokio::test]
async fn a_constrained_turn_sends_one_alternative_per_tool_and_the_answer_and_reads_the_call() {
    let mock = replay_or_record("constrained_add_two_red_mugs").await;
    let request = ChatRequest {
        messages: conversation("Add two red mugs to my cart."),
        tools: storefront_home(),
        ..ChatRequest::default()
    };
    let (reply, streamed) = complete(&local_provider(&mock.base, ToolMode::Constrained), &request).await;
    let reply = reply.unwrap();
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(
        (reply.tool_calls[0].name.as_str(), &reply.tool_calls[0].arguments),
        ("cart_add", &json!({"productId": "mug-red", "quantity": 2}))
    );
    assert_eq!(streamed, "");
    let sent = mock.requests.lock().unwrap()[0].1.clone();
    assert!(sent.get("tools").is_none());
    let schema = &sent["response_format"]["json_schema"]["schema"];
    let names: Vec<Value> =
        schema["anyOf"].as_array().unwrap().iter().map(|a| a["properties"]["next"]["const"].clone()).collect();
    assert_eq!(names, [json!("navigate"), json!("product_view"), json!("cart_add"), json!("answer")]);
    assert_eq!(schema["anyOf"][3]["required"], json!(["next", "answer"]));
    // The grammar makes the model write the keys in the order sent: the step (the tool's name)
    // first (with `arguments` first, the recorded model answered "Two red mugs have been added"
    // instead).
    let raw = mock.raw.lock().unwrap()[0].clone();
    assert!(raw.contains(r#""properties":{"next":{"const":"cart_add","type":"string"},"arguments":{"#), "{raw}");
    assert_sent_as_recorded(&mock, "constrained_add_two_red_mugs");
}

#[tokio::test]
async fn a_constrained_answer_after_a_short_result_reaches_the_user() {
    let mut messages = conversation("Add two red mugs to my cart.");
    messages.push(ChatMessage::Assistant {
        content: "{\"next\": \"cart_add\", \"arguments\": {\"productId\": \"mug-red\", \"quantity\": 2}}".into(),
        tool_calls: vec![ModelToolCall {
            id: "r1.1.0".into(),
            name: "cart_add".into(),
            arguments: json!({"productId": "mug-red", "quantity": 2}),
        }],
    });
    messages.push(ChatMessage::tool(
        "r1.1.0",
        "cart_add",
        ResultStatus::Ok,
        "added 2 × Red mug; cart: 2 items (2 × Red mug)",
    ));
    let request = ChatRequest { messages, tools: storefront_home(), ..ChatRequest::default() };
    let mock = replay_or_record("constrained_answer_after_result").await;
    let (reply, streamed) = complete(&local_provider(&mock.base, ToolMode::Constrained), &request).await;
    let reply = reply.unwrap();
    assert!(reply.tool_calls.is_empty(), "{reply:?}");
    assert!(reply.text.contains("2") && reply.text.to_lowercase().contains("red mug"), "{}", reply.text);
    assert_eq!(streamed, reply.text, "the answer's string streams, not its JSON");
    assert!(reply.raw.starts_with("{\"next\": \"answer\""), "{}", reply.raw);
    // The result reached the model as labelled user text, the call as the model wrote it.
    let sent = mock.requests.lock().unwrap()[0].1.clone();
    let roles: Vec<&str> = sent["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    // The tools come right before the run's request, after the instructions.
    assert_eq!(roles, ["system", "system", "user", "assistant", "user"]);
    assert!(sent["messages"][1]["content"].as_str().unwrap().starts_with("# Tools"));
    assert!(sent["messages"][4]["content"].as_str().unwrap().starts_with("[result of cart_add] added 2 × Red mug"));
    assert_sent_as_recorded(&mock, "constrained_answer_after_result");
}

#[tokio::test]
async fn a_text_turn_reads_the_call_the_model_wrote() {
    let mock = replay_or_record("text_add_black_tshirts").await;
    let request = ChatRequest {
        messages: conversation("Put 3 black T-shirts in my cart, please."),
        tools: storefront_home(),
        ..ChatRequest::default()
    };
    let (reply, streamed) = complete(&local_provider(&mock.base, ToolMode::Text), &request).await;
    let reply = reply.unwrap();
    assert_eq!(reply.tool_calls.len(), 1, "{reply:?}");
    assert_eq!(reply.tool_calls[0].arguments, json!({"productId": "tee-black", "quantity": 3}));
    assert!(!streamed.contains("cart_add"), "the call never reaches the user: {streamed:?}");
    assert_sent_as_recorded(&mock, "text_add_black_tshirts");
}

#[tokio::test]
async fn auto_asks_the_provider_once_and_chooses_constrained_for_llama_cpp() {
    let mock = replay_or_record("auto_probe_llama_cpp").await;
    let provider = local_provider(&mock.base, ToolMode::Auto);
    let said = provider.describe_mode().await.unwrap();
    assert_eq!(said, "tool mode auto: constrained (the provider honours response_format json_schema)");
    let request = ChatRequest {
        messages: conversation("Add the blue mug to my cart."),
        tools: storefront_home(),
        ..ChatRequest::default()
    };
    let (reply, _) = complete(&provider, &request).await;
    let reply = reply.unwrap();
    assert_eq!(reply.tool_calls[0].name, "cart_add");
    let sent: Vec<Value> = mock.requests.lock().unwrap().iter().map(|(_, body)| body.clone()).collect();
    assert_eq!(sent.len(), 2, "one probe, then the turn");
    assert!(sent[1].get("response_format").is_some());
    assert_sent_as_recorded(&mock, "auto_probe_llama_cpp");
}

#[tokio::test]
async fn auto_chooses_native_when_the_provider_fills_tool_calls_and_text_when_nothing_works() {
    // An OpenAI-like provider: refuses a root `anyOf` schema, answers tools in `tool_calls`.
    let mock = mock(Arc::new(|_, _, body| {
        if body.get("response_format").is_some() {
            return (StatusCode::BAD_REQUEST, "{\"error\":{\"message\":\"schema must be an object\"}}").into_response();
        }
        axum::Json(json!({"choices": [{"message": {"content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "ping", "arguments": "{}"}}]}}]})).into_response()
    }))
    .await;
    let provider = provider_in(&mock.base, ToolMode::Auto);
    assert_eq!(provider.tool_mode().await.unwrap().0, ToolMode::Native);
    assert_eq!(provider.tool_mode().await.unwrap().0, ToolMode::Native);
    assert_eq!(mock.requests.lock().unwrap().len(), 2, "asked once");
    // A provider that ignores both: text.
    let mock = self::mock(Arc::new(|_, _, _| {
        axum::Json(json!({"choices": [{"message": {"content": "pong"}}]})).into_response()
    }))
    .await;
    assert_eq!(provider_in(&mock.base, ToolMode::Auto).tool_mode().await.unwrap().0, ToolMode::Text);
}

#[tokio::test]
async fn a_judge_in_constrained_mode_is_held_to_its_verdict_schema() {
    let mock = replay_or_record("judge_constrained_stop").await;
    let judge_schema = json!({"anyOf": [
        {"type": "object", "properties": {"ok": {"const": true}}, "required": ["ok"], "additionalProperties": false},
        {"type": "object", "properties": {"ok": {"const": false}, "reason": {"type": "string"}}, "required": ["ok", "reason"], "additionalProperties": false}
    ]});
    let prompt = "You review the final answer of an assistant before it reaches the user.\n\n{\"final_output\": \"Added 2 red mugs to your cart.\", \"hook_event_name\": \"Stop\"}\n\nThe answer (final_output) must end with \"=== RESPONSE COMPLETE ===\".\nIf it does, respond with {\"ok\": true}.\nIf it does not, respond with {\"ok\": false, \"reason\": \"...\"} and say what to add.";
    let request = ChatRequest {
        messages: vec![
            ChatMessage::System {
                content: "You are a hook that checks an AI agent's work. Answer with one JSON object.".into(),
            },
            ChatMessage::User { content: prompt.into() },
        ],
        tools: Vec::new(),
        ..ChatRequest::default()
    };
    let provider = local_provider(&mock.base, ToolMode::Constrained);
    let ignore = |_: &str| {};
    let reply = provider.complete_json(&request, &judge_schema, &ignore).await.unwrap();
    let verdict: Value = serde_json::from_str(&reply.text).unwrap();
    assert_eq!(verdict["ok"], false, "{}", reply.text);
    assert!(verdict["reason"].as_str().is_some_and(|r| !r.is_empty()));
    let sent = mock.requests.lock().unwrap()[0].1.clone();
    assert_eq!(sent["response_format"]["json_schema"]["schema"], judge_schema);
    assert_sent_as_recorded(&mock, "judge_constrained_stop");
}

#[tokio::test]
async fn a_schema_with_a_self_reference_is_sent_inlined() {
    // llama.cpp answers HTTP 400 to `{"$ref": "#"}`; the provider never sends one.
    let mock = mock(Arc::new(|_, _, body| {
        if body.to_string().contains("$ref") {
            return (StatusCode::BAD_REQUEST, "{\"error\":{\"message\":\"JSON schema conversion failed\"}}")
                .into_response();
        }
        axum::Json(json!({"choices": [{"message": {"content": "{\"answer\": \"ok\"}"}}]})).into_response()
    }))
    .await;
    let tree = spec(
        "tree_set",
        json!({"type": "object", "properties": {"label": {"type": "string"}, "child": {"$ref": "#"}}}),
    );
    let request = ChatRequest {
        messages: conversation("hi"),
        tools: vec![tree, spec("open_cart", json!({"type": "object"}))],
        ..ChatRequest::default()
    };
    for mode in [ToolMode::Native, ToolMode::Constrained] {
        let (reply, _) = complete(&provider_in(&mock.base, mode), &request).await;
        let reply = reply.unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert!(reply.refused_tools.is_empty(), "{mode}");
    }
}

#[tokio::test]
async fn a_tool_the_provider_still_refuses_is_left_out_and_reported_and_the_turn_goes_on() {
    // A provider that refuses any schema with `patternProperties` (one it cannot turn into a grammar).
    let mock = mock(Arc::new(|_, _, body| {
        if body.to_string().contains("patternProperties") {
            return (StatusCode::BAD_REQUEST, "{\"error\":{\"message\":\"unsupported: patternProperties\"}}").into_response();
        }
        axum::Json(json!({"choices": [{"message": {"content": "{\"name\": \"cart_add\", \"arguments\": {\"productId\": \"mug-red\"}}"}}]})).into_response()
    }))
    .await;
    let odd = spec("labels_set", json!({"type": "object", "patternProperties": {"^x-": {"type": "string"}}}));
    let mut tools = storefront_home();
    tools.insert(1, odd);
    let request = ChatRequest { messages: conversation("add a red mug"), tools, ..ChatRequest::default() };
    let provider = provider_in(&mock.base, ToolMode::Native);
    let (reply, _) = complete(&provider, &request).await;
    let reply = reply.unwrap();
    assert_eq!(reply.refused_tools.len(), 1);
    assert_eq!(reply.refused_tools[0].name, "labels_set");
    assert!(reply.refused_tools[0].reason.contains("patternProperties"), "{:?}", reply.refused_tools);
    let asked = mock.requests.lock().unwrap().len();
    let last = mock.requests.lock().unwrap().last().unwrap().1.clone();
    let sent: Vec<&str> =
        last["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(sent, ["navigate", "product_view", "cart_add"]);
    // The next turn leaves it out at once, and still says so.
    let (reply, _) = complete(&provider, &request).await;
    assert_eq!(reply.unwrap().refused_tools.len(), 1);
    assert_eq!(mock.requests.lock().unwrap().len(), asked + 1, "no probing the second time");
}

#[tokio::test]
async fn the_issue_trace_runs_the_call_once_and_answers() {
    // The failing conversation of issue 12, through the provider and the loop: a call followed by
    // "Done.", then the same call again, then an answer.
    let replies = [
        "{\"name\": \"cart_add\", \"arguments\": {\"productId\": \"tee-black\", \"quantity\": 2}}\nDone.",
        "```json\n{\"name\": \"cart_add\", \"arguments\": {\"productId\": \"tee-black\", \"quantity\": 2}}\n```",
        "The black T-shirts have been added to your cart.",
    ];
    let mock = mock(Arc::new(move |n, _, _| {
        axum::Json(json!({"choices": [{"message": {"content": replies[n.min(2)]}}]})).into_response()
    }))
    .await;
    let agent = AgentLoop::new(Arc::new(provider_in(&mock.base, ToolMode::Text)));
    struct Cart(Mutex<u32>);
    impl ToolHost for Cart {
        fn tools(&self) -> Vec<ToolSpec> {
            storefront_home()
        }
        fn check(&self, _: &str, _: &Value) -> Result<(), ToolOutput> {
            Ok(())
        }
        fn execute<'a>(&'a self, _: CallRef<'a>, args: Value) -> BoxFuture<'a, ToolOutput> {
            Box::pin(async move {
                let mut items = self.0.lock().unwrap();
                *items += args["quantity"].as_u64().unwrap() as u32;
                ToolOutput::new(ResultStatus::Ok, format!("added 2 × Black T-shirt; cart: {items} items"))
            })
        }
    }
    let cart = Cart(Mutex::new(0));
    let streamed = Mutex::new(String::new());
    let on_delta = |d: &str| streamed.lock().unwrap().push_str(d);
    let on_event = |_| {};
    let outcome = agent
        .run(
            &cart,
            &RunSink { on_delta: &on_delta, on_event: &on_event },
            &"r".into(),
            "Add two black T-shirts",
            Vec::new(),
        )
        .await;
    assert_eq!(*cart.0.lock().unwrap(), 2, "added once");
    assert_eq!(outcome.answer, "The black T-shirts have been added to your cart.");
    assert_eq!(streamed.into_inner().unwrap(), "Done.\n\nThe black T-shirts have been added to your cart.");
    // What the model wrote stays as written; nothing was recorded empty.
    let written: Vec<String> = outcome
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Assistant { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(written, replies);
}

#[tokio::test]
async fn a_template_that_wants_the_system_message_first_gets_the_tools_there_from_then_on() {
    // Like chat templates that raise "system message must be first": a 400 for any other order.
    let mock = mock(Arc::new(|_, _, body| {
        let messages = body["messages"].as_array().unwrap();
        if messages.iter().skip(1).any(|m| m["role"] == "system") {
            return (StatusCode::BAD_REQUEST, "{\"error\":{\"message\":\"System message must be at the beginning.\"}}")
                .into_response();
        }
        axum::Json(json!({"choices": [{"message": {"content": "{\"answer\": \"hi\"}"}}]})).into_response()
    }))
    .await;
    let provider = provider_in(&mock.base, ToolMode::Constrained);
    let request = ChatRequest { messages: conversation("hello"), tools: storefront_home(), ..ChatRequest::default() };
    for _ in 0..2 {
        let (reply, _) = complete(&provider, &request).await;
        assert_eq!(reply.unwrap().text, "hi");
    }
    let sent: Vec<Value> = mock.requests.lock().unwrap().iter().map(|(_, body)| body.clone()).collect();
    let system_count =
        |body: &Value| body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "system").count();
    assert_eq!(sent.len(), 3, "the refused order once, then the first-message order for both requests");
    assert_eq!(system_count(&sent[0]), 2);
    assert_eq!(system_count(&sent[1]), 1);
    assert!(sent[1]["messages"][0]["content"].as_str().unwrap().contains("# Tools"));
    assert_eq!(system_count(&sent[2]), 1);
}

/// One streamed token of a constrained reply with the provider's likeliest tokens at it
/// (`(token, probability)`), as llama.cpp's server sends them when asked for `logprobs`.
fn token(text: &str, top: &[(&str, f64)]) -> Value {
    let top: Vec<Value> = top.iter().map(|(t, p)| json!({"token": t, "logprob": p.ln()})).collect();
    json!({"choices": [{"delta": {"content": text},
                        "logprobs": {"content": [{"token": text, "logprob": top.first().map_or(0.0, |t| t["logprob"].as_f64().unwrap()), "top_logprobs": top}]}}]})
}

/// "Cancel lunch with Ana." as the 1.5B model began it on a calendar (2026-12-05): the step's
/// likeliest token is `answer` (0.44), but `move` (0.29) and `cancel` (0.22) begin tools.
fn answer_at_odds(answer: f64) -> Vec<Value> {
    let mut events: Vec<Value> = ["{\"", "next", "\":", " \""].iter().map(|t| token(t, &[(t, 0.99)])).collect();
    events.push(token("answer", &[("answer", answer), ("move", 0.29), ("cancel", 0.22), ("confirm", 0.01)]));
    for text in ["\",", " \"answer\": \"", "Lunch with Ana has been canceled.", "\"}"] {
        events.push(token(text, &[(text, 0.99)]));
    }
    events
}

fn calendar_tools() -> Vec<ToolSpec> {
    let id = json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]});
    vec![spec("move_event", id.clone()), spec("cancel_event", id)]
}

fn steps(sent: &Value) -> Vec<Value> {
    let schema = &sent["response_format"]["json_schema"]["schema"];
    schema["anyOf"].as_array().unwrap().iter().map(|a| a["properties"]["next"]["const"].clone()).collect()
}

#[tokio::test]
async fn an_answer_begun_when_the_tools_were_likelier_is_asked_again_as_a_call_and_nothing_of_it_is_shown() {
    let mock = mock(Arc::new(|n, _, _| {
        if n == 0 {
            sse(&answer_at_odds(0.44))
        } else {
            sse(&[json!({"choices": [{"delta": {"content": "{\"next\": \"cancel_event\", \"arguments\": {\"id\": \"c3\"}}"}}]})])
        }
    }))
    .await;
    let provider = provider_in(&mock.base, ToolMode::Constrained);
    let request = ChatRequest {
        messages: conversation("Cancel lunch with Ana."),
        tools: calendar_tools(),
        ..ChatRequest::default()
    };
    let streamed = Mutex::new(String::new());
    let on_text = |delta: &str| streamed.lock().unwrap().push_str(delta);
    let reply = provider
        .complete_step(&request, StepRule::CallIfLikelier, Streams { text: &on_text, tool_call: &|_| {} })
        .await
        .unwrap();
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(
        (reply.tool_calls[0].name.as_str(), &reply.tool_calls[0].arguments),
        ("cancel_event", &json!({"id": "c3"}))
    );
    assert_eq!(*streamed.lock().unwrap(), "", "nothing of the answer begun reached the user");
    let sent = mock.requests.lock().unwrap();
    assert_eq!(sent.len(), 2);
    // First with the probabilities and every step; then without the answer among them.
    assert_eq!((sent[0].1["logprobs"].clone(), sent[0].1["top_logprobs"].clone()), (json!(true), json!(10)));
    assert_eq!(steps(&sent[0].1), [json!("move_event"), json!("cancel_event"), json!("answer")]);
    assert_eq!(steps(&sent[1].1), [json!("move_event"), json!("cancel_event")]);
    assert!(sent[1].1.get("logprobs").is_none());
}

#[tokio::test]
async fn an_answer_likelier_than_the_tools_or_written_as_written_is_the_answer() {
    // The answer likelier than the tools together: read to its end and shown.
    let mock = mock(Arc::new(|_, _, _| sse(&answer_at_odds(0.6)))).await;
    let provider = provider_in(&mock.base, ToolMode::Constrained);
    let request = ChatRequest {
        messages: conversation("Cancel lunch with Ana."),
        tools: calendar_tools(),
        ..ChatRequest::default()
    };
    let streamed = Mutex::new(String::new());
    let on_text = |delta: &str| streamed.lock().unwrap().push_str(delta);
    let reply = provider
        .complete_step(&request, StepRule::CallIfLikelier, Streams { text: &on_text, tool_call: &|_| {} })
        .await
        .unwrap();
    assert_eq!(reply.text, "Lunch with Ana has been canceled.");
    assert_eq!(*streamed.lock().unwrap(), "Lunch with Ana has been canceled.");
    assert_eq!(mock.requests.lock().unwrap().len(), 1);

    // As written (a question's run, or once the run called): no probabilities asked, the answer
    // is the answer.
    let mock = mock_answering(0.44).await;
    let provider = provider_in(&mock.base, ToolMode::Constrained);
    let reply = provider.complete_step(&request, StepRule::AsWritten, Streams::text(&|_| {})).await.unwrap();
    assert_eq!(reply.text, "Lunch with Ana has been canceled.");
    let sent = mock.requests.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    assert!(sent[0].1.get("logprobs").is_none());

    // A provider that refuses token probabilities in a streamed turn: asked again without
    // them, and not asked for them again.
    let refusing = self::mock(Arc::new(|_, _, body: &Value| {
        if body.get("logprobs").is_some() {
            (StatusCode::BAD_REQUEST, "logprobs are not supported with stream").into_response()
        } else {
            sse(&answer_at_odds(0.44))
        }
    }))
    .await;
    let provider = provider_in(&refusing.base, ToolMode::Constrained);
    for _ in 0..2 {
        let reply = provider.complete_step(&request, StepRule::CallIfLikelier, Streams::text(&|_| {})).await.unwrap();
        assert_eq!(reply.text, "Lunch with Ana has been canceled.");
    }
    let sent = refusing.requests.lock().unwrap();
    let asked: Vec<bool> = sent.iter().map(|(_, body)| body.get("logprobs").is_some()).collect();
    assert_eq!(asked, [true, false, false]);
}

async fn mock_answering(answer: f64) -> Mock {
    mock(Arc::new(move |_, _, _| sse(&answer_at_odds(answer)))).await
}

#[tokio::test]
async fn a_reply_that_must_call_is_offered_only_the_tools() {
    let mock = mock(Arc::new(|_, _, _| {
        sse(&[
            json!({"choices": [{"delta": {"content": "{\"next\": \"move_event\", \"arguments\": {\"id\": \"c1\"}}"}}]}),
        ])
    }))
    .await;
    let provider = provider_in(&mock.base, ToolMode::Constrained);
    let request = ChatRequest { messages: conversation("Move it."), tools: calendar_tools(), ..ChatRequest::default() };
    let reply = provider.complete_step(&request, StepRule::MustCall, Streams::text(&|_| {})).await.unwrap();
    assert_eq!(reply.tool_calls[0].name, "move_event");
    assert_eq!(steps(&mock.requests.lock().unwrap()[0].1), [json!("move_event"), json!("cancel_event")]);
    // Text and native modes have no step to choose: the rule changes nothing there.
    let mock = mock_answering(0.44).await;
    let reply = provider_in(&mock.base, ToolMode::Text)
        .complete_step(&request, StepRule::CallIfLikelier, Streams::text(&|_| {}))
        .await
        .unwrap();
    assert!(reply.tool_calls.is_empty());
    assert!(mock.requests.lock().unwrap()[0].1.get("logprobs").is_none());
}
