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
use tether_protocol::ToolSpec;

type Handler = Arc<dyn Fn(usize, &HeaderMap, &Value) -> Response + Send + Sync>;

struct Mock {
    base: String,
    requests: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
}

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
    Mock { base, requests }
}

fn provider(base: &str) -> OpenAiProvider {
    let mut config = OpenAiConfig::new(base, "qwen2.5-coder-1.5b-instruct-q4_k_m");
    config.retry_delay = Duration::from_millis(5);
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
            "tool" => ChatMessage::Tool {
                call_id: m["tool_call_id"].as_str().unwrap().into(),
                name: String::new(),
                content: m["content"].as_str().unwrap().into(),
            },
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
        .map(|t| ToolSpec {
            name: t["function"]["name"].as_str().unwrap().into(),
            description: t["function"]["description"].as_str().unwrap().into(),
            parameters: t["function"]["parameters"].clone(),
            risk: Default::default(),
            global: false,
        })
        .collect();
    ChatRequest { messages, tools }
}

async fn complete(provider: &OpenAiProvider, request: &ChatRequest) -> (Result<ModelReply, AgentError>, String) {
    let streamed = Mutex::new(String::new());
    let on_delta = |d: &str| streamed.lock().unwrap().push_str(d);
    let reply = provider.complete(request, &on_delta).await;
    (reply, streamed.into_inner().unwrap())
}

#[tokio::test]
async fn recorded_small_model_replies_become_the_right_tool_calls() {
    let cases = [
        ("cart_tool_call", "cart_add", json!({"productId": "mug-red", "quantity": 2})),
        ("trains_tool_call", "book_ticket", json!({"train": 12345, "seat_class": "first"})),
        ("after_refusal", "book_ticket", json!({"train": 412, "seat_class": "tourist"})),
        ("after_tool_result", "book_ticket", json!({"train": 412, "seat_class": "first"})),
        ("no_tool_needed", "find_trains", json!({"to": "New York", "date": "2023-10-05"})),
    ];
    for (name, tool, args) in cases {
        let recorded = fixture(name);
        let response = recorded["response"].clone();
        let mock = mock(Arc::new(move |_, _, _| axum::Json(response.clone()).into_response())).await;
        let request = request_of(&recorded);
        let (reply, streamed) = complete(&provider(&mock.base), &request).await;
        let reply = reply.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(reply.tool_calls.len(), 1, "{name}");
        assert_eq!((reply.tool_calls[0].name.as_str(), &reply.tool_calls[0].arguments), (tool, &args), "{name}");
        assert_eq!(streamed, "", "{name}: a tool call written as text must not reach the user");
        // What we sent is what the model was recorded answering.
        let sent = &mock.requests.lock().unwrap()[0].1;
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
async fn a_streamed_json_block_is_held_back_and_becomes_a_tool_call() {
    let mock = mock(Arc::new(|_, _, _| {
        sse(&[
            json!({"choices": [{"delta": {"content": "```json\n{\"name\": \"cart_view\","}}]}),
            json!({"choices": [{"delta": {"content": " \"arguments\": {}}\n```"}}]}),
        ])
    }))
    .await;
    let request = ChatRequest { messages: Vec::new(), tools: vec![tool("cart_view")] };
    let (reply, streamed) = complete(&provider(&mock.base), &request).await;
    let reply = reply.unwrap();
    assert_eq!(streamed, "");
    assert_eq!(reply.tool_calls[0].name, "cart_view");
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: String::new(),
        parameters: json!({"type": "object"}),
        risk: Default::default(),
        global: false,
    }
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
    let request = ChatRequest { messages: Vec::new(), tools: vec![tool("cart_view"), tool("cart_add")] };
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
    struct NoTools;
    impl ToolHost for NoTools {
        fn tools(&self) -> Vec<ToolSpec> {
            Vec::new()
        }
        fn check(&self, _: &str, _: &Value) -> Result<(), ToolOutput> {
            Ok(())
        }
        fn execute<'a>(&'a self, _: &'a str, _: &'a str, _: &'a str, _: Value) -> BoxFuture<'a, ToolOutput> {
            unreachable!()
        }
    }
    let on_delta = |_: &str| {};
    let on_event = |_| {};
    let outcome =
        agent.run(&NoTools, &RunSink { on_delta: &on_delta, on_event: &on_event }, "r", "hi", Vec::new()).await;
    assert_eq!(outcome.status, tether_protocol::RunStatus::Failed);
    assert_eq!(outcome.error.as_deref(), Some("model provider returned HTTP 401: invalid api key"));
}
