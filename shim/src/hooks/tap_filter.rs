//! The tap's first look at a line, vectorised: 16 or 32 bytes per step instead of the engines
//! crate's 8, so that a line that matches nothing costs the program a few nanoseconds.
//!
//! A "Teddy" filter (after Hyperscan's): every anchor of `vramledger_engines::log::anchors`
//! is put in one of 8 buckets by its first byte, and for each of its first three bytes two
//! 16-entry tables say which buckets have that byte's low and high nibble there (at the
//! second and third byte the low nibble alone is looked up: four shuffles a step, not six).
//! One shuffle per table and position tells, for 16 (SSSE3) or 32 (AVX2) positions at once,
//! which buckets could start there; a position where a bucket survives all three is a
//! candidate, and only a
//! line with a candidate is handed to the exact prefilter (`log::may_match`). So this never
//! says no where the exact one would say yes, and the buckets are chosen so that ordinary
//! serving lines (access logs, decode progress, request logs) have no candidate at all.
//! Without SSSE3 (or off x86-64) the exact prefilter runs alone.
//!
//! With AVX2: 32-byte windows from 34 bytes on, two 16-byte ones from 18 (shorter lines take
//! the SSSE3 path, through a copy), and no scalar tail for a line that ends with a line end
//! (no anchor can start at its last two bytes). `write` inlines this into its own AVX2 body
//! ([`line_may_match_avx2`]), or, on a CPU with AVX-512BW and VL, the variant of `avx512.rs`
//! (64-byte windows for long lines, masked loads for short ones: [`line_may_match_avx512`]);
//! `writev` and stdio reach the AVX2 one through [`may_match`].

use vramledger_engines::log;

/// Bytes of an anchor the filter looks at.
const DEPTH: usize = 3;

/// The bucket of anchors starting with `lead`: chosen with `scripts/tap_buckets.py`, which
/// models this filter, so that ordinary serving lines (access logs, decode and prefill
/// progress, request logs) get no candidate and as few real log lines without an anchor as
/// it could find do.
const fn bucket(lead: u8) -> u8 {
    match lead {
        b'S' | b'I' => 0,
        b'-' => 1,
        b'#' => 2,
        b'K' | b'M' => 3,
        b'L' | b'C' => 4,
        b'_' => 5,
        b'U' | b'N' | b'D' => 6,
        _ => 7,
    }
}

/// `[low-nibble table, high-nibble table]` for each of the first three anchor bytes.
const TABLES: [[[u8; 16]; 2]; DEPTH] = {
    let mut t = [[[0u8; 16]; 2]; DEPTH];
    let mut lead = 0usize;
    while lead < 256 {
        let list = log::anchors(lead as u8);
        let bit = 1u8 << bucket(lead as u8);
        let mut a = 0;
        while a < list.len() {
            let anchor = list[a];
            let mut k = 0;
            while k < DEPTH {
                if k < anchor.len() {
                    let c = anchor[k];
                    t[k][0][(c & 15) as usize] |= bit;
                    t[k][1][(c >> 4) as usize] |= bit;
                } else {
                    // A shorter anchor matches whatever follows it.
                    let mut n = 0;
                    while n < 16 {
                        t[k][0][n] |= bit;
                        t[k][1][n] |= bit;
                        n += 1;
                    }
                }
                k += 1;
            }
            a += 1;
        }
        lead += 1;
    }
    // Where the high nibble is not looked up (a shuffle fewer per step: the filter gets
    // looser there, never stricter) it says only what the low one's shuffle says on its own:
    // an ASCII byte, or any byte at a wild position.
    let mut k = 0;
    while k < DEPTH {
        if LOW_ONLY[k] {
            let mut h = 0;
            while h < 16 {
                t[k][1][h] = if h < 8 || WILD[k] { 0xff } else { 0 };
                h += 1;
            }
        }
        k += 1;
    }
    t
};

/// The anchor byte positions whose high nibble is not looked up (see `TABLES`).
const LOW_ONLY: [bool; DEPTH] = [false, true, true];

/// For each anchor byte position, the buckets that a whole byte value allows there (both
/// nibble tables at once): the scalar lookups of a line's last positions.
const FULL: [[u8; 256]; DEPTH] = {
    let mut f = [[0u8; 256]; DEPTH];
    let mut k = 0;
    while k < DEPTH {
        let mut c = 0;
        while c < 256 {
            f[k][c] = TABLES[k][0][c & 15] & TABLES[k][1][c >> 4];
            c += 1;
        }
        k += 1;
    }
    f
};

