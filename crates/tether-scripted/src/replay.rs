//! [`Replay`], the fake model for tests and benchmarks: it answers from a script of replies (or
//! from a function of the request) and records every request it got.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tether_agent::{AgentError, BoxFuture, ChatModel, ChatRequest, DeltaSink, ModelReply};

/// How a [`Replay`] answers.
type Respond = Box<dyn Fn(&ChatRequest) -> ModelReply + Send + Sync>;

/// A model for tests: each turn is answered by the next reply of its script (or by a function of
/// the request), its text streamed word by word; every request is kept for the test to read
/// ([`Replay::requests`]).
pub struct Replay {
    /// The script, last reply first.
    script: Mutex<Vec<ModelReply>>,
    /// What answers once the script is over (`None`: the test fails there).
    after: Option<Respond>,
    delay: Duration,
    requests: Mutex<Vec<ChatRequest>>,
}

impl Replay {
    /// Answers `replies` in order; a turn beyond them fails the test.
    pub fn new(replies: Vec<ModelReply>) -> Arc<Replay> {
        Arc::new(Replay::build(replies, None))
    }

    /// Answers `replies` in order, then `after` for every further turn.
    pub fn then(replies: Vec<ModelReply>, after: ModelReply) -> Arc<Replay> {
        Arc::new(Replay::build(replies, Some(Box::new(move |_| after.clone()))))
    }

    /// Answers every turn with `respond(request)`.
    pub fn responding(respond: impl Fn(&ChatRequest) -> ModelReply + Send + Sync + 'static) -> Arc<Replay> {
        Arc::new(Replay::build(Vec::new(), Some(Box::new(respond))))
    }

    /// Answers every turn with `respond(request)`, each after `delay` (a slow model).
    pub fn responding_after(
        delay: Duration,
        respond: impl Fn(&ChatRequest) -> ModelReply + Send + Sync + 'static,
    ) -> Arc<Replay> {
        Arc::new(Replay { delay, ..Replay::build(Vec::new(), Some(Box::new(respond))) })
    }

    fn build(mut script: Vec<ModelReply>, after: Option<Respond>) -> Replay {
        script.reverse();
        Replay { script: Mutex::new(script), after, delay: Duration::ZERO, requests: Mutex::new(Vec::new()) }
    }

    /// Every request it received, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().expect("the requests").clone()
    }
}

impl ChatModel for Replay {
    fn name(&self) -> &str {
        "replay"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_delta: DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>> {
        Box::pin(async move {
            self.requests.lock().expect("the requests").push(request.clone());
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            let next = self.script.lock().expect("the script").pop();
            let reply = match (next, &self.after) {
                (Some(reply), _) => reply,
                (None, Some(respond)) => respond(request),
                (None, None) => panic!("the script has no reply for turn {}", self.requests().len()),
            };
            for piece in reply.text.split_inclusive(' ') {
                on_delta(piece);
            }
            Ok(reply)
        })
    }
}
