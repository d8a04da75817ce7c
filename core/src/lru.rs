//! A map with a capacity that forgets its least recently used entries: the bound on the
//! realizer's caches of lowered kernels and compiled programs, so a long-running process that
//! meets ever new kernels keeps a bounded number of them (and the libraries behind them) alive.
//!
//! Invariant: after any insert, `len() <= capacity`. Eviction drops the least recently used
//! quarter at once (recency is a counter stamped on every hit), so the scan it costs is paid once
//! per capacity/4 inserts.

use alloc::vec::Vec;
use core::hash::Hash;

use hashbrown::HashMap;

/// A least-recently-used bounded map.
pub struct Lru<K, V> {
    map: HashMap<K, (V, u64)>,
    clock: u64,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> Lru<K, V> {
    /// An empty map holding at most `capacity` entries (at least 1).
    pub fn new(capacity: usize) -> Self {
        Lru {
            map: HashMap::new(),
            clock: 0,
            capacity: capacity.max(1),
        }
    }

    /// The value for `key`, marked as just used.
    pub fn get(&mut self, key: &K) -> Option<V> {
        self.clock += 1;
        let clock = self.clock;
        self.map.get_mut(key).map(|(v, used)| {
            *used = clock;
            v.clone()
        })
    }

    /// Inserts `value` for `key` (marked as just used), forgetting the least recently used
    /// entries first when the map is full.
    pub fn insert(&mut self, key: K, value: V) {
        if self.map.len() >= self.capacity && !self.map.contains_key(&key) {
            self.evict();
        }
        self.clock += 1;
        self.map.insert(key, (value, self.clock));
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &K) {
        self.map.remove(key);
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The most entries it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Sets the capacity (at least 1), forgetting entries at once if there are more.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
        while self.map.len() > self.capacity {
            self.evict();
        }
    }

    /// Drops the least recently used quarter of the capacity (at least one entry).
    fn evict(&mut self) {
        let drop = (self.capacity / 4).max(1).min(self.map.len());
        let mut stamps: Vec<u64> = self.map.values().map(|(_, used)| *used).collect();
        stamps.sort_unstable();
        let Some(&cut) = stamps.get(drop - 1) else {
            return;
        };
        self.map.retain(|_, (_, used)| *used > cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_most_recently_used() {
        let mut m = Lru::new(8);
        for i in 0..8 {
            m.insert(i, i * 10);
        }
        // Touch 0 and 1: they are now the most recent.
        assert_eq!(m.get(&0), Some(0));
        assert_eq!(m.get(&1), Some(10));
        m.insert(100, 1000);
        assert!(m.len() <= 8);
        // The two least recently used (2 and 3) went; 0, 1 and the new one stayed.
        assert_eq!((m.get(&2), m.get(&3)), (None, None));
        assert_eq!(
            (m.get(&0), m.get(&1), m.get(&100)),
            (Some(0), Some(10), Some(1000))
        );
        for i in 200..1000 {
            m.insert(i, i);
            assert!(m.len() <= 8);
        }
        m.set_capacity(2);
        assert!(m.len() <= 2);
        assert_eq!(m.get(&999), Some(999));
    }
}
