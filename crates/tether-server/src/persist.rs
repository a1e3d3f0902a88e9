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
//! the run in progress at its last checkpoint.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tether_agent::{ChatMessage, RunCheckpoint, ToolOutput};
use tether_core::session::ServerSessionSnapshot;
use tether_protocol::{
    ContextEntry, ErrorCode, ErrorFrame, HistoryLine, PageInfo, ServerFrame, ToolSpec, encode_frame,
};
use tokio::sync::{mpsc, oneshot};

use crate::session::Outbound;
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
    /// The machine's bookkeeping; its `log` is empty (the store keeps the frames itself).
    pub(crate) machine: ServerSessionSnapshot,
    pub(crate) tools: Vec<ToolSpec>,
    pub(crate) revision: u64,
    pub(crate) page: Option<PageInfo>,
    pub(crate) context: Vec<ContextEntry>,
    /// The conversation as the model reads it (between runs).
    pub(crate) history: Vec<ChatMessage>,
    /// The conversation as the user saw it.
    pub(crate) transcript: Vec<HistoryLine>,
    /// The run in progress, at its last checkpoint.
    pub(crate) run: Option<StoredRun>,
    pub(crate) run_counter: u64,
    /// The `USER_MESSAGE` ids of the last runs that ended (absent in sessions stored before it
    /// was kept).
    #[serde(default)]
    pub(crate) messages: Vec<String>,
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
    pub(crate) results: Vec<(String, ToolOutput)>,
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
    jobs: mpsc::UnboundedSender<Job>,
    /// Set once the store refused a write because another server claimed the session.
    moved: Arc<AtomicBool>,
}

impl Persister {
    /// Starts the persister of session `id`; in a shared store its writes carry `claim`.
    pub(crate) fn spawn(store: Arc<dyn SessionStore>, id: String, claim: Option<String>) -> Persister {
        let (jobs, queue) = mpsc::unbounded_channel();
        let moved = Arc::new(AtomicBool::new(false));
        tokio::spawn(run(store, id, claim, moved.clone(), queue));
        Persister { jobs, moved }
    }

    /// Whether another server claimed the session: this one may no longer write it.
    pub(crate) fn moved(&self) -> bool {
        self.moved.load(Ordering::Acquire)
    }

    pub(crate) fn send(&self, job: Job) {
        // The persister ends only when every queue to it is dropped.
        let _ = self.jobs.send(job);
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
        write.state = next.state;
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
    mut queue: mpsc::UnboundedReceiver<Job>,
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
        for job in jobs {
            match job {
                Job::Write { write: next, frames: more } => {
                    merge(&mut write, next);
                    frames.extend(more);
                }
                other => {
                    write = writer.commit(write.take(), std::mem::take(&mut frames), &socket, &mut told).await;
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
        unstored = writer.commit(write, frames, &socket, &mut told).await;
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
                match store.write(id, write.clone()).await {
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
                            let _ = tx.send(Outbound::Close(crate::connection::CLOSE_RESTART, reason));
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