/// Whether position `k` takes any byte for some anchor (one shorter than `k + 1`); where it
/// does not, only the anchors' own bytes (all ASCII, checked here) are allowed there.
const WILD: [bool; DEPTH] = {
    let mut w = [false; DEPTH];
    let mut lead = 0usize;
    while lead < 256 {
        let list = log::anchors(lead as u8);
        let mut a = 0;
        while a < list.len() {
            let mut k = 0;
            while k < DEPTH {
                if k >= list[a].len() {
                    w[k] = true;
                } else {
                    assert!(list[a][k] < 0x80, "anchors are ASCII");
                }
                k += 1;
            }
            a += 1;
        }
        lead += 1;
    }
    w
};

/// True unless `bytes` surely holds no anchor (then no grammar can match the line).
#[inline(always)]
pub fn may_match(bytes: &[u8]) -> bool {
    match simd::candidates(bytes, ends_line(bytes)) {
        Some(false) => false,
        _ => log::may_match(bytes),
    }
}

/// Whether the CPU has AVX2 (then [`line_may_match_avx2`] may be called).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn avx2() -> bool {
    simd::level() == 1
}

/// Whether the CPU has AVX-512BW and VL (then [`line_may_match_avx512`] may be called, from a
/// function compiled for both). Asked where `write` picks its route.
#[cfg(target_arch = "x86_64")]
pub fn avx512() -> bool {
    std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vl")
}

/// [`line_may_match_avx2`] in 64-byte windows ([`avx512`]), to be inlined the same way.
///
/// # Safety
/// The CPU has AVX-512BW and VL ([`avx512`]); called from a function compiled with them.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub unsafe fn line_may_match_avx512(bytes: &[u8]) -> bool {
    debug_assert!(ends_line(bytes));
    // SAFETY: AVX-512BW (the caller's contract).
    unsafe { avx512::head(bytes) && log::may_match(bytes) }
}

/// [`may_match`] for a line that ends with a line end (the caller has checked:
/// [`ends_line`]), on a CPU with AVX2, to be inlined into a caller compiled for it: a
/// `#[target_feature]` function cannot be forced inline, this one (without the attribute) is,
/// and its intrinsics are then inlined into the caller, which has the feature.
///
/// # Safety
/// The CPU has AVX2 ([`avx2`]); called from a function compiled with AVX2 (elsewhere it is
/// correct, but each intrinsic is a call).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub unsafe fn line_may_match_avx2(bytes: &[u8]) -> bool {
    debug_assert!(ends_line(bytes));
    // SAFETY: AVX2 (the caller's contract).
    unsafe { simd::avx2_body::<true>(bytes) && log::may_match(bytes) }
}

/// Whether `bytes` ends with a line end: then no anchor starts at its last two positions
/// (anchors are two bytes or more, and hold no line end: checked below), which the vector
/// windows leave to a scalar tail.
#[inline(always)]
pub fn ends_line(bytes: &[u8]) -> bool {
    matches!(bytes.last(), Some(b'\n' | b'\r'))
}

const _: () = {
    let mut lead = 0usize;
    while lead < 256 {
        let list = log::anchors(lead as u8);
        let mut a = 0;
        while a < list.len() {
            assert!(list[a].len() >= 2, "anchors are two bytes or more");
            let mut k = 0;
            while k < list[a].len() {
                assert!(
                    list[a][k] != b'\n' && list[a][k] != b'\r',
                    "no line end in an anchor"
                );
                k += 1;
            }
            a += 1;
        }
        lead += 1;
    }
};

/// The filter alone: `true` for a line with a candidate position.
#[cfg(test)]
fn scalar_candidates(bytes: &[u8]) -> bool {
    (0..bytes.len()).any(|i| {
        let mut m = 0xffu8;
        for (k, t) in TABLES.iter().enumerate() {
            let c = bytes.get(i + k).copied().unwrap_or(0);
            m &= t[0][(c & 15) as usize] & t[1][(c >> 4) as usize];
        }
        m != 0
    })
}

