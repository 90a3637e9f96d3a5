//! A map keyed by device address for the live books: an allocation inserts a new address, a
//! free removes one, at random, around a live set that is small beside the journal.
//!
//! Open addressing with linear probing, kept at most half full, and deletion by backward
//! shift, so churn leaves no tombstones and probes never lengthen with age. It halves itself
//! once an eighth full, so a table grown for a past peak (weights loaded, then freed) does not
//! spread today's few blocks over memory no cache holds (`HashMap` never shrinks: on the
//! 10^7-record bench run, 10^5 blocks live after the weights and a few thousand while serving,
//! `report` took a quarter longer with it; BENCHMARKS.md, issue 15's eighth round).

/// A key's home slot: the high bits of a Fibonacci product (every key bit reaches them;
/// addresses' zero low bits, from alignment, do not matter).
#[inline(always)]
fn home(key: u64, shift: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
}

/// The smallest table, in slots.
const MIN_SLOTS: usize = 16;

/// A map from `u64` to `V`. Key 0 marks a free slot, so it has a slot of its own.
#[derive(Debug, Clone)]
pub struct AddrTable<V> {
    /// (key, value); key 0: free.
    slots: Vec<(u64, V)>,
    /// The value at key 0.
    zero: Option<V>,
    /// Entries in `slots` (key 0 not counted).
    used: usize,
    /// `64 - log2(slots)`.
    shift: u32,
}

impl<V: Copy + Default> Default for AddrTable<V> {
    fn default() -> Self {
        Self::with_slots(MIN_SLOTS)
    }
}

impl<V: Copy + Default> AddrTable<V> {
    fn with_slots(slots: usize) -> Self {
        debug_assert!(slots.is_power_of_two() && slots >= MIN_SLOTS);
        AddrTable {
            slots: vec![(0, V::default()); slots],
            zero: None,
            used: 0,
            shift: 64 - slots.trailing_zeros(),
        }
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.used + usize::from(self.zero.is_some())
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The slot holding `key` (not 0), or the free slot that ends its probe.
    #[inline(always)]
    fn find(&self, key: u64) -> (usize, bool) {
        let mask = self.mask();
        let mut i = home(key, self.shift);
        loop {
            match self.slots[i].0 {
                k if k == key => return (i, true),
                0 => return (i, false),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The value at `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<&V> {
        if key == 0 {
            return self.zero.as_ref();
        }
        let (i, found) = self.find(key);
        found.then(|| &self.slots[i].1)
    }

    /// The value at `key`, to change.
    #[inline]
    pub fn get_mut(&mut self, key: u64) -> Option<&mut V> {
        if key == 0 {
            return self.zero.as_mut();
        }
        let (i, found) = self.find(key);
        found.then(|| &mut self.slots[i].1)
    }

    /// Puts `val` at `key`; returns the value it replaced.
    #[inline(always)]
    pub fn insert(&mut self, key: u64, val: V) -> Option<V> {
        if key == 0 {
            return self.zero.replace(val);
        }
        if (self.used + 1) * 2 > self.slots.len() {
            self.resize(self.slots.len() * 2);
        }
        let (i, found) = self.find(key);
        if found {
            return Some(std::mem::replace(&mut self.slots[i].1, val));
        }
        self.slots[i] = (key, val);
        self.used += 1;
        None
    }

    /// Takes the value at `key` out.
    #[inline(always)]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        if key == 0 {
            return self.zero.take();
        }
        let (mut hole, found) = self.find(key);
        if !found {
            return None;
        }
        let out = self.slots[hole].1;
        // Backward shift: each later key of the run moves into the hole unless its home lies
        // between the hole and it (then it is already as near home as it can be).
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let k = self.slots[j].0;
            if k == 0 {
                break;
            }
            let h = home(k, self.shift);
            if (j.wrapping_sub(h) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole].0 = 0;
        self.used -= 1;
        if self.used * 8 < self.slots.len() && self.slots.len() > 1024 {
            self.resize(self.slots.len() / 2);
        }
        Some(out)
    }

    #[cold]
    fn resize(&mut self, slots: usize) {
        let mut next = Self::with_slots(slots.max(MIN_SLOTS));
        next.zero = self.zero;
        for &(k, v) in &self.slots {
            if k != 0 {
                let (i, _) = next.find(k);
                next.slots[i] = (k, v);
                next.used += 1;
            }
        }
        *self = next;
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        let zero = self.zero.as_ref().map(|v| (0, v));
        zero.into_iter().chain(
            self.slots
                .iter()
                .filter(|(k, _)| *k != 0)
                .map(|(k, v)| (*k, v)),
        )
    }
}

#[cfg(test)]
#[path = "addr_table_tests.rs"]
mod tests;
