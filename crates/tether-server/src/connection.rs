//! One WebSocket connection: admission (origin, token), the frame rate and size checks, the
//! handshake (`HELLO` → `WELCOME`, resuming a session), and every frame after it handed to its
//! session.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::Extension;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use tether_protocol::{
    ClientFrame, ErrorCode, ErrorFrame, Hello, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, Resume, RunEvent, ServerFrame,
    ToolCollisionEvent, ToolProgressEvent, Welcome, decode_client_frame,
};
use tokio::sync::mpsc;

use crate::app::App;
use crate::config::ServerConfig;
use crate::outbound::{CLOSE_POLICY, CLOSE_RESTART, CLOSE_TRY_AGAIN, Outbound};
use crate::policy::{origin_allowed, presented_token, token_accepted};
use crate::run::{resume_run, start_run};
use crate::session::{Applied, Session};

/// Why a connection may not open a session (its origin or its token), or `None`.
fn admission(config: &ServerConfig, headers: &HeaderMap, query: Option<&str>) -> Option<String> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = String::from_utf8_lossy(origin.as_bytes());
        let host = headers.get(header::HOST).and_then(|host| host.to_str().ok());
        if !origin_allowed(&config.allowed_origins, &origin, host) {
            return Some(format!("origin {origin} is not allowed here (--allow-origin)"));
        }
    }
    if !config.auth_tokens.is_empty() {
        let authorization = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok());
        return match presented_token(authorization, query) {
            None => Some("a token is required (Authorization: Bearer, or ?token= in the URL)".into()),
            Some(token) if !token_accepted(&config.auth_tokens, Some(&token)) => Some("the token is not valid".into()),
            Some(_) => None,
        };
    }
    None
}

/// Cuts a close reason to what a close frame carries (123 bytes).
fn close_reason(reason: &str) -> String {
    let mut end = reason.len().min(120);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_string()
}

pub(crate) async fn websocket(
    ws: WebSocketUpgrade,
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    uri: Uri,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
) -> Response {
    let peer = peer.map(|Extension(ConnectInfo(addr))| addr);
    let client_ip = peer.map(|addr| client_ip(addr.ip(), &headers, &app.config.trusted_proxies));
    let refusal = admission(&app.config, &headers, uri.query());
    if let Some(reason) = &refusal {
        // The reason names the origin, never a token.
        tracing::warn!(peer = ?peer, client = ?client_ip, reason = ?reason, "WebSocket connection refused");
        app.metrics.frame_refused(ErrorCode::Unauthorized.as_str());
    }
    // The transport limit is far above the protocol limit, so that an oversized frame gets a
    // typed ERROR from the decoder and the session goes on; beyond it the socket closes (1009).
    let transport_limit = app.config.max_frame_bytes.saturating_mul(4).max(1 << 20);
    // Small buffers keep an idle session cheap (tungstenite's defaults are 128 KiB each).
    ws.max_message_size(transport_limit)
        .max_frame_size(transport_limit)
        .read_buffer_size(8 * 1024)
        .write_buffer_size(8 * 1024)
        .on_upgrade(move |socket| async move {
            match refusal {
                Some(reason) => refuse(socket, &reason).await,
                None => connection(socket, app, client_ip).await,
            }
        })
        .into_response()
}

/// The client's address: the peer's, or, when the peer is a trusted reverse proxy, the last
/// address in `X-Forwarded-For` that is not itself a trusted proxy (entries before it could be
/// written by anyone). A header that is missing or does not parse leaves the peer's address.
fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpAddr]) -> IpAddr {
    if !trusted.contains(&peer) {
        return peer;
    }
    let forwarded = headers.get_all("x-forwarded-for").iter().filter_map(|value| value.to_str().ok());
    let entries: Vec<&str> = forwarded.flat_map(|value| value.split(',')).map(str::trim).collect();
    for entry in entries.iter().rev() {
        match entry.parse::<IpAddr>() {
            Ok(ip) if trusted.contains(&ip) => continue,
            Ok(ip) => return ip,
            Err(_) => return peer,
        }
    }
    peer
}