#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;
    use std::sync::atomic::{AtomicU8, Ordering};

    use super::{FULL, LOW_ONLY, TABLES, WILD};

    // 0 not asked, 1 AVX2, 2 SSSE3, 3 neither.
    static LEVEL: AtomicU8 = AtomicU8::new(0);

    #[inline(always)]
    pub fn level() -> u8 {
        match LEVEL.load(Ordering::Relaxed) {
            0 => level_first(),
            l => l,
        }
    }

    #[cold]
    fn level_first() -> u8 {
        let l = if std::is_x86_feature_detected!("avx2") {
            1
        } else if std::is_x86_feature_detected!("ssse3") {
            2
        } else {
            3
        };
        LEVEL.store(l, Ordering::Relaxed);
        l
    }

    /// Whether `bytes` has a candidate position; `None` without the instructions.
    #[inline(always)]
    pub fn candidates(bytes: &[u8], ended: bool) -> Option<bool> {
        match level() {
            // SAFETY: the CPU has AVX2 (asked above).
            1 => Some(unsafe {
                if ended {
                    avx2::<true>(bytes)
                } else {
                    avx2::<false>(bytes)
                }
            }),
            // SAFETY: the CPU has SSSE3 (asked above).
            2 => Some(unsafe { ssse3(bytes) }),
            _ => None,
        }
    }

    /// The four tables the AVX2 step looks up (position 0's low and high nibble, positions 1
    /// and 2's low nibble: `LOW_ONLY`), each broadcast to both 16-byte halves (AVX2 shuffles
    /// within halves). The compiler folds the broadcasts into 32-byte constants of its own;
    /// forcing 16-byte loads from this one cache line measured the same (BENCHMARKS.md).
    #[repr(C, align(64))]
    pub(super) struct Line(pub(super) [[u8; 16]; 4]);

    pub(super) static LINE: Line = {
        assert!(!LOW_ONLY[0] && LOW_ONLY[1] && LOW_ONLY[2] && !WILD[0] && !WILD[1]);
        Line([TABLES[0][0], TABLES[0][1], TABLES[1][0], TABLES[2][0]])
    };

    /// The AVX2 tables in registers.
    struct Tables {
        lo0: __m256i,
        hi0: __m256i,
        lo1: __m256i,
        lo2: __m256i,
        nib: __m256i,
    }

    impl Tables {
        /// # Safety
        /// AVX2, in a caller compiled for it (`avx2_body`).
        #[inline(always)]
        unsafe fn load() -> Tables {
            // SAFETY (caller): AVX2; the rows are 16 aligned bytes each.
            unsafe {
                let row = |i: usize| _mm_load_si128(LINE.0[i].as_ptr().cast());
                Tables {
                    lo0: _mm256_broadcastsi128_si256(row(0)),
                    hi0: _mm256_broadcastsi128_si256(row(1)),
                    lo1: _mm256_broadcastsi128_si256(row(2)),
                    lo2: _mm256_broadcastsi128_si256(row(3)),
                    nib: _mm256_set1_epi8(0x0f),
                }
            }
        }

        /// [`Tables::window`] for positions `[q, q + 16)` (the tables' low halves).
        ///
        /// # Safety
        /// AVX2, in a caller compiled for it; `q .. q + 18` readable.
        #[inline(always)]
        unsafe fn window16(&self, q: *const u8) -> __m128i {
            // SAFETY (caller): AVX2, the 18 bytes.
            unsafe {
                let half = _mm256_castsi256_si128;
                let nib = half(self.nib);
                let v0 = _mm_loadu_si128(q.cast());
                let l0 = _mm_shuffle_epi8(half(self.lo0), v0);
                let h0 =
                    _mm_shuffle_epi8(half(self.hi0), _mm_and_si128(_mm_srli_epi16(v0, 4), nib));
                let m1 = _mm_shuffle_epi8(half(self.lo1), _mm_loadu_si128(q.add(1).cast()));
                let v2 = _mm_and_si128(_mm_loadu_si128(q.add(2).cast()), nib);
                let m2 = _mm_shuffle_epi8(half(self.lo2), v2);
                _mm_and_si128(_mm_and_si128(l0, h0), _mm_and_si128(m1, m2))
            }
        }

        /// The buckets that survive at each of positions `[q, q + 32)`.
        ///
        /// # Safety
        /// AVX2, in a caller compiled for it; `q .. q + 34` readable.
        #[inline(always)]
        unsafe fn window(&self, q: *const u8) -> __m256i {
            // A byte of 0x80 and above makes the shuffle give 0 ("no bucket"): right where no
            // anchor can have such a byte (positions 0 and 1: `WILD`), so the low nibble needs
            // no mask there; at positions 1 and 2 that is all the high nibble's table says.
            // SAFETY (caller): AVX2, the 34 bytes.
            unsafe {
                let v0 = _mm256_loadu_si256(q.cast());
                let l0 = _mm256_shuffle_epi8(self.lo0, v0);
                let hi = _mm256_and_si256(_mm256_srli_epi16(v0, 4), self.nib);
                let h0 = _mm256_shuffle_epi8(self.hi0, hi);
                let m1 = _mm256_shuffle_epi8(self.lo1, _mm256_loadu_si256(q.add(1).cast()));
                let v2 = _mm256_and_si256(_mm256_loadu_si256(q.add(2).cast()), self.nib);
                let m2 = _mm256_shuffle_epi8(self.lo2, v2);
                _mm256_and_si256(_mm256_and_si256(l0, h0), _mm256_and_si256(m1, m2))
            }
        }
    }

    /// Whether `bytes` has a candidate; `ENDED`: it ends with a line end (`ends_line`).
    #[target_feature(enable = "avx2")]
    unsafe fn avx2<const ENDED: bool>(bytes: &[u8]) -> bool {
        // SAFETY: AVX2 (the caller's contract), and this function is compiled for it.
        unsafe { avx2_body::<ENDED>(bytes) }
    }

    /// [`avx2`]'s body, to be inlined into a function compiled with AVX2.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[inline(always)]
    pub unsafe fn avx2_body<const ENDED: bool>(bytes: &[u8]) -> bool {
        let len = bytes.len();
        if len < 34 {
            if len < 18 {
                // SAFETY (caller): SSSE3 comes with AVX2.
                return unsafe { ssse3(bytes) };
            }
            // Two 16-byte windows, the second ending where the 32-byte one would: every load
            // reads 16 bytes at `at` with `at + 2 + 16 <= len`.
            // SAFETY (caller): AVX2; the bounds just said.
            return unsafe {
                let t = Tables::load();
                let p = bytes.as_ptr();
                let any = _mm_or_si128(t.window16(p), t.window16(p.add(len - 18)));
                _mm_testz_si128(any, any) == 0 || (!ENDED && tail(bytes))
            };
        }
        // Every load reads 32 bytes at an offset `at` with `at + 2 + 32 <= len` (checked
        // below): inside `bytes`; the tables are 16-byte rows of an aligned line.
        // SAFETY (caller): AVX2; the bounds as just said.
        unsafe {
            let t = Tables::load();
            let p = bytes.as_ptr();
            // Positions [at, at + 32) for each window; the last one overlaps the one before
            // (checking a position twice changes nothing). The windows' survivors are
            // gathered and tested once: a line that matches nothing (almost every line) is
            // read to its end anyway, and one branch fewer per window is one less to guess
            // wrong just after the kernel ran.
            let mut any = _mm256_setzero_si256();
            let mut at = 0;
            while at + 34 <= len {
                any = _mm256_or_si256(any, t.window(p.add(at)));
                at += 32;
            }
            if at < len - 2 {
                any = _mm256_or_si256(any, t.window(p.add(len - 34)));
            }
            _mm256_testz_si256(any, any) == 0 || (!ENDED && tail(bytes))
        }
    }

    /// The last two positions of a line, whose windows run past its end (bytes there read as
    /// 0): two lookups each in the combined tables.
    #[inline(always)]
    fn tail(bytes: &[u8]) -> bool {
        let [.., a, b] = *bytes else {
            return false;
        };
        let (a, b) = (a as usize, b as usize);
        (FULL[0][a] & FULL[1][b] & FULL[2][0]) | (FULL[0][b] & FULL[1][0] & FULL[2][0]) != 0
    }

    #[target_feature(enable = "ssse3")]
    #[inline(never)]
    unsafe fn ssse3(bytes: &[u8]) -> bool {
        // SAFETY (caller): SSSE3. Every load below reads 16 bytes inside `bytes` or inside the
        // zeroed local tail buffer (the bounds are checked before each).
        unsafe {
            let table = |k: usize, h: usize| _mm_loadu_si128(TABLES[k][h].as_ptr().cast());
            let (lo0, hi0) = (table(0, 0), table(0, 1));
            let (lo1, hi1) = (table(1, 0), table(1, 1));
            let (lo2, hi2) = (table(2, 0), table(2, 1));
            let nib = _mm_set1_epi8(0x0f);
            let look = |v: __m128i, lo: __m128i, hi: __m128i| {
                let l = _mm_shuffle_epi8(lo, _mm_and_si128(v, nib));
                let h = _mm_shuffle_epi8(hi, _mm_and_si128(_mm_srli_epi16(v, 4), nib));
                _mm_and_si128(l, h)
            };
            let step = |p: *const u8| {
                let m0 = look(_mm_loadu_si128(p.cast()), lo0, hi0);
                let m1 = look(_mm_loadu_si128(p.add(1).cast()), lo1, hi1);
                let m2 = look(_mm_loadu_si128(p.add(2).cast()), lo2, hi2);
                let m = _mm_and_si128(_mm_and_si128(m0, m1), m2);
                _mm_movemask_epi8(_mm_cmpeq_epi8(m, _mm_setzero_si128())) != 0xffff
            };
            let p = bytes.as_ptr();
            let mut i = 0;
            while i + 16 + 2 <= bytes.len() {
                if step(p.add(i)) {
                    return true;
                }
                i += 16;
            }
            let mut tail = [0u8; 32 + 2];
            let rest = bytes.len() - i;
            tail[..rest].copy_from_slice(&bytes[i..]);
            let mut j = 0;
            while j < rest {
                if step(tail.as_ptr().add(j)) {
                    return true;
                }
                j += 16;
            }
            false
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod simd {
    /// No vectorised filter here: the exact prefilter decides.
    #[inline]
    pub fn candidates(_: &[u8], _: bool) -> Option<bool> {
        None
    }
}

#[cfg(test)]
mod tests;
