//! The filter in 64-byte windows (AVX-512BW), for `write`'s path on a CPU that has it: a line
//! of up to 66 bytes is one window, one of up to 130 two, against two to four of the AVX2 path.
//! The same four shuffles a window as AVX2's (the tables broadcast to the four 16-byte lanes),
//! one `vpternlog` for three of the ands, and `vptestmb` for the fourth with the verdict in a
//! mask register: a shorter chain from the line's loads to the branch after the system call.
//!
//! A line shorter than 66 bytes is read with masked loads (masked-out bytes are never read,
//! so no fault past its end, and read as 0); longer ones with plain loads, the last window
//! overlapping the one before, as the AVX2 path does.

use std::arch::x86_64::*;

use super::simd::LINE;

/// The tables in registers.
struct Tables {
    lo0: __m512i,
    hi0: __m512i,
    lo1: __m512i,
    lo2: __m512i,
    nib: __m512i,
}

impl Tables {
    /// # Safety
    /// AVX-512BW, in a caller compiled for it.
    #[inline(always)]
    unsafe fn load() -> Tables {
        // SAFETY (caller): AVX-512BW; the rows are 16 aligned bytes each.
        unsafe {
            let row = |i: usize| _mm512_broadcast_i32x4(_mm_load_si128(LINE.0[i].as_ptr().cast()));
            Tables {
                lo0: row(0),
                hi0: row(1),
                lo1: row(2),
                lo2: row(3),
                nib: _mm512_set1_epi8(0x0f),
            }
        }
    }

    /// The positions of `[0, 64)` (of those in `keep`) where a bucket survives, given the
    /// bytes at positions `+0`, `+1` and `+2` (see the AVX2 `Tables::window` for why only
    /// the third needs its low nibble masked).
    ///
    /// # Safety
    /// AVX-512BW, in a caller compiled for it.
    #[inline(always)]
    unsafe fn survivors(&self, v0: __m512i, v1: __m512i, v2: __m512i, keep: u64) -> u64 {
        // SAFETY (caller): AVX-512BW.
        unsafe {
            let l0 = _mm512_shuffle_epi8(self.lo0, v0);
            let hi = _mm512_and_si512(_mm512_srli_epi16(v0, 4), self.nib);
            let h0 = _mm512_shuffle_epi8(self.hi0, hi);
            let m1 = _mm512_shuffle_epi8(self.lo1, v1);
            let m2 = _mm512_shuffle_epi8(self.lo2, _mm512_and_si512(v2, self.nib));
            // 0x80: a & b & c. The high nibble's shuffle is the longest chain: it goes last.
            let three = _mm512_ternarylogic_epi32(l0, m1, m2, 0x80);
            _mm512_mask_test_epi8_mask(keep, three, h0)
        }
    }

    /// Positions `[q, q + 64)`, read with plain loads.
    ///
    /// # Safety
    /// AVX-512BW, in a caller compiled for it; `q .. q + 66` readable.
    #[inline(always)]
    unsafe fn window(&self, q: *const u8) -> u64 {
        // SAFETY (caller): AVX-512BW, the 66 bytes.
        unsafe {
            let load = |at: usize| _mm512_loadu_si512(q.add(at).cast());
            self.survivors(load(0), load(1), load(2), !0)
        }
    }

    /// Positions `[q, q + n)`, `n < 64`, read with masked loads: the bytes read are those of
    /// `q .. q + n + 2`, no others.
    ///
    /// # Safety
    /// AVX-512BW, in a caller compiled for it; `q .. q + n + 2` readable.
    #[inline(always)]
    unsafe fn masked(&self, q: *const u8, n: usize) -> u64 {
        debug_assert!(n < 64);
        let keep = (1u64 << n) - 1;
        // SAFETY (caller): AVX-512BW; a masked-out byte is not read (nor faults), and the
        // kept ones, `at .. at + n` for `at` ≤ 2, are inside the readable bytes.
        unsafe {
            let load = |at: usize| _mm512_maskz_loadu_epi8(keep, q.add(at).cast());
            self.survivors(load(0), load(1), load(2), keep)
        }
    }
}

/// Whether positions `[0, len - 2)` of `bytes` hold a candidate (the last two are left to the
/// caller: a line that ends with a line end has none there).
///
/// # Safety
/// The CPU has AVX-512BW; to be inlined into a function compiled for it.
#[inline(always)]
pub unsafe fn head(bytes: &[u8]) -> bool {
    let len = bytes.len();
    let p = bytes.as_ptr();
    // SAFETY (caller): AVX-512BW. Every window reads the bytes of `at .. at + 66` (plain) or
    // `0 .. n + 2 = len` (masked) with the bounds checked here: inside `bytes`.
    unsafe {
        let t = Tables::load();
        if len < 66 {
            return t.masked(p, len.saturating_sub(2)) != 0;
        }
        // The windows at 0 and at `len - 66` cover lines of up to 130 bytes; longer ones get
        // the windows between as well (a position seen twice changes nothing).
        let mut any = t.window(p) | t.window(p.add(len - 66));
        let mut at = 64;
        while at + 66 < len {
            any |= t.window(p.add(at));
            at += 64;
        }
        any != 0
    }
}
