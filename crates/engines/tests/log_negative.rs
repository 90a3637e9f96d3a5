//! Robustness of the log grammar: garbage, empty and huge lines, near misses, every truncation of
//! real lines, and the prefilter on unrelated text. Nothing here may panic or take long.

mod log_support;

use log_support::reject;
use vramledger_engines::log::{classify, classify_bytes, may_match, stage as st};

/// Small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const REAL: &[&str] = &[
    "[2025-03-08 12:29:13 TP2] Init torch distributed ends. mem usage=0.13 GB",
    "[2026-02-01 00:05:03 TP0] Load weight end. elapsed=1.25 s, type=GraniteMoeHybridForCausalLM, dtype=torch.bfloat16, avail mem=9.26 GB, mem usage=5.98 GB.",
    "[2026-02-01 00:05:03 TP0] Mamba Cache is allocated. max_mamba_cache_size: 38, conv_state size: 0.03GB, ssm_state size: 2.74GB ",
    "[2026-02-26 16:41:18 TP6] KV Cache is allocated. #tokens: 2454421, KV size: 160.63 GB",
    "Full KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 100000, K size: 2.50 GB, V size: 2.50 GB",
    "Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=3.21 s, mem usage=0.52 GB, avail mem=69.60 GB.",
    "Capture draft extend cuda graph begin (step 2). This can take up to several minutes. avail mem=30.00 GB",
    "Capturing batches (bs=1 avail_mem=2.91 GB): 100%|\u{2588}\u{2588}\u{2588}| 4/4 [00:01<00:00,  3.20it/s]",
    "Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 480000, KV size: 58.59 GB, avail mem=10.20 GB",
    "[2025-07-14 05:49:02] max_total_num_tokens=38141, chunked_prefill_size=2048, max_prefill_tokens=16384, max_running_requests=2048, context_len=131072, available_gpu_mem=0.83 GB",
    "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88. Raise --mem-fraction-static above 0.913 (minimum viable = 1 - available/pre = 0.9124).",
    "\x1b[1;36m(VllmWorker rank=0 pid=12)\x1b[0;0m INFO 05-30 06:40:55 [worker.py:267] model weights take 2.89GiB; non_torch_memory takes 0.01GiB; PyTorch activation peak memory takes 2.02GiB; the rest of the memory reserved for KV Cache is 2.36GiB.",
    "2025-11-24 14:00:30.379 | INFO 11-23 23:00:30 [kv_cache_utils.py:715] GPU KV cache size: 136,592 tokens",
    "INFO 05-30 06:40:55 executor_base.py:110] # CUDA blocks: 5517, # CPU blocks: 9362",
    "  0%|     | 0/13 [00:00<?, ?it/s][2025-03-08 12:29:21 TP1] Capture cuda graph begin. This can take up to several minutes. avail mem=1.45 GB",
];

#[test]
fn empty_and_blank_lines() {
    for line in [
        "",
        "\n",
        "\r",
        "\r\n",
        " ",
        "\t\t",
        "\x1b[0m",
        "\x1b[0m\r\n",
        "[",
        "]",
        "(",
        ")",
        "#",
        "# ",
    ] {
        reject(line);
        assert!(classify_bytes(line.as_bytes()).is_none());
    }
}

#[test]
fn garbage_bytes_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut buf = Vec::new();
    for _ in 0..20_000 {
        buf.clear();
        let len = rng.below(200);
        for _ in 0..len {
            buf.push(rng.next() as u8);
        }
        let _ = classify_bytes(&buf);
        if let Ok(s) = std::str::from_utf8(&buf) {
            let _ = classify(s);
        }
    }
    // invalid UTF-8 around a real line: the valid piece is still read
    let mut bytes = vec![0xff, 0xfe, b'x'];
    bytes.extend_from_slice(b"[2025-01-01 00:00:00 TP0] Memory pool end. avail mem=1.00 GB");
    let b = classify_bytes(&bytes).expect("valid piece after invalid bytes");
    assert_eq!((b.stage, b.rank.tp), (st::POST_KV_INIT, Some(0)));
    bytes.extend_from_slice(&[0xc3, 0x28, b' ']);
    assert!(classify_bytes(&bytes).is_some());
}

#[test]
fn token_soup_never_panics() {
    // Random sequences of grammar fragments hit the parsers' edge paths.
    const PARTS: &[&str] = &[
        "[2025-01-01 00:00:00",
        " TP",
        "3",
        "]",
        " ",
        "Capture ",
        "cuda graph",
        " begin",
        " end.",
        ".",
        "avail mem=",
        "-",
        "1",
        "2.5",
        " GB",
        ",",
        "KV Cache ",
        "is allocated.",
        "#tokens: ",
        "K size: ",
        "KV size: ",
        "bs=[",
        "max_total_num_tokens=",
        "(step ",
        "Load weight ",
        "end.",
        "\r",
        "\x1b[",
        "m",
        "(",
        "pid=",
        ")",
        "INFO ",
        "Post-capture KV sizing: ",
        "->",
        "GiB",
        "é",
        "\u{2588}",
        "Capturing",
        " (",
        "avail_mem=",
        "KV cache size: ",
        "Model loading took ",
        "the rest of the memory reserved for KV Cache is ",
        "[gpu_id=",
        "~",
        "[BCG] ",
    ];
    let mut rng = Rng(42);
    let mut line = String::new();
    for _ in 0..50_000 {
        line.clear();
        for _ in 0..rng.below(16) {
            line.push_str(PARTS[rng.below(PARTS.len())]);
        }
        let got = classify(&line);
        if !may_match(line.as_bytes()) {
            assert!(
                got.is_none(),
                "classify accepted what may_match rejected: {line:?}"
            );
        }
    }
}

