//! SGLang graph-capture lines of `docs/sglang-memory.md` §2.2/§2.3, per version (0.4.6 to 0.5.23),
//! their tqdm bars and the post-capture KV sizing lines, rendered by hand into literal lines.

mod log_support;

use log_support::check;
use vramledger_engines::log::{event as ev, stage as st, LineKind::*};

#[test]
fn capture_0_4_6_and_0_5_5() {
    let b = check(
        "Capture cuda graph begin. This can take up to several minutes. avail mem=45.03 GB",
        Boundary,
        st::GRAPH_CAPTURE,
        ev::CAPTURE_BEGIN,
        &[("avail_mem_gib", 45.03)],
    );
    assert_eq!(b.words.graph, Some("cuda graph"));
    check(
        "Capture cuda graph end. Time elapsed: 7.23 s. mem usage=0.93 GB. avail mem=0.53 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_END,
        &[
            ("time_s", 7.23),
            ("mem_usage_gib", 0.93),
            ("avail_mem_gib", 0.53),
        ],
    );
    // 0.4.6 EAGLE: avail before usage
    check(
        "Capture draft cuda graph begin. This can take up to several minutes. avail mem=5.90 GB",
        Boundary,
        st::GRAPH_CAPTURE_DRAFT,
        ev::CAPTURE_DRAFT_BEGIN,
        &[("avail_mem_gib", 5.9)],
    );
    check(
        "Capture draft cuda graph end. Time elapsed: 1.00 s. avail mem=5.80 GB. mem usage=0.10 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_DRAFT_END,
        &[
            ("time_s", 1.0),
            ("avail_mem_gib", 5.8),
            ("mem_usage_gib", 0.1),
        ],
    );
    // 0.5.5 cpu graph
    check(
        "Capture cpu graph begin. This can take up to several minutes. avail mem=100.00 GB",
        Boundary,
        st::GRAPH_CAPTURE,
        ev::CAPTURE_BEGIN,
        &[("avail_mem_gib", 100.0)],
    );
    check(
        "Capture cpu graph end. Time elapsed: 3.00 s. mem usage=0.00 GB. avail mem=100.00 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_END,
        &[
            ("time_s", 3.0),
            ("mem_usage_gib", 0.0),
            ("avail_mem_gib", 100.0),
        ],
    );
    // 0.5.5, 0.5.12 EAGLE draft extend
    check(
        "Capture draft extend cuda graph begin. This can take up to several minutes. avail mem=30.12 GB",
        Boundary,
        st::GRAPH_CAPTURE_DRAFT,
        ev::CAPTURE_DRAFT_EXTEND_BEGIN,
        &[("avail_mem_gib", 30.12)],
    );
    check(
        "Capture draft extend cuda graph end. Time elapsed: 2.50 s. mem usage=0.30 GB. avail mem=29.82 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_DRAFT_EXTEND_END,
        &[("time_s", 2.5), ("mem_usage_gib", 0.3), ("avail_mem_gib", 29.82)],
    );
    // "Capture cuda graph bs [...]" (TP0, 0.4.x to 0.5.x; seen in the real logs)
    check(
        "Capture cuda graph bs [1, 2, 4, 8, 12, 16, 24, 32]",
        Progress,
        st::GRAPH_CAPTURE,
        ev::CAPTURE_BATCH_SIZES,
        &[("bs_max", 32.0), ("bs_count", 8.0)],
    );
}

