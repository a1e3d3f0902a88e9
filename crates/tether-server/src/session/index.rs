//! All sessions of a server, by id, and how many each client address holds (the per-address
//! limit).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use super::Session;

/// All sessions of a server, and how many each client address has.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    inner: Mutex<SessionIndex>,
}

#[derive(Debug, Default)]
struct SessionIndex {
    by_id: HashMap<String, Arc<Session>>,
    per_ip: HashMap<IpAddr, usize>,
}

impl SessionIndex {
    fn insert(&mut self, session: Arc<Session>, per_ip_limit: usize) -> Result<(), usize> {
        if let Some(ip) = session.peer_ip {
            let count = self.per_ip.entry(ip).or_insert(0);
            if per_ip_limit > 0 && *count >= per_ip_limit {
                return Err(*count);
            }
            *count += 1;
        }
        self.by_id.insert(session.id.clone(), session);
        Ok(())
    }
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, SessionIndex> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a session unless its client address already has `per_ip_limit` sessions (0: no
    /// limit). `Err` carries how many it has.
    pub(crate) fn insert(&self, session: Arc<Session>, per_ip_limit: usize) -> Result<(), usize> {
        self.lock().insert(session, per_ip_limit)
    }

    /// Adds a session read back from the store, unless one with its id is held already (two
    /// connections resumed it at once): then that one. The bool: `session` was added.
    pub(crate) fn insert_or_get(
        &self,
        session: Arc<Session>,
        per_ip_limit: usize,
    ) -> Result<(Arc<Session>, bool), usize> {
        let mut index = self.lock();
        if let Some(held) = index.by_id.get(&session.id) {
            return Ok((held.clone(), false));
        }
        index.insert(session.clone(), per_ip_limit)?;
        Ok((session, true))
    }

    /// Every session held now.
    pub(crate) fn all(&self) -> Vec<Arc<Session>> {
        self.lock().by_id.values().cloned().collect()
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.lock().by_id.get(id).cloned()
    }

    /// Removes `session`, if it is the one held under its id.
    pub(crate) fn remove(&self, session: &Arc<Session>) {
        let mut index = self.lock();
        if !index.by_id.get(&session.id).is_some_and(|held| Arc::ptr_eq(held, session)) {
            return;
        }
        index.by_id.remove(&session.id);
        index.forget_address(session);
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().by_id.len()
    }
}

impl SessionIndex {
    fn forget_address(&mut self, session: &Session) {
        let index = self;
        if let Some(ip) = session.peer_ip
            && let Some(count) = index.per_ip.get_mut(&ip)
        {
            *count = count.saturating_sub(1);
            if *count == 0 {
                index.per_ip.remove(&ip);
            }
        }
    }
}
