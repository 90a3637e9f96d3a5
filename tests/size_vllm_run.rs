//! `vramledger size RUN` on vLLM runs: the recorded H200 run (tests/data/h200-vllm-explore, vLLM
//! 0.26.0, V2 model runner, Llama-3.1-8B shape, gpu_memory_utilization 0.5) must reproduce
//! vLLM's own `Available KV cache memory: 52.95 GiB`, `GPU KV cache size: 433,776 tokens`, 27111
//! blocks of 16 and both `--kv-cache-memory=` integers; from the journal alone the printed
//! budget leaves an interval holding them.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-vllm-explore")
}

fn size(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramledger"))
        .arg("size")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let (rc, out, err) = size(&all);
    assert_eq!(rc, 0, "{err}\n{out}");
    serde_json::from_str(&out).unwrap()
}

fn run() -> String {
    data().display().to_string()
}

fn log() -> String {
    data().join("engine-stdout.txt").display().to_string()
}

#[test]
fn with_the_engine_output_the_h200_budget_is_exact() {
    let v = json(&[&run(), "--log", &log()]);
    assert_eq!(v["schema"], "vramledger.size/1");
    assert_eq!(v["engine"], "vllm");
    assert_eq!(v["block_size"], 16);
    assert_eq!(v["settings"]["max_model_len"]["value"], 4096);
    assert_eq!(v["gpu_memory_utilization"]["value"], 0.5);
    assert_eq!(v["total_bytes"], 150_109_880_320.0);
    assert_eq!(v["requested_bytes"], 75_054_940_160.0);
    assert_eq!(v["available_bytes"], 56_857_337_344i64); // 52.9529 GiB: "52.95"
    assert_eq!(v["blocks"], 27_111);
    assert_eq!(v["blocks_bounds"], serde_json::json!([27_111, 27_111]));
    assert_eq!(v["tokens"], 433_776);
    assert_eq!(v["observed_blocks"], 27_111);
    assert_eq!(v["reproduced"], true);
    let r = &v["run"]["ranks"][0];
    let inputs = &r["inputs"];
    for (name, source) in [
        ("total_bytes", "measured"),
        ("init_free_bytes", "measured"),
        ("non_torch_bytes", "measured"),
        ("cuda_graph_bytes", "measured"),
        ("cuda_graph_estimate_bytes", "measured"),
        ("weights_bytes", "logged"),
        ("activation_peak_bytes", "logged"),
    ] {
        assert_eq!(inputs[name]["source"], source, "{name}");
    }
    assert_eq!(inputs["init_free_bytes"]["lo"], 149_557_477_376i64);
    assert_eq!(inputs["non_torch_bytes"]["lo"], 241_172_480); // vLLM printed 0.22 GiB
    assert_eq!(inputs["cuda_graph_bytes"]["lo"], 243_269_632); // vLLM printed 0.23 GiB
    assert_eq!(r["non_kv_bytes"]["lo"], 18_197_602_816i64);
    assert_eq!(r["non_kv_bytes"]["exact"], true);
    let s = &r["kv_cache_memory_suggestion"];
    assert_eq!(s["to_requested_bytes"]["lo"], 56_456_781_312i64);
    assert_eq!(s["to_gpu_bytes"]["lo"], 130_959_318_528i64);
    assert_eq!(s["reproduced"], true);
    // The recommendation keeps the margin free at the lowest point measured after the KV cache.
    let low = r["low_free_bytes"].as_i64().unwrap();
    let rec = &v["run"]["recommendation"];
    assert_eq!(
        rec["kv_cache_memory_bytes"].as_i64().unwrap(),
        56_857_337_344 + low - (1 << 30)
    );
    assert_eq!(rec["gpu_memory_utilization"], 0.98);
    assert_eq!(r["low_free_stage"], "serving");
}