#[test]
fn every_truncation_of_real_lines_is_safe() {
    for line in REAL {
        assert!(
            classify(line).is_some(),
            "REAL line not recognised: {line:?}"
        );
        for (i, _) in line.char_indices() {
            let _ = classify(&line[..i]);
            let _ = classify(&line[i..]);
            let _ = classify_bytes(&line.as_bytes()[..i]);
            let _ = classify_bytes(&line.as_bytes()[i..]);
        }
        // byte-level cuts, including inside multi-byte characters
        for i in 0..line.len() {
            let _ = classify_bytes(&line.as_bytes()[..i]);
        }
    }
}

#[test]
fn huge_lines() {
    // 8 MiB of nothing.
    let huge = "a".repeat(8 << 20);
    reject(&huge);
    // 8 MiB of anchors that never complete.
    let anchors = "KV Capture max_total_ Load weight GiB ".repeat(200_000);
    reject(&anchors);
    // A real line behind 1 MiB of debris is still found (an embedded prefix).
    let mut glued = "x".repeat(1 << 20);
    glued.push_str("[2025-01-01 00:00:00 TP7] Load weight begin. avail mem=1.00 GB");
    let b = classify(&glued).expect("embedded line");
    assert_eq!(
        (b.stage, b.rank.tp, b.numbers.avail_mem_gib),
        (st::WEIGHT_LOAD, Some(7), Some(1.0))
    );
    // Many prefixes without messages: bounded retries, not quadratic.
    let prefixes = "[2025-01-01 00:00:00 TP0] ".repeat(200_000);
    reject(&prefixes);
    // Many `\r` segments: the last recognised one wins.
    let mut bars = String::new();
    for bs in 0..100_000 {
        bars.push_str(&format!("Capturing batches (bs={bs} avail_mem=1.00 GB)\r"));
    }
    assert_eq!(classify(&bars).and_then(|b| b.numbers.bs), Some(99_999));
    // A huge list and huge numbers.
    let list = format!("Capture cuda graph bs [{}1]", "1, ".repeat(500_000));
    assert_eq!(
        classify(&list).and_then(|b| b.numbers.bs_count),
        Some(500_001)
    );
    let big = format!("max_total_num_tokens={}", "9".repeat(100_000));
    reject(&big);
    let big = format!("Memory pool end. avail mem={}.5 GB", "9".repeat(400));
    assert!(classify(&big)
        .and_then(|b| b.numbers.avail_mem_gib)
        .is_some());
}

#[test]
fn may_match_rejects_unrelated_text() {
    // Random lower-case text, digits and punctuation: no anchor can appear.
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789 .,:;-=/'\"!?[]{}<>|@%&*+";
    let mut rng = Rng(7);
    let mut buf = Vec::new();
    for _ in 0..20_000 {
        buf.clear();
        for _ in 0..rng.below(300) {
            buf.push(ALPHABET[rng.below(ALPHABET.len())]);
        }
        assert!(!may_match(&buf), "{:?}", String::from_utf8_lossy(&buf));
    }
    // Ordinary server output.
    for line in [
        "[2025-03-08 12:29:12 TP0] sglang is using nccl==2.21.5",
        "[2025-03-08 12:29:29] INFO:     Started server process [3207]",
        "[2025-03-08 12:29:29] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
        "[2026-02-04 11:30:33] The server is fired up and ready to roll!",
        "INFO:     127.0.0.1:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
        "[2025-01-23 19:35:28 TP0] Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0",
        "[2025-01-23 19:35:28 TP0] Decode batch. #running-req: 1, #token: 40, token usage: 0.00, gen throughput (token/s): 6.11, #queue-req: 0",
        "Loading safetensors checkpoint shards:  75% Completed | 3/4 [04:27<01:29, 89.93s/it]",
        "INFO 11-23 22:54:53 [parallel_state.py:1065] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0",
        "Traceback (most recent call last):",
        "  File \"/usr/lib/python3.10/runpy.py\", line 196, in _run_module_as_main",
        "WARNING: Retrying (Retry(total=4, connect=None, read=None)) after connection broken",
    ] {
        assert!(!may_match(line.as_bytes()), "{line:?}");
        reject(line);
    }
}

#[test]
fn lines_that_look_close_but_are_not_boundaries() {
    for line in [
        // a quote of a boundary inside another message
        "[2025-01-01 00:00:00] user said: Load weight begin. avail mem=1.00 GB",
        "[2025-01-01 00:00:00] grep 'Memory pool end.' server.log",
        "echo \"max_total_num_tokens=1\"",
        // wrong case / wording
        "load weight begin. avail mem=1.00 GB",
        "Load Weight Begin. avail mem=1.00 GB",
        "KV CACHE is allocated. #tokens: 1, KV size: 1.00 GB",
        "kv cache is allocated. #tokens: 1, KV size: 1.00 GB",
        "Capture CUDA Graphs begin.",
        "Capture cuda graphs end.",
        "Graph capturing started",
        "memory pool end. avail mem=1.00 GB",
        "Max_total_num_tokens=1",
        // a label that is a sentence, not a pool name
        "Freed: KV Cache is allocated. #tokens: 1, KV size: 1.00 GB",
        "This is a very long sentence that happens to mention that the KV Cache is allocated. #tokens: 1, K size: 1.00 GB",
        // tqdm without numbers
        "Capturing batches: 100%|##########| 4/4",
        "100%|\u{2588}\u{2588}\u{2588}\u{2588}\u{2588}| 23/23 [00:06<00:00,  3.51it/s]",
    ] {
        reject(line);
    }
}
