//! A map from names or ids to values for the handful of entries a session has at once (calls
//! in flight, resolvers): a vector searched in order.
//!
//! With a few entries a scan is as fast as hashing, and in the browser module it costs far
//! less code than a hash map (a hash table and its hasher per value type).

use std::borrow::Borrow;

/// A map for few entries, keyed by a string-like `K` (a name: `String`; a call: `CallId`) and
/// looked up by anything that borrows as `str` (`&str`, `&String`, `&CallId`); insertion order is
/// kept until a removal.
///
/// The scan compares `&str`s whatever the key and the lookup type, so the browser module carries
/// one scan per map and no more.
#[derive(Debug, Clone)]
pub struct SmallMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for SmallMap<K, V> {
    fn default() -> Self {
        SmallMap(Vec::new())
    }
}

impl<K: Borrow<str>, V> SmallMap<K, V> {
    fn position(&self, key: &str) -> Option<usize> {
        self.0.iter().position(|(k, _)| k.borrow() == key)
    }

    /// The value for `key`.
    pub fn get<Q: Borrow<str> + ?Sized>(&self, key: &Q) -> Option<&V> {
        self.position(key.borrow()).map(|n| &self.0[n].1)
    }

    /// The value for `key`, to change it.
    pub fn get_mut<Q: Borrow<str> + ?Sized>(&mut self, key: &Q) -> Option<&mut V> {
        self.position(key.borrow()).map(|n| &mut self.0[n].1)
    }

    /// Whether `key` has a value.
    pub fn contains_key<Q: Borrow<str> + ?Sized>(&self, key: &Q) -> bool {
        self.position(key.borrow()).is_some()
    }

    /// Sets the value for `key`, replacing an earlier one.
    pub fn insert(&mut self, key: K, value: V) {
        match self.position(key.borrow()) {
            Some(n) => self.0[n].1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// Removes and returns the value for `key`.
    pub fn remove<Q: Borrow<str> + ?Sized>(&mut self, key: &Q) -> Option<V> {
        self.position(key.borrow()).map(|n| self.0.swap_remove(n).1)
    }

    /// Every entry.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::SmallMap;

    #[test]
    fn behaves_as_a_map() {
        let mut map: SmallMap<String, i32> = SmallMap::default();
        assert!(map.is_empty());
        map.insert("a".to_string(), 1);
        map.insert("b".to_string(), 2);
        map.insert("a".to_string(), 3);
        assert_eq!((map.len(), map.get("a"), map.get("b"), map.get("c")), (2, Some(&3), Some(&2), None));
        *map.get_mut("b").unwrap() += 10;
        assert_eq!(map.remove("b"), Some(12));
        assert_eq!(map.remove("b"), None);
        assert!(map.contains_key("a") && !map.contains_key("b"));
        assert_eq!(map.iter().map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>(), [("a", 3)]);
    }
}
