//! The server's side of a session: numbered frames and their replay log, the tool calls waiting
//! for a result (with their deadlines), the calls answered (a result applied once, acknowledged
//! every time) and abandoned (timed out or cancelled: a late result is acknowledged, not applied).
//!
//! Every frame the server sends goes through [`ServerSession::send`] (or
//! [`ServerSession::call`]): it gets the next number (`s<n>`), is kept in the log, and is queued
//! for the connection if there is one. The edge writes what [`ServerSession::take_writes`]
//! returns, in order, after every event it feeds in, before it lets another event in (the
//! numbers must reach the socket in order).

use std::collections::VecDeque;

use tether_protocol::{
    CallId, ErrorCode, ErrorFrame, RunId, ServerFrame, ToolCall, ToolCancel, ToolResult, ToolResultAck, encode_frame,
};

use crate::RecentIds;

/// How many answered (and, separately, abandoned) call ids a session remembers to recognise a
/// result that comes again or comes late.
pub const DEFAULT_ANSWERED_IDS_KEPT: usize = 4096;

/// Settings of a [`ServerSession`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerSessionConfig {
    /// How many of the last frames are kept to replay after a reconnect.
    pub log_limit: usize,
    /// How many calls may wait for a result at once.
    pub max_pending_calls: usize,
    /// How long a call waits for its result, in milliseconds.
    pub result_timeout_ms: u64,
    /// How long a session waits for its client to come back, in milliseconds.
    pub grace_ms: u64,
    /// See [`DEFAULT_ANSWERED_IDS_KEPT`].
    pub answered_kept: usize,
}

impl Default for ServerSessionConfig {
    fn default() -> Self {
        ServerSessionConfig {
            log_limit: 1024,
            max_pending_calls: 16,
            result_timeout_ms: 330_000,
            grace_ms: 30_000,
            answered_kept: DEFAULT_ANSWERED_IDS_KEPT,
        }
    }
}

/// A tool call waiting for its result.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PendingCall {
    /// The call.
    pub call_id: CallId,
    /// The run that made it.
    pub run_id: RunId,
    /// Its frame's number.
    pub seq: u64,
    /// Its frame as sent, to send again after a reconnect.
    pub text: String,
    /// When it stops waiting, in the edge's milliseconds.
    pub deadline_ms: u64,
}

/// What became of a `TOOL_RESULT`.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultOutcome {
    /// The first result of a waiting call: deliver it. Acknowledged.
    Applied(ToolResult),
    /// The call was answered before: ignored, acknowledged again.
    Duplicate,
    /// The call had stopped waiting (timed out or cancelled): not applied, acknowledged so
    /// that the client forgets it.
    Late,
    /// This session never made that call: refused with `ERROR unknown_call` naming the frame.
    Unknown,
}

/// What [`ServerSession::attach`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attached {
    /// Frames the client had not processed that were older than the log: not sent again.
    pub lost: u64,
}

/// What [`ServerSession::poll`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Polled {
    /// Calls that stopped waiting: their time was up (each was sent a `TOOL_CANCEL`).
    pub timed_out: Vec<CallId>,
}

/// What a [`ServerSession`] needs to go on in another process (a restart, another instance):
/// everything but the attached connection, which is gone with the process. Serialisable.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServerSessionSnapshot {
    /// The number of the last frame sent.
    pub seq: u64,
    /// The replay log, oldest first.
    pub log: Vec<(u64, String)>,
    /// The calls waiting for a result. Their deadlines are in the old process's clock: a
    /// restore gives each a fresh result timeout.
    pub pending: Vec<PendingCall>,
    /// Answered call ids, oldest first.
    pub answered: Vec<CallId>,
    /// Abandoned call ids, oldest first.
    pub abandoned: Vec<CallId>,
}

