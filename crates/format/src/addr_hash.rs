//! The hasher of the reader's maps keyed by device address or handle (the live books keep theirs
//! in [`crate::addr_table`]).

use std::hash::Hasher;

/// A fast hasher for addresses and handles (they are already well spread; SipHash's
/// resistance to chosen keys buys nothing here and costs a third of a replay).
#[derive(Default, Clone, Copy)]
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
        self.0 = (v ^ (v >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        self.0 ^= self.0 >> 32;
    }
}
