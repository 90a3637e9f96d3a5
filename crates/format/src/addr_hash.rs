//! The hasher of the maps keyed by device address or handle: the live books'
//! ([`crate::addr_table`]) and the reader's.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// A fast hasher for addresses and handles (SipHash cost a third of a replay); built by
/// [`AddrState`], it starts from a random seed, so chosen keys cannot crowd a map.
/// (No `Default`: a hasher without its seed is the one a crafted journal can crowd.)
#[derive(Clone, Copy)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        let v = v ^ self.0;
        self.0 = (v ^ (v >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        self.0 ^= self.0 >> 32;
    }
}

/// A map keyed by address or handle, seeded ([`AddrState`]): `hashbrown`'s, whose insert and
/// remove inline into a replay's loop (`std`'s copy of it is built without `inline-more`).
pub type AddrMap<V> = hashbrown::HashMap<u64, V, AddrState>;

/// A set of addresses or handles, seeded, as [`AddrMap`].
pub type AddrSet = hashbrown::HashSet<u64, AddrState>;

/// Builds [`AddrHasher`]s that start from a seed of their own, drawn from `std`'s random keys.
/// The hash is a bijection: without a seed, addresses whose hashes share their low bits (one
/// bucket, probes as long as the map) are easy to compute, and a journal made of them would
/// make its replay quadratic.
#[derive(Debug, Clone, Copy)]
pub struct AddrState {
    seed: u64,
}

impl Default for AddrState {
    fn default() -> Self {
        AddrState {
            seed: RandomState::new().hash_one(0x5EED_u64),
        }
    }
}

impl AddrState {
    /// A state with a chosen seed: seed 0 is the hash as a crafted journal would target it
    /// (`benches/crowded.rs`). Maps take [`AddrState::default`].
    pub fn with_seed(seed: u64) -> Self {
        AddrState { seed }
    }
}

impl BuildHasher for AddrState {
    type Hasher = AddrHasher;
    #[inline]
    fn build_hasher(&self) -> AddrHasher {
        AddrHasher(self.seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_states_place_the_same_addresses_apart() {
        // Addresses one hashing sends to one bucket of a 2^16-bucket map are spread by another
        // (the chance that a fresh seed keeps 64 of them together is nil).
        let (a, b) = (AddrState::default(), AddrState::default());
        let low = |s: &AddrState, k: u64| s.hash_one(k) & 0xFFFF;
        let mut crowded = Vec::new();
        let mut k = 0x7000_0000_0000u64;
        while crowded.len() < 64 {
            if low(&a, k) == low(&a, 0x7000_0000_0000) {
                crowded.push(k);
            }
            k += 1 << 9;
        }
        let spread: std::collections::HashSet<u64> = crowded.iter().map(|&k| low(&b, k)).collect();
        assert!(spread.len() > 32, "{} buckets", spread.len());
    }
}
