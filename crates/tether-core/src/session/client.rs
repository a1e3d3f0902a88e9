//! The browser's side of a session: results kept until acknowledged, resent after a resume and
//! on a live connection that does not answer, the last server frame processed (`lastSeq`), and
//! what becomes of results nobody waits for.
//!
//! The edge calls [`ClientSession::connected`] when a socket opens (and sends the `HELLO` it
//! returns), [`ClientSession::welcomed`] on `WELCOME`, [`ClientSession::received`] for every
//! other server frame (a `false` means a frame seen before: skip it), and
//! [`ClientSession::disconnected`] when the socket dies. Results go in with
//! [`ClientSession::result`]; [`ClientSession::poll`] at [`ClientSession::next_deadline`]
//! returns the ones to send again.

use serde_json::Value;
use tether_protocol::{
    CallId, ClientFrame, ErrorCode, ErrorFrame, Hello, PROTOCOL_VERSION, ResultStatus, Resume, ServerFrameOf,
    ToolResult, UserMessage, Welcome,
};

/// How long a result sent on a live connection waits for its acknowledgement before it is sent
/// again (doubled for each further resend).
pub const DEFAULT_RESEND_AFTER_MS: u64 = 3_000;
/// How many times a result is sent again on one connection without an acknowledgement; after
/// that it waits for the next connection.
pub const DEFAULT_MAX_RESENDS: u32 = 3;

/// Settings of a [`ClientSession`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSessionConfig {
    /// See [`DEFAULT_RESEND_AFTER_MS`].
    pub resend_after_ms: u64,
    /// See [`DEFAULT_MAX_RESENDS`].
    pub max_resends: u32,
}

impl Default for ClientSessionConfig {
    fn default() -> Self {
        ClientSessionConfig { resend_after_ms: DEFAULT_RESEND_AFTER_MS, max_resends: DEFAULT_MAX_RESENDS }
    }
}

/// Where the connection stands, as the session sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// No socket is open.
    Down,
    /// A socket is open and `HELLO` was sent; no `WELCOME` yet.
    Connected,
    /// The server welcomed the client on the open socket: frames can be sent.
    Welcomed,
}

/// A result the server has not acknowledged.
#[derive(Debug, Clone, PartialEq)]
pub struct Unacknowledged {
    /// The frame, sent again as it is (same id), so that an `ERROR` naming it names the result.
    pub result: ToolResult,
    /// When it was last sent on the current connection (`None`: not on this one yet).
    pub sent_at_ms: Option<u64>,
    /// How many times it was sent again on the current connection.
    pub resends: u32,
}

/// What [`ClientSession::welcomed`] asks of the edge.
#[derive(Debug, Clone, PartialEq)]
pub struct Welcomed {
    /// Send these, in order: the tool list first, then the unacknowledged results, then the
    /// messages queued while disconnected.
    pub send: Vec<ClientFrame>,
    /// Results dropped because the server no longer knows the session (it expired): report them.
    pub lost: usize,
}

/// The browser's side of a session. Plain data: clone it to save it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientSession {
    config: ClientSessionConfig,
    link: Link,
    /// The session to resume (its `lastSeq` is filled in when saying `HELLO`).
    resume: Option<Resume>,
    /// The number of the last server frame processed.
    last_seq: Option<u64>,
    /// The number in the last frame id this client made (`c<n>`).
    next_frame: u64,
    /// Results not yet acknowledged, oldest first.
    outbox: Vec<Unacknowledged>,
    /// The user's messages not answered yet (no run's end seen since): sent after every welcome,
    /// those sent before too (a server that died may never have read them; one that did ignores
    /// a message id it has seen).
    unanswered: Vec<UserMessage>,
    /// Calls the server cancelled while they ran: their results are not sent.
    unwanted: Vec<CallId>,
}

impl Default for ClientSession {
    fn default() -> Self {
        ClientSession::new(ClientSessionConfig::default())
    }
}

