//! Writing a session to its store before the frames that depend on it leave.
//!
//! Each durable session has a persister: a task that takes, in order, what the session queued
//! under its lock — a [`SessionWrite`] with the frames it numbered, and the connection to write
//! them to — and stores each write before it passes its frames on. So a client never holds a
//! frame the store does not know about: after a crash and a restart the numbering goes on where
//! the client is, and a resume replays from the store. A burst of queued writes (a streamed
//! answer) becomes one transaction.
//!
//! The state is a [`Snapshot`] as JSON: the session machine's bookkeeping (the replay log lives
//! in the store's own log), the page's tools and state, the conversation, what the user saw, and
//! the run in progress at its last checkpoint. A write carries a [`Patch`] rather than the whole
//! snapshot: the small part whole, and of the three lists that grow with the conversation (the
//! model's conversation, what the user saw, the run's messages) only what is new since the last
//! write ([`Tail`]). So a write costs the same at run 2,000 as at run 20. [`StoreCopy`] knows what
//! the store holds, and when the patches since the last whole snapshot add up to more than that
//! snapshot, the next write is a whole snapshot again (which drops them): a session read back
//! applies at most about its own size again in patches.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tether_agent::{ChatMessage, RunCheckpoint, ToolOutput};
use tether_core::session::ServerSessionSnapshot;
use tether_protocol::{
    CallId, ContextEntry, ErrorCode, ErrorFrame, HistoryLine, PageInfo, ServerFrame, ToolSpec, encode_frame,
};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use crate::outbound::{CLOSE_RESTART, Outbound};
use crate::store::{SessionStore, SessionWrite};
use crate::{ServerError, StoreProblem};

/// The longest wait between two tries of a write that a shared store refused (it was away).
const STORE_RETRY_MAX: Duration = Duration::from_secs(1);

/// How many answered (and abandoned) call ids a stored session keeps: enough for the results a
/// client resends after a restart (the ones of its last runs), without rewriting thousands of
/// ids with every result.
pub(crate) const STORED_IDS_KEPT: usize = 512;

/// A session's state as its store keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Snapshot {
    /// Everything but the lists that grow with the conversation.
    #[serde(flatten)]
    pub(crate) head: Head,
    /// The conversation as the model reads it (between runs; during one, as it was before it).
    pub(crate) history: Vec<ChatMessage>,
    /// The conversation as the user saw it.
    pub(crate) transcript: Vec<HistoryLine>,
    /// The number of the last [`Patch`] this snapshot includes (0 in sessions stored before
    /// patches).
    #[serde(default)]
    pub(crate) patched: u64,
}

/// The part of a [`Snapshot`] that does not grow with the conversation: each write carries it
/// whole.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Head {
    /// The machine's bookkeeping; its `log` is empty (the store keeps the frames itself).
    pub(crate) machine: ServerSessionSnapshot,
    pub(crate) tools: Vec<ToolSpec>,
    pub(crate) revision: u64,
    pub(crate) page: Option<PageInfo>,
    pub(crate) context: Vec<ContextEntry>,
    /// The run in progress, at its last checkpoint. (In a [`Patch`], its checkpoint's messages
    /// are empty: they come as the patch's `run`.)
    pub(crate) run: Option<StoredRun>,
    pub(crate) run_counter: u64,
    /// The `USER_MESSAGE` ids of the last runs that ended (absent in sessions stored before it
    /// was kept).
    #[serde(default)]
    pub(crate) messages: Vec<String>,
}

/// The new end of a list: the first `keep` items the store holds stay, the rest is replaced by
/// `add`. Applying it twice changes nothing more.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Tail<L> {
    pub(crate) keep: usize,
    pub(crate) add: L,
}

impl<T> Tail<Vec<T>> {
    fn apply(self, list: &mut Vec<T>, what: &str) -> Result<(), String> {
        if self.keep > list.len() {
            return Err(format!("it keeps {} items of {what}, which has only {}", self.keep, list.len()));
        }
        list.truncate(self.keep);
        list.extend(self.add);
        Ok(())
    }
}

