//! A bounded set of the most recent ids, with hashed lookup: the executor's finished call ids
//! (a resent `TOOL_CALL` never runs twice) and a server session's answered and abandoned calls.
//!
//! The ids live in a ring (the oldest is forgotten when it is full); an open-addressing table
//! of ring positions, hashed with FNV-1a and probed linearly, finds one without a scan. It is
//! written here rather than built on `HashSet` because it ships in the browser module, where a
//! `std` hash table and its hasher cost several kB more (ARCHITECTURE.md, "Size"). The ids are
//! call ids the server made, so the table needs no protection from chosen collisions.

use tether_protocol::CallId;

/// The most recent call ids, at most `capacity` of them; the oldest is forgotten first.
#[derive(Debug, Clone)]
pub struct RecentIds {
    capacity: usize,
    /// The ids, in a ring: while not full, in insertion order; then `next` is the oldest.
    ring: Vec<CallId>,
    /// The ring position the next id replaces once the ring is full.
    next: usize,
    /// Open addressing: 0 is an empty slot, `n` is ring position `n - 1`. Twice the capacity
    /// (rounded up to a power of two), allocated on the first insert.
    slots: Vec<u32>,
}

fn hash(id: &str) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    (hash ^ (hash >> 32)) as usize
}

impl RecentIds {
    /// An empty set that keeps the `capacity` most recent ids (at least 1).
    pub fn new(capacity: usize) -> Self {
        RecentIds { capacity: capacity.max(1), ring: Vec::new(), next: 0, slots: Vec::new() }
    }

    /// How many ids it keeps at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many ids it holds.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot that holds `id`, or the empty slot where it would go.
    fn find(&self, id: &str) -> (usize, bool) {
        let mask = self.mask();
        let mut slot = hash(id) & mask;
        loop {
            match self.slots[slot] {
                0 => return (slot, false),
                n if self.ring[n as usize - 1] == id => return (slot, true),
                _ => slot = (slot + 1) & mask,
            }
        }
    }

    /// Whether `id` is among the most recent ids.
    pub fn contains(&self, id: &CallId) -> bool {
        !self.slots.is_empty() && self.find(id.as_str()).1
    }

    /// Adds `id` (forgetting the oldest when full). `false` if it was already there.
    pub fn insert(&mut self, id: CallId) -> bool {
        if self.slots.is_empty() {
            self.slots = vec![0; (self.capacity * 2).next_power_of_two()];
        }
        if self.find(id.as_str()).1 {
            return false;
        }
        let position = if self.ring.len() < self.capacity {
            self.ring.push(id);
            self.ring.len() - 1
        } else {
            let position = self.next;
            self.next = (position + 1) % self.capacity;
            let (slot, _) = self.find(self.ring[position].as_str());
            self.vacate(slot);
            self.ring[position] = id;
            position
        };
        let (slot, _) = self.find(self.ring[position].as_str());
        self.slots[slot] = position as u32 + 1;
        true
    }

    /// Empties `slot` and moves later entries of its probe run back, so that every entry stays
    /// reachable from its home slot (deletion without tombstones).
    fn vacate(&mut self, mut slot: usize) {
        let mask = self.mask();
        self.slots[slot] = 0;
        let mut next = slot;
        loop {
            next = (next + 1) & mask;
            let entry = self.slots[next];
            if entry == 0 {
                return;
            }
            let home = hash(self.ring[entry as usize - 1].as_str()) & mask;
            // The entry may move to `slot` unless its home lies cyclically in (slot, next].
            let stays = if slot <= next { slot < home && home <= next } else { slot < home || home <= next };
            if !stays {
                self.slots[slot] = entry;
                self.slots[next] = 0;
                slot = next;
            }
        }
    }

    /// The ids, oldest first (to save and restore the set).
    pub fn iter(&self) -> impl Iterator<Item = &CallId> {
        let (newer, older) = self.ring.split_at(if self.ring.len() < self.capacity { 0 } else { self.next });
        older.iter().chain(newer)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashSet, VecDeque};

    use proptest::prelude::*;

    use super::{CallId, RecentIds};

    #[test]
    fn keeps_the_most_recent_ids_and_forgets_the_oldest() {
        let mut ids = RecentIds::new(3);
        assert!(ids.is_empty());
        assert!(!ids.contains(&"a".into()));
        for id in ["a", "b", "c"] {
            assert!(ids.insert(id.into()));
        }
        assert!(!ids.insert("b".into()), "already there");
        assert!(ids.insert("d".into()));
        assert_eq!(ids.iter().map(CallId::as_str).collect::<Vec<_>>(), ["b", "c", "d"]);
        assert!(!ids.contains(&"a".into()) && ids.contains(&"b".into()) && ids.contains(&"d".into()));
        assert_eq!((ids.len(), ids.capacity()), (3, 3));
    }

    proptest! {
        /// Against a model (a queue and a set): the same answers for every insert and lookup,
        /// through many evictions on a small table (so probe runs wrap and collide).
        #[test]
        fn behaves_like_a_bounded_queue_of_distinct_ids(
            capacity in 1usize..12,
            ops in prop::collection::vec((any::<bool>(), 0u8..40), 0..400),
        ) {
            let mut ids = RecentIds::new(capacity);
            let mut queue = VecDeque::new();
            let mut set = HashSet::new();
            for (insert, n) in ops {
                let id = CallId::from(format!("call-{n}"));
                if insert {
                    let fresh = !set.contains(&id);
                    prop_assert_eq!(ids.insert(id.clone()), fresh);
                    if fresh {
                        if queue.len() == capacity {
                            set.remove(&queue.pop_front().unwrap());
                        }
                        queue.push_back(id.clone());
                        set.insert(id);
                    }
                } else {
                    prop_assert_eq!(ids.contains(&id), set.contains(&id));
                }
                prop_assert_eq!(ids.iter().cloned().collect::<Vec<_>>(), queue.iter().cloned().collect::<Vec<_>>());
            }
            for n in 0..40u8 {
                let id = CallId::from(format!("call-{n}"));
                prop_assert_eq!(ids.contains(&id), set.contains(&id));
            }
        }
    }
}
