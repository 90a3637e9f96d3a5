//! Fuzzing the log grammar (crates/engines `log`: the prefilter, `classify` on text and bytes,
//! `classify_each`, the stage tracker, rule files) and the CLI's log reader (`LogFacts`: the
//! `server_args` line, the numbers `size` uses), seeded with the real engine output in
//! tests/data (the recorded runs' program and engine output, and public SGLang/vLLM startup logs).
//!
//! See tests/fuzz_support for the method, the counts and how to replay an input.

mod fuzz_support;

use fuzz_support::{count, files, havoc, manifest_dir, run_sharded, Rng};
use vramledger::sizing::inputs::{LogFacts, Measured};
use vramledger::sizing::limits as size_limits;
use vramledger_engines::log::{classify, classify_bytes, classify_each, may_match};
use vramledger_engines::log::{Engine, Rules, StageTracker};

#[global_allocator]
static GUARD: fuzz_support::Guard = fuzz_support::Guard;

/// Every line of every real log and program output in tests/data.
fn seed_lines() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (path, bytes) in files(&manifest_dir().join("tests/data")) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.ends_with(".log")
            || name == "program-output.txt"
            || name.starts_with("engine-std"))
        {
            continue;
        }
        out.extend(
            bytes
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(<[u8]>::to_vec),
        );
    }
    assert!(out.len() > 300, "seed lines: {}", out.len());
    out
}

/// Words of the grammars, to splice into lines.
const DICT: &[&[u8]] = &[
    b"[2025-01-01 00:00:00 TP0] ",
    b"[2025-01-01 00:00:00 DP1 TP3 EP3] ",
    b"[gpu_id=0] ",
    b"(VllmWorker rank=1 pid=7) ",
    b"INFO 01-01 00:00:00 [gpu_worker.py:1] ",
    b"Load weight begin. avail mem=",
    b"Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=",
    b" GB, mem usage=",
    b"KV Cache is allocated. #tokens: ",
    b", K size: ",
    b"Memory pool end. avail mem=",
    b"Capture cuda graph begin. This can take up to several minutes. avail mem=",
    b"Capture cuda graph end. Time elapsed: ",
    b"max_total_num_tokens=",
    b", chunked_prefill_size=",
    b"server_args=ServerArgs(",
    b"chunked_prefill_size=9223372036854775807, ",
    b"tp_size=",
    b"mem_fraction_static=",
    b"Available KV cache memory: ",
    b"# GPU blocks: ",
    b"Maximum concurrency for ",
    b" tokens per request: ",
    b"GiB",
    b"\r",
    b"\x1b[0m",
    b"\x1b[32m",
    b"|",
    b"100%|##########|",
    b"=",
    b"\xff\xfe",
    b"\xe2\x80",
    b"weight_load  \"Load weight begin\"\n",
    b"kv_pool\t\"unterminated\n",
];

fn generate(rng: &mut Rng, lines: &[Vec<u8>]) -> Vec<u8> {
    let start = rng.below(lines.len());
    let n = 1 + rng.below(4);
    let mut b = Vec::new();
    for l in &lines[start..(start + n).min(lines.len())] {
        b.extend_from_slice(l);
        b.push(if rng.one_in(6) { b'\r' } else { b'\n' });
    }
    let other = rng.pick(lines).clone();
    if !rng.one_in(8) {
        havoc(rng, &mut b, &other, DICT, 1 << 16);
    }
    b
}

/// Every reader of engine lines. Returns whether any line was recognised.
fn grammar(bytes: &[u8]) -> bool {
    let mut tracker = StageTracker::new();
    let mut seen = false;
    for line in bytes.split(|b| *b == b'\n') {
        let _ = may_match(line);
        if let Some(b) = classify_bytes(line) {
            seen = true;
            let _ = tracker.observe(&b);
            let _ = tracker.stage(&b.rank);
        }
    }
    let text = String::from_utf8_lossy(bytes);
    let mut facts = LogFacts::new("fuzz");
    for line in text.lines() {
        if let Some(b) = classify(line) {
            seen = true;
            let _ = tracker.observe(&b);
        }
        for b in classify_each(line) {
            let _ = tracker.observe(&b);
        }
        facts.observe_line(line);
    }
    if let Ok(rules) = Rules::parse(&text) {
        for line in text.lines() {
            let _ = rules.classify(line);
        }
    }
    // The numbers `size` takes from a log, through its bounds.
    match facts.engine() {
        Some(Engine::Sglang) => {
            if let Ok(m) = Measured::from_log(&facts) {
                let _ = size_limits::check_measured(&m);
            }
        }
        Some(Engine::Vllm) => {
            let _ = size_limits::check_vllm(&facts.vllm_attempts, &facts.vllm_config);
        }
        None => {}
    }
    seen
}

#[test]
fn log_lines() {
    let lines = seed_lines();
    let stats = run_sharded(
        "log_lines",
        count(450_000),
        |rng| generate(rng, &lines),
        grammar,
    );
    assert!(stats.inputs >= count(450_000));
    assert!(stats.accepted > stats.inputs / 10, "{stats:?}");
}
