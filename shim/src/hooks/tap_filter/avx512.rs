//! `write`'s filter on a CPU with AVX-512BW: under 18 bytes one 16-byte window read with masked
//! loads (instead of the SSSE3 path's copy); up to 98 bytes AVX2's windows (three 32-byte ones
//! at most), compiled with AVX-512VL so that `vpternlog` merges their ands; from 99 bytes on
//! 64-byte windows, two instead of four up to 130 bytes (SGLang's decode line is 128).
//!
//! Measured on the dev VM (BENCHMARKS.md, "fifth round"): one 64-byte window costs more in
//! situ than two 32-byte ones, so 64-byte windows are used only where they save two or more;
//! masked loads (one window for any line under 66 bytes) measured slower than the plain
//! overlapping loads from 18 bytes on, and faster only below, where the other paths copy.

use std::arch::x86_64::*;

use super::simd::{self, LINE};

/// The four tables (see `simd::LINE`) broadcast to the four 16-byte lanes.
struct Tables512 {
    lo0: __m512i,
    hi0: __m512i,
    lo1: __m512i,
    lo2: __m512i,
    nib: __m512i,
}

impl Tables512 {
    /// # Safety
    /// AVX-512BW, in a caller compiled for it.
    #[inline(always)]
    unsafe fn load() -> Tables512 {
        // SAFETY (caller): AVX-512BW; the rows are 16 aligned bytes each.
        unsafe {
            let row = |i: usize| _mm512_broadcast_i32x4(_mm_load_si128(LINE.0[i].as_ptr().cast()));
            Tables512 {
                lo0: row(0),
                hi0: row(1),
                lo1: row(2),
                lo2: row(3),
                nib: _mm512_set1_epi8(0x0f),
            }
        }
    }

    /// The buckets that survive at each of positions `[q, q + 64)` (as AVX2's
    /// `Tables::window`, which says why only the third byte's low nibble is masked).
    ///
    /// # Safety
    /// AVX-512BW, in a caller compiled for it; `q .. q + 66` readable.
    #[inline(always)]
    unsafe fn window(&self, q: *const u8) -> __m512i {
        // SAFETY (caller): AVX-512BW, the 66 bytes.
        unsafe {
            let load = |at: usize| _mm512_loadu_si512(q.add(at).cast());
            let v0 = load(0);
            let l0 = _mm512_shuffle_epi8(self.lo0, v0);
            let hi = _mm512_and_si512(_mm512_srli_epi16(v0, 4), self.nib);
            let h0 = _mm512_shuffle_epi8(self.hi0, hi);
            let m1 = _mm512_shuffle_epi8(self.lo1, load(1));
            let m2 = _mm512_shuffle_epi8(self.lo2, _mm512_and_si512(load(2), self.nib));
            // 0x80: a & b & c.
            _mm512_and_si512(_mm512_ternarylogic_epi32(l0, m1, m2, 0x80), h0)
        }
    }
}

/// Whether positions `[0, len - 2)` of `bytes` hold a candidate (a line that ends with a line
/// end has none at its last two: `ends_line`).
///
/// # Safety
/// The CPU has AVX-512BW; to be inlined into a function compiled for it.
#[inline(always)]
pub unsafe fn head(bytes: &[u8]) -> bool {
    let len = bytes.len();
    if len < 18 {
        // SAFETY (caller): AVX-512BW and VL; the window's `n + 2 <= len` bytes.
        return unsafe { masked16(bytes.as_ptr(), len.saturating_sub(2)) };
    }
    if len <= 98 {
        // SAFETY (caller): AVX2 comes with AVX-512BW.
        return unsafe { simd::avx2_body::<true>(bytes) };
    }
    let p = bytes.as_ptr();
    // SAFETY (caller): AVX-512BW. A window at `at` reads `at .. at + 66`, and every `at` below
    // has `at + 66 <= len`: inside `bytes`.
    unsafe {
        let t = Tables512::load();
        // Positions [0, 64) and [len - 66, len - 2): all of them up to 130 bytes; longer
        // lines get the windows between as well (a position seen twice changes nothing).
        let mut any = _mm512_or_si512(t.window(p), t.window(p.add(len - 66)));
        let mut at = 64;
        while at + 66 < len {
            any = _mm512_or_si512(any, t.window(p.add(at)));
            at += 64;
        }
        _mm512_test_epi8_mask(any, any) != 0
    }
}

/// Positions `[q, q + n)`, `n < 16`, in one 16-byte window read with masked loads: a
/// masked-out byte is neither read nor faults, so no copy of a short line is needed.
///
/// # Safety
/// AVX-512BW and VL, in a caller compiled for them; `q .. q + n + 2` readable.
#[inline(always)]
unsafe fn masked16(q: *const u8, n: usize) -> bool {
    debug_assert!(n < 16);
    let keep = ((1u32 << n) - 1) as u16;
    // SAFETY (caller): AVX-512BW and VL; the loads at `q + at`, `at` ≤ 2, read `n` bytes each,
    // inside `q .. q + n + 2`.
    unsafe {
        let row = |i: usize| _mm_load_si128(LINE.0[i].as_ptr().cast());
        let load = |at: usize| _mm_maskz_loadu_epi8(keep, q.add(at).cast());
        let nib = _mm_set1_epi8(0x0f);
        let v0 = load(0);
        let l0 = _mm_shuffle_epi8(row(0), v0);
        let h0 = _mm_shuffle_epi8(row(1), _mm_and_si128(_mm_srli_epi16(v0, 4), nib));
        let m1 = _mm_shuffle_epi8(row(2), load(1));
        let m2 = _mm_shuffle_epi8(row(3), _mm_and_si128(load(2), nib));
        // 0x80: a & b & c; the test's mask leaves out the positions not loaded.
        let three = _mm_ternarylogic_epi32(l0, m1, m2, 0x80);
        _mm_mask_test_epi8_mask(keep, three, h0) != 0
    }
}