impl ClientSession {
    /// A session that has not connected yet.
    pub fn new(config: ClientSessionConfig) -> Self {
        ClientSession {
            config,
            link: Link::Down,
            resume: None,
            last_seq: None,
            next_frame: 0,
            outbox: Vec::new(),
            unanswered: Vec::new(),
            unwanted: Vec::new(),
        }
    }

    /// A fresh frame id (`c1`, `c2`, …): unique for this client.
    pub fn next_id(&mut self) -> String {
        self.next_frame += 1;
        format!("c{}", self.next_frame)
    }

    /// Where the connection stands.
    pub fn link(&self) -> Link {
        self.link
    }

    /// The session id, once welcomed.
    pub fn session_id(&self) -> Option<&str> {
        self.resume.as_ref().map(|resume| resume.session_id.as_str())
    }

    /// The session id and resume token, once welcomed: what a page keeps (in the browser's
    /// `sessionStorage`) to resume the session after a reload ([`ClientSession::reloaded`]).
    pub fn resume_info(&self) -> Option<(&str, &str)> {
        self.resume.as_ref().map(|resume| (resume.session_id.as_str(), resume.token.as_str()))
    }

    /// The number in the last frame id this client made (kept across a reload, so that ids
    /// stay unique in the session).
    pub fn frames_made(&self) -> u64 {
        self.next_frame
    }

    /// A page that reloaded goes on with the session it kept: the next `HELLO` resumes it and
    /// asks for the conversation so far (`history`), and `results` (those the server had not
    /// acknowledged) are sent again after the welcome. `frames_made` continues the frame ids.
    pub fn reloaded(&mut self, session_id: String, token: String, results: Vec<ToolResult>, frames_made: u64) {
        self.resume = Some(Resume { session_id, token, last_seq: None, history: true });
        self.next_frame = self.next_frame.max(frames_made);
        self.outbox =
            results.into_iter().map(|result| Unacknowledged { result, sent_at_ms: None, resends: 0 }).collect();
    }

    /// The number of the last server frame processed.
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// The results waiting for an acknowledgement, oldest first.
    pub fn unacknowledged(&self) -> &[Unacknowledged] {
        &self.outbox
    }

    /// A socket opened: send the `HELLO` this returns (it resumes the session, if there is one,
    /// from the last frame processed).
    pub fn connected(&mut self) -> ClientFrame {
        self.link = Link::Connected;
        // `lastSeq` 0 when nothing numbered was processed yet: the server replays from its first
        // frame (without it, the server would resend only what it sent after it saw us leave).
        // After a reload (`history`) the server sends the conversation instead of old frames.
        let resume = self
            .resume
            .clone()
            .map(|resume| Resume { last_seq: (!resume.history).then(|| self.last_seq.unwrap_or(0)), ..resume });
        ClientFrame::Hello(Hello {
            id: self.next_id(),
            protocol_version: PROTOCOL_VERSION,
            resume,
            client: Some(concat!("tether-web/", env!("CARGO_PKG_VERSION")).to_string()),
        })
    }

    /// The socket died. Whatever was in flight is sent again after the next welcome.
    pub fn disconnected(&mut self) {
        self.link = Link::Down;
    }

    /// The server welcomed the client. `context` is the full tool list (a `CONTEXT_UPDATE`),
    /// sent first so that results and messages are read against it. When the session was not
    /// resumed (it expired), the results nobody waits for any more are dropped and counted.
    pub fn welcomed(&mut self, welcome: &Welcome, context: ClientFrame, now_ms: u64) -> Welcomed {
        let mut lost = 0;
        if !welcome.resumed {
            // A new session numbers its frames from 1, and waits for none of the old results.
            self.last_seq = None;
            lost = self.outbox.len();
            self.outbox.clear();
            self.unwanted.clear();
            // Nor for the old session's messages: the page says the conversation was lost and
            // starts afresh (messages made before any session was welcomed still go).
            if self.resume.is_some() {
                self.unanswered.clear();
            }
        }
        self.resume = Some(Resume {
            session_id: welcome.session_id.clone(),
            token: welcome.resume_token.clone(),
            last_seq: None,
            history: false,
        });
        self.link = Link::Welcomed;
        let mut send = vec![context];
        for entry in &mut self.outbox {
            entry.sent_at_ms = Some(now_ms);
            entry.resends = 0;
            send.push(ClientFrame::ToolResult(entry.result.clone()));
        }
        send.extend(self.unanswered.iter().cloned().map(ClientFrame::UserMessage));
        Welcomed { send, lost }
    }