/// What a write stores instead of the whole [`Snapshot`]: the head whole, and the ends of the
/// lists that changed. Generic over its parts so that a write borrows them (`&Head`, `&[T]`) and
/// a read owns them (`Head`, `Vec<T>`).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Patch<H, M, L> {
    pub(crate) head: H,
    pub(crate) history: Tail<M>,
    pub(crate) transcript: Tail<L>,
    /// The run's messages (present when `head.run` is): after the store's run's messages, or,
    /// when the state before had no run, after the history (a run starts with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) run: Option<Tail<M>>,
    /// The answered call ids that are new (`head.machine.answered` is empty).
    pub(crate) answered: NewIds,
    /// The abandoned call ids that are new (`head.machine.abandoned` is empty).
    pub(crate) abandoned: NewIds,
}

/// Call ids added to a list that keeps the last [`STORED_IDS_KEPT`].
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct NewIds {
    /// The list starts again (the store's last id is no longer in it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) reset: bool,
    pub(crate) add: Vec<CallId>,
}

impl NewIds {
    /// The ids of `now` after the store's last one, `last` (all of them if it is not there).
    fn after(last: Option<&CallId>, now: &[CallId]) -> NewIds {
        match last.and_then(|last| now.iter().rposition(|id| id == last)) {
            Some(at) => NewIds { reset: false, add: now[at + 1..].to_vec() },
            None => NewIds { reset: last.is_some() || !now.is_empty(), add: now.to_vec() },
        }
    }

    fn apply(self, ids: &mut Vec<CallId>) {
        if self.reset {
            ids.clear();
        }
        ids.extend(self.add);
        let extra = ids.len().saturating_sub(STORED_IDS_KEPT);
        ids.drain(..extra);
    }
}

/// A patch as written.
pub(crate) type PatchOut<'a> = Patch<&'a Head, &'a [ChatMessage], &'a [HistoryLine]>;
/// A patch as read back.
pub(crate) type PatchIn = Patch<Head, Vec<ChatMessage>, Vec<HistoryLine>>;

impl Snapshot {
    /// The state stored whole and the patches after it, applied in order. An error says why it
    /// cannot be read (a patch that does not fit the state before it).
    pub(crate) fn read(state: &str, patches: &[(u64, String)]) -> Result<Snapshot, String> {
        let mut snapshot: Snapshot =
            serde_json::from_str(state).map_err(|error| format!("the stored session cannot be read ({error})"))?;
        for (n, text) in patches {
            if *n <= snapshot.patched {
                continue;
            }
            if *n != snapshot.patched + 1 {
                return Err(format!(
                    "the stored session misses changes: after change {} comes change {n}",
                    snapshot.patched
                ));
            }
            let patch: PatchIn = serde_json::from_str(text)
                .map_err(|error| format!("change {n} of the stored session cannot be read ({error})"))?;
            snapshot.apply(patch).map_err(|error| format!("change {n} of the stored session does not fit: {error}"))?;
            snapshot.patched = *n;
        }
        Ok(snapshot)
    }

    fn apply(&mut self, patch: PatchIn) -> Result<(), String> {
        let run_before = self.head.run.take().map(|run| run.checkpoint.messages);
        let mut answered = std::mem::take(&mut self.head.machine.answered);
        let mut abandoned = std::mem::take(&mut self.head.machine.abandoned);
        patch.answered.apply(&mut answered);
        patch.abandoned.apply(&mut abandoned);
        self.head = patch.head;
        self.head.machine.answered = answered;
        self.head.machine.abandoned = abandoned;
        patch.history.apply(&mut self.history, "the conversation")?;
        patch.transcript.apply(&mut self.transcript, "the transcript")?;
        match (&mut self.head.run, patch.run) {
            (Some(run), Some(tail)) => {
                let mut messages = run_before.unwrap_or_else(|| self.history.clone());
                tail.apply(&mut messages, "the run's messages")?;
                run.checkpoint.messages = messages;
            }
            (None, None) => {}
            _ => return Err("its run and the run's messages disagree".into()),
        }
        Ok(())
    }
}

/// How many of the first items two lists have in common.
pub(crate) fn common_prefix<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Patches since the last whole snapshot are written until they add up to more than that
/// snapshot, or than this, whichever is more: small sessions are written whole more often.
const PATCH_BYTES_MIN: usize = 64 * 1024;

