//! The prefilter: a cheap "could this line be one of ours?" for the stdout/stderr tap.
//!
//! Owns the anchor table. Every line any grammar in this module recognises contains one of the
//! anchors below, and [`crate::log::classify`] calls [`may_match`] first, so a `false` here is
//! always a `None` there. When a grammar learns a new line, its anchor goes here (the catalogue
//! tests fail otherwise). Must stay allocation-free and branch-light: it runs on every line a
//! server prints, inside the server.

/// The anchors that start with byte `b` (empty for bytes that start none). An anchor matches
/// where its bytes occur verbatim. Lead bytes are chosen to be rare in ordinary output: lines
/// such as "Post-capture KV sizing", "Reserving … of the KV budget", "PyTorch activation … GiB"
/// or "The memory capacity … local_gpu_memory=" are caught by `KV`, `GiB` or `_gpu_memory`.
fn anchors(b: u8) -> &'static [&'static [u8]] {
    match b {
        b'K' => &[b"KV", b"Kv"],
        b'G' => &[b"GiB", b"Graph capturing"],
        b'_' => &[
            b"_total_",
            b"_running_requests",
            b"_gpu_memory",
            b"_gpu_blocks",
        ],
        b'I' => &[b"Init "],
        b'L' => &[b"Load weight", b"Loaded weights", b"Loading model weights"],
        b'M' => &[
            b"Memory ",
            b"Mamba ",
            b"Model loading",
            b"Maximum concurrency",
        ],
        b'C' => &[b"Captur", b"Compiling num"],
        b'U' => &[b"Use sliding", b"Use Sliding"],
        b'N' => &[b"NCCL", b"Not enough", b"No available memory"],
        b'D' => &[b"Disable prefill"],
        b'S' => &[b"SWA pool", b"Starting "],
        b'H' => &[b"Hybrid ("],
        b'#' => &[b"# "],
        b'(' => &[b"(profile"],
        _ => &[],
    }
}

/// For each byte value, whether some anchor starts with it.
const LEAD: [bool; 256] = {
    let mut t = [false; 256];
    let leads = b"KG_ILMCUNDSH#(";
    let mut i = 0;
    while i < leads.len() {
        t[leads[i] as usize] = true;
        i += 1;
    }
    t
};

/// True when `bytes` contains one of the anchors; false means no grammar here can match.
///
/// One pass over the line; only at a byte that starts an anchor (a few capitals, `_`, `#`, `(`)
/// are that byte's one to four anchors compared, so an ordinary line costs about a table lookup
/// per byte.
pub fn may_match(bytes: &[u8]) -> bool {
    let mut rest = bytes;
    while let Some(p) = rest.iter().position(|&b| LEAD[b as usize]) {
        let here = rest.get(p..).unwrap_or(&[]);
        let lead = here.first().copied().unwrap_or(0);
        if anchors(lead).iter().any(|a| here.starts_with(a)) {
            return true;
        }
        rest = here.get(1..).unwrap_or(&[]);
    }
    false
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