    /// Notes a server frame before the edge handles it. `false` means the frame was processed
    /// already (a number at or below `lastSeq`, delivered again): the edge skips it. `WELCOME`
    /// and unnumbered frames are always handled.
    pub fn received<E, L>(&mut self, frame: &ServerFrameOf<E, L>) -> bool {
        if matches!(frame, ServerFrameOf::Welcome(_)) {
            return true;
        }
        if let Some(seq) = frame.seq().filter(|seq| *seq > 0) {
            if self.last_seq.is_some_and(|last| seq <= last) {
                return false;
            }
            self.last_seq = Some(seq);
        }
        // A run ended (a frame not seen before): the messages sent before it are answered (one
        // by it, the others refused while it ran).
        if matches!(frame, ServerFrameOf::AgentMessage(message) if message.done) {
            self.unanswered.clear();
        }
        true
    }

    /// A `TOOL_RESULT_ACK`: the result is applied, forget it.
    pub fn acknowledged(&mut self, call_id: &CallId) {
        self.outbox.retain(|entry| entry.result.call_id != *call_id);
    }

    /// An `ERROR`. When it is `unknown_call` naming one of the results kept here, the server
    /// will never apply it: it is dropped, and its call id returned (to report).
    pub fn refused(&mut self, error: &ErrorFrame) -> Option<CallId> {
        if error.code != ErrorCode::UnknownCall {
            return None;
        }
        let reply_to = error.reply_to.as_deref()?;
        let at = self.outbox.iter().position(|entry| entry.result.id == reply_to)?;
        Some(self.outbox.remove(at).result.call_id)
    }

    /// The server cancelled a call that is still running: its result will not be sent.
    pub fn nobody_waits(&mut self, call_id: &CallId) {
        self.unwanted.push(call_id.clone());
    }

    /// A call finished. The result is kept until acknowledged; the frame to send now is
    /// returned when the client is welcomed (otherwise it leaves after the next welcome).
    /// `None` too when the server cancelled the call: nobody waits for the result.
    pub fn result(
        &mut self,
        call_id: &CallId,
        status: ResultStatus,
        content: Value,
        now_ms: u64,
    ) -> Option<ClientFrame> {
        if let Some(at) = self.unwanted.iter().position(|id| id == call_id) {
            self.unwanted.swap_remove(at);
            return None;
        }
        let result = ToolResult { id: self.next_id(), call_id: call_id.clone(), status, content };
        let welcomed = self.link == Link::Welcomed;
        let frame = welcomed.then(|| ClientFrame::ToolResult(result.clone()));
        self.outbox.push(Unacknowledged { result, sent_at_ms: welcomed.then_some(now_ms), resends: 0 });
        frame
    }

    /// A `TOOL_CALL` for a call the executor has seen already: the result kept for it, to send
    /// again (when welcomed and the result is still unacknowledged).
    pub fn repeated_call(&self, call_id: &CallId) -> Option<ClientFrame> {
        let entry = self.outbox.iter().find(|entry| entry.result.call_id == *call_id)?;
        (self.link == Link::Welcomed).then(|| ClientFrame::ToolResult(entry.result.clone()))
    }

    /// The user's message: the frame to send now, or `None` when it was queued until the next
    /// welcome.
    pub fn message(&mut self, text: &str) -> Option<ClientFrame> {
        let message = UserMessage { id: self.next_id(), text: text.to_string() };
        self.unanswered.push(message.clone());
        (self.link == Link::Welcomed).then_some(ClientFrame::UserMessage(message))
    }

