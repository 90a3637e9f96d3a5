//! The prefilter: a cheap "could this line be one of ours?" for the stdout/stderr tap.
//!
//! Owns the anchor table. Every line any grammar in this module recognises contains one of the
//! anchors below, and [`crate::log::classify`] calls [`may_match`] first, so a `false` here is
//! always a `None` there. When a grammar learns a new line, its anchor goes here (the catalogue
//! tests fail otherwise). Must stay allocation-free and branch-light: it runs on every line a
//! server prints, inside the server.

/// The anchors that start with byte `b` (empty for bytes that start none). An anchor matches
/// where its bytes occur verbatim. Public so that a faster prefilter (the shim's vectorised
/// one) can be built from the same table; such a prefilter must accept every line that holds
/// one of these. Lead bytes are chosen to be rare in ordinary output: lines
/// such as "Post-capture KV sizing", "Reserving … of the KV budget", "PyTorch activation … GiB"
/// or "The memory capacity … local_gpu_memory=" are caught by `KV`, `GiB` or `_gpu_memory`.
pub const fn anchors(b: u8) -> &'static [&'static [u8]] {
    match b {
        b'K' => &[b"KV", b"Kv"],
        b'G' => &[b"GiB", b"Graph capturing"],
        b'_' => &[
            b"_total_",
            b"_running_requests",
            b"_gpu_memory",
            b"_gpu_blocks",
            b"_init_method=",
            b"_args=ServerArgs(",
        ],
        b'I' => &[b"Init ", b"Initial profiling"],
        b'L' => &[
            b"Load weight",
            b"Loaded weights",
            b"Loading model",
            b"LLM engine (",
        ],
        b'M' => &[
            b"Memory ",
            b"Mamba ",
            b"Model loading",
            b"Maximum concurrency",
        ],
        b'C' => &[
            b"Captur",
            b"Compiling num",
            b"Compile and warming",
            b"CUDA graph",
        ],
        b'U' => &[b"Use sliding", b"Use Sliding"],
        b'N' => &[b"NCCL", b"Not enough", b"No available memory"],
        b'D' => &[b"Disable prefill"],
        b'S' => &[b"SWA pool", b"Starting "],
        b'H' => &[b"Hybrid ("],
        b'#' => &[b"# "],
        b'(' => &[b"(profile"],
        // vLLM's `non-default args: {…}` settings line (see `settings.rs`).
        b'-' => &[b"-default args: {"],
        _ => &[],
    }
}

/// For each byte value, whether some anchor starts with it.
const LEAD: [bool; 256] = {
    let mut t = [false; 256];
    let leads = b"KG_ILMCUNDSH#(-";
    let mut i = 0;
    while i < leads.len() {
        t[leads[i] as usize] = true;
        i += 1;
    }
    t
};

/// True when `bytes` contains one of the anchors; false means no grammar here can match.
///
/// One pass over the line; only at a byte that starts an anchor (a few capitals, `_`, `#`, `(`, `-`)
/// are that byte's one to four anchors compared, so an ordinary line costs about a table lookup
/// per byte.
pub fn may_match(bytes: &[u8]) -> bool {
    let mut at = 0;
    // Eight bytes at a time: only the bytes that could lead an anchor (ASCII capitals, `_`,
    // `#`, `(`, `-`) are looked at; most of a line is skipped a word at a time.
    while at + 8 <= bytes.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[at..at + 8]);
        let w = u64::from_le_bytes(word);
        if w & HIGH != 0 {
            // Non-ASCII bytes in this word: byte by byte.
            if (at..at + 8).any(|i| lead_at(bytes, i)) {
                return true;
            }
        } else {
            let mut m = candidates(w);
            while m != 0 {
                let k = (m.trailing_zeros() / 8) as usize;
                if lead_at(bytes, at + k) {
                    return true;
                }
                m &= m - 1;
            }
        }
        at += 8;
    }
    (at..bytes.len()).any(|i| lead_at(bytes, i))
}

