//! Which sessions' pages paired an MCP client (`--expose-mcp`, the `mcp` feature): the pairing
//! entry a page puts in its context, the code's hash, the clients to tell when the page's tools
//! change. The `/mcp` service that serves the paired pages' tools is `expose.rs`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tether_protocol::ContextEntry;
use tokio_util::sync::CancellationToken;

/// The context key under which a page offers its tools to a paired MCP client:
/// `{"code": "<at least 16 characters>"}`. Never stored, never shown to the model.
pub const PAIRING_KEY: &str = "tether-mcp-pairing";
/// The shortest pairing code accepted (the toolkits make 26 characters, 128 bits).
const MIN_CODE_CHARS: usize = 16;

type CodeHash = [u8; 32];

fn hash(code: &str) -> CodeHash {
    Sha256::digest(code.as_bytes()).into()
}

/// The paired sessions, and the MCP clients to tell when their tools change.
#[derive(Default)]
pub(crate) struct Exposed {
    pairings: Mutex<HashMap<String, Pairing>>,
    calls: AtomicU64,
}

struct Pairing {
    code: CodeHash,
    /// Ends the clients' subscriptions when the pairing ends.
    ended: CancellationToken,
    /// Clients on protocol versions before 2026-07-28 (one MCP session each).
    peers: Vec<Peer<RoleServer>>,
    /// Clients on 2026-07-28 (`subscriptions/listen`).
    sinks: Vec<SubscriptionSink>,
}

impl Exposed {
    /// Takes the pairing entry out of a `CONTEXT_UPDATE`'s context and pairs, re-pairs or
    /// unpairs the session by it (when `enabled`: `--expose-mcp`). `Err`: the entry is
    /// malformed, or pairing is not enabled here (the update is applied without it, and the
    /// session is not paired).
    pub(crate) fn take_pairing(
        &self,
        enabled: bool,
        session: &str,
        context: &mut Vec<ContextEntry>,
    ) -> Result<(), String> {
        let entry = context.iter().position(|e| e.key == PAIRING_KEY).map(|at| context.remove(at));
        if !enabled {
            return match entry {
                None => Ok(()),
                Some(_) => Err("this server does not offer page tools to MCP clients (tether serve --expose-mcp); \
                                the pairing entry was ignored"
                    .to_string()),
            };
        }
        let code = match entry {
            None => None,
            Some(entry) => match entry.value.get("code").and_then(Value::as_str) {
                Some(code) if code.chars().count() >= MIN_CODE_CHARS => Some(hash(code)),
                _ => {
                    self.unpair(session);
                    return Err(format!(
                        "the context entry {PAIRING_KEY:?} must be {{\"code\": \"…\"}} with at least \
                         {MIN_CODE_CHARS} characters; the session is not paired"
                    ));
                }
            },
        };
        match code {
            None => self.unpair(session),
            Some(code) => {
                let mut pairings = self.pairings.lock().expect("pairings lock");
                let same = pairings.get(session).is_some_and(|p| bool::from(p.code.ct_eq(&code)));
                if !same {
                    if let Some(old) = pairings.remove(session) {
                        old.ended.cancel();
                    }
                    tracing::info!(session, "the page allowed an MCP client to use its tools");
                    pairings.insert(
                        session.to_string(),
                        Pairing { code, ended: CancellationToken::new(), peers: Vec::new(), sinks: Vec::new() },
                    );
                }
            }
        }
        Ok(())
    }

    /// Ends a session's pairing: its MCP clients are refused from now on.
    pub(crate) fn unpair(&self, session: &str) {
        if let Some(pairing) = self.pairings.lock().expect("pairings lock").remove(session) {
            tracing::info!(session, "MCP pairing ended");
            pairing.ended.cancel();
        }
    }

    /// The session a presented code pairs with.
    pub(crate) fn session_for(&self, code: &str) -> Option<(String, CancellationToken)> {
        let presented = hash(code);
        let pairings = self.pairings.lock().expect("pairings lock");
        // Every entry is compared, in constant time each, so timing says nothing of the codes.
        let mut found = None;
        for (session, pairing) in pairings.iter() {
            if bool::from(pairing.code.ct_eq(&presented)) {
                found = Some((session.clone(), pairing.ended.clone()));
            }
        }
        found
    }

    /// Tells the session's MCP clients that its tools changed (after a `CONTEXT_UPDATE`).
    pub(crate) fn tools_changed(&self, session: &str) {
        let Some((peers, sinks)) = self.with_pairing(session, |pairing| {
            pairing.peers.retain(|peer| !peer.is_transport_closed());
            (pairing.peers.clone(), pairing.sinks.clone())
        }) else {
            return;
        };
        if peers.is_empty() && sinks.is_empty() {
            return;
        }
        tokio::spawn(async move {
            for peer in peers {
                let _ = peer.notify_tool_list_changed().await;
            }
            for sink in sinks {
                let _ = sink.notify_tool_list_changed().await;
            }
        });
    }

    /// Keeps a client's MCP session peer (a client before 2026-07-28), told of tool changes.
    pub(crate) fn add_peer(&self, session: &str, peer: Peer<RoleServer>) {
        self.with_pairing(session, |pairing| pairing.peers.push(peer));
    }

    /// Keeps a client's subscription (2026-07-28, `subscriptions/listen`), told of tool changes.
    pub(crate) fn add_sink(&self, session: &str, sink: SubscriptionSink) {
        self.with_pairing(session, |pairing| pairing.sinks.push(sink));
    }

    /// Forgets a subscription that ended.
    pub(crate) fn remove_sink(&self, session: &str, sink: &SubscriptionSink) {
        self.with_pairing(session, |pairing| pairing.sinks.retain(|s| s.id() != sink.id()));
    }

    /// `change` applied to the session's pairing, under the lock; `None` when it is not paired.
    fn with_pairing<R>(&self, session: &str, change: impl FnOnce(&mut Pairing) -> R) -> Option<R> {
        self.pairings.lock().expect("pairings lock").get_mut(session).map(change)
    }

    /// A new number for a call of a paired client (its run id is `mcp-N`).
    pub(crate) fn next_call(&self) -> u64 {
        self.calls.fetch_add(1, Ordering::Relaxed)
    }
}