/// Tells a refused client why (an `ERROR unauthorized`, then a close frame with the reason) and
/// waits briefly for its side of the close handshake.
async fn refuse(mut socket: WebSocket, reason: &str) {
    let frame = ServerFrame::Error(ErrorFrame {
        id: "s0".into(),
        code: ErrorCode::Unauthorized,
        message: format!("connection refused: {reason}"),
        reply_to: None,
    });
    let _ = socket.send(Message::Text(tether_protocol::encode_frame(&frame).into())).await;
    let close = CloseFrame { code: CLOSE_POLICY, reason: close_reason(reason).into() };
    let _ = socket.send(Message::Close(Some(close))).await;
    let _ =
        tokio::time::timeout(Duration::from_secs(5), async { while let Some(Ok(_)) = socket.recv().await {} }).await;
}

/// A token bucket: `per_second` frames a second on average, bursts of twice as many. A frame
/// over the rate is not dropped: the connection waits before it reads it (backpressure), so a
/// `TOOL_RESULT` sent in a flood is still applied.
struct FrameRate {
    per_second: f64,
    burst: f64,
    /// Below zero while frames wait: the debt paid back before the next one is read.
    tokens: f64,
    last: Instant,
    /// Whether the client was told that its frames are read more slowly.
    told: bool,
}

impl FrameRate {
    fn new(per_second: u32) -> Option<FrameRate> {
        (per_second > 0).then(|| {
            let burst = f64::from(per_second) * 2.0;
            FrameRate { per_second: f64::from(per_second), burst, tokens: burst, last: Instant::now(), told: false }
        })
    }

    /// Takes a token for the next frame: how long to wait before reading it (zero when the
    /// frame is within the rate).
    fn admit(&mut self) -> Duration {
        let now = Instant::now();
        let earned = now.duration_since(self.last).as_secs_f64() * self.per_second;
        self.tokens = (self.tokens + earned).min(self.burst);
        self.last = now;
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            self.told = false;
            return Duration::ZERO;
        }
        Duration::from_secs_f64(-self.tokens / self.per_second)
    }
}

/// Sends an `ERROR` on a connection that has no session yet.
fn send_direct_error(tx: &mpsc::UnboundedSender<Outbound>, code: ErrorCode, message: String, reply_to: Option<String>) {
    let frame = ServerFrame::Error(ErrorFrame { id: "s0".into(), code, message, reply_to });
    let _ = tx.send(Outbound::Text(tether_protocol::encode_frame(&frame)));
}

/// Tells a client whose `HELLO` the session store cannot serve now why, and to try again later
/// (close 1013), instead of losing its session to a new one.
fn refuse_for_now(tx: &mpsc::UnboundedSender<Outbound>, message: String, hello_id: String) {
    send_direct_error(tx, ErrorCode::Internal, message, Some(hello_id));
    let _ = tx.send(Outbound::Close(CLOSE_TRY_AGAIN, "the session store is unavailable".into()));
}

async fn connection(socket: WebSocket, app: Arc<App>, peer_ip: Option<IpAddr>) {
    app.open_connections.fetch_add(1, Ordering::AcqRel);
    serve_connection(socket, &app, peer_ip).await;
    app.open_connections.fetch_sub(1, Ordering::AcqRel);
    app.connection_closed.notify_waiters();
}

