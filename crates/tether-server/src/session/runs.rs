//! The run of a session: begun, checkpointed, stopped, suspended for a drain, ended, and its
//! conversation.

use tether_agent::{ChatMessage, RunCheckpoint};
use tether_protocol::{ErrorCode, ErrorFrame, HistoryLine, HistoryRole, RunId, RunStatus, ServerFrame};
use tokio::sync::oneshot;

use super::{MESSAGE_IDS_KEPT, RunHandle, Session, State};
use crate::persist::StoredRun;

impl Session {
    /// Stops the run task without ending the run (a draining shutdown): its last checkpoint
    /// stays in the store, and a server that reads the session back goes on with it.
    pub(crate) fn suspend_run(&self) {
        let mut state = self.lock();
        if let Some(run) = state.run.take() {
            run.abort.abort();
        }
        state.waiters.clear();
    }

    /// The run to go on with after this session was read back from its store, once (the
    /// caller starts it): its checkpoint and the `USER_MESSAGE` frame id that started it.
    pub(crate) fn run_to_resume(&self) -> Option<(RunCheckpoint, String)> {
        let state = self.lock();
        if state.run.is_some() {
            return None;
        }
        state.stored_run.as_ref().map(|run| (run.checkpoint.clone(), run.message_id.clone()))
    }

    /// Starts a run unless one is in progress. When one is, answers the `USER_MESSAGE`
    /// `frame_id` with `ERROR run_in_progress` and returns `false`. The refusal is queued under
    /// the same lock as the run's end, so it always reaches the client before that run's last
    /// frame: a client can send again when it sees that frame.
    pub(crate) fn begin_run(
        &self,
        run_id: &RunId,
        abort: impl FnOnce() -> tokio::task::AbortHandle,
        stop: oneshot::Sender<()>,
        frame_id: String,
        text: Option<&str>,
    ) -> bool {
        let mut state = self.lock();
        if state.run.is_some() {
            let message = "a run is in progress; wait for its end (AGENT_MESSAGE done) and send again";
            let frame = ErrorFrame {
                id: String::new(),
                code: ErrorCode::RunInProgress,
                message: message.into(),
                reply_to: Some(frame_id),
            };
            state.machine.send(ServerFrame::Error(frame));
            state.flush();
            return false;
        }
        state.run = Some(RunHandle { id: run_id.clone(), message_id: frame_id, abort: abort(), stop: Some(stop) });
        // A new run (`text`), not one that goes on after a restart: the user's message is part
        // of what they saw.
        if let Some(text) = text {
            state.transcript.push(HistoryLine {
                role: HistoryRole::User,
                text: text.to_string(),
                run_id: None,
                status: None,
            });
            state.run_text.clear();
            state.dirty = true;
        }
        true
    }

    /// Where the run in progress is ([`tether_agent::ToolHost::checkpoint`]): kept (stored,
    /// when the store is durable) so that a restart goes on from here.
    pub(crate) fn checkpoint(&self, checkpoint: RunCheckpoint) {
        let mut state = self.lock();
        state.awaiting_checkpoint = false;
        let Some(message_id) = state.run.as_ref().map(|run| run.message_id.clone()) else { return };
        // The run's own results (the conversation before it holds none of its calls).
        let own = checkpoint.messages.get(checkpoint.run_start..).unwrap_or(&checkpoint.messages);
        let answered: std::collections::HashSet<&str> = own
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Tool { call_id, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        // Results the checkpoint already holds need not be kept apart any more.
        let before = state.stored_run.take();
        state.store_copy.run_replaced(before.as_ref().map(|run| &run.checkpoint.messages[..]), &checkpoint.messages);
        let mut results = before.map(|run| run.results).unwrap_or_default();
        results.retain(|(id, _)| !answered.contains(id.as_str()));
        let text = state.run_text.clone();
        state.stored_run = Some(StoredRun { checkpoint, text, message_id, results });
        state.dirty = true;
        state.flush();
    }

    /// Stops the run in progress (`STOP_RUN`), if there is one and it is `run_id` (any, when
    /// `None`): it ends as `aborted` and records what it did. `false` when nothing was stopped.
    pub(crate) fn stop_run(&self, run_id: Option<&RunId>) -> bool {
        let mut state = self.lock();
        match state.run.as_mut().filter(|run| run_id.is_none_or(|id| *id == run.id)) {
            Some(run) => run.stop.take().is_some_and(|stop| stop.send(()).is_ok()),
            None => false,
        }
    }

    /// Whether a run is in progress.
    pub fn run_in_progress(&self) -> bool {
        self.lock().run.is_some()
    }

    /// The conversation a new run starts from. The session keeps it until the run ends with the
    /// conversation that follows (a run that fails keeps it as it was).
    pub(crate) fn history(&self) -> Vec<ChatMessage> {
        self.lock().history.clone()
    }

    /// Records the end of a run (and the conversation to continue).
    pub(crate) fn end_run(
        &self,
        run_id: &RunId,
        message_id: &str,
        history: Option<Vec<ChatMessage>>,
        status: RunStatus,
        errors: Vec<(ErrorCode, String, Option<String>)>,
    ) {
        let mut state = self.lock();
        // (Whatever a run held back leaves with its end.)
        state.awaiting_checkpoint = false;
        if state.run.as_ref().is_some_and(|run| run.id == *run_id) {
            state.run = None;
        }
        // Stored with the run's end: its message is answered. (Also when a hand-off or a drain
        // suspended the run as it ended: its end is what the store must have.)
        if state.messages.len() == MESSAGE_IDS_KEPT {
            state.messages.remove(0);
        }
        state.messages.push(message_id.to_string());
        if let Some(history) = history {
            let State { store_copy, history: old, .. } = &mut *state;
            store_copy.history_replaced(old, &history);
            state.history = history;
        }
        let text = std::mem::take(&mut state.run_text);
        state.transcript.push(HistoryLine {
            role: HistoryRole::Agent,
            text,
            run_id: Some(run_id.clone()),
            status: Some(status),
        });
        if state.stored_run.take().is_some() {
            state.store_copy.run_ended();
        }
        state.dirty = true;
        // Its calls still waiting are cancelled (a result that comes anyway is acknowledged as late).
        for call_id in state.machine.end_run(run_id) {
            state.waiters.remove(&call_id);
        }
        // Its `ERROR`s, then its last frame, in the same write as its end: a crash cannot leave
        // a stored session whose run ended with a client that never hears so.
        for (code, message, reply_to) in errors {
            state.machine.send(ServerFrame::Error(ErrorFrame { id: String::new(), code, message, reply_to }));
        }
        state.send_text(run_id, String::new(), true, Some(status), false);
    }
}
