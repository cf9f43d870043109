//! A small capped map for what the adapter remembers between events (channel kinds, threads it
//! opened, where messages live, the bot's roles per guild).
//!
//! It must never grow without bound: past its capacity the oldest entry goes.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};

/// A map that forgets its oldest insertions past `capacity`.
#[derive(Debug)]
pub(crate) struct Memo<K, V> {
    capacity: usize,
    inner: Mutex<Inner<K, V>>,
}

#[derive(Debug)]
struct Inner<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
}

impl<K: Eq + Hash + Clone, V: Clone> Memo<K, V> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), inner: Mutex::new(Inner { map: HashMap::new(), order: VecDeque::new() }) }
    }

    pub(crate) fn get(&self, key: &K) -> Option<V> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).map.get(key).cloned()
    }

    pub(crate) fn insert(&self, key: K, value: V) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.map.insert(key.clone(), value).is_none() {
            inner.order.push_back(key);
        }
        while inner.order.len() > self.capacity {
            if let Some(oldest) = inner.order.pop_front() {
                inner.map.remove(&oldest);
            }
        }
    }

    /// Inserts or replaces `key` and makes it the newest entry (linear in the size: for small
    /// memos only).
    pub(crate) fn refresh(&self, key: K, value: V) {
        {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            if inner.map.remove(&key).is_some() {
                inner.order.retain(|k| k != &key);
            }
        }
        self.insert(key, value);
    }

    /// Every entry, oldest insertion first.
    pub(crate) fn entries(&self) -> Vec<(K, V)> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.order.iter().filter_map(|key| inner.map.get(key).map(|value| (key.clone(), value.clone()))).collect()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_entries_go_past_capacity() {
        let memo = Memo::new(2);
        memo.insert(1, "a");
        memo.insert(2, "b");
        memo.insert(1, "a2");
        memo.insert(3, "c");
        assert_eq!(memo.len(), 2);
        assert_eq!(memo.get(&1), None, "1 was inserted first");
        assert_eq!(memo.get(&2), Some("b"));
        assert_eq!(memo.get(&3), Some("c"));
        assert_eq!(memo.entries(), vec![(2, "b"), (3, "c")]);
        memo.refresh(2, "b2");
        memo.insert(4, "d");
        assert_eq!(memo.entries(), vec![(2, "b2"), (4, "d")], "a refreshed entry is the newest");
    }
}