#[test]
fn capture_0_5_12() {
    for backend in ["npu graph", "xpu graph", "musa graph"] {
        let line = format!(
            "Capture {backend} begin. This can take up to several minutes. avail mem=60.00 GB"
        );
        let b = check(
            &line,
            Boundary,
            st::GRAPH_CAPTURE,
            ev::CAPTURE_BEGIN,
            &[("avail_mem_gib", 60.0)],
        );
        assert_eq!(b.words.graph, Some(backend));
    }
    check(
        "Capture piecewise CUDA graph begin. avail mem=40.00 GB",
        Boundary,
        st::GRAPH_CAPTURE_PIECEWISE,
        ev::CAPTURE_PIECEWISE_BEGIN,
        &[("avail_mem_gib", 40.0)],
    );
    check(
        "Capture piecewise CUDA graph end. Time elapsed: 12.00 s. mem usage=1.25 GB. avail mem=38.75 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_PIECEWISE_END,
        &[("time_s", 12.0), ("mem_usage_gib", 1.25), ("avail_mem_gib", 38.75)],
    );
    // multi-layer EAGLE
    check(
        "Capture draft extend cuda graph begin (step 2). This can take up to several minutes. avail mem=30.00 GB",
        Boundary,
        st::GRAPH_CAPTURE_DRAFT,
        ev::CAPTURE_DRAFT_EXTEND_BEGIN,
        &[("step", 2.0), ("avail_mem_gib", 30.0)],
    );
    // Frozen-KV MTP (0.5.12+), no numbers
    check(
        "Capture Frozen-KV MTP draft cuda graph begin.",
        Boundary,
        st::GRAPH_CAPTURE_DRAFT,
        ev::CAPTURE_DRAFT_BEGIN,
        &[],
    );
    check(
        "Capture Frozen-KV MTP draft cuda graph end.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_DRAFT_END,
        &[],
    );
}

