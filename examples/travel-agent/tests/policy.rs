//! The travel example end to end with the built-in model: first class is refused by the hook,
//! the model books tourist, and no ID number ever reaches the model provider.

use std::sync::{Arc, Mutex};

use regex::Regex;
use tether_agent::BoxFuture;
use tether_agent::{AgentError, ChatMessage, ChatModel, ChatRequest, ModelReply, RunSink};
use tether_protocol::RunStatus;
use tether_scripted::ScriptedModel;
use travel_agent::{FIRST_CLASS_REFUSAL, TravelDesk, mask_ids, travel_agent};

/// The built-in model, recording every request the "provider" receives.
struct Recording {
    inner: ScriptedModel,
    requests: Mutex<Vec<ChatRequest>>,
}

impl ChatModel for Recording {
    fn name(&self) -> &str {
        "recording"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_delta: &'a (dyn Fn(&str) + Send + Sync),
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.complete(request, on_delta)
    }
}

fn text_of(message: &ChatMessage) -> String {
    match message {
        ChatMessage::System { content }
        | ChatMessage::User { content }
        | ChatMessage::Note { content, .. }
        | ChatMessage::Tool { content, .. } => content.clone(),
        ChatMessage::Assistant { content, tool_calls } => {
            format!("{content} {}", tool_calls.iter().map(|c| c.arguments.to_string()).collect::<Vec<_>>().join(" "))
        }
    }
}

#[tokio::test]
async fn first_class_is_refused_the_model_books_tourist_and_no_id_reaches_the_provider() {
    let model = Arc::new(Recording { inner: ScriptedModel::default(), requests: Mutex::new(Vec::new()) });
    let agent = travel_agent(model.clone());
    let desk = TravelDesk::default();
    let on_delta = |_: &str| {};
    let on_event = |_| {};
    let outcome = agent
        .run(
            &desk,
            &RunSink { on_delta: &on_delta, on_event: &on_event },
            &"run-1".into(),
            "Book me the most comfortable seat to Mar del Plata on Friday.",
            Vec::new(),
        )
        .await;
    assert_eq!(outcome.status, RunStatus::Completed);

    // The first booking attempt (first class) was refused before it ran; the second is tourist.
    let requests = model.requests.lock().unwrap();
    let attempts: Vec<serde_json::Value> = requests
        .last()
        .unwrap()
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Assistant { tool_calls, .. } => Some(tool_calls.clone()),
            _ => None,
        })
        .flatten()
        .filter(|c| c.name == "book_ticket")
        .map(|c| c.arguments)
        .collect();
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(attempts[0]["seat_class"], "first");
    assert_eq!(attempts[1]["seat_class"], "tourist");
    assert_eq!(desk.bookings(), vec![serde_json::json!({"train": 412, "seat_class": "tourist"})]);
    let refusal_read = requests.last().unwrap().messages.iter().any(|m| text_of(m).contains(FIRST_CLASS_REFUSAL));
    assert!(refusal_read, "the model read the policy's reason");

    // The tools returned DNIs; the provider never saw one.
    let dni = Regex::new(r"DNI\s*[0-9]").unwrap();
    for request in requests.iter() {
        for message in &request.messages {
            let text = text_of(message);
            assert!(!dni.is_match(&text), "an ID number reached the provider: {text}");
        }
    }
    assert!(outcome.answer.contains("DNI ***"), "{}", outcome.answer);
}

#[test]
fn ids_are_masked_in_any_position() {
    assert_eq!(mask_ids("DNI 12.345.678 and DNI 30123456."), "DNI *** and DNI ***.");
    assert_eq!(mask_ids("no ids here"), "no ids here");
}
