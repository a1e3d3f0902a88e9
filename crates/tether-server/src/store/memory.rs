//! The in-memory store (`--store memory`): the same semantics as the others, nothing survives
//! the process.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{SessionStore, SessionWrite, StoreFuture, StoredSession};
use crate::ServerError;

/// Sessions in this process's memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    sessions: Mutex<HashMap<String, StoredSession>>,
}

impl MemoryStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, StoredSession>> {
        self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Appends the items numbered above the last one `list` holds (the others were stored before).
fn append_numbered(list: &mut Vec<(u64, String)>, items: Vec<(u64, String)>) {
    let last = list.last().map(|(n, _)| *n);
    list.extend(items.into_iter().filter(|(n, _)| last.is_none_or(|last| *n > last)));
}

/// Applies `write` to `session`: the one definition of a write's meaning, shared by the stores
/// that keep a session as a value.
pub(super) fn apply(session: &mut StoredSession, write: SessionWrite) {
    if let Some(hash) = write.token_hash {
        session.token_hash = hash;
    }
    if let Some(state) = write.state {
        session.state = state;
        session.patches.clear();
    }
    append_numbered(&mut session.patches, write.patches);
    append_numbered(&mut session.log, write.append);
    if let Some(below) = write.trim_below {
        session.log.retain(|(seq, _)| *seq >= below);
    }
    session.expires_at_ms = write.expires_at_ms;
}

impl SessionStore for MemoryStore {
    fn describe(&self) -> String {
        "memory".into()
    }

    fn durable(&self) -> bool {
        false
    }

    fn load<'a>(&'a self, id: &'a str, now_ms: u64) -> StoreFuture<'a, Result<Option<StoredSession>, ServerError>> {
        let found = self.lock().get(id).filter(|s| s.expires_at_ms >= now_ms).cloned();
        Box::pin(async move { Ok(found) })
    }

    fn write<'a>(&'a self, id: &'a str, write: SessionWrite) -> StoreFuture<'a, Result<(), ServerError>> {
        let mut sessions = self.lock();
        let session = sessions.entry(id.to_string()).or_insert_with(|| StoredSession {
            id: id.to_string(),
            token_hash: [0; 32],
            state: String::new(),
            patches: Vec::new(),
            log: Vec::new(),
            expires_at_ms: 0,
        });
        apply(session, write);
        Box::pin(async { Ok(()) })
    }

    fn remove<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<(), ServerError>> {
        self.lock().remove(id);
        Box::pin(async { Ok(()) })
    }

    fn expire(&self, now_ms: u64) -> StoreFuture<'_, Result<usize, ServerError>> {
        let mut sessions = self.lock();
        let before = sessions.len();
        sessions.retain(|_, s| s.expires_at_ms >= now_ms);
        let removed = before - sessions.len();
        Box::pin(async move { Ok(removed) })
    }

    fn count(&self) -> StoreFuture<'_, Result<usize, ServerError>> {
        let count = self.lock().len();
        Box::pin(async move { Ok(count) })
    }
}