#[test]
fn capture_0_5_18_and_0_5_23() {
    // prefill (role target / draft); num_tokens as a list and as a number
    let b = check(
        "Capture target prefill CUDA graph begin. backend=fa3, num_tokens=[512, 1024, 2048, 4096, 8192], avail mem=60.00 GB",
        Boundary,
        st::GRAPH_CAPTURE_PREFILL,
        ev::CAPTURE_PREFILL_BEGIN,
        &[("num_tokens", 8192.0), ("avail_mem_gib", 60.0)],
    );
    assert_eq!(b.words.backend, Some("fa3"));
    assert_eq!(b.words.graph, Some("target prefill CUDA graph"));
    check(
        "Capture target prefill CUDA graph end. elapsed=4.50 s, mem usage=1.10 GB, avail mem=58.90 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_PREFILL_END,
        &[("time_s", 4.5), ("mem_usage_gib", 1.1), ("avail_mem_gib", 58.9)],
    );
    check(
        "Capture draft prefill CUDA graph begin. backend=fa3, num_tokens=4096, avail mem=58.00 GB",
        Boundary,
        st::GRAPH_CAPTURE_DRAFT,
        ev::CAPTURE_DRAFT_PREFILL_BEGIN,
        &[("num_tokens", 4096.0), ("avail_mem_gib", 58.0)],
    );
    check(
        "Capture draft prefill CUDA graph end. elapsed=1.00 s, mem usage=0.10 GB, avail mem=57.90 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_DRAFT_PREFILL_END,
        &[("time_s", 1.0), ("mem_usage_gib", 0.1), ("avail_mem_gib", 57.9)],
    );
    // 0.5.18 decode / verify: bs list in the begin line, every graph backend word
    let b = check(
        "Capture target decode CUDA graph begin. backend=flashinfer, num_tokens_per_req=1, bs=[1, 2, 4, 8, 16], avail mem=57.00 GB",
        Boundary,
        st::GRAPH_CAPTURE_DECODE,
        ev::CAPTURE_DECODE_BEGIN,
        &[("num_tokens_per_req", 1.0), ("bs_max", 16.0), ("bs_count", 5.0), ("avail_mem_gib", 57.0)],
    );
    assert_eq!(b.words.backend, Some("flashinfer"));
    check(
        "Capture target decode CUDA graph end. elapsed=2.00 s, mem usage=0.40 GB, avail mem=56.60 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_DECODE_END,
        &[("time_s", 2.0), ("mem_usage_gib", 0.4), ("avail_mem_gib", 56.6)],
    );
    for graph in ["CPU graph", "NPU graph", "XPU graph"] {
        let line = format!(
            "Capture target verify {graph} begin. backend=torch_native, num_tokens_per_req=4, bs=[1, 2], avail mem=10.00 GB"
        );
        check(
            &line,
            Boundary,
            st::GRAPH_CAPTURE_VERIFY,
            ev::CAPTURE_VERIFY_BEGIN,
            &[
                ("num_tokens_per_req", 4.0),
                ("bs_max", 2.0),
                ("bs_count", 2.0),
                ("avail_mem_gib", 10.0),
            ],
        );
    }
    // 0.5.23 decode: bs list moved to the end line
    check(
        "Capture target decode CUDA graph begin. backend=flashinfer, num_tokens_per_req=1, avail mem=70.12 GB",
        Boundary,
        st::GRAPH_CAPTURE_DECODE,
        ev::CAPTURE_DECODE_BEGIN,
        &[("num_tokens_per_req", 1.0), ("avail_mem_gib", 70.12)],
    );
    check(
        "Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=3.21 s, mem usage=0.52 GB, avail mem=69.60 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_DECODE_END,
        &[("bs_max", 8.0), ("bs_count", 4.0), ("time_s", 3.21), ("mem_usage_gib", 0.52), ("avail_mem_gib", 69.6)],
    );
    check(
        "Capture target verify CUDA graph begin. backend=fa3, num_tokens_per_req=4, avail mem=60.00 GB",
        Boundary,
        st::GRAPH_CAPTURE_VERIFY,
        ev::CAPTURE_VERIFY_BEGIN,
        &[("num_tokens_per_req", 4.0), ("avail_mem_gib", 60.0)],
    );
    check(
        "Capture target verify CUDA graph end. bs=[1, 2, 4], elapsed=1.50 s, mem usage=0.25 GB, avail mem=59.75 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_VERIFY_END,
        &[("bs_max", 4.0), ("bs_count", 3.0), ("time_s", 1.5), ("mem_usage_gib", 0.25), ("avail_mem_gib", 59.75)],
    );
    check(
        "Capture draft verify CUDA graph begin. backend=fa3, num_tokens_per_req=4, avail mem=59.00 GB",
        Boundary,
        st::GRAPH_CAPTURE_DRAFT,
        ev::CAPTURE_DRAFT_VERIFY_BEGIN,
        &[("num_tokens_per_req", 4.0), ("avail_mem_gib", 59.0)],
    );
    check(
        "Capture draft verify CUDA graph end. bs=[1], elapsed=0.50 s, mem usage=0.05 GB, avail mem=58.95 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_DRAFT_VERIFY_END,
        &[("bs_max", 1.0), ("bs_count", 1.0), ("time_s", 0.5), ("mem_usage_gib", 0.05), ("avail_mem_gib", 58.95)],
    );
    // EAGLE v2 draft decode / extend (0.5.18+)
    check(
        "Capture draft decode CUDA graph begin. backend=fa3, num_tokens_per_req=4, bs=[1, 2, 4], avail mem=50.00 GB",
        Boundary,
        st::GRAPH_CAPTURE_DRAFT,
        ev::CAPTURE_DRAFT_BEGIN,
        &[("num_tokens_per_req", 4.0), ("bs_max", 4.0), ("bs_count", 3.0), ("avail_mem_gib", 50.0)],
    );
    check(
        "Capture draft decode CUDA graph end. elapsed=1.50 s, mem usage=0.20 GB, avail mem=49.80 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_DRAFT_END,
        &[("time_s", 1.5), ("mem_usage_gib", 0.2), ("avail_mem_gib", 49.8)],
    );
    check(
        "Capture draft extend CUDA graph begin. backend=fa3, num_tokens_per_req=8, bs=[1, 2, 4], avail mem=49.80 GB",
        Boundary,
        st::GRAPH_CAPTURE_DRAFT,
        ev::CAPTURE_DRAFT_EXTEND_BEGIN,
        &[("num_tokens_per_req", 8.0), ("bs_max", 4.0), ("bs_count", 3.0), ("avail_mem_gib", 49.8)],
    );
    check(
        "Capture draft extend CUDA graph end. elapsed=0.90 s, mem usage=0.15 GB, avail mem=49.65 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_DRAFT_EXTEND_END,
        &[("time_s", 0.9), ("mem_usage_gib", 0.15), ("avail_mem_gib", 49.65)],
    );
    // multi-layer EAGLE
    check(
        "Capture draft extend CUDA graph begin. step=1, avail mem=49.00 GB",
        Boundary,
        st::GRAPH_CAPTURE_DRAFT,
        ev::CAPTURE_DRAFT_EXTEND_BEGIN,
        &[("step", 1.0), ("avail_mem_gib", 49.0)],
    );
    check(
        "Capture draft extend CUDA graph end. step=1, elapsed=0.80 s, mem usage=0.10 GB, avail mem=48.90 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_DRAFT_EXTEND_END,
        &[("step", 1.0), ("time_s", 0.8), ("mem_usage_gib", 0.1), ("avail_mem_gib", 48.9)],
    );
    check(
        "Disable prefill CUDA graph because --disable-piecewise-cuda-graph is set.",
        Progress,
        st::POST_KV_INIT,
        ev::PREFILL_GRAPH_DISABLED,
        &[],
    );
    check(
        "DeepGEMM masked layout budget: 2.50 GiB from 60.00 GiB free.",
        Progress,
        st::POST_KV_INIT,
        ev::DEEPGEMM_BUDGET,
        &[("reserve_gib", 2.5), ("avail_mem_gib", 60.0)],
    );
}