/// The server's side of a session. Plain data: clone it to save it.
#[derive(Debug, Clone)]
pub struct ServerSession {
    config: ServerSessionConfig,
    /// The number of the last frame sent.
    seq: u64,
    /// The last frames sent, numbered, for replay; at most `log_limit`.
    log: VecDeque<(u64, String)>,
    /// The connection frames go to, if the client is there.
    connection: Option<u64>,
    /// Frames for that connection, in order, until the edge takes them.
    writes: Vec<String>,
    /// The number of the last frame sent before the client went away, and when it went.
    away: Option<(u64, u64)>,
    /// Calls waiting for a result, in the order they were made.
    pending: Vec<PendingCall>,
    answered: RecentIds,
    abandoned: RecentIds,
}

impl Default for ServerSession {
    fn default() -> Self {
        ServerSession::new(ServerSessionConfig::default())
    }
}

impl ServerSession {
    /// A session with nothing sent and no client attached.
    pub fn new(config: ServerSessionConfig) -> Self {
        ServerSession {
            config,
            seq: 0,
            log: VecDeque::new(),
            connection: None,
            writes: Vec::new(),
            away: None,
            pending: Vec::new(),
            answered: RecentIds::new(config.answered_kept),
            abandoned: RecentIds::new(config.answered_kept),
        }
    }

    /// The settings.
    pub fn config(&self) -> &ServerSessionConfig {
        &self.config
    }

    /// The number of the last frame sent.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The connection attached now.
    pub fn connection(&self) -> Option<u64> {
        self.connection
    }

    /// The calls waiting for a result, oldest first.
    pub fn pending(&self) -> &[PendingCall] {
        &self.pending
    }

