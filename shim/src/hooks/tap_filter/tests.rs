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
        let len = (x % 300) as usize;
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
        check_ended(&ended);
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
                0usize, 1, 13, 14, 15, 16, 17, 30, 31, 32, 33, 34, 63, 64, 65, 66, 80, 95, 96, 97,
                98, 99, 110, 126, 127, 128, 129, 130, 131, 190, 200, 260,
            ] {
                let mut l = vec![fill; pad];
                l.extend_from_slice(a);
                assert!(may_match(&l), "{}", String::from_utf8_lossy(&l));
                // The anchor just before the line's end, as a program writes it.
                for end in [&b"\n"[..], b"\r", b"\r\n"] {
                    let mut e = l.clone();
                    e.extend_from_slice(end);
                    assert!(may_match(&e), "{}", String::from_utf8_lossy(&e));
                    check_ended(&e);
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

/// `write`'s AVX2 entry, compiled as `write_avx2` is.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn via_avx2(line: &[u8]) -> bool {
    // SAFETY: the caller's contract.
    unsafe { line_may_match_avx2(line) }
}

/// `write`'s AVX-512 entry and its filter alone, compiled as `write_avx512` is.
///
/// # Safety
/// The CPU has AVX-512BW and VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn via_avx512(line: &[u8]) -> (bool, bool) {
    // SAFETY: the caller's contract.
    unsafe { (line_may_match_avx512(line), avx512::head(line)) }
}

/// The scalar model of the filter at positions `[0, n)` of `bytes` (0 past its end).
fn candidates_before(bytes: &[u8], n: usize) -> bool {
    (0..n).any(|i| {
        let mut m = 0xffu8;
        for (k, t) in TABLES.iter().enumerate() {
            let c = bytes.get(i + k).copied().unwrap_or(0);
            m &= t[0][(c & 15) as usize] & t[1][(c >> 4) as usize];
        }
        m != 0
    })
}

/// Every entry `write` may take for a line that ends with a line end, against the exact
/// prefilter; the AVX-512 filter alone against its scalar model (no position left out).
fn check_ended(line: &[u8]) {
    assert!(ends_line(line));
    let exact = log::may_match(line);
    assert_eq!(may_match(line), exact, "{line:?}");
    #[cfg(target_arch = "x86_64")]
    {
        if avx2() {
            // SAFETY: the CPU has AVX2.
            assert_eq!(unsafe { via_avx2(line) }, exact, "{line:?}");
        }
        // Skipped where the CPU has no AVX-512 (then `write` does not take that route).
        if avx512() {
            // SAFETY: the CPU has AVX-512BW and VL.
            let (entry, filter) = unsafe { via_avx512(line) };
            assert_eq!(entry, exact, "{line:?}");
            let model = candidates_before(line, line.len().saturating_sub(2));
            assert_eq!(filter, model, "{}", String::from_utf8_lossy(line));
        }
    }
}

/// Two pages, the second one inaccessible: a line placed at the end of the first is followed
/// by memory that faults when read.
struct Fence {
    base: *mut u8,
    page: usize,
}

impl Fence {
    fn new() -> Fence {
        // SAFETY: sysconf reads a constant of the system.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        // SAFETY: asks the kernel for fresh anonymous pages; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let second = base.cast::<u8>().wrapping_add(page).cast();
        // SAFETY: the second page of the mapping just made.
        let rc = unsafe { libc::mprotect(second, page, libc::PROT_NONE) };
        assert_eq!(rc, 0);
        Fence {
            base: base.cast(),
            page,
        }
    }

    /// `line` copied to end right at the inaccessible page.
    fn place(&mut self, line: &[u8]) -> &[u8] {
        assert!(line.len() <= self.page);
        // SAFETY: the first page is ours, readable and writable; the slice lies inside it.
        unsafe {
            let at = self.base.add(self.page - line.len());
            std::ptr::copy_nonoverlapping(line.as_ptr(), at, line.len());
            std::slice::from_raw_parts(at, line.len())
        }
    }
}

impl Drop for Fence {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer borrowed.
        unsafe { libc::munmap(self.base.cast(), 2 * self.page) };
    }
}

/// Lines of every length up to 300 that end right before an unmapped page (a read past the
/// line faults), with no anchor and with one at every position, through every entry.
#[test]
fn lines_of_every_length_at_a_page_end() {
    let filler = SERVING[1].strip_suffix(b"\n").unwrap();
    let mut fence = Fence::new();
    for len in 0..=300usize {
        for end in [&b"\n"[..], b"\r", b"\r\n"] {
            let body = len.saturating_sub(end.len());
            let mut line: Vec<u8> = filler.iter().cycle().take(body).copied().collect();
            line.extend_from_slice(&end[..len - body]);
            let plain = fence.place(&line).to_vec();
            if ends_line(&plain) {
                check_ended(fence.place(&line));
            }
            assert_eq!(may_match(fence.place(&line)), log::may_match(&plain));
            for anchor in [&b"KV"[..], b"GiB", b"_gpu_memory"] {
                let n = body.saturating_sub(anchor.len() - 1);
                // Every position for the shortest, every fifth and the last ones for the rest.
                for at in (0..n).filter(|&at| anchor.len() == 2 || at % 5 == 0 || at + 3 >= n) {
                    let mut l = line.clone();
                    l[at..at + anchor.len()].copy_from_slice(anchor);
                    let placed = fence.place(&l);
                    assert!(may_match(placed), "{}", String::from_utf8_lossy(&l));
                    if ends_line(&l) {
                        check_ended(fence.place(&l));
                    }
                }
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    if !avx512() {
        eprintln!("no AVX-512BW/VL here: write's AVX-512 route was not tested");
    }
}
