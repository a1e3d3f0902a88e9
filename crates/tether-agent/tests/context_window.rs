//! A long conversation against a model with a small context window, over real HTTP: a mock of
//! llama.cpp's server that refuses, as llama.cpp does (HTTP 400, `exceed_context_size_error`), a
//! prompt longer than its window. Every run of a 150-message conversation completes; a provider
//! that reports its window (`/props`) never gets a request it refuses; one that does not gets
//! one, and the run goes on with older messages left out, without the provider changing how it
//! sends tools; a message that cannot fit alone is refused before it is sent.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::{Value, json};
use tether_agent::*;
use tether_protocol::{ResultStatus, RunStatus, ToolSpec};
use tether_scripted::Page;

/// The mock's window, in its own tokens (1 per 4 bytes of the request's messages).
const WINDOW: usize = 2_000;

#[derive(Default)]
struct Seen {
    /// Each request's messages and whether it was refused as too long.
    requests: Vec<(Vec<Value>, bool)>,
}

/// A llama.cpp-like server: `/props` (when `reports`), and chat completions that answer
/// `{"next": "answer", "answer": "I will keep that in mind."}` or refuse a prompt over [`WINDOW`].
async fn llama(reports: bool) -> (String, Arc<Mutex<Seen>>) {
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let recorded = seen.clone();
    let mut app = Router::new().route(
        "/v1/chat/completions",
        post(move |body: String| {
            let recorded = recorded.clone();
            async move {
                let request: Value = serde_json::from_str(&body).unwrap();
                let messages = request["messages"].as_array().unwrap().clone();
                let tokens = serde_json::to_string(&messages).unwrap().len() / 4;
                let over = tokens > WINDOW;
                recorded.lock().unwrap().requests.push((messages, over));
                if over {
                    let error = json!({"error": {"code": 400, "message": format!("request ({tokens} tokens) exceeds the available context size ({WINDOW} tokens), try increasing it"), "type": "exceed_context_size_error", "n_prompt_tokens": tokens, "n_ctx": WINDOW}});
                    return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
                }
                let content = json!({"next": "answer", "answer": "I will keep that in mind."}).to_string();
                let reply = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]});
                (StatusCode::OK, axum::Json(reply)).into_response()
            }
        }),
    );
    if reports {
        app = app
            .route("/props", get(|| async { axum::Json(json!({"default_generation_settings": {"n_ctx": WINDOW}})) }));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, seen)
}

/// A page with one tool, `note_add`, answered "added".
fn notes() -> Page {
    Page::new(vec![
        ToolSpec::new("note_add", "Add a note.").with_parameters(
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        ),
    ])
    .answering(|_, _| ToolOutput::new(ResultStatus::Ok, "added"))
}

fn agent(base: &str) -> AgentLoop {
    let mut config = OpenAiConfig::new(base, "small");
    config.tool_mode = ToolMode::Constrained;
    config.max_tokens = Some(100);
    AgentLoop::new(Arc::new(OpenAiProvider::new(config).unwrap()))
}

/// Sends 75 long messages, one run each, carrying the conversation on: 150 messages.
async fn converse(agent: &AgentLoop) -> Vec<RunOutcome> {
    let mut history = Vec::new();
    let mut outcomes = Vec::new();
    for n in 0..75 {
        let text = format!("Message {n}: {}", "please remember this sentence about the weather. ".repeat(4));
        let sink = RunSink { on_delta: &|_| {}, on_event: &|_| {} };
        let outcome = agent.run(&notes(), &sink, &format!("r{n}").into(), &text, history).await;
        history = outcome.messages.clone();
        outcomes.push(outcome);
    }
    outcomes
}

#[tokio::test]
async fn a_model_that_reports_its_window_is_never_sent_more_than_it_takes() {
    let (base, seen) = llama(true).await;
    let outcomes = converse(&agent(&base)).await;
    for (n, outcome) in outcomes.iter().enumerate() {
        assert_eq!(
            (n, outcome.status, outcome.answer.as_str()),
            (n, RunStatus::Completed, "I will keep that in mind."),
            "{:?}",
            outcome.error
        );
    }
    let seen = seen.lock().unwrap();
    assert!(seen.requests.iter().all(|(_, over)| !over), "a request over the window was sent");
    // The conversation was shortened, from its oldest runs, with a note in their place; the
    // last message is always there.
    let (last, _) = seen.requests.last().unwrap();
    let text = serde_json::to_string(last).unwrap();
    assert!(text.contains("earlier messages of this conversation were left out"), "{text}");
    assert!(text.contains("Message 74:") && !text.contains("Message 0:"), "{text}");
    // What the host keeps is the shortened conversation: it stops growing.
    let kept = outcomes.last().unwrap().messages.len();
    assert!(kept < 100, "{kept} messages kept");
}

#[tokio::test]
async fn a_model_that_does_not_say_refuses_one_request_and_the_conversation_goes_on_as_before() {
    let (base, seen) = llama(false).await;
    let outcomes = converse(&agent(&base)).await;
    for outcome in &outcomes {
        assert_eq!(
            (outcome.status, outcome.answer.as_str()),
            (RunStatus::Completed, "I will keep that in mind."),
            "{:?}",
            outcome.error
        );
    }
    let seen = seen.lock().unwrap();
    let refused = seen.requests.iter().filter(|(_, over)| *over).count();
    assert!(refused >= 1, "the window was reached");
    assert!(refused <= 5, "each refusal shortened the conversation enough for a while: {refused}");
    // A refusal for length never made the provider move the tools to the first system message
    // (the tools stay right before the run's request, where the prompt cache keeps the rest).
    for (messages, _) in seen.requests.iter() {
        let first = messages[0]["content"].as_str().unwrap();
        assert!(!first.contains("# Tools"), "the tools moved to the first system message");
    }
}

#[tokio::test]
async fn a_message_too_long_for_the_window_is_refused_before_it_is_sent() {
    let (base, seen) = llama(true).await;
    let sink = RunSink { on_delta: &|_| {}, on_event: &|_| {} };
    let text = "word ".repeat(WINDOW * 4);
    let outcome = agent(&base).run(&notes(), &sink, &"r1".into(), &text, Vec::new()).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let error = outcome.error.unwrap();
    assert!(
        error.starts_with("the request does not fit the model's context window: this request needs about"),
        "{error}"
    );
    assert!(seen.lock().unwrap().requests.is_empty(), "nothing was sent");
}
