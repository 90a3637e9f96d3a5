//! A map keyed by device address for the live books: an allocation inserts a new address, a
//! free removes one, at random, around a live set that is small beside the journal.
//!
//! `hashbrown`'s `HashMap`, `std`'s own SwissTable (a group of control bytes compared at once,
//! so a probe's branches are predictable where linear probing's were not) built with
//! `inline-more`, so that insert and remove inline into the hook and the replay, with the
//! seeded address hasher, and shrunk once an eighth full: it never shrinks by itself, and a
//! table grown for a past peak (weights loaded, then freed) spreads today's few blocks over
//! memory no cache holds (on the 10^7-record bench run, 10^5 blocks live after the weights and
//! a few thousand while serving; BENCHMARKS.md, issue 15's eighth, ninth, twelfth and
//! sixteenth rounds).

use crate::addr_hash::AddrMap;

/// Tables at most this large are never shrunk (in entries they can hold).
const KEEP_CAPACITY: usize = 1024;

/// A map from `u64` to `V`.
#[derive(Debug, Clone)]
pub struct AddrTable<V> {
    map: AddrMap<V>,
}

impl<V> Default for AddrTable<V> {
    fn default() -> Self {
        AddrTable {
            map: AddrMap::default(),
        }
    }
}

impl<V> AddrTable<V> {
    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The value at `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<&V> {
        self.map.get(&key)
    }

    /// The value at `key`, to change.
    #[inline]
    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        self.map.get_mut(&key)
    }

    /// Puts `val` at `key`; returns the value it replaced.
    #[inline(always)]
    pub fn insert(&mut self, key: u64, val: V) -> Option<V> {
        self.map.insert(key, val)
    }

    /// Takes the value at `key` out.
    #[inline(always)]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        let out = self.map.remove(&key);
        if self.map.len() * 8 < self.map.capacity() && self.map.capacity() > KEEP_CAPACITY {
            self.shrink();
        }
        out
    }

    #[cold]
    fn shrink(&mut self) {
        self.map.shrink_to(self.map.len() * 2);
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        self.map.iter().map(|(&k, v)| (k, v))
    }

    /// Entries the table can hold before it grows.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.map.capacity()
    }
}

#[cfg(test)]
#[path = "addr_table_tests.rs"]
mod tests;