#[test]
fn tqdm_bars() {
    let tail = ": 100%|\u{2588}\u{2588}\u{2588}\u{2588}| 4/4 [00:18<00:00,  4.51s/it]";
    let cases: [(&str, &[(&str, f64)]); 5] = [
        (
            "Capturing batches (bs=256 avail_mem=20.31 GB)",
            &[("bs", 256.0), ("avail_mem_gib", 20.31)],
        ),
        (
            "Capturing batches (avail_mem=20.31 GB)",
            &[("avail_mem_gib", 20.31)],
        ), // 0.4.6
        (
            "Capturing num tokens (num_tokens=8192 avail_mem=40.10 GB)",
            &[("num_tokens", 8192.0), ("avail_mem_gib", 40.1)],
        ),
        (
            "[BCG] Capturing (num_tokens=4096 avail_mem=39.00 GB)",
            &[("num_tokens", 4096.0), ("avail_mem_gib", 39.0)],
        ),
        (
            "Capturing prefill shape (num_tokens=2048 avail_mem=38.00 GB)",
            &[("num_tokens", 2048.0), ("avail_mem_gib", 38.0)],
        ),
    ];
    for (bar, nums) in cases {
        check(bar, Progress, st::GRAPH_CAPTURE, ev::CAPTURE_PROGRESS, nums);
        let with_tail = format!("{bar}{tail}");
        check(
            &with_tail,
            Progress,
            st::GRAPH_CAPTURE,
            ev::CAPTURE_PROGRESS,
            nums,
        );
    }
    check(
        "Compiling num tokens (num_tokens=1024): 50%|\u{2588}\u{2588}   | 1/2",
        Progress,
        st::GRAPH_CAPTURE,
        ev::COMPILE_PROGRESS,
        &[("num_tokens", 1024.0)],
    );
    // `\r`-separated bars: the last segment wins.
    check(
        "Capturing batches (bs=512 avail_mem=43.46 GB):   0%|  | 0/52\rCapturing batches (bs=256 avail_mem=43.10 GB):   2%|  | 1/52\r",
        Progress,
        st::GRAPH_CAPTURE,
        ev::CAPTURE_PROGRESS,
        &[("bs", 256.0), ("avail_mem_gib", 43.1)],
    );
}

