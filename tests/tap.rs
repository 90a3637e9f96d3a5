//! The stdout/stderr tap inside the target: SGLang's log lines, written the way a program
//! writes them (whole lines, or split across writes by a block-buffered pipe), become stage
//! records with the line attached; a rule file adds stages for other engines.

mod support;

use std::path::PathBuf;

use support::{clients, profile_dir};
use vramledger::journal::{self, Journal};
use vramledger_format::Kind;

const SGLANG_STARTUP: &str = "\
[2025-06-01 10:00:00 TP0] Init torch distributed begin.
[2025-06-01 10:00:01 TP0] Init torch distributed ends. mem usage=0.58 GB
[2025-06-01 10:00:01 TP0] Load weight begin. avail mem=78.68 GB
Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00,  1.71it/s]\r
[2025-06-01 10:00:04 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.57 GB, mem usage=15.11 GB.
[2025-06-01 10:00:04 TP0] KV Cache is allocated. #tokens: 444500, K size: 27.13 GB, V size: 27.13 GB
[2025-06-01 10:00:04 TP0] Memory pool end. avail mem=8.40 GB
[2025-06-01 10:00:05 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=7.88 GB
[2025-06-01 10:00:20 TP0] Capture cuda graph end. Time elapsed: 15.21 s. mem usage=0.60 GB. avail mem=7.28 GB.
an unrelated line that mentions nothing
[2025-06-01 10:00:21 TP0] max_total_num_tokens=444500, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=131072, available_gpu_mem=7.28 GB
";

fn shim() -> PathBuf {
    if let Some(p) = std::env::var_os("VRAMLEDGER_TEST_SHIM") {
        return PathBuf::from(p); // another build of the library, to compare
    }
    profile_dir().join("libvramledger.so")
}

fn run_writer(test: &str, text: &str, chunk: usize, fd: u8, extra_env: &[(&str, &str)]) -> Journal {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tap-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("input.log");
    std::fs::write(&input, text).unwrap();
    let out = dir.join("journals");
    let (shim, out_s, input_s) = (
        shim().to_string_lossy().into_owned(),
        out.to_string_lossy().into_owned(),
        input.to_string_lossy().into_owned(),
    );
    let mut env = vec![
        ("LD_PRELOAD", shim.as_str()),
        ("VRAMLEDGER_OUT", out_s.as_str()),
    ];
    env.extend_from_slice(extra_env);
    let chunk_s = chunk.to_string();
    let fd_s = fd.to_string();
    let run = clients().run("tap_writer", &[&input_s, &chunk_s, &fd_s], &env);
    assert!(run.success(), "{}", run.dump());
    assert_eq!(
        run.stdout.len() + run.stderr.len(),
        text.len(),
        "the output itself must be unchanged\n{}",
        run.dump()
    );
    let files = journal::find(&out).unwrap();
    assert_eq!(files.len(), 1, "one journal expected");
    journal::read(&files[0]).unwrap()
}

fn stages(j: &Journal) -> Vec<(String, String)> {
    j.events
        .iter()
        .filter(|e| e.kind() == Some(Kind::Stage))
        .map(|e| {
            let mut lines = e.text.lines();
            let name = lines.next().unwrap_or("").to_string();
            (name, lines.next().unwrap_or("").to_string())
        })
        .collect()
}

fn names(j: &Journal) -> Vec<String> {
    stages(j).into_iter().map(|(n, _)| n).collect()
}

const EXPECTED: &[&str] = &[
    "startup",
    "dist_init",
    "weight_load",
    "kv_pool",
    "post_kv_init",
    "graph_capture",
    "post_capture",
    "serving",
];

#[test]
fn sglang_lines_mark_every_stage_whole_or_split() {
    for (chunk, fd) in [(65536, 1), (7, 1), (1, 2), (113, 2)] {
        let j = run_writer(&format!("split{chunk}"), SGLANG_STARTUP, chunk, fd, &[]);
        assert_eq!(names(&j), EXPECTED, "chunk {chunk} fd {fd}");
        // Each boundary keeps its line, so the offline parser can read the engine's numbers.
        let st = stages(&j);
        assert!(st[3].1.contains("Load weight end."), "{:?}", st[3]);
        assert!(st[3].1.ends_with("mem usage=15.11 GB."), "{:?}", st[3]);
        let kv = j
            .events
            .iter()
            .find(|e| e.kind() == Some(Kind::Stage) && e.text.starts_with("kv_pool"))
            .unwrap();
        assert_eq!(f64::from_bits(kv.arg0), 63.57);
        assert_eq!(f64::from_bits(kv.arg1), 15.11);
    }
}

#[test]
fn the_tap_steps_aside_once_serving() {
    // A second startup after the summary line is not followed: serving is the last stage.
    let twice = format!("{SGLANG_STARTUP}{SGLANG_STARTUP}");
    let j = run_writer("serving", &twice, 4096, 2, &[]);
    assert_eq!(names(&j), EXPECTED);
}

#[test]
fn rule_files_add_stages_for_other_engines() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tap-rulefile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("rules.txt");
    std::fs::write(
        &rules,
        "# my engine\nwarmup  Warming up the engine\nready   \"Engine ready \"\n",
    )
    .unwrap();
    let rules_s = rules.to_string_lossy().into_owned();
    let text = "booting\nWarming up the engine (3 steps)\nEngine ready now\n";
    let j = run_writer("rules", text, 5, 1, &[("VRAMLEDGER_RULES", &rules_s)]);
    assert_eq!(names(&j), vec!["startup", "warmup", "ready"]);
}

#[test]
fn lines_that_match_nothing_open_no_journal_and_tap_can_be_off() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tap-quiet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("input.log");
    std::fs::write(&input, "hello\nworld, nothing to see\n").unwrap();
    let out = dir.join("journals");
    let (shim, out_s, input_s) = (
        shim().to_string_lossy().into_owned(),
        out.to_string_lossy().into_owned(),
        input.to_string_lossy().into_owned(),
    );
    let run = clients().run(
        "tap_writer",
        &[&input_s, "3"],
        &[("LD_PRELOAD", &shim), ("VRAMLEDGER_OUT", &out_s)],
    );
    assert!(run.success(), "{}", run.dump());
    assert!(!out.exists() || journal::find(&out).unwrap().is_empty());

    let j_off = {
        std::fs::write(&input, SGLANG_STARTUP).unwrap();
        let run = clients().run(
            "tap_writer",
            &[&input_s, "64"],
            &[
                ("LD_PRELOAD", &shim),
                ("VRAMLEDGER_OUT", &out_s),
                ("VRAMLEDGER_TAP", "0"),
            ],
        );
        assert!(run.success(), "{}", run.dump());
        if out.exists() {
            journal::find(&out).unwrap()
        } else {
            Vec::new()
        }
    };
    assert!(
        j_off.is_empty(),
        "the tap was off, nothing should be recorded"
    );
}

