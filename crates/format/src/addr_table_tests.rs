use std::collections::HashMap;

use super::*;

/// A seeded xorshift: the same operations every run.
struct Rnd(u64);

impl Rnd {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Every entry is found by its key (a shrink rehashes them all).
fn assert_reachable(t: &AddrTable<u64>) {
    for (k, &v) in t.iter() {
        assert_eq!(t.get(k), Some(&v), "key {k:#x} lost");
    }
}

#[test]
fn random_inserts_and_removes_agree_with_a_hash_map_through_growth_and_shrinking() {
    // Keys from a small pool (so inserts replace and removes hit), key 0 included, some
    // differing only in low or only in high bits (what the address hasher must spread).
    let mut r = Rnd(0x5EED);
    let mut t: AddrTable<u64> = AddrTable::default();
    let mut m: HashMap<u64, u64> = HashMap::new();
    let mut max_len = 0;
    for step in 0..200_000u64 {
        // Grow to a few thousand keys, fall back to a few, twice: the table grows and shrinks.
        let phase = (step / 50_000) % 2;
        let pool = if phase == 0 { 8192 } else { 64 };
        let key = match r.next() % 4 {
            0 => r.next() % pool,
            1 => (r.next() % pool) << 21,
            2 => (r.next() % 8) | 0xFFFF_0000_0000_0000,
            _ => 0x7000_0000_0000 + (r.next() % pool) * 512,
        };
        let insert =
            phase == 0 && !r.next().is_multiple_of(3) || phase == 1 && r.next().is_multiple_of(4);
        if insert {
            assert_eq!(t.insert(key, step), m.insert(key, step), "insert {key:#x}");
        } else {
            assert_eq!(t.remove(key), m.remove(&key), "remove {key:#x}");
        }
        assert_eq!(t.len(), m.len());
        max_len = max_len.max(m.len());
        if step % 10_000 == 0 {
            assert_reachable(&t);
        }
    }
    assert!(
        max_len > 4000,
        "the table grew past a few thousand: {max_len}"
    );
    let mut got: Vec<(u64, u64)> = t.iter().map(|(k, &v)| (k, v)).collect();
    let mut want: Vec<(u64, u64)> = m.into_iter().collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
}

#[test]
fn a_table_grown_for_a_peak_shrinks_once_nearly_empty_and_keeps_what_it_holds() {
    let mut t: AddrTable<u64> = AddrTable::default();
    for k in 1..=10_000u64 {
        t.insert(k << 21, k);
    }
    let grown = t.capacity();
    assert!(grown >= 10_000, "grown: {grown}");
    for k in 1..=9_990u64 {
        assert_eq!(t.remove(k << 21), Some(k));
    }
    assert!(t.capacity() <= 1024, "shrunk back: {}", t.capacity());
    assert_eq!(t.len(), 10);
    for k in 9_991..=10_000u64 {
        assert_eq!(t.get(k << 21), Some(&k));
    }
    assert_eq!(t.get(1 << 21), None);
}

#[test]
fn key_zero_is_a_key_like_any_other() {
    let mut t: AddrTable<u64> = AddrTable::default();
    assert!(t.is_empty());
    assert_eq!(t.get(0), None);
    assert_eq!(t.insert(0, 7), None);
    assert_eq!(t.insert(0, 8), Some(7));
    assert_eq!((t.len(), t.get(0)), (1, Some(&8)));
    assert_eq!(t.iter().collect::<Vec<_>>(), vec![(0, &8)]);
    assert_eq!(t.remove(0), Some(8));
    assert_eq!(t.remove(0), None);
    assert!(t.is_empty());
}
