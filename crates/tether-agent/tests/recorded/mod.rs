//! Replies of the real 1.5B model, recorded once and replayed: a mock of its server that answers
//! each request with the reply recorded for it, and the tools and conversations the tests send.
//! With `TETHER_RECORD_MODEL=http://127.0.0.1:PORT` the mock forwards to that model server instead
//! and records the fixture again (../shared/real-model/README.md).

#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::{Value, json};
use tether_agent::*;
use tether_protocol::ToolSpec;

/// A model server on 127.0.0.1: what it was sent, in order.
pub struct Mock {
    pub base: String,
    pub requests: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
    /// The request bodies as sent (key order included); kept by `replay_or_record`.
    pub raw: Arc<Mutex<Vec<String>>>,
}

impl Mock {
    /// Asks the mock (as Tether's provider in constrained mode asks the 1.5B model) and returns
    /// the reply.
    pub async fn complete(&self, request: &ChatRequest) -> ModelReply {
        local_provider(&self.base, ToolMode::Constrained).complete(request, &|_| {}).await.unwrap()
    }

    /// The `n`th request body it received.
    pub fn sent(&self, n: usize) -> Value {
        self.requests.lock().unwrap()[n].1.clone()
    }
}

/// The Leptos storefront's home page tools (docs/storefront.md), as the page registers them.
pub fn storefront_home() -> Vec<ToolSpec> {
    let ids = json!(["mug-red", "mug-blue", "tee-black", "poster-space"]);
    let pages =
        json!(["home", "cart", "product/mug-red", "product/mug-blue", "product/tee-black", "product/poster-space"]);
    vec![
        ToolSpec::new("navigate", "Go to a page of the shop: home, the cart (to see, change or check out the cart) or a product page."
                    ).with_parameters(json!({"type": "object", "properties": {"to": {"type": "string", "enum": pages}}, "required": ["to"], "additionalProperties": false})).with_global(true),
        ToolSpec::new("product_view", "Open a product's page; the result has its price and description.").with_parameters(json!({"type": "object", "properties": {"productId": {"type": "string", "enum": ids}}, "required": ["productId"], "additionalProperties": false})),
        ToolSpec::new("cart_add", "Add a product to the shopping cart.").with_parameters(json!({"type": "object", "properties": {"productId": {"type": "string", "enum": ids}, "quantity": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1}}, "required": ["productId"], "additionalProperties": false})),
    ]
}

/// A mock that replays the exchanges recorded in `fixtures/model-replies/<name>.json`, in order.
/// With `TETHER_RECORD_MODEL=http://127.0.0.1:PORT` it forwards each request to that real model
/// instead (non-streamed, so the fixture holds the whole reply) and writes the fixture.
pub async fn replay_or_record(name: &'static str) -> Mock {
    let path = format!("{}/tests/fixtures/model-replies/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let record = std::env::var("TETHER_RECORD_MODEL").ok().filter(|url| !url.is_empty());
    let recorded: Vec<Value> = match &record {
        Some(_) => Vec::new(),
        None => {
            let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            file["exchanges"].as_array().unwrap().clone()
        }
    };
    let requests: Arc<Mutex<Vec<(HeaderMap, Value)>>> = Arc::default();
    let raw: Arc<Mutex<Vec<String>>> = Arc::default();
    let exchanges: Arc<Mutex<Vec<Value>>> = Arc::default();
    let (seen, kept, raw_seen) = (requests.clone(), exchanges.clone(), raw.clone());
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |headers: HeaderMap, body: String| {
            let (seen, kept, record, recorded, path) =
                (seen.clone(), kept.clone(), record.clone(), recorded.clone(), path.clone());
            raw_seen.lock().unwrap().push(body.clone());
            // Forwarded as sent (re-serialising would sort the keys, and key order steers a
            // constrained model), without streaming.
            let forwarded = body.replacen("\"stream\":true", "\"stream\":false", 1);
            async move {
                let body: Value = serde_json::from_str(&body).unwrap();
                let n = seen.lock().unwrap().len();
                seen.lock().unwrap().push((headers, body.clone()));
                let response = match record {
                    Some(url) => {
                        let reply = reqwest::Client::new()
                            .post(format!("{url}/v1/chat/completions"))
                            .header("content-type", "application/json")
                            .body(forwarded)
                            .send()
                            .await
                            .unwrap();
                        let status = reply.status().as_u16();
                        let mut response: Value = reply.json().await.unwrap();
                        for key in ["timings", "usage", "system_fingerprint", "created", "id"] {
                            if let Some(object) = response.as_object_mut() {
                                object.remove(key);
                            }
                        }
                        let mut kept = kept.lock().unwrap();
                        kept.push(json!({"request": body, "status": status, "response": response}));
                        let file = json!({"exchanges": *kept});
                        std::fs::write(&path, serde_json::to_string_pretty(&file).unwrap() + "\n").unwrap();
                        (status, response)
                    }
                    None => {
                        let exchange = recorded.get(n).unwrap_or_else(|| panic!("{path}: no exchange {n}"));
                        (exchange["status"].as_u64().unwrap_or(200) as u16, exchange["response"].clone())
                    }
                };
                (StatusCode::from_u16(response.0).unwrap(), axum::Json(response.1)).into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let _ = exchanges;
    Mock { base, requests, raw }
}

/// The requests a replayed fixture was recorded with (stream flag aside, which recording turns off).
pub fn recorded_requests(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/fixtures/model-replies/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    file["exchanges"].as_array().unwrap().iter().map(|e| e["request"].clone()).collect()
}

pub fn assert_sent_as_recorded(mock: &Mock, name: &str) {
    let sent: Vec<Value> = mock.requests.lock().unwrap().iter().map(|(_, body)| body.clone()).collect();
    assert_eq!(
        sent,
        recorded_requests(name),
        "{name}: the provider no longer sends what the model was recorded answering; record again"
    );
}

pub fn local_provider(base: &str, mode: ToolMode) -> OpenAiProvider {
    let mut config = OpenAiConfig::new(base, "qwen2.5-coder-1.5b-instruct-q4_k_m");
    config.tool_mode = mode;
    config.temperature = Some(0.0);
    config.max_tokens = Some(300);
    OpenAiProvider::new(config).unwrap()
}

/// The one tool call of `reply`, when it is one.
pub fn call_of(reply: &ModelReply) -> Option<(String, Value)> {
    match reply.tool_calls.as_slice() {
        [call] => Some((call.name.clone(), call.arguments.clone())),
        _ => None,
    }
}

/// A request as the agent loop sends it: the system prompt, then `rest`, with `tools`.
pub fn request(rest: Vec<ChatMessage>, tools: Vec<ToolSpec>) -> ChatRequest {
    let mut messages = vec![ChatMessage::System { content: DEFAULT_SYSTEM_PROMPT.into() }];
    messages.extend(rest);
    ChatRequest { messages, tools, ..ChatRequest::default() }
}

/// The README's to-do example's tools with `items` on the list (examples/todo-react).
pub fn todo_tools(items: &[&str]) -> Vec<ToolSpec> {
    let tool = |name: &str, description: &str, title: Value| {
        ToolSpec::new(name, description).with_parameters(json!({"type": "object", "properties": {"title": title}, "required": ["title"], "additionalProperties": false}))
    };
    vec![
        tool("todo_add", "Add an item to the to-do list.", json!({"type": "string", "minLength": 1})),
        tool("todo_remove", "Remove an item from the to-do list.", json!({"type": "string", "enum": items})),
    ]
}
