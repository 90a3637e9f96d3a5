//! The filter against the exact prefilter, on made-up and real serving lines.

use super::*;

const SERVING: &[&[u8]] = &[
    b"INFO:     127.0.0.1:52344 - \"POST /generate HTTP/1.1\" 200 OK (request 8841, 412 tokens)\n",
    b"[2025-06-01 10:02:11 TP0] Decode batch. #running-req: 12, #token: 3301, token usage: 0.01, gen throughput (token/s): 812.44\n",
    b"[2025-06-01 10:02:11 TP0] Prefill batch. #new-seq: 1, #new-token: 128, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0\n",
    b"INFO:     127.0.0.1:40000 - \"GET /health HTTP/1.1\" 200 OK\n",
    b"(APIServer pid=123) INFO:     127.0.0.1:50866 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n",
];

#[test]
fn ordinary_serving_lines_have_no_candidate() {
    for l in SERVING {
        assert!(!scalar_candidates(l), "{}", String::from_utf8_lossy(l));
        assert!(!simd::candidates(l, ends_line(l)).unwrap_or(false));
        assert!(!may_match(l));
    }
}

#[test]
fn never_says_no_where_the_exact_prefilter_says_yes() {
    let mut x = 0x1234_5678_9abc_def0u64;
    let pool = b"abc KV_Load weight Init ( # GiB x\xff-default args: {NCCL Kv_total_ M S";
    for round in 0..40_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 150) as usize;
        let line: Vec<u8> = (0..len)
            .map(|i| pool[((x >> (i % 50)) as usize + i * 7 + round) % pool.len()])
            .collect();
        // Ended by a line end too: the vector path then skips the last two positions.
        let mut ended = line.clone();
        ended.push(if round % 2 == 0 { b'\n' } else { b'\r' });
        assert_eq!(may_match(&ended), log::may_match(&ended), "{ended:?}");
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the CPU has AVX2 (this function is not compiled for it: only slower).
            let inlined = unsafe { line_may_match_avx2(&ended) };
            assert_eq!(inlined, log::may_match(&ended), "{ended:?}");
        }
        let exact = log::may_match(&line);
        assert_eq!(may_match(&line), exact, "{line:?}");
        if exact {
            assert!(scalar_candidates(&line), "{line:?}");
            assert_ne!(
                simd::candidates(&line, ends_line(&line)),
                Some(false),
                "{line:?}"
            );
        }
        if let Some(c) = simd::candidates(&line, ends_line(&line)) {
            assert_eq!(c, scalar_candidates(&line), "{line:?}");
        }
    }
    // Anchors at the very start and end of short and long lines.
    for a in [
        &b"KV"[..],
        b"# ",
        b"GiB",
        b"-default args: {",
        b"_gpu_memory",
    ] {
        // UTF-8 bytes (0x80 and above) beside an anchor as well as ASCII.
        for fill in [b'x', 0xc3, 0xff] {
            for pad in [
                0usize, 1, 13, 14, 15, 16, 17, 30, 31, 32, 33, 34, 63, 64, 65,
            ] {
                let mut l = vec![fill; pad];
                l.extend_from_slice(a);
                assert!(may_match(&l), "{}", String::from_utf8_lossy(&l));
                // The anchor just before the line's end, as a program writes it.
                for end in [&b"\n"[..], b"\r", b"\r\n"] {
                    let mut e = l.clone();
                    e.extend_from_slice(end);
                    assert!(may_match(&e), "{}", String::from_utf8_lossy(&e));
                }
                let mut r = a.to_vec();
                r.extend(vec![fill; pad]);
                assert!(may_match(&r), "{}", String::from_utf8_lossy(&r));
                if let Some(c) = simd::candidates(&r, ends_line(&r)) {
                    assert!(c, "{}", String::from_utf8_lossy(&r));
                }
            }
        }
    }
}