async fn serve_connection(socket: WebSocket, app: &Arc<App>, peer_ip: Option<IpAddr>) {
    let app = app.clone();
    let connection_id = app.connection_counter.fetch_add(1, Ordering::Relaxed);
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Outbound>();
    let writer = tokio::spawn(async move {
        while let Some(outbound) = rx.recv().await {
            let result = match outbound {
                Outbound::Text(text) => sink.send(Message::Text(text.into())).await,
                Outbound::Close(code, reason) => {
                    let _ = sink.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
                    break;
                }
            };
            if result.is_err() {
                break;
            }
        }
    });

    let mut session: Option<Arc<Session>> = None;
    let mut rate = FrameRate::new(app.config.max_frames_per_second);
    while let Some(message) = stream.next().await {
        if let Some(rate) = rate.as_mut().filter(|_| matches!(message, Ok(Message::Text(_) | Message::Binary(_)))) {
            let wait = rate.admit();
            if !wait.is_zero() {
                app.metrics.frame_refused(ErrorCode::RateLimited.as_str());
                if !rate.told {
                    rate.told = true;
                    tracing::warn!(peer = ?peer_ip, "frames over the rate limit: reading them more slowly");
                    let error = format!(
                        "more than {} frames per second on this connection: the server reads them more slowly \
                         until the rate falls (none is dropped); send more slowly",
                        app.config.max_frames_per_second
                    );
                    match &session {
                        Some(s) => s.send_error(ErrorCode::RateLimited, error, None),
                        None => send_direct_error(&tx, ErrorCode::RateLimited, error, None),
                    }
                }
                // Backpressure: nothing more is read from this socket meanwhile.
                tokio::time::sleep(wait).await;
            }
        }
        let text = match message {
            Ok(Message::Text(text)) => text,
            Ok(Message::Binary(_)) => {
                let error = "binary frames are not part of the protocol; send JSON text".to_string();
                app.metrics.frame_refused(ErrorCode::MalformedFrame.as_str());
                match &session {
                    Some(s) => s.send_error(ErrorCode::MalformedFrame, error, None),
                    None => send_direct_error(&tx, ErrorCode::MalformedFrame, error, None),
                }
                continue;
            }
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => continue,
        };
        let frame = match decode_client_frame(&text, app.config.max_frame_bytes) {
            Ok(frame) => frame,
            Err(error) => {
                tracing::debug!(%error, "refused a frame");
                app.metrics.frame_refused(error.code().as_str());
                let reply_to = error.frame_id().map(String::from);
                match &session {
                    Some(s) => s.send_error(error.code(), error.to_string(), reply_to),
                    None => send_direct_error(&tx, error.code(), error.to_string(), reply_to),
                }
                continue;
            }
        };
        match (frame, &session) {
            (ClientFrame::Hello(hello), None) => match handshake(&app, hello, connection_id, &tx, peer_ip).await {
                Some(attached) => session = Some(attached),
                None => break,
            },
            (ClientFrame::Hello(hello), Some(s)) => {
                app.metrics.frame_refused(ErrorCode::MalformedFrame.as_str());
                s.send_error(
                    ErrorCode::MalformedFrame,
                    "HELLO was already received on this connection",
                    Some(hello.id),
                );
            }
            (other, None) => {
                let message = format!("{} before HELLO: start with a HELLO frame", other.type_name());
                app.metrics.frame_refused(ErrorCode::HandshakeRequired.as_str());
                send_direct_error(&tx, ErrorCode::HandshakeRequired, message, Some(other.id().to_string()));
            }
            (frame, Some(s)) => handle(&app, s, frame),
        }
    }
    tracing::debug!(connection = connection_id, "connection closed");
    if let Some(session) = session.filter(|session| session.detach(connection_id)) {
        let app = app.clone();
        tokio::spawn(async move {
            // Until the session expires, or its client comes back (then no expiry is due).
            while let Some(wait) = session.expires_in() {
                if wait.is_zero() {
                    // In one step with a resuming client's attach: one of the two wins.
                    if session.close_if_expired() {
                        tracing::info!(session = session.id(), "client did not come back; session closed");
                        app.remove_session(&session);
                        return;
                    }
                    continue;
                }
                tokio::time::sleep(wait).await;
            }
        });
    }
    drop(tx);
    let _ = writer.await;
}

/// What a `HELLO` that resumes a session found.
enum Found {
    /// The session, held in memory or read back from the store.
    Session(Arc<Session>, bool),
    /// No such session (or it expired): a new one is started.
    Missing,
    /// The session exists but the token is wrong: a new one is started, and the client told.
    WrongToken,
    /// The store could not be read: the connection is closed, so the client tries again later
    /// instead of losing its session to a new one.
    StoreFailed(String),
}

/// Finds the session a `HELLO` resumes: in memory, or (after a restart, or on another
/// instance) in the store, checking the token against its stored hash. The bool: it was read
/// back from the store (its run, if it was in one, goes on). With a store shared by several
/// servers, the session is claimed first (from the server that held it, which lets it go).
async fn find_session(app: &Arc<App>, resume: &Resume, peer_ip: Option<IpAddr>) -> Found {
    // One resume of a session at a time on this server: two at once claim it once.
    let lock = {
        let mut resuming = app.resuming.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        resuming.entry(resume.session_id.clone()).or_default().clone()
    };
    let found = {
        let _one_at_a_time = lock.lock().await;
        find_session_now(app, resume, peer_ip).await
    };
    let mut resuming = app.resuming.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if resuming.get(&resume.session_id).is_some_and(|held| Arc::ptr_eq(held, &lock) && Arc::strong_count(held) == 2) {
        resuming.remove(&resume.session_id);
    }
    found
}