/// What the store holds of a session's state (as far as the writes given to the persister go):
/// how much of each growing list it holds as the list is now, and how big the patches since the
/// last whole snapshot are.
#[derive(Debug, Default)]
pub(crate) struct StoreCopy {
    history: usize,
    transcript: usize,
    /// How many of the run's messages; `None` when the store has no run.
    run: Option<usize>,
    /// The number of the last patch written.
    patch: u64,
    patch_bytes: usize,
    /// The size of the last whole snapshot written (0: none yet).
    whole_bytes: usize,
    /// The last answered and abandoned call ids the store holds.
    answered: Option<CallId>,
    abandoned: Option<CallId>,
}

impl StoreCopy {
    /// What the store holds once it holds `snapshot`, written whole as `state`, and `patches`
    /// after it: a session read back, or one just written whole (no patches).
    pub(crate) fn holding(snapshot: &Snapshot, state: &str, patches: &[(u64, String)]) -> StoreCopy {
        StoreCopy {
            history: snapshot.history.len(),
            transcript: snapshot.transcript.len(),
            run: snapshot.head.run.as_ref().map(|run| run.checkpoint.messages.len()),
            patch: snapshot.patched,
            patch_bytes: patches.iter().map(|(_, text)| text.len()).sum(),
            whole_bytes: state.len().max(1),
            answered: snapshot.head.machine.answered.last().cloned(),
            abandoned: snapshot.head.machine.abandoned.last().cloned(),
        }
    }

    /// The history is replaced by `new`.
    pub(crate) fn history_replaced(&mut self, old: &[ChatMessage], new: &[ChatMessage]) {
        self.history = self.history.min(common_prefix(old, new));
    }

    /// The run's checkpoint is replaced: its messages were `old` (`None`: there was no run).
    pub(crate) fn run_replaced(&mut self, old: Option<&[ChatMessage]>, new: &[ChatMessage]) {
        if let (Some(held), Some(old)) = (self.run, old) {
            self.run = Some(held.min(common_prefix(old, new)));
        }
    }

    /// The run's checkpoint is gone (the run ended): a next run's messages are all new to the
    /// store's run, if it still has one.
    pub(crate) fn run_ended(&mut self) {
        self.run = self.run.map(|_| 0);
    }

    /// A patch with what changed since the last write, numbered, for a session whose state
    /// changed; `None` when the state should be written whole instead ([`StoreCopy::holding`]):
    /// when nothing was written whole yet, when the patches since the last whole snapshot would
    /// add up to more than it, and when `compact` asks (a store that is failing: its unstored
    /// writes then do not pile up). `head.run`'s messages are empty; they are `run_messages`.
    /// `head` is as it was when this returns.
    pub(crate) fn patch(
        &mut self,
        head: &mut Head,
        run_messages: Option<&[ChatMessage]>,
        history: &[ChatMessage],
        transcript: &[HistoryLine],
        compact: bool,
    ) -> Option<(u64, String)> {
        if self.whole_bytes == 0 || compact {
            return None;
        }
        let run = run_messages.map(|messages| {
            let keep = self.run.unwrap_or_else(|| common_prefix(history, messages)).min(messages.len());
            Tail { keep, add: &messages[keep..] }
        });
        let answered = NewIds::after(self.answered.as_ref(), &head.machine.answered);
        let abandoned = NewIds::after(self.abandoned.as_ref(), &head.machine.abandoned);
        // The ids go as `answered` and `abandoned`.
        let ids = (std::mem::take(&mut head.machine.answered), std::mem::take(&mut head.machine.abandoned));
        let patch: PatchOut<'_> = Patch {
            head: &*head,
            history: Tail { keep: self.history, add: &history[self.history..] },
            transcript: Tail { keep: self.transcript, add: &transcript[self.transcript..] },
            run,
            answered,
            abandoned,
        };
        let text = serde_json::to_string(&patch).expect("a patch always serialises");
        (head.machine.answered, head.machine.abandoned) = ids;
        if self.patch_bytes + text.len() > self.whole_bytes.max(PATCH_BYTES_MIN) {
            return None;
        }
        self.patch += 1;
        self.patch_bytes += text.len();
        self.held(head, history, transcript, run_messages);
        Some((self.patch, text))
    }

    /// The number of the last patch written (a whole snapshot written now includes it).
    pub(crate) fn last_patch(&self) -> u64 {
        self.patch
    }

    fn held(&mut self, head: &Head, history: &[ChatMessage], transcript: &[HistoryLine], run: Option<&[ChatMessage]>) {
        self.history = history.len();
        self.transcript = transcript.len();
        self.run = run.map(<[ChatMessage]>::len);
        self.answered = head.machine.answered.last().cloned();
        self.abandoned = head.machine.abandoned.last().cloned();
    }
}