#[test]
fn a_line_longer_than_any_log_line_is_skipped_whole_and_never_copied() {
    // 20,000 bytes, then a boundary phrase, on one line: nothing in that line is a stage,
    // whether it arrives whole or in small pieces; the real startup after it is read as usual.
    let long = format!(
        "{}[2025-06-01 10:00:00 TP0] Init torch distributed begin.\n",
        "x".repeat(20_000)
    );
    let text = format!("{long}{SGLANG_STARTUP}");
    for chunk in [7, 65536] {
        let j = run_writer(&format!("long{chunk}"), &text, chunk, 1, &[]);
        let st = stages(&j);
        assert_eq!(names(&j), EXPECTED, "chunk {chunk}");
        assert!(
            st[1]
                .1
                .starts_with("[2025-06-01 10:00:00 TP0] Init torch distributed begin."),
            "chunk {chunk}: {:?}",
            &st[1].1[..st[1].1.len().min(80)]
        );
    }
}

const VLLM_SIZING: &str = "\
(EngineCore pid=1008) INFO 12-01 09:43:02 [gpu_model_runner.py:2905] Model loading took 14.99 GiB memory and 3.1 seconds
(EngineCore pid=1008) INFO 12-01 09:43:35 [gpu_worker.py:560] Available KV cache memory: 52.95 GiB
(EngineCore pid=1008) INFO 12-01 09:43:35 [kv_cache_utils.py:2177] GPU KV cache size: 433,776 tokens
(EngineCore pid=1008) INFO 12-01 09:43:35 [kv_cache_utils.py:2178] Maximum concurrency for 4,096 tokens per request: 105.90x
(EngineCore pid=1008) INFO 12-01 09:43:36 [gpu_worker.py:857] Free memory on device (139.29/139.8 GiB) on startup. Desired GPU memory utilization is (0.5, 69.9 GiB). Actual usage is 15.0 GiB for weight, 1.72 GiB for peak activation, 0.22 GiB for non-torch memory, and 0.23 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=56456781312` (52.58 GiB) to fit into requested memory, or `--kv-cache-memory=130959318528` (121.97 GiB) to fully utilize gpu memory. Current kv cache memory in use is 52.95 GiB.
(EngineCore pid=1008) INFO 12-01 09:43:36 [core.py:210] a line with api_key=sk-live-0123456789abcdefghij and nothing to size
";

/// vLLM's sizing lines that start no stage are kept as engine-line records (bounded, redacted)
/// beside the stage records, so that the journal alone says what the engine sized.
#[test]
fn sizing_lines_that_start_no_stage_are_kept_as_engine_lines() {
    for chunk in [1 << 16, 7] {
        let j = run_writer(&format!("vllm-sizing-{chunk}"), VLLM_SIZING, chunk, 1, &[]);
        let engine: Vec<&str> = j
            .events
            .iter()
            .filter(|e| {
                e.kind() == Some(Kind::Warning)
                    && e.api == vramledger_format::Api::VramledgerEngineLine as u16
            })
            .map(|e| e.text.as_str())
            .collect();
        assert_eq!(engine.len(), 3, "chunk {chunk}: {engine:?}");
        assert!(engine[0].ends_with("GPU KV cache size: 433,776 tokens"));
        assert!(engine[1].ends_with("Maximum concurrency for 4,096 tokens per request: 105.90x"));
        assert!(engine[2].contains("`--kv-cache-memory=56456781312` (52.58 GiB)"));
        // The journal's accessor has them in file order, the stage lines among them.
        let lines: Vec<&str> = j.engine_lines().collect();
        let at = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap();
        assert!(at("Available KV cache memory") < at("GPU KV cache size"));
        assert!(at("GPU KV cache size") < at("--kv-cache-memory="));
        assert!(!lines.iter().any(|l| l.contains("nothing to size")));
    }
}

#[test]
fn engine_lines_are_bounded_and_lose_their_secrets() {
    let long = format!(
        "(EngineCore pid=1) INFO 12-01 09:43:36 [gpu_worker.py:857] Free memory on device (139.29/139.8 GiB) on startup. Replace gpu_memory_utilization config with `--kv-cache-memory=56456781312` (52.58 GiB) to fit into requested memory, or `--kv-cache-memory=130959318528` (121.97 GiB) to fully utilize gpu memory. Current kv cache memory in use is 52.95 GiB. {}\n",
        "é".repeat(3000)
    );
    let secret = "(EngineCore pid=1) INFO 12-01 09:43:35 [kv_cache_utils.py:2178] Maximum concurrency for 4 tokens per request: 1.00x hf_token=hf_AbCdEfGhIjKlMnOpQrStUvWx\n";
    let j = run_writer("engine-bounds", &format!("{long}{secret}"), 1 << 16, 2, &[]);
    let engine = engine_lines(&j);
    assert_eq!(engine.len(), 2, "{engine:?}");
    assert!(
        engine[0].len() <= 4096 && engine[0].len() > 4000,
        "{}",
        engine[0].len()
    );
    assert!(engine[0].starts_with("(EngineCore") && !engine[0].contains('\u{FFFD}'));
    assert!(engine[1].contains("hf_token=<redacted>"), "{}", engine[1]);
    assert!(!engine[1].contains("hf_AbCd"));
    // The shim's bytes (the reader redacts again: it would hide a shim that did not).
    assert!(!raw_contains("engine-bounds", b"hf_AbCd"));
}

/// The texts of the engine-line records of `j`, in order.
fn engine_lines(j: &Journal) -> Vec<&str> {
    j.events
        .iter()
        .filter(|e| e.api == vramledger_format::Api::VramledgerEngineLine as u16)
        .map(|e| e.text.as_str())
        .collect()
}

/// Whether any journal `run_writer(test, …)` left holds `needle`, as the shim wrote it.
fn raw_contains(test: &str, needle: &[u8]) -> bool {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tap-{test}-{}", std::process::id()))
        .join("journals");
    std::fs::read_dir(&dir).unwrap().any(|f| {
        let bytes = std::fs::read(f.unwrap().path()).unwrap();
        bytes.windows(needle.len()).any(|w| w == needle)
    })
}

#[test]
fn a_line_cut_to_its_bound_keeps_no_start_of_a_token() {
    // A token across the engine line's 4096-byte cut: cut first, its start (too short for its
    // shape) stayed in the journal.
    let head = "(EngineCore pid=1) INFO 12-01 09:43:36 [gpu_worker.py:857] Free memory on device (139.29/139.8 GiB) on startup. Replace gpu_memory_utilization config with `--kv-cache-memory=56456781312` (52.58 GiB) to fit into requested memory, or `--kv-cache-memory=130959318528` (121.97 GiB) to fully utilize gpu memory. Current kv cache memory in use is 52.95 GiB. ";
    let pad = "x".repeat(4096 - head.len() - 8);
    let line = format!("{head}{pad} hf_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123 tail\n");
    let j = run_writer("engine-cut-token", &line, 1 << 16, 2, &[]);
    let engine = engine_lines(&j);
    assert_eq!(engine.len(), 1, "{engine:?}");
    assert!(engine[0].len() <= 4096);
    assert!(
        !raw_contains("engine-cut-token", b"hf_ABC"),
        "a token's start was kept"
    );
}

/// The journal alone sizes a vLLM run exactly once the tap keeps the sizing lines: the
/// recorded H200 run (whose journal predates engine lines and settings records) with what the
/// tap records today from the engine's own output (run through `tap_writer` under the shim)
/// reproduces vLLM's 27,111 blocks and 433,776 tokens with no `--log`.
#[test]
fn a_vllm_run_is_sized_exactly_from_its_journal_alone() {
    use vramledger_format::memwriter::MemJournal;
    use vramledger_format::Api;
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-vllm-explore");
    let output = std::fs::read_to_string(data.join("engine-stdout.txt")).unwrap();
    let tapped = run_writer("vllm-run-lines", &output, 1 << 16, 1, &[]);
    let kept: Vec<_> = tapped
        .events
        .iter()
        .filter(|e| {
            e.kind() == Some(Kind::Warning)
                && (e.api == Api::VramledgerEngineLine as u16
                    || e.api == Api::VramledgerSettings as u16)
        })
        .cloned()
        .collect();
    assert!(
        kept.iter()
            .any(|e| e.text.contains("GPU KV cache size: 433,776 tokens")),
        "{kept:?}"
    );
    let recorded = journal::read(&data.join("pid1008.vlj")).unwrap();
    let run = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tap-vllm-alone-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&run);
    std::fs::create_dir_all(&run).unwrap();
    std::fs::copy(data.join("config.json"), run.join("config.json")).unwrap();
    let mut w = MemJournal::new(&recorded.header);
    for e in recorded.events.iter().chain(&kept) {
        w.event(e);
    }
    std::fs::write(run.join("pid1008.vlj"), w.finish(true)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramledger"))
        .args(["size", &run.to_string_lossy(), "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["engine"], "vllm");
    assert_eq!(v["gpu_memory_utilization"]["value"], 0.5);
    assert_eq!(v["blocks"], 27_111, "{v:#}");
    assert_eq!(v["blocks_bounds"], serde_json::json!([27_111, 27_111]));
    assert_eq!(v["tokens"], 433_776);
    assert_eq!(v["reproduced"], true);
    let s = &v["run"]["ranks"][0]["kv_cache_memory_suggestion"];
    assert_eq!(s["reproduced"], true, "{s:#}");
}