async fn find_session_now(app: &Arc<App>, resume: &Resume, peer_ip: Option<IpAddr>) -> Found {
    if let Some(session) = app.sessions.get(&resume.session_id) {
        if !session.token_matches(&resume.token) {
            return Found::WrongToken;
        }
        // (Checked after the store answers too: the session may have ended meanwhile.)
        if !session.moved() && still_held(app, &session).await && !session.is_closed() {
            return Found::Session(session, false);
        }
        if session.is_closed() {
            // Its grace period ran out: what it was is read back from the store, if kept.
            app.remove_session(&session);
        } else {
            // Another server claimed it meanwhile: it is read back from the store below.
            tracing::info!(session = session.id(), "session claimed by another server; reading it back");
            // (It lost its claim: whatever it holds, the store refuses from it.)
            let _ = session.hand_off().await;
            app.remove_session(&session);
        }
    }
    let Some(store) = &app.store else { return Found::Missing };
    let load = || async {
        store.load(&resume.session_id, crate::store::unix_ms()).await.map_err(|error| {
            tracing::error!(session = resume.session_id, %error, "the session store could not be read");
            error.to_string()
        })
    };
    let stored = match load().await {
        Ok(Some(stored)) => stored,
        Ok(None) => return Found::Missing,
        Err(error) => return Found::StoreFailed(error),
    };
    // The token before the claim: a client without it moves no session.
    if !crate::store::same_hash(&stored.token_hash, &crate::store::token_hash(&resume.token)) {
        return Found::WrongToken;
    }
    let (stored, claim) = if store.shared() {
        let claim = match crate::handoff::claim(app, &**store, &resume.session_id).await {
            Ok(claim) => claim,
            Err(error) => return Found::StoreFailed(error),
        };
        // Read again: the server that let it go stored its last state first.
        match load().await {
            Ok(Some(stored)) => (stored, Some(claim)),
            other => {
                let _ = store.release(&resume.session_id, &app.instance, &claim).await;
                return match other {
                    Err(error) => Found::StoreFailed(error),
                    _ => Found::Missing,
                };
            }
        }
    } else {
        (stored, None)
    };
    match Session::restore(app.config.clone(), peer_ip, store.clone(), stored, &resume.token, claim) {
        // Two connections resuming at once: the first one in memory is the session.
        Ok(restored) => match app.sessions.insert_or_get(restored, app.config.max_sessions_per_ip) {
            Ok((session, fresh)) => {
                if fresh {
                    app.metrics.resumes.inc();
                }
                Found::Session(session, fresh)
            }
            Err(_) => Found::StoreFailed("too many sessions from this address (max_sessions_per_ip)".into()),
        },
        Err(error) => {
            // A stored session this version cannot read is not resumed; the client gets a new one.
            tracing::error!(session = resume.session_id, error = error.0, "a stored session could not be read back");
            Found::Missing
        }
    }
}

/// Whether this server still holds its claim on `session` (a shared store; a store that cannot
/// answer now counts as yes: the session goes on here, and its writes are fenced all the same).
async fn still_held(app: &App, session: &Session) -> bool {
    match (&app.store, session.claim()) {
        (Some(store), Some(claim)) => store.holds(session.id(), claim).await.unwrap_or(true),
        _ => true,
    }
}

/// A new session, claimed first when the store is shared.
async fn new_session(app: &Arc<App>, peer_ip: Option<IpAddr>) -> Result<Arc<Session>, String> {
    let id = Session::new_id();
    let claim = match app.store.as_ref().filter(|store| store.shared()) {
        Some(store) => Some(crate::handoff::claim(app, &**store, &id).await?),
        None => None,
    };
    Ok(Session::new(app.config.clone(), peer_ip, app.store.clone(), id, claim))
}