/// A run in progress as the store keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StoredRun {
    /// Where the agent loop was.
    pub(crate) checkpoint: RunCheckpoint,
    /// The answer text the user had seen at that point.
    pub(crate) text: String,
    /// The frame id of the `USER_MESSAGE` that started it.
    pub(crate) message_id: String,
    /// Results that arrived for its calls (given to the loop again if it resumes before its next
    /// checkpoint records them).
    pub(crate) results: Vec<(CallId, ToolOutput)>,
}

/// What a session queues for its persister.
pub(crate) enum Job {
    /// Store this, then pass these frames to the connection.
    Write { write: SessionWrite, frames: Vec<String> },
    /// Frames go to this connection from now on.
    Attach(mpsc::UnboundedSender<Outbound>),
    /// No connection any more.
    Detach,
    /// Answered once everything queued before it is stored (a draining shutdown waits for it).
    /// (With whether the store took it all.)
    Flush(oneshot::Sender<bool>),
}

/// The queue to a session's persister.
#[derive(Debug, Clone)]
pub(crate) struct Persister {
    /// Each job with the span it was queued in (a run's): its store write is a child of it.
    jobs: mpsc::UnboundedSender<(Job, tracing::Span)>,
    /// Set once the store refused a write because another server claimed the session.
    moved: Arc<AtomicBool>,
    /// Set while the store keeps failing and the persister holds writes it refused.
    failing: Arc<AtomicBool>,
}

impl Persister {
    /// Starts the persister of session `id`; in a shared store its writes carry `claim`.
    pub(crate) fn spawn(store: Arc<dyn SessionStore>, id: String, claim: Option<String>) -> Persister {
        let (jobs, queue) = mpsc::unbounded_channel();
        let moved = Arc::new(AtomicBool::new(false));
        let failing = Arc::new(AtomicBool::new(false));
        tokio::spawn(run(store, id, claim, moved.clone(), failing.clone(), queue));
        Persister { jobs, moved, failing }
    }

    /// Whether the store refused the last write (it is held for the next one): the session then
    /// writes its state whole, which replaces the patches held, rather than piling patches up.
    pub(crate) fn failing(&self) -> bool {
        self.failing.load(Ordering::Acquire)
    }

    /// Whether another server claimed the session: this one may no longer write it.
    pub(crate) fn moved(&self) -> bool {
        self.moved.load(Ordering::Acquire)
    }

    pub(crate) fn send(&self, job: Job) {
        // The persister ends only when every queue to it is dropped.
        let _ = self.jobs.send((job, tracing::Span::current()));
    }

    /// Waits until everything queued so far was given to the store; whether it took all of it
    /// (`false`: it was unavailable, and keeps what it refused for the next write).
    pub(crate) async fn flushed(&self) -> bool {
        let (done, wait) = oneshot::channel();
        self.send(Job::Flush(done));
        wait.await.unwrap_or(false)
    }
}

/// One write for several: frames appended in order, the last state, the furthest trim.
fn merge(into: &mut Option<SessionWrite>, next: SessionWrite) {
    let Some(write) = into else {
        *into = Some(next);
        return;
    };
    write.token_hash = write.token_hash.or(next.token_hash);
    if next.state.is_some() {
        // A whole state includes every patch before it.
        write.state = next.state;
        write.patches = next.patches;
    } else {
        write.patches.extend(next.patches);
    }
    write.append.extend(next.append);
    write.trim_below = write.trim_below.max(next.trim_below);
    write.expires_at_ms = next.expires_at_ms;
}

