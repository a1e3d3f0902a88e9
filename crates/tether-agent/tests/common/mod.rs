//! What the agent-loop tests share: a model that answers from a script, streaming each reply in
//! small pieces (as a provider does), and records what it was asked.

#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Mutex};

use tether_agent::{AgentError, BoxFuture, ChatModel, ChatRequest, DeltaSink, ModelReply};

/// A model that answers from a script and records every request.
pub struct ReplayModel {
    replies: Mutex<Vec<ModelReply>>,
    requests: Mutex<Vec<ChatRequest>>,
    /// What it answers once the script is over (`None`: the test fails there).
    after_script: Option<ModelReply>,
}

impl ReplayModel {
    /// Answers `replies` in order; a turn beyond them fails the test.
    pub fn new(replies: Vec<ModelReply>) -> Arc<Self> {
        ReplayModel::build(replies, None)
    }

    /// Answers `replies` in order, then `after` for every further turn.
    pub fn then(replies: Vec<ModelReply>, after: ModelReply) -> Arc<Self> {
        ReplayModel::build(replies, Some(after))
    }

    fn build(mut replies: Vec<ModelReply>, after_script: Option<ModelReply>) -> Arc<Self> {
        replies.reverse();
        Arc::new(ReplayModel { replies: Mutex::new(replies), requests: Mutex::new(Vec::new()), after_script })
    }

    /// Every request it received, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl ChatModel for ReplayModel {
    fn name(&self) -> &str {
        "replay"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_delta: DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>> {
        Box::pin(async move {
            self.requests.lock().unwrap().push(request.clone());
            let next = self.replies.lock().unwrap().pop();
            let reply = next.or_else(|| self.after_script.clone()).expect("the script has a reply for every turn");
            for piece in reply.text.split_inclusive(' ') {
                on_delta(piece);
            }
            Ok(reply)
        })
    }
}