async fn handshake(
    app: &Arc<App>,
    hello: Hello,
    connection_id: u64,
    tx: &mpsc::UnboundedSender<Outbound>,
    peer_ip: Option<IpAddr>,
) -> Option<Arc<Session>> {
    if !(MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&hello.protocol_version) {
        let message = format!(
            "this server speaks protocol versions {MIN_PROTOCOL_VERSION} to {PROTOCOL_VERSION}, the client {}",
            hello.protocol_version
        );
        app.metrics.frame_refused(ErrorCode::UnsupportedVersion.as_str());
        send_direct_error(tx, ErrorCode::UnsupportedVersion, message.clone(), Some(hello.id));
        let _ = tx.send(Outbound::Close(1002, message));
        return None;
    }
    if app.draining.load(Ordering::Relaxed) {
        let _ = tx.send(Outbound::Close(CLOSE_RESTART, "the server is restarting; connect again".into()));
        return None;
    }
    // Only the resume token proves a client owns a session: a known session id with a wrong
    // token gets nothing of that session (no calls, no results, no frames), only a new one.
    let found = match &hello.resume {
        Some(resume) => find_session(app, resume, peer_ip).await,
        None => Found::Missing,
    };
    let (session, was_resumed, from_store) = match found {
        Found::Session(session, from_store) => (session, true, from_store),
        Found::StoreFailed(error) => {
            let message = format!("the session could not be read back ({error}); connect again later");
            refuse_for_now(tx, message, hello.id);
            return None;
        }
        found => {
            if matches!(found, Found::WrongToken) {
                let id = hello.resume.as_ref().map(|r| r.session_id.as_str()).unwrap_or_default();
                tracing::warn!(session = id, peer = ?peer_ip, "resume refused: wrong token");
                app.metrics.frame_refused(ErrorCode::Unauthorized.as_str());
                let message = "resume refused: the token does not match that session; a new session is started";
                send_direct_error(tx, ErrorCode::Unauthorized, message.into(), Some(hello.id.clone()));
            }
            let session = match new_session(app, peer_ip).await {
                Ok(session) => session,
                Err(error) => {
                    let message = format!("no session can be started now ({error}); connect again later");
                    refuse_for_now(tx, message, hello.id);
                    return None;
                }
            };
            let limit = app.config.max_sessions_per_ip;
            if let Err(count) = app.sessions.insert(session.clone(), limit) {
                tracing::warn!(peer = ?peer_ip, count, limit, "session refused: too many sessions from this address");
                app.metrics.frame_refused(ErrorCode::LimitExceeded.as_str());
                let message = format!(
                    "this address has {count} sessions, the most allowed (max_sessions_per_ip); close one or \
                     resume it"
                );
                send_direct_error(tx, ErrorCode::LimitExceeded, message, Some(hello.id));
                let _ = tx.send(Outbound::Close(CLOSE_POLICY, "too many sessions from this address".into()));
                return None;
            }
            (session, false, false)
        }
    };
    // One WELCOME per connection; it is not numbered (replays never include it).
    let welcome = ServerFrame::Welcome(Welcome {
        id: "welcome".into(),
        protocol_version: PROTOCOL_VERSION,
        session_id: session.id().to_string(),
        resume_token: session.resume_token().to_string(),
        resumed: was_resumed,
        max_active_tools: app.config.max_active_tools,
        max_frame_bytes: app.config.max_frame_bytes as u64,
        capabilities: vec![
            "tool_result_ack".into(),
            "resume".into(),
            "events".into(),
            "risk_floor".into(),
            "history".into(),
            "stop".into(),
        ],
    });
    tracing::info!(
        session = session.id(),
        resumed = was_resumed,
        from_store,
        instance = app.instance,
        connection = connection_id,
        "client connected"
    );
    let resume = hello.resume.as_ref().filter(|_| was_resumed);
    if resume.is_some() {
        app.metrics.reconnects.inc();
    }
    let last_seq = resume.and_then(|r| r.last_seq);
    let with_history = resume.is_some_and(|r| r.history);
    if !session.attach(connection_id, tx.clone(), &welcome, last_seq, with_history) {
        // It ended between the lookup and now (its client's grace period ran out): this client
        // connects again and resumes what the store kept, or starts afresh.
        tracing::info!(
            session = session.id(),
            connection = connection_id,
            "the session ended while resuming; reconnect"
        );
        app.remove_session(&session);
        let _ = tx.send(Outbound::Close(CLOSE_RESTART, "the session ended while resuming; connect again".into()));
        return None;
    }
    if from_store {
        resume_run(app, &session);
    }
    Some(session)
}