async fn run(
    store: Arc<dyn SessionStore>,
    id: String,
    claim: Option<String>,
    moved: Arc<AtomicBool>,
    failing: Arc<AtomicBool>,
    mut queue: mpsc::UnboundedReceiver<(Job, tracing::Span)>,
) {
    let mut socket: Option<mpsc::UnboundedSender<Outbound>> = None;
    let mut told = false;
    let writer = Writer { store: &*store, id: &id, claim: claim.as_deref(), moved: &moved };
    // What the store refused last (it was unavailable): stored with the next write.
    let mut unstored = None;
    while let Some(first) = queue.recv().await {
        let mut jobs = vec![first];
        while let Ok(job) = queue.try_recv() {
            jobs.push(job);
        }
        let mut write = unstored.take();
        let mut frames = Vec::new();
        // The span the batch's first write was queued in: its store write's parent.
        let mut parent = tracing::Span::none();
        for (job, queued_in) in jobs {
            match job {
                Job::Write { write: next, frames: more } => {
                    if parent.is_none() {
                        parent = queued_in;
                    }
                    merge(&mut write, next);
                    frames.extend(more);
                }
                other => {
                    let parent = std::mem::replace(&mut parent, tracing::Span::none());
                    write = writer.commit(write.take(), std::mem::take(&mut frames), &socket, &mut told, &parent).await;
                    match other {
                        Job::Attach(tx) => socket = Some(tx),
                        Job::Detach => socket = None,
                        Job::Flush(done) => {
                            let _ = done.send(write.is_none());
                        }
                        Job::Write { .. } => unreachable!("merged above"),
                    }
                }
            }
        }
        unstored = writer.commit(write, frames, &socket, &mut told, &parent).await;
        failing.store(unstored.is_some(), Ordering::Release);
    }
}

/// What a persister writes with.
struct Writer<'a> {
    store: &'a dyn SessionStore,
    id: &'a str,
    claim: Option<&'a str>,
    moved: &'a AtomicBool,
}

impl Writer<'_> {
    /// Stores `write` (a few tries), then passes `frames` on. If the store keeps failing, the
    /// client is told once, and then: with a store of one server (SQLite), the frames go all the
    /// same (the session goes on rather than stops; a restart would lose it) and the write is
    /// returned, to be stored with the next one (so that once the store is back it has
    /// everything again); with a store shared by several servers (Redis), the write is tried
    /// again until the store takes it and only then do the frames leave, since another server
    /// may read the session back and must find what the client was told. If another
    /// server claimed the session (a shared store), nothing more is written or sent: the client
    /// is asked to reconnect, and finds the session where it is now.
    async fn commit(
        &self,
        write: Option<SessionWrite>,
        frames: Vec<String>,
        socket: &Option<mpsc::UnboundedSender<Outbound>>,
        told: &mut bool,
        parent: &tracing::Span,
    ) -> Option<SessionWrite> {
        let (store, id) = (self.store, self.id);
        if self.moved.load(Ordering::Acquire) {
            return None;
        }
        let mut unstored = None;
        if let Some(mut write) = write {
            write.claim = self.claim.map(String::from);
            let mut delay = Duration::from_millis(50);
            let mut attempt = 0;
            loop {
                let span = tracing::info_span!(
                    target: tether_agent::SPAN_TARGET,
                    parent: parent,
                    "tether.store.write",
                    tether.store = store.describe().split(':').next().unwrap_or_default(),
                    tether.session.id = id,
                    tether.store.attempt = attempt,
                    error.type = tracing::field::Empty,
                );
                let written = store.write(id, write.clone()).instrument(span.clone()).await;
                if let Err(error) = &written {
                    span.record("error.type", error.kind());
                }
                drop(span);
                match written {
                    Ok(()) => {
                        *told = false;
                        break;
                    }
                    Err(ServerError::Store { problem: StoreProblem::Moved, .. }) => {
                        tracing::info!(
                            session = id,
                            claim = self.claim,
                            "another server claimed this session; it lets go here"
                        );
                        self.moved.store(true, Ordering::Release);
                        if let Some(tx) = socket {
                            let reason = "this session is served by another server now; reconnect".to_string();
                            let _ = tx.send(Outbound::Close(CLOSE_RESTART, reason));
                        }
                        return None;
                    }
                    Err(error) if attempt < 3 => {
                        tracing::warn!(session = id, %error, attempt, "the session store failed; trying again");
                        attempt += 1;
                        tokio::time::sleep(delay).await;
                        delay *= 2;
                    }
                    Err(error) => {
                        // Shared by several servers, a frame leaves only once stored: another
                        // server may read the session back meanwhile, and must find what the
                        // client was told. (If one claims it, the next try is refused as moved.)
                        let shared = store.shared();
                        if !*told {
                            *told = true;
                            if shared {
                                tracing::error!(session = id, %error, "the session store failed; this session's replies wait for it");
                            } else {
                                tracing::error!(session = id, %error, "the session store failed; this session will not survive a restart");
                            }
                            if let Some(tx) = socket {
                                let message = if shared {
                                    format!(
                                        "the server cannot store this session now ({error}); its replies wait until the \
                                         store is back"
                                    )
                                } else {
                                    format!(
                                        "the server could not store this session ({error}); it goes on, but a restart of \
                                         the server would lose it"
                                    )
                                };
                                let frame = ServerFrame::Error(ErrorFrame {
                                    id: "s0".into(),
                                    code: ErrorCode::Internal,
                                    message,
                                    reply_to: None,
                                });
                                let _ = tx.send(Outbound::Text(encode_frame(&frame)));
                            }
                        }
                        if shared {
                            tokio::time::sleep(delay).await;
                            delay = (delay * 2).min(STORE_RETRY_MAX);
                            continue;
                        }
                        unstored = Some(write);
                        break;
                    }
                }
            }
        }
        if let Some(tx) = socket {
            for frame in frames {
                let _ = tx.send(Outbound::Text(frame));
            }
        }
        unstored
    }
}