    /// The frames to write to the attached connection, in order. Take them after every event.
    pub fn take_writes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.writes)
    }

    /// Numbers `frame` (`s<n>`), keeps it for a replay, and queues it for the connection.
    pub fn send(&mut self, mut frame: ServerFrame) {
        self.number(&mut frame);
    }

    fn number(&mut self, frame: &mut ServerFrame) -> (u64, String) {
        self.seq += 1;
        frame.set_id(format!("s{}", self.seq));
        let text = encode_frame(frame);
        if self.connection.is_some() {
            self.writes.push(text.clone());
        }
        if self.log.len() >= self.config.log_limit.max(1) {
            self.log.pop_front();
        }
        self.log.push_back((self.seq, text.clone()));
        (self.seq, text)
    }

    /// Sends a `TOOL_CALL` and waits for its result until `now_ms` plus the result timeout.
    /// `Err` (nothing sent) when `max_pending_calls` calls are waiting already; it carries the
    /// limit.
    pub fn call(&mut self, frame: ToolCall, now_ms: u64) -> Result<(), usize> {
        if self.pending.len() >= self.config.max_pending_calls {
            return Err(self.config.max_pending_calls);
        }
        let (call_id, run_id) = (frame.call_id.clone(), frame.run_id.clone());
        let (seq, text) = self.number(&mut ServerFrame::ToolCall(frame));
        let deadline_ms = now_ms.saturating_add(self.config.result_timeout_ms);
        self.pending.push(PendingCall { call_id, run_id, seq, text, deadline_ms });
        Ok(())
    }

    /// Whether the call was answered or abandoned (it is no longer waited for).
    pub fn settled(&self, call_id: &CallId) -> bool {
        self.answered.contains(call_id) || self.abandoned.contains(call_id)
    }

    /// Stops waiting for a call and tells the client to abort it. `false` if it was not waiting.
    pub fn cancel(&mut self, call_id: &CallId, reason: &str) -> bool {
        let Some(at) = self.pending.iter().position(|call| call.call_id == *call_id) else { return false };
        let call = self.pending.remove(at);
        self.abandoned.insert(call.call_id);
        let frame = ToolCancel { id: String::new(), call_id: call_id.clone(), reason: reason.to_string() };
        self.send(ServerFrame::ToolCancel(frame));
        true
    }

    /// A run ended: its calls still waiting are cancelled. Returns their ids.
    pub fn end_run(&mut self, run_id: &RunId) -> Vec<CallId> {
        let stale: Vec<CallId> =
            self.pending.iter().filter(|call| call.run_id == *run_id).map(|call| call.call_id.clone()).collect();
        for call_id in &stale {
            self.cancel(call_id, "the run ended");
        }
        stale
    }

    /// Applies a `TOOL_RESULT` once, and acknowledges or refuses it (see [`ResultOutcome`]).
    pub fn result(&mut self, result: ToolResult) -> ResultOutcome {
        let call_id = result.call_id.clone();
        let outcome = if let Some(at) = self.pending.iter().position(|call| call.call_id == call_id) {
            self.pending.remove(at);
            self.answered.insert(call_id.clone());
            ResultOutcome::Applied(result)
        } else if self.answered.contains(&call_id) {
            ResultOutcome::Duplicate
        } else if self.abandoned.contains(&call_id) {
            ResultOutcome::Late
        } else {
            let message = format!("TOOL_RESULT for unknown call {call_id:?}: this session never sent it");
            let frame =
                ErrorFrame { id: String::new(), code: ErrorCode::UnknownCall, message, reply_to: Some(result.id) };
            self.send(ServerFrame::Error(frame));
            return ResultOutcome::Unknown;
        };
        self.send(ServerFrame::ToolResultAck(ToolResultAck { id: String::new(), call_id }));
        outcome
    }

    /// When [`ServerSession::poll`] has a call to time out.
    pub fn next_deadline(&self) -> Option<u64> {
        self.pending.iter().map(|call| call.deadline_ms).min()
    }

    /// Times out the calls whose deadline has passed: each is cancelled (`TOOL_CANCEL`, "no
    /// result in time") and counts as abandoned.
    pub fn poll(&mut self, now_ms: u64) -> Polled {
        let expired: Vec<CallId> =
            self.pending.iter().filter(|call| call.deadline_ms <= now_ms).map(|call| call.call_id.clone()).collect();
        for call_id in &expired {
            self.cancel(call_id, "no result in time");
        }
        Polled { timed_out: expired }
    }

    /// Makes `connection` the client's, then queues `welcome` (unnumbered), the calls still
    /// waiting that the replay will not carry (in order; their numbers are below the replay's),
    /// and the frames the client has not processed: after `last_seq` when it says, else those
    /// sent since it went away.
    pub fn attach(&mut self, connection: u64, welcome: String, last_seq: Option<u64>) -> Attached {
        self.attach_with(connection, vec![welcome], last_seq)
    }

    /// [`ServerSession::attach`] with several unnumbered frames first (the welcome, then a
    /// history of the conversation for a client that reloaded).
    pub fn attach_with(&mut self, connection: u64, first: Vec<String>, last_seq: Option<u64>) -> Attached {
        // Without `lastSeq`: what was sent since the client went away (nothing, if a new
        // connection replaces one not yet seen to die; everything, if none was ever attached).
        let never_attached = self.connection.is_none() && self.away.is_none();
        let from = last_seq.or(self.away.map(|(seq, _)| seq)).unwrap_or(if never_attached { 0 } else { self.seq });
        let oldest = self.log.front().map_or(self.seq + 1, |(seq, _)| *seq);
        let replayed = |seq: u64| seq > from && seq >= oldest;
        let mut writes = first;
        writes.extend(self.pending.iter().filter(|call| !replayed(call.seq)).map(|call| call.text.clone()));
        writes.extend(self.log.iter().filter(|(seq, _)| *seq > from).map(|(_, text)| text.clone()));
        let unlogged = oldest.saturating_sub(from.saturating_add(1));
        let resent = self.pending.iter().filter(|call| call.seq > from && call.seq < oldest).count() as u64;
        self.connection = Some(connection);
        self.writes = writes;
        self.away = None;
        Attached { lost: unlogged.saturating_sub(resent) }
    }

    /// The connection went away (when `now_ms`). `false` if it was not the attached one.
    pub fn detach(&mut self, connection: u64, now_ms: u64) -> bool {
        if self.connection != Some(connection) {
            return false;
        }
        self.connection = None;
        self.writes.clear();
        self.away = Some((self.seq, now_ms));
        true
    }

    /// When the session expires if its client stays away (`None` while it is attached).
    pub fn expires_at(&self) -> Option<u64> {
        self.away.map(|(_, since)| since.saturating_add(self.config.grace_ms))
    }

    /// Whether the client has been away for the whole grace period.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_at().is_some_and(|at| now_ms >= at)
    }

    /// The logged frames numbered after `seq`, oldest first (what a store has not been given yet).
    pub fn logged_after(&self, seq: u64) -> Vec<(u64, String)> {
        self.log.iter().filter(|(n, _)| *n > seq).cloned().collect()
    }

    /// The number of the oldest frame still in the replay log.
    pub fn oldest_logged(&self) -> Option<u64> {
        self.log.front().map(|(seq, _)| *seq)
    }

    /// What another process needs to go on with this session ([`ServerSession::restore`]).
    pub fn snapshot(&self) -> ServerSessionSnapshot {
        ServerSessionSnapshot {
            seq: self.seq,
            log: self.log.iter().cloned().collect(),
            pending: self.pending.clone(),
            answered: self.answered.iter().cloned().collect(),
            abandoned: self.abandoned.iter().cloned().collect(),
        }
    }

    /// A snapshot without the replay log, with only the last `ids_kept` answered and abandoned
    /// ids: what a store that keeps the log itself writes, in time that does not grow with the
    /// ids remembered.
    pub fn snapshot_without_log(&self, ids_kept: usize) -> ServerSessionSnapshot {
        let last = |ids: &RecentIds| ids.iter().skip(ids.len().saturating_sub(ids_kept)).cloned().collect();
        ServerSessionSnapshot {
            seq: self.seq,
            log: Vec::new(),
            pending: self.pending.clone(),
            answered: last(&self.answered),
            abandoned: last(&self.abandoned),
        }
    }

    /// A session restored from a [`ServerSessionSnapshot`] in this process, at `now_ms`: no
    /// client attached (it is away since now, so the grace period starts again), and each
    /// waiting call gets a fresh result timeout.
    pub fn restore(config: ServerSessionConfig, snapshot: ServerSessionSnapshot, now_ms: u64) -> Self {
        let mut session = ServerSession::new(config);
        session.seq = snapshot.seq;
        let skip = snapshot.log.len().saturating_sub(config.log_limit.max(1));
        session.log = snapshot.log.into_iter().skip(skip).collect();
        session.pending = snapshot.pending;
        for call in &mut session.pending {
            call.deadline_ms = now_ms.saturating_add(config.result_timeout_ms);
        }
        for id in snapshot.answered {
            session.answered.insert(id);
        }
        for id in snapshot.abandoned {
            session.abandoned.insert(id);
        }
        session.away = Some((session.seq, now_ms));
        session
    }

    /// Ends the session: nothing waits any more. Returns the calls that were waiting.
    pub fn close(&mut self) -> Vec<CallId> {
        self.pending.drain(..).map(|call| call.call_id).collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use tether_protocol::{AgentMessage, ResultStatus, Risk, decode_server_frame};

    use super::*;

    fn call(call_id: &str, run_id: &str) -> ToolCall {
        ToolCall {
            id: String::new(),
            call_id: call_id.into(),
            run_id: run_id.into(),
            name: "cart_add".into(),
            args: json!({}),
            risk: Risk::None,
        }
    }

    fn result(call_id: &str, id: &str) -> ToolResult {
        ToolResult { id: id.into(), call_id: call_id.into(), status: ResultStatus::Ok, content: Value::Null }
    }

    fn text(delta: &str) -> ServerFrame {
        ServerFrame::AgentMessage(AgentMessage {
            id: String::new(),
            run_id: "r".into(),
            delta: delta.into(),
            done: false,
            status: None,
            reset: false,
        })
    }

    fn frames(texts: &[String]) -> Vec<ServerFrame> {
        texts.iter().map(|text| decode_server_frame(text, usize::MAX).unwrap()).collect()
    }

    fn ids(texts: &[String]) -> Vec<String> {
        frames(texts).iter().map(|frame| frame.id().to_string()).collect()
    }

    #[test]
    fn a_result_is_applied_once_acknowledged_always_and_an_unknown_one_refused() {
        let mut session = ServerSession::default();
        session.attach(1, "welcome".into(), None);
        session.take_writes();
        session.call(call("k1", "r"), 0).unwrap();
        assert_eq!(session.result(result("k1", "c1")), ResultOutcome::Applied(result("k1", "c1")));
        assert_eq!(session.result(result("k1", "c2")), ResultOutcome::Duplicate);
        assert_eq!(session.result(result("zz", "c3")), ResultOutcome::Unknown);
        let sent = frames(&session.take_writes());
        assert!(matches!(&sent[0], ServerFrame::ToolCall(c) if c.id == "s1"));
        assert!(matches!(&sent[1], ServerFrame::ToolResultAck(a) if a.call_id == "k1"));
        assert!(matches!(&sent[2], ServerFrame::ToolResultAck(a) if a.call_id == "k1"));
        assert!(matches!(&sent[3], ServerFrame::Error(e)
            if e.code == ErrorCode::UnknownCall && e.reply_to.as_deref() == Some("c3")));
    }

    #[test]
    fn a_result_after_the_timeout_or_a_cancel_is_acknowledged_as_late() {
        let config = ServerSessionConfig { result_timeout_ms: 100, ..ServerSessionConfig::default() };
        let mut session = ServerSession::new(config);
        session.attach(1, "welcome".into(), None);
        session.call(call("k1", "r1"), 0).unwrap();
        session.call(call("k2", "r2"), 50).unwrap();
        session.call(call("k3", "r3"), 50).unwrap();
        assert_eq!(session.next_deadline(), Some(100));
        assert_eq!(session.poll(99).timed_out, Vec::<CallId>::new());
        assert_eq!(session.poll(100).timed_out, ["k1"]);
        assert!(session.cancel(&"k2".into(), "stop"));
        assert!(!session.cancel(&"k2".into(), "stop"), "only once");
        assert_eq!(session.end_run(&"r3".into()), ["k3"]);
        session.take_writes();
        for call_id in ["k1", "k2", "k3"] {
            assert_eq!(session.result(result(call_id, "c")), ResultOutcome::Late);
        }
        let sent = frames(&session.take_writes());
        assert!(sent.iter().all(|f| matches!(f, ServerFrame::ToolResultAck(_))), "{sent:?}");
        assert!(session.pending().is_empty() && session.next_deadline().is_none());
    }

    #[test]
    fn a_full_session_refuses_another_call() {
        let config = ServerSessionConfig { max_pending_calls: 1, ..ServerSessionConfig::default() };
        let mut session = ServerSession::new(config);
        session.call(call("k1", "r"), 0).unwrap();
        assert_eq!(session.call(call("k2", "r"), 0), Err(1));
        assert_eq!(session.seq(), 1, "nothing sent for the refused call");
    }

    #[test]
    fn a_resume_replays_after_last_seq_and_resends_older_waiting_calls_first() {
        let config = ServerSessionConfig { log_limit: 3, ..ServerSessionConfig::default() };
        let mut session = ServerSession::new(config);
        session.attach(1, "welcome".into(), None);
        session.call(call("k1", "r"), 0).unwrap(); // s1
        for n in 0..4 {
            session.send(text(&n.to_string())); // s2..s5
        }
        assert!(session.detach(1, 10));
        assert!(!session.detach(1, 10), "once");
        assert_eq!(session.take_writes(), Vec::<String>::new(), "nothing queued while away");
        session.send(text("while away")); // s6
        // The client processed s1 and s2; the log holds s4..s6: s3 is lost, s1 is still waiting.
        let attached = session.attach(2, "welcome".into(), Some(2));
        assert_eq!(attached.lost, 1);
        assert_eq!(session.take_writes()[0], "welcome");
        let mut again = ServerSession::new(config);
        again.call(call("k1", "r"), 0).unwrap();
        again.send(text("x"));
        again.detach(0, 0);
        again.attach(3, "w".into(), Some(0));
        assert_eq!(ids(&again.take_writes()[1..]), ["s1", "s2"]);
        // Without lastSeq: what was sent since the client went away; the waiting call first.
        session.detach(2, 20);
        session.send(text("later")); // s7
        session.attach(4, "welcome".into(), None);
        assert_eq!(ids(&session.take_writes()[1..]), ["s1", "s7"]);
    }

    #[test]
    fn a_restored_session_goes_on_where_the_snapshot_left_it() {
        let config = ServerSessionConfig { log_limit: 4, result_timeout_ms: 100, ..ServerSessionConfig::default() };
        let mut session = ServerSession::new(config);
        session.attach(1, "w".into(), None);
        session.call(call("k1", "r"), 0).unwrap(); // s1
        session.call(call("k2", "r"), 0).unwrap(); // s2
        assert!(matches!(session.result(result("k1", "c1")), ResultOutcome::Applied(_))); // s3 ack
        session.cancel(&"k2".into(), "stop"); // s4
        session.send(text("hello")); // s5
        session.call(call("k3", "r"), 0).unwrap(); // s6
        let snapshot = session.snapshot();
        let json = serde_json::to_string(&snapshot).unwrap();
        let restored_snapshot: ServerSessionSnapshot = serde_json::from_str(&json).unwrap();
        assert_eq!(restored_snapshot, snapshot);
        let mut restored = ServerSession::restore(config, restored_snapshot, 5_000);
        // Numbering goes on; answered, abandoned and waiting calls are known as before.
        assert_eq!(restored.seq(), 6);
        assert_eq!(restored.pending().len(), 1);
        assert_eq!(restored.next_deadline(), Some(5_100), "a fresh timeout in this process's clock");
        assert_eq!(restored.result(result("k1", "c9")), ResultOutcome::Duplicate);
        assert_eq!(restored.result(result("k2", "c9")), ResultOutcome::Late);
        // A client that processed s4 gets s5 and s6 again (s6 is the waiting call), then the
        // acknowledgements of the two results above (s7, s8).
        restored.attach(2, "w".into(), Some(4));
        assert_eq!(ids(&restored.take_writes()[1..]), ["s5", "s6", "s7", "s8"]);
        assert!(matches!(restored.result(result("k3", "c10")), ResultOutcome::Applied(_)));
        assert!(restored.expires_at().is_none(), "attached");
        // Without a client it is away from the restore on.
        let away = ServerSession::restore(config, session.snapshot(), 5_000);
        assert_eq!(away.expires_at(), Some(5_000 + config.grace_ms));
    }

    #[test]
    fn a_session_expires_after_the_grace_period_away() {
        let config = ServerSessionConfig { grace_ms: 1000, ..ServerSessionConfig::default() };
        let mut session = ServerSession::new(config);
        assert!(!session.expired(u64::MAX), "never attached, never away");
        session.attach(1, "w".into(), None);
        session.call(call("k1", "r"), 0).unwrap();
        session.detach(1, 500);
        assert_eq!(session.expires_at(), Some(1500));
        assert!(!session.expired(1499) && session.expired(1500));
        session.attach(2, "w".into(), None);
        assert!(!session.expired(5000), "back in time");
        assert_eq!(session.close(), ["k1"]);
    }
}