fn handle(app: &Arc<App>, session: &Arc<Session>, frame: ClientFrame) {
    match frame {
        ClientFrame::Hello(_) => unreachable!("handled by the connection loop"),
        ClientFrame::ContextUpdate(mut update) => {
            let frame_id = update.id.clone();
            // A pairing entry is the server's, never the model's: taken out before anything else.
            if let Err(message) = app.exposed.take_pairing(app.config.expose_mcp, session.id(), &mut update.context) {
                session.send_error(ErrorCode::Unauthorized, message, Some(frame_id.clone()));
            }
            let collisions: Vec<String> =
                update.tools.iter().filter(|t| app.runs_here(&t.name)).map(|t| t.name.clone()).collect();
            match session.apply_context(update) {
                Ok(_) => {
                    app.exposed.tools_changed(session.id());
                    for tool in collisions {
                        session.send_event(None, RunEvent::ToolCollision(ToolCollisionEvent { tool }));
                    }
                }
                Err(refusal) => {
                    app.metrics.frame_refused(refusal.code.as_str());
                    session.send_error(refusal.code, refusal.message, Some(frame_id));
                }
            }
        }
        ClientFrame::UserMessage(message) => start_run(app, session, message.id, message.text),
        ClientFrame::ToolResult(result) => {
            let call_id = result.call_id.clone();
            match session.apply_result(result) {
                Applied::First => {
                    app.metrics.results_applied.inc();
                }
                Applied::Duplicate => {
                    app.metrics.results_duplicate.inc();
                }
                Applied::Late => {
                    tracing::info!(
                        session = session.id(),
                        call = %call_id,
                        "late result: the call had timed out or was cancelled; acknowledged, not applied"
                    );
                    app.metrics.results_late.inc();
                }
                Applied::Unknown => {
                    tracing::debug!(session = session.id(), call = %call_id, "result for an unknown call");
                }
                Applied::Deferred => {
                    tracing::debug!(
                        session = session.id(),
                        call = %call_id,
                        "result left for the server the session moves to"
                    );
                }
            }
        }
        ClientFrame::ToolProgress(progress) => {
            session.send_event(
                None,
                RunEvent::ToolProgress(ToolProgressEvent { call_id: progress.call_id, message: progress.message }),
            );
        }
        ClientFrame::StopRun(stop) => {
            if session.stop_run(stop.run_id.as_ref()) {
                tracing::info!(session = session.id(), "the user stopped the run");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append("x-forwarded-for", value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn the_client_address_comes_from_x_forwarded_for_only_through_a_trusted_proxy() {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let proxy = ip("10.0.0.5");
        let trusted = [proxy, ip("10.0.0.6")];
        // Not trusted: the header is ignored.
        assert_eq!(client_ip(ip("192.0.2.1"), &forwarded(&["203.0.113.7"]), &trusted), ip("192.0.2.1"));
        // Trusted: the last entry that is not a trusted proxy, across repeated headers too.
        assert_eq!(client_ip(proxy, &forwarded(&["203.0.113.7"]), &trusted), ip("203.0.113.7"));
        assert_eq!(client_ip(proxy, &forwarded(&["1.2.3.4, 203.0.113.7, 10.0.0.6"]), &trusted), ip("203.0.113.7"));
        assert_eq!(client_ip(proxy, &forwarded(&["1.2.3.4", "2001:db8::1"]), &trusted), ip("2001:db8::1"));
        // Missing, unparsable, or only proxies: the peer.
        assert_eq!(client_ip(proxy, &forwarded(&[]), &trusted), proxy);
        assert_eq!(client_ip(proxy, &forwarded(&["unknown"]), &trusted), proxy);
        assert_eq!(client_ip(proxy, &forwarded(&["10.0.0.6"]), &trusted), proxy);
    }
}