#[cfg(test)]
mod tests {
    use tether_agent::RunCheckpoint;

    use super::*;

    /// A session's state as the tests change it: what the store must give back.
    struct Truth {
        head: Head,
        run_messages: Option<Vec<ChatMessage>>,
        history: Vec<ChatMessage>,
        transcript: Vec<HistoryLine>,
    }

    impl Truth {
        fn snapshot(&self) -> serde_json::Value {
            let mut head = self.head.clone();
            if let (Some(run), Some(messages)) = (&mut head.run, &self.run_messages) {
                run.checkpoint.messages = messages.clone();
            }
            let snapshot =
                Snapshot { head, history: self.history.clone(), transcript: self.transcript.clone(), patched: 0 };
            let mut value = serde_json::to_value(snapshot).unwrap();
            value.as_object_mut().unwrap().remove("patched");
            value
        }
    }

    fn user(text: String) -> ChatMessage {
        ChatMessage::User { content: text }
    }

    fn line(text: String) -> HistoryLine {
        HistoryLine { role: tether_protocol::HistoryRole::User, text, run_id: None, status: None }
    }

    /// A store of one session, as the stores apply writes: a whole state drops the patches.
    #[derive(Default)]
    struct Store {
        state: String,
        patches: Vec<(u64, String)>,
    }

