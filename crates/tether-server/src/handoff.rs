//! Several servers on one shared store (Redis): each session has one owner at a time, and it
//! moves to the server its client reconnects to.
//!
//! A server claims a session before it serves it ([`SessionStore::claim`]) and keeps a
//! heartbeat in the store; its claims stand while the heartbeat does. A client that reconnects
//! to another server makes that server ask the owner to let go: the owner stops the run at its
//! last checkpoint (as a draining shutdown does), stores everything, releases the claim and
//! forgets the session; the new server claims it, reads it back and goes on with the run. An
//! owner that is gone (killed, cut off) answers nothing: once its heartbeat lapses, the new
//! server claims the session all the same, and the store refuses every later write of the old
//! owner (fencing), so no session is ever driven by two servers. `docs/scaling.md` has the
//! design and its limits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use crate::app::App;
use crate::store::{Claim, SessionStore};

/// How often a server waiting for a session asks its owner again (a request may be lost).
const ASK_AGAIN: Duration = Duration::from_millis(500);
/// How often it looks whether the owner let go.
const POLL: Duration = Duration::from_millis(5);

/// Renews this server's heartbeat every third of the lease, for as long as the server runs.
pub(crate) async fn heartbeat(app: Arc<App>, store: Arc<dyn SessionStore>) {
    let every = app.config.instance_lease / 3;
    loop {
        tokio::time::sleep(every).await;
        if app.draining.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        if let Err(error) = store.heartbeat(&app.instance, app.config.instance_lease).await {
            tracing::warn!(%error, "could not renew this server's heartbeat; its sessions may move to other servers");
        }
    }
}

/// Answers the other servers' requests for this server's sessions, for as long as it runs
/// (subscribing again when the store's connection drops).
pub(crate) async fn answer_requests(app: Arc<App>, store: Arc<dyn SessionStore>) {
    loop {
        match store.release_requests(&app.instance).await {
            Ok(Some(mut ids)) => {
                while let Some(id) = ids.next().await {
                    tokio::spawn(let_go(app.clone(), store.clone(), id));
                }
                tracing::warn!("lost the store's channel for session requests; subscribing again");
            }
            Ok(None) => return,
            Err(error) => tracing::warn!(%error, "cannot hear other servers' requests for sessions; trying again"),
        }
        tokio::time::sleep(ASK_AGAIN).await;
    }
}

/// Lets session `id` go to the server that asked for it.
async fn let_go(app: Arc<App>, store: Arc<dyn SessionStore>, id: String) {
    let claim = match app.sessions.get(&id) {
        Some(session) => {
            if !session.hand_off().await {
                tracing::warn!(session = id, "the store did not take this session's last changes; it stays here");
                crate::run::resume_run(&app, &session);
                return;
            }
            app.remove_session(&session);
            app.metrics.handoffs.inc();
            tracing::info!(session = id, instance = app.instance, "session handed to another server");
            session.claim().unwrap_or_default().to_string()
        }
        // Not held here (any more): whatever claim this server still has is given up.
        None => String::new(),
    };
    if let Err(error) = store.release(&id, &app.instance, &claim).await {
        tracing::warn!(session = id, %error, "could not release a session; the other server waits for the lease");
    }
}

/// Claims session `id` for this server: at once when no live server holds it; else after
/// asking its owner to let go, waiting up to the lease and a little more (an owner that is gone
/// loses it when its heartbeat lapses). `Err`: what to tell the client (it tries again later).
pub(crate) async fn claim(app: &App, store: &dyn SessionStore, id: &str) -> Result<String, String> {
    let deadline = Instant::now() + app.config.instance_lease + Duration::from_secs(2);
    let expiry = crate::store::unix_ms().saturating_add(app.config.session_ttl.as_millis() as u64);
    let mut asked: Option<Instant> = None;
    loop {
        match store.claim(id, &app.instance, expiry).await {
            Ok(Claim::Claimed(claim)) => {
                tracing::debug!(session = id, claim, asked = asked.is_some(), "session claimed");
                return Ok(claim);
            }
            Ok(Claim::HeldBy(holder)) => {
                if Instant::now() >= deadline {
                    return Err(format!("server {holder} holds the session and did not let it go"));
                }
                if asked.is_none_or(|at| at.elapsed() >= ASK_AGAIN) {
                    if let Err(error) = store.ask_release(id, &holder).await {
                        return Err(error.to_string());
                    }
                    asked = Some(Instant::now());
                }
                tokio::time::sleep(POLL).await;
            }
            Err(error) => return Err(error.to_string()),
        }
    }
}