#[test]
fn the_journal_alone_leaves_the_interval_the_printed_budget_allows() {
    let v = json(&[&run()]);
    let bounds = v["blocks_bounds"].as_array().unwrap();
    let (lo, hi) = (bounds[0].as_i64().unwrap(), bounds[1].as_i64().unwrap());
    assert_eq!((lo, hi), (27_107, 27_112)); // 52.95 ± 0.005 GiB in 2 MiB blocks
    assert!(lo <= 27_111 && 27_111 <= hi);
    assert_eq!(v["gpu_memory_utilization"], Value::Null);
    let notes: Vec<&str> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with("no settings line")),
        "a missing settings line is said: {notes:?}"
    );
    // Given the settings, the journal's numbers narrow the activation peak to the print's window.
    let v = json(&[
        &run(),
        "--gpu-memory-utilization",
        "0.5",
        "--context-length",
        "4096",
    ]);
    let a = &v["run"]["ranks"][0]["inputs"]["activation_peak_bytes"];
    assert_eq!(a["source"], "derived");
    let (alo, ahi) = (a["lo"].as_f64().unwrap(), a["hi"].as_f64().unwrap());
    let gib = (1u64 << 30) as f64;
    assert!(alo / gib > 1.70 && ahi / gib < 1.74, "[{alo}, {ahi}]");
    assert_eq!(v["run"]["what_if"], serde_json::json!([]));
}

#[test]
fn what_ifs_for_utilization_and_max_model_len() {
    let v = json(&[
        &run(),
        "--log",
        &log(),
        "--what-if-gpu-memory-utilization",
        "0.9",
        "--what-if-gpu-memory-utilization",
        "0.12",
        "--what-if-context-length",
        "131072",
    ]);
    let w = v["run"]["what_if"].as_array().unwrap();
    assert_eq!(w.len(), 3);
    // 0.9: ceil(150109880320 × 0.9) − 18197602816 = 116901289472 → 55742 blocks of 2 MiB.
    assert_eq!(w[0]["setting"], "gpu_memory_utilization");
    assert_eq!(w[0]["blocks"], serde_json::json!([55_742, 55_742]));
    assert_eq!(w[0]["error"], Value::Null);
    // 0.12: 16.78 GiB − 16.95 GiB < 0: vLLM's own error.
    assert!(w[1]["error"]
        .as_str()
        .unwrap()
        .starts_with("No available memory for the cache blocks."));
    // max_model_len 131072: same blocks, 8192 blocks per request.
    assert_eq!(w[2]["blocks"], serde_json::json!([27_111, 27_111]));
    assert_eq!(w[2]["max_concurrency"][0], 27_111.0 / 8192.0);
}

#[test]
fn an_unknown_engine_line_changes_nothing() {
    let dir = std::env::temp_dir().join(format!("vl-size-vllm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let noisy = dir.join("noisy.log");
    let mut text = std::fs::read_to_string(data().join("engine-stdout.txt")).unwrap();
    text = text.replace(
        "\n",
        "\n(EngineCore pid=1008) INFO 12-01 09:43:30 [x.py:1] Model loading is slow; GiB of KV cache maybe\n",
    );
    std::fs::write(&noisy, text).unwrap();
    let a = json(&[&run(), "--log", &log()]);
    let b = json(&[&run(), "--log", &noisy.display().to_string()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(a["run"], b["run"]);
    assert_eq!(a["blocks"], b["blocks"]);
}

#[test]
fn bad_input_is_exit_2() {
    for (args, says) in [
        (
            vec![run(), "--mem-fraction-static".into(), "0.8".into()],
            "no mem_fraction_static",
        ),
        (
            vec![
                run(),
                "--what-if-gpu-memory-utilization".into(),
                "1.5".into(),
            ],
            "outside (0, 1]",
        ),
        (
            vec![run(), "--log".into(), "/nonexistent/engine.log".into()],
            "cannot read",
        ),
        (
            vec![
                run(),
                "--model-config".into(),
                "/nonexistent/config.json".into(),
            ],
            "cannot read",
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (rc, out, err) = size(&args);
        assert_eq!(rc, 2, "{args:?}: {out}{err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