/// Whether an anchor starts at `bytes[i]`: lead byte, then its second byte (one table
/// lookup rejects almost every capital of ordinary text), then the full anchors.
#[inline]
fn lead_at(bytes: &[u8], i: usize) -> bool {
    let b = bytes[i];
    if !LEAD[b as usize] {
        return false;
    }
    match bytes.get(i + 1) {
        Some(&n) if SECOND[b as usize][(n >> 6) as usize] & (1 << (n & 63)) == 0 => false,
        _ => anchors(b).iter().any(|a| bytes[i..].starts_with(a)),
    }
}

/// For each lead byte, the set of bytes that follow it in some anchor (256 bits).
const SECOND: [[u64; 4]; 256] = {
    let mut t = [[0u64; 4]; 256];
    let mut b = 0;
    while b < 256 {
        let list = anchors(b as u8);
        let mut k = 0;
        while k < list.len() {
            let a = list[k];
            if a.len() > 1 {
                let n = a[1];
                t[b][(n >> 6) as usize] |= 1 << (n & 63);
            } else {
                t[b] = [u64::MAX; 4];
            }
            k += 1;
        }
        b += 1;
    }
    t
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// For an all-ASCII word: the high bit of every byte that could start an anchor (an ASCII
/// capital, `_`, `#`, `(` or `-`), and nothing else.
#[inline]
fn candidates(w: u64) -> u64 {
    // For ASCII bytes: high bit of (byte + 0x80 − lo) is set iff byte ≥ lo (no carries cross
    // bytes because every byte is < 0x80).
    let ge_a = (w + ONES * (0x80 - b'A' as u64)) & HIGH;
    let gt_z = (w + ONES * (0x80 - b'Z' as u64 - 1)) & HIGH;
    let eq = |c: u8| {
        let x = w ^ (ONES * c as u64);
        // Exact per byte for ASCII input: a byte is zero iff x - 1 borrows into its high bit
        // while x's own high bit is clear; the borrow chain starts only at zero bytes.
        !((x & !HIGH) + !HIGH) & !x & HIGH
    };
    (ge_a & !gt_z) | eq(b'_') | eq(b'#') | eq(b'(') | eq(b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lead_table_matches_anchor_lists() {
        for b in 0..=255u8 {
            assert_eq!(LEAD[b as usize], !anchors(b).is_empty(), "byte {b}");
            assert!(anchors(b).iter().all(|a| a.first() == Some(&b)));
        }
    }

    #[test]
    fn word_skip_agrees_with_the_byte_loop() {
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..20000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let line: Vec<u8> = (0..(x % 40) as usize)
                .map(|i| {
                    let pool = b"abc KV_Load weight Init ( # GiB x\xff";
                    pool[((x >> (i % 50)) as usize + i * 7) % pool.len()]
                })
                .collect();
            let slow = (0..line.len()).any(|i| lead_at(&line, i));
            assert_eq!(may_match(&line), slow, "{line:?}");
        }
        for b in 0..128u8 {
            for pos in 0..8 {
                let mut word = [b'a'; 8];
                word[pos] = b;
                let m = candidates(u64::from_le_bytes(word));
                let want = b.is_ascii_uppercase() || matches!(b, b'_' | b'#' | b'(' | b'-');
                assert_eq!(
                    m,
                    if want { 0x80 << (8 * pos) } else { 0 },
                    "byte {b} at {pos}"
                );
            }
        }
    }

    #[test]
    fn examples() {
        assert!(may_match(
            b"[2025-03-08 12:29:21 TP0] Load weight begin. avail mem=21.63 GB"
        ));
        assert!(may_match(b"max_total_num_tokens=1"));
        assert!(!may_match(b""));
        assert!(!may_match(
            b"[2025-03-08 12:29:12 TP0] sglang is using nccl==2.21.5"
        ));
        assert!(!may_match(b"INFO:     Started server process [3207]"));
        assert!(!may_match(&[0xff, 0xfe, 0x00, 0x1b]));
    }
}