#[test]
fn carriage_return_segments() {
    use vramledger_engines::log::{classify, classify_each};
    // A boundary followed by a bar on the same physical line: the boundary wins.
    let line =
        "[2026-02-26 16:41:19 TP0] Capture cuda graph begin. This can take up to several minutes. \
                avail mem=45.03 GB\rCapturing batches (bs=512 avail_mem=43.46 GB):   0%|  | 0/52\r";
    let b = check(
        line,
        Boundary,
        st::GRAPH_CAPTURE,
        ev::CAPTURE_BEGIN,
        &[("avail_mem_gib", 45.03)],
    );
    assert_eq!(b.rank.tp, Some(0));
    let all: Vec<_> = classify_each(line).map(|b| b.event).collect();
    assert_eq!(all, [ev::CAPTURE_BEGIN, ev::CAPTURE_PROGRESS]);
    // Bars only: the last bar.
    let bars =
        "Capturing batches (bs=4 avail_mem=2.95 GB)\rCapturing batches (bs=2 avail_mem=2.93 GB)";
    assert_eq!(classify(bars).and_then(|b| b.numbers.bs), Some(2));
    assert_eq!(classify_each(bars).count(), 2);
    assert_eq!(classify_each("nothing\rhere").count(), 0);
}

#[test]
fn post_capture_kv_sizing() {
    check(
        "Post-capture KV sizing: decode CUDA graph max_bs=256 < max_running_requests=1024; reserving activation headroom",
        Boundary,
        st::POST_CAPTURE_RESIZE,
        ev::POST_CAPTURE_DECODE_GAP,
        &[("bs_max", 256.0), ("max_running_requests", 1024.0)],
    );
    check(
        "Post-capture KV sizing: KV-canary per-forward workspace 0.25 GB",
        Boundary,
        st::POST_CAPTURE_RESIZE,
        ev::POST_CAPTURE_WORKSPACE,
        &[("reserve_gib", 0.25)],
    );
    check(
        "Post-capture KV sizing: max_running_requests 1024 -> 512",
        Boundary,
        st::POST_CAPTURE_RESIZE,
        ev::POST_CAPTURE_MAX_RUNNING_REQUESTS,
        &[
            ("max_running_requests_before", 1024.0),
            ("max_running_requests", 512.0),
        ],
    );
    check(
        "Post-capture KV sizing: full_layer_tokens=480000, swa_layer_tokens=0",
        Boundary,
        st::POST_CAPTURE_RESIZE,
        ev::POST_CAPTURE_TOKENS,
        &[("full_layer_tokens", 480000.0), ("swa_layer_tokens", 0.0)],
    );
    let b = check(
        "Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 480000, KV size: 58.59 GB, avail mem=10.20 GB",
        Boundary,
        st::POST_CAPTURE_RESIZE,
        ev::POST_CAPTURE_KV_ALLOCATED,
        &[("tokens", 480000.0), ("kv_size_gib", 58.59), ("avail_mem_gib", 10.2)],
    );
    assert_eq!(b.words.dtype, Some("torch.bfloat16"));
    // 0.5.18: no avail mem
    check(
        "Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 470000, KV size: 57.37 GB",
        Boundary,
        st::POST_CAPTURE_RESIZE,
        ev::POST_CAPTURE_KV_ALLOCATED,
        &[("tokens", 470000.0), ("kv_size_gib", 57.37)],
    );
    check(
        "Post-capture KV sizing: draft KV cache allocated. dtype: torch.bfloat16, #tokens: 480000, KV size: 1.83 GB",
        Boundary,
        st::POST_CAPTURE_RESIZE,
        ev::POST_CAPTURE_DRAFT_KV_ALLOCATED,
        &[("tokens", 480000.0), ("kv_size_gib", 1.83)],
    );
}