    #[test]
    fn the_state_read_back_from_patches_is_the_state_written_through_every_kind_of_change() {
        for seed in 0..40u64 {
            let mut random = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let mut next = |below: u64| {
                random = random.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (random >> 33) % below
            };
            let mut truth = Truth {
                head: Head {
                    machine: ServerSessionSnapshot {
                        seq: 0,
                        log: Vec::new(),
                        pending: Vec::new(),
                        answered: Vec::new(),
                        abandoned: Vec::new(),
                    },
                    tools: Vec::new(),
                    revision: 0,
                    page: None,
                    context: Vec::new(),
                    run: None,
                    run_counter: 0,
                    messages: Vec::new(),
                },
                run_messages: None,
                history: Vec::new(),
                transcript: Vec::new(),
            };
            let mut copy = StoreCopy::default();
            let mut store = Store::default();
            let mut ids = 0;
            for step in 0..120 {
                match next(8) {
                    0 => truth.transcript.push(line(format!("line {step}"))),
                    1 => truth.history.push(user(format!("message {step}"))),
                    // The window leaves the oldest messages out, a note in their place.
                    2 if truth.history.len() > 3 => {
                        let before = truth.history.clone();
                        truth.history.drain(..2);
                        truth.history[0] = user(format!("note {step}"));
                        copy.history_replaced(&before, &truth.history);
                    }
                    // A run's checkpoint: the history, then the run's own messages.
                    3 => {
                        let mut messages = truth.run_messages.clone().unwrap_or_else(|| truth.history.clone());
                        messages.push(user(format!("run message {step}")));
                        copy.run_replaced(truth.run_messages.as_deref(), &messages);
                        truth.run_messages = Some(messages);
                        truth.head.run = Some(StoredRun {
                            checkpoint: RunCheckpoint {
                                run_id: format!("run {step}").into(),
                                ..RunCheckpoint::default()
                            },
                            text: String::new(),
                            message_id: "u1".into(),
                            results: Vec::new(),
                        });
                    }
                    // The run ends: its conversation becomes the history.
                    4 if truth.run_messages.is_some() => {
                        let messages = truth.run_messages.take().unwrap();
                        copy.history_replaced(&truth.history, &messages);
                        truth.history = messages;
                        truth.head.run = None;
                        copy.run_ended();
                    }
                    5 => {
                        for _ in 0..next(300) {
                            ids += 1;
                            truth.head.machine.answered.push(format!("call-{ids}").into());
                        }
                        let extra = truth.head.machine.answered.len().saturating_sub(STORED_IDS_KEPT);
                        truth.head.machine.answered.drain(..extra);
                    }
                    _ => truth.head.run_counter += 1,
                }
                // Written: a patch, or (now and then, or when the patches grew) whole.
                let mut head = truth.head.clone();
                let compact = next(10) == 0;
                let patch =
                    copy.patch(&mut head, truth.run_messages.as_deref(), &truth.history, &truth.transcript, compact);
                assert_eq!(serde_json::to_value(&head).unwrap(), serde_json::to_value(&truth.head).unwrap());
                match patch {
                    Some(patch) => store.patches.push(patch),
                    None => {
                        let mut value = truth.snapshot();
                        value["patched"] = copy.last_patch().into();
                        let snapshot: Snapshot = serde_json::from_value(value).unwrap();
                        store.state = serde_json::to_string(&snapshot).unwrap();
                        copy = StoreCopy::holding(&snapshot, &store.state, &[]);
                        store.patches.clear();
                    }
                }
                let read = Snapshot::read(&store.state, &store.patches).unwrap();
                let mut value = serde_json::to_value(read).unwrap();
                value.as_object_mut().unwrap().remove("patched");
                assert_eq!(value, truth.snapshot(), "seed {seed}, step {step}");
            }
        }
    }

    #[test]
    fn patches_that_do_not_fit_are_refused_with_what_is_wrong() {
        let whole = r#"{"machine":{"seq":0,"log":[],"pending":[],"answered":[],"abandoned":[]},"tools":[],
            "revision":0,"page":null,"context":[],"run":null,"runCounter":0,"history":[],"transcript":[],"patched":3}"#;
        let head = r#"{"machine":{"seq":0,"log":[],"pending":[],"answered":[],"abandoned":[]},"tools":[],"revision":0,
            "page":null,"context":[],"run":null,"runCounter":1}"#;
        let patch = |keep: usize| {
            format!(
                r#"{{"head":{head},"history":{{"keep":{keep},"add":[]}},"transcript":{{"keep":0,"add":[]}},"answered":{{"add":[]}},"abandoned":{{"add":[]}}}}"#
            )
        };
        // Patches the whole state includes are skipped; the next one applies.
        assert!(Snapshot::read(whole, &[(2, patch(5)), (4, patch(0))]).is_ok());
        let gap = Snapshot::read(whole, &[(5, patch(0))]).unwrap_err();
        assert_eq!(gap, "the stored session misses changes: after change 3 comes change 5");
        let beyond = Snapshot::read(whole, &[(4, patch(2))]).unwrap_err();
        assert_eq!(
            beyond,
            "change 4 of the stored session does not fit: it keeps 2 items of the conversation, which has only 0"
        );
        let unreadable = Snapshot::read(whole, &[(4, "{".into())]).unwrap_err();
        assert!(unreadable.starts_with("change 4 of the stored session cannot be read"), "{unreadable}");
        assert!(Snapshot::read("not json", &[]).unwrap_err().starts_with("the stored session cannot be read"));
    }
}