    fn due(&self, entry: &Unacknowledged) -> Option<u64> {
        let sent = entry.sent_at_ms?;
        (self.link == Link::Welcomed && entry.resends < self.config.max_resends)
            .then(|| sent.saturating_add(self.config.resend_after_ms << entry.resends.min(16)))
    }

    /// When [`ClientSession::poll`] has something to send again.
    pub fn next_deadline(&self) -> Option<u64> {
        self.outbox.iter().filter_map(|entry| self.due(entry)).min()
    }

    /// The results whose acknowledgement is overdue on this connection, to send again (each at
    /// most `max_resends` times per connection, waiting twice as long each time).
    pub fn poll(&mut self, now_ms: u64) -> Vec<ClientFrame> {
        let mut send = Vec::new();
        for at in 0..self.outbox.len() {
            if self.due(&self.outbox[at]).is_some_and(|due| due <= now_ms) {
                let entry = &mut self.outbox[at];
                entry.sent_at_ms = Some(now_ms);
                entry.resends += 1;
                send.push(ClientFrame::ToolResult(entry.result.clone()));
            }
        }
        send
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tether_protocol::{AgentMessage, ContextUpdate, ServerFrame, ToolResultAck};

    use super::*;

    fn welcome(resumed: bool) -> Welcome {
        Welcome {
            id: "welcome".into(),
            protocol_version: PROTOCOL_VERSION,
            session_id: "s-1".into(),
            resume_token: "t".into(),
            resumed,
            max_active_tools: 30,
            max_frame_bytes: 1 << 18,
            capabilities: Vec::new(),
        }
    }

    fn context(session: &mut ClientSession) -> ClientFrame {
        ClientFrame::ContextUpdate(ContextUpdate {
            id: session.next_id(),
            revision: 1,
            tools: Vec::new(),
            page: None,
            context: Vec::new(),
        })
    }

    fn message(id: &str) -> ServerFrame {
        ServerFrame::AgentMessage(AgentMessage {
            id: id.into(),
            run_id: "r".into(),
            delta: "x".into(),
            done: false,
            status: None,
            reset: false,
        })
    }

    fn welcomed(session: &mut ClientSession, resumed: bool, now: u64) -> Welcomed {
        let context = context(session);
        session.welcomed(&welcome(resumed), context, now)
    }

    fn call_ids(frames: &[ClientFrame]) -> Vec<&str> {
        frames
            .iter()
            .filter_map(|frame| match frame {
                ClientFrame::ToolResult(result) => Some(result.call_id.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_result_is_kept_until_acknowledged_and_resent_after_a_resume() {
        let mut session = ClientSession::default();
        assert!(matches!(session.connected(), ClientFrame::Hello(Hello { resume: None, .. })));
        welcomed(&mut session, false, 0);
        assert!(session.received(&message("s4")));
        let sent = session.result(&"k1".into(), ResultStatus::Ok, json!(1), 10).expect("sent at once");
        session.disconnected();
        // Made while away: kept, not sent.
        assert_eq!(session.result(&"k2".into(), ResultStatus::Ok, json!(2), 20), None);
        let ClientFrame::Hello(hello) = session.connected() else { panic!("a HELLO") };
        assert_eq!(hello.resume.map(|r| (r.session_id, r.last_seq)), Some(("s-1".into(), Some(4))));
        let again = welcomed(&mut session, true, 30);
        assert_eq!((call_ids(&again.send), again.lost), (vec!["k1", "k2"], 0));
        assert!(matches!(again.send[0], ClientFrame::ContextUpdate(_)), "the tool list goes first");
        assert_eq!(again.send[1], sent, "resent as it was, same id");
        session.acknowledged(&"k1".into());
        session.acknowledged(&"k2".into());
        assert!(session.unacknowledged().is_empty());
    }

    #[test]
    fn a_reloaded_page_resumes_with_history_and_sends_the_kept_results_once_welcomed() {
        let mut before = ClientSession::default();
        before.connected();
        welcomed(&mut before, false, 0);
        before.received(&message("s7"));
        let kept = before.result(&"k1".into(), ResultStatus::Ok, json!(1), 10);
        let (id, token) = before.resume_info().map(|(id, token)| (id.to_string(), token.to_string())).unwrap();
        let results: Vec<ToolResult> = before.unacknowledged().iter().map(|entry| entry.result.clone()).collect();

        // The new page's session starts from what the old one kept.
        let mut after = ClientSession::default();
        after.reloaded(id, token, results, before.frames_made());
        let ClientFrame::Hello(hello) = after.connected() else { panic!("a HELLO") };
        let resume = hello.resume.expect("it resumes");
        assert_eq!((resume.session_id.as_str(), resume.history, resume.last_seq), ("s-1", true, None));
        assert!(after.next_id() != "c1" && after.frames_made() > before.frames_made(), "ids go on, never reused");
        let again = welcomed(&mut after, true, 20);
        assert_eq!(call_ids(&again.send), vec!["k1"]);
        assert_eq!(Some(&again.send[1]), kept.as_ref(), "sent again as it was, same id");
        // Later reconnects are ordinary resumes.
        after.disconnected();
        let ClientFrame::Hello(hello) = after.connected() else { panic!("a HELLO") };
        assert!(!hello.resume.expect("it resumes").history);
    }

    #[test]
    fn an_expired_session_drops_and_counts_the_results_nobody_waits_for() {
        let mut session = ClientSession::default();
        session.connected();
        welcomed(&mut session, false, 0);
        session.received(&message("s9"));
        session.result(&"k1".into(), ResultStatus::Ok, json!(1), 0);
        assert!(session.message("remove the mug").is_some());
        session.disconnected();
        session.connected();
        let again = welcomed(&mut session, false, 5);
        assert_eq!((call_ids(&again.send).len(), again.lost), (0, 1));
        let messages = again.send.iter().filter(|frame| matches!(frame, ClientFrame::UserMessage(_))).count();
        assert_eq!(messages, 0, "the old session's message is not sent to the new one");
        assert_eq!(session.last_seq(), None, "the new session numbers from 1");
        assert!(session.received(&message("s1")));
    }

    #[test]
    fn frames_processed_already_are_skipped() {
        let mut session = ClientSession::default();
        assert!(session.received(&message("s1")) && session.received(&message("s2")));
        assert!(!session.received(&message("s2")) && !session.received(&message("s1")));
        // Unnumbered frames (an error before the session, the welcome) always count.
        assert!(session.received(&message("s0")) && session.received(&message("a")));
        assert!(session.received(&message("s3")));
        assert_eq!(session.last_seq(), Some(3));
    }

    #[test]
    fn an_unknown_call_error_naming_a_result_drops_it() {
        let mut session = ClientSession::default();
        session.connected();
        welcomed(&mut session, false, 0);
        let Some(ClientFrame::ToolResult(result)) = session.result(&"k1".into(), ResultStatus::Ok, json!(1), 0) else {
            panic!("sent")
        };
        let error = |code, reply_to: &str| ErrorFrame {
            id: "s2".into(),
            code,
            message: String::new(),
            reply_to: Some(reply_to.into()),
        };
        assert_eq!(session.refused(&error(ErrorCode::RateLimited, &result.id)), None);
        assert_eq!(session.refused(&error(ErrorCode::UnknownCall, "c999")), None);
        assert_eq!(session.unacknowledged().len(), 1);
        assert_eq!(session.refused(&error(ErrorCode::UnknownCall, &result.id)), Some("k1".into()));
        assert!(session.unacknowledged().is_empty());
    }

    #[test]
    fn an_unacknowledged_result_is_resent_on_a_live_connection_a_bounded_number_of_times() {
        let config = ClientSessionConfig { resend_after_ms: 1000, max_resends: 3 };
        let mut session = ClientSession::new(config);
        session.connected();
        welcomed(&mut session, false, 0);
        session.result(&"k1".into(), ResultStatus::Ok, json!(1), 100);
        assert_eq!(session.next_deadline(), Some(1100));
        assert!(session.poll(1099).is_empty());
        assert_eq!(call_ids(&session.poll(1100)), ["k1"]);
        // Twice as long each time: 2 s, then 4 s.
        assert_eq!(session.next_deadline(), Some(3100));
        assert_eq!(call_ids(&session.poll(3100)), ["k1"]);
        assert_eq!(call_ids(&session.poll(7100)), ["k1"]);
        assert_eq!((session.next_deadline(), session.poll(1_000_000).len()), (None, 0), "bounded");
        // A new connection starts over.
        session.disconnected();
        assert_eq!(session.next_deadline(), None, "nothing is resent while down");
        session.connected();
        assert_eq!(call_ids(&welcomed(&mut session, true, 2_000_000).send), ["k1"]);
        assert_eq!(session.next_deadline(), Some(2_001_000));
        session.acknowledged(&"k1".into());
        assert_eq!(session.next_deadline(), None);
    }

    #[test]
    fn a_result_of_a_call_the_server_cancelled_is_not_sent_and_messages_wait_for_a_welcome() {
        let mut session = ClientSession::default();
        assert_eq!(session.message("hi"), None);
        session.connected();
        let again = welcomed(&mut session, false, 0);
        assert!(matches!(&again.send[1], ClientFrame::UserMessage(m) if m.text == "hi"));
        session.nobody_waits(&"k1".into());
        assert_eq!(session.result(&"k1".into(), ResultStatus::Cancelled, json!("x"), 0), None);
        assert!(session.unacknowledged().is_empty());
        assert!(session.result(&"k2".into(), ResultStatus::Ok, json!(2), 0).is_some());
        assert_eq!(call_ids(&[session.repeated_call(&"k2".into()).unwrap()]), ["k2"]);
        assert_eq!(session.repeated_call(&"k1".into()), None);
        let ack = ServerFrame::ToolResultAck(ToolResultAck { id: "s1".into(), call_id: "k2".into() });
        assert!(session.received(&ack));
        session.acknowledged(&"k2".into());
        assert_eq!(session.repeated_call(&"k2".into()), None);
    }

    #[test]
    fn a_message_is_sent_again_after_every_welcome_until_a_run_ends() {
        let messages = |frames: &[ClientFrame]| -> Vec<(String, String)> {
            frames
                .iter()
                .filter_map(|frame| match frame {
                    ClientFrame::UserMessage(m) => Some((m.id.clone(), m.text.clone())),
                    _ => None,
                })
                .collect()
        };
        let mut session = ClientSession::default();
        session.connected();
        welcomed(&mut session, false, 0);
        let Some(ClientFrame::UserMessage(sent)) = session.message("add the red mug") else { panic!("sent at once") };
        // The server died before it read the message (or after: it ignores the id it has read).
        session.disconnected();
        session.connected();
        let again = welcomed(&mut session, true, 10);
        assert_eq!(messages(&again.send), vec![(sent.id, sent.text)], "same id, same text");
        // A run's frames that are not its end leave it unanswered; its end answers it.
        assert!(session.received(&message("s2")));
        session.disconnected();
        session.connected();
        assert_eq!(messages(&welcomed(&mut session, true, 20).send).len(), 1);
        let done = ServerFrame::AgentMessage(AgentMessage {
            id: "s3".into(),
            run_id: "r".into(),
            delta: String::new(),
            done: true,
            status: Some(tether_protocol::RunStatus::Completed),
            reset: false,
        });
        assert!(session.received(&done));
        session.disconnected();
        session.connected();
        assert!(messages(&welcomed(&mut session, true, 30).send).is_empty(), "answered: not sent again");
    }
}
