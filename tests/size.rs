//! `vramledger size`: SGLang's KV sizing re-run on the recorded H200 journals (exact bytes: the
//! program's own figures, bit for bit), on the real logs of `../shared/logs` (within the
//! printed tolerance; failures explained), vLLM's budget, the what-ifs, and bad input.
//!
//! The expectations on the real logs are those the sizing module's own tests established
//! (crates/engines/tests/sizing_logs_*.rs); here they are reached through the command line.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod support;

fn cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vramledger"))
}

fn run_data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-sglang-shape")
}

fn tmp(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("size-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// (exit code, stdout, stderr).
fn size(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(cli()).arg("size").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// (exit code, the JSON).
fn size_json(args: &[&str]) -> (i32, Value) {
    let mut all = args.to_vec();
    all.push("--json");
    let (rc, out, err) = size(&all);
    let v: Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {out}\nstderr: {err}"));
    assert_eq!(v["schema"], "vramledger.size/1");
    (rc, v)
}

/// The program's own `VRAMLEDGER_SGLANG` line for rank 0's KV pool.
fn program_kv_line() -> Value {
    let text = std::fs::read_to_string(run_data().join("program-output.txt")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("VRAMLEDGER_SGLANG "))
        .map(|j| serde_json::from_str::<Value>(j).unwrap())
        .find(|v| v["line"] == "kv_cache_allocated" && v["rank"] == 0)
        .unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn recorded_run_reproduces_the_programs_sizing_exactly() {
    let data = run_data();
    let config = data.join("config.json");
    // The example read the capacity from torch (the driver's total); SGLang, and vramledger's
    // default, read nvidia-smi's (NVML's): `--gpu-mem-source driver` says which this run used.
    let (rc, v) = size_json(&[
        s(&data),
        "--model-config",
        s(&config),
        "--sglang-version",
        "0.5.5",
        "--max-total-tokens",
        "524288",
        "--gpu-mem-source",
        "driver",
    ]);
    assert_eq!(rc, 0, "{v:#}");
    let p = program_kv_line();
    // The program's exact inputs: pre_model_load = float32 MIN of the ranks' free bytes after
    // distributed init (148580139008 B = 138.37603759765625 GiB), available after the weights
    // 148053753856 B = 137.88580322265625 GiB, f 0.905, cell 4 heads × 128 × 8 layers × 2 × 2
    // = 16384 B; rest = 137.8858… − 138.3760… × 0.095 = 124.74007965087891 GiB;
    // int(rest × 2^30 // 16384) = 8174965, capped to 524288.
    assert_eq!(v["layout"]["label"], "L2");
    assert_eq!(v["cell_bytes"], p["cell_size"]);
    assert_eq!(v["pre_bytes"], 148_580_139_008u64);
    assert_eq!(v["available_bytes"], p["available_bytes"]);
    assert_eq!(
        v["pre_gib"].as_f64().unwrap().to_bits(),
        p["pre_model_load_gib"].as_f64().unwrap().to_bits()
    );
    assert_eq!(
        v["available_gib"].as_f64().unwrap().to_bits(),
        p["available_gpu_memory_gib"].as_f64().unwrap().to_bits()
    );
    assert_eq!(
        v["rest_gib"].as_f64().unwrap().to_bits(),
        p["rest_memory_gib"].as_f64().unwrap().to_bits()
    );
    assert_eq!(v["profiled_tokens"], p["profiled_tokens"]);
    assert_eq!(v["profiled_tokens"], 8_174_965);
    assert_eq!(v["tokens"], 524_288);
    assert_eq!(v["tolerance_tokens"], 0);
    assert_eq!(v["observed_tokens"], 524_288);
    assert_eq!(v["reproduced"], true);
    assert_eq!(v["error"], Value::Null);
    assert_eq!(v["max_running_requests"], 4096);
    // The fraction: SGLang 0.5.5's default rule on the capacity the program read (torch's
    // total_memory = the driver's total, 150109880320 B = 143155.9375 MiB): reserved = 512 +
    // 8192 × 1.5 + 256 × 2 + 2 / 8 × 1024 = 13568 MB; round((143155.9375 − 13568) / 143155.9375,
    // 3) = round(0.90522, 3) = 0.905, as the program printed.
    assert_eq!(v["mem_fraction_static"]["value"], p["mem_fraction_static"]);
    assert_eq!(v["mem_fraction_static"]["source"], "derived");
    let d = &v["defaults"];
    assert_eq!(d["gpu_mem_mib"]["value"], 143155.9375);
    assert_eq!(d["reserved_mb"], 13568.0);
    assert_eq!(
        (
            d["chunked_prefill_size"].clone(),
            d["cuda_graph_max_bs"].clone()
        ),
        (8192.into(), 256.into())
    );
    // NVML's total (143771 MiB, what nvidia-smi prints) would have given 0.906.
    assert_eq!(d["alternative"]["gpu_mem_mib"]["value"], 143_771.0);
    assert_eq!(d["alternative"]["mem_fraction_static"], 0.906);
    // Breakdown: weights 526385152 B; headroom pre × 0.095; KV 524288 × 16384 = 8 GiB.
    let e = &v["explanation"];
    assert_eq!(e["weights_bytes"], 526_385_152);
    assert_eq!(e["kv_bytes"], 8u64 << 30);
    // Run time after the pool, from the books: post_kv_init 236978176 + graph_capture 62914560
    // = 299892736 B taken, lowest free 138994057216 B.
    let rt = &e["runtime"];
    assert_eq!(rt["exact"], true);
    assert_eq!(rt["need_bytes"], 299_892_736);
    assert_eq!(rt["low_free_bytes"], 138_994_057_216u64);
    let stages: Vec<&str> = rt["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["post_kv_init", "graph_capture"]);
    // Recommendation (margin 1 GiB): the pool may grow by (138994057216 − 2^30) / 16384 =
    // 8418019 tokens over the 524288 it had, i.e. to 8942307. f 0.989: rest = 137.8858… −
    // 138.3760… × 0.011 = 136.36367 GiB → 8936729 tokens (fits); 0.990 → 8945798 (does not).
    let rec = &v["what_if"]["recommended_mem_fraction_static"];
    assert_eq!(rec["value"], 0.989);
    assert_eq!(rec["uncapped_tokens"], 8_936_729);
    assert_eq!(rec["uncapped_token_change"], 8_936_729 - 8_174_965);
    assert_eq!(rec["tokens"], 524_288);
    // Post-capture emulation: the pool's 524289 rows × 16384 B come back, one page (two rows)
    // stays backed; at f 0.905 the budget is the free memory after capture less the headroom.
    let pc = &v["what_if"]["post_capture"][0];
    assert_eq!(
        pc["free_after_capture_bytes"],
        138_994_057_216u64 + 524_289 * 16384 - 32768
    );
    assert_eq!(pc["backed_bytes"], 32768);
    assert!(pc["budget_tokens"].as_i64().unwrap() < 8_174_965);

    // Given instead of taken from the run: the same answer, source "given".
    let (rc, g) = size_json(&[
        s(&data),
        "--model-config",
        s(&config),
        "--sglang-version",
        "0.5.5",
        "--max-total-tokens",
        "524288",
        "--gpu-mem-mib",
        "143155.9375",
    ]);
    assert_eq!(rc, 0);
    assert_eq!(g["mem_fraction_static"]["value"], 0.905);
    assert_eq!(g["defaults"]["gpu_mem_mib"]["source"], "given");
    assert_eq!(g["profiled_tokens"], 8_174_965);
    // NVML's capacity: 0.906, a different profile (still capped to the same pool).
    let (_, n) = size_json(&[
        s(&data),
        "--model-config",
        s(&config),
        "--sglang-version",
        "0.5.5",
        "--max-total-tokens",
        "524288",
        "--gpu-mem-source",
        "nvml",
    ]);
    assert_eq!(n["mem_fraction_static"]["value"], 0.906);
    assert_ne!(n["profiled_tokens"], 8_174_965);
}

#[test]
fn uncapped_recorded_run_from_the_journals_alone() {
    // Recorded on the H200 pair with no KV cap: the engine took the profiled count itself.
    // No flag at all: the config sits in the run folder, TP 2 from the two ranks, the layout
    // from the recorded lines (L2), the fraction derived from the driver's capacity (0.905).
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-sglang-uncapped");
    let (rc, v) = size_json(&[s(&data), "--gpu-mem-source", "driver"]);
    assert_eq!(rc, 0, "{v:#}");
    let text = std::fs::read_to_string(data.join("program-output.txt")).unwrap();
    let p: Value = text
        .lines()
        .filter_map(|l| l.strip_prefix("VRAMLEDGER_SGLANG "))
        .map(|j| serde_json::from_str::<Value>(j).unwrap())
        .find(|v| v["line"] == "kv_cache_allocated")
        .unwrap();
    assert_eq!(p["tokens"], 8_174_965);
    assert_eq!(v["layout"]["label"], "L2");
    assert_eq!(v["settings"]["tp"]["value"], 2);
    assert_eq!(v["mem_fraction_static"]["value"], 0.905);
    assert_eq!(v["available_bytes"], p["available_bytes"]);
    assert_eq!(
        v["rest_gib"].as_f64().unwrap().to_bits(),
        p["rest_memory_gib"].as_f64().unwrap().to_bits()
    );
    assert_eq!(v["tokens"], p["tokens"]);
    assert_eq!(v["observed_tokens"], p["tokens"]);
    assert_eq!(v["tolerance_tokens"], 0);
    assert_eq!(v["reproduced"], true);
    // The pool's 8174966 rows × 16384 B: the KV bytes of the breakdown.
    assert_eq!(v["explanation"]["kv_bytes"], 8_174_965i64 * 16384);
    // The capped recording from its journals alone: the cap is not in the journals, so the
    // count is not reproduced, and the note says what would explain it.
    let (rc, v) = size_json(&[s(&run_data()), "--gpu-mem-source", "driver"]);
    assert_eq!(rc, 0);
    assert_eq!(v["reproduced"], false);
    assert!(v["notes"].as_array().unwrap().iter().any(|n| n
        .as_str()
        .unwrap()
        .contains("--max-total-tokens cap would explain it")));
}

#[test]
fn recorded_run_with_its_log_and_without_flags() {
    // The program's output holds the server_args line: the fraction is then logged, the
    // cap comes from it, the config from the run folder, and the layout from the line
    // formats ("Load weight end. type=" → 0.5.5 or older; summary with available_gpu_mem).
    let data = run_data();
    let log = data.join("program-output.txt");
    let (rc, v) = size_json(&[s(&data), "--log", s(&log), "--gpu-mem-source", "driver"]);
    assert_eq!(rc, 0, "{v:#}");
    assert_eq!(v["mem_fraction_static"]["source"], "logged");
    assert_eq!(v["mem_fraction_static"]["value"], 0.905);
    assert_eq!(v["settings"]["max_total_tokens"]["value"], 524_288);
    assert_eq!(v["settings"]["tp"]["value"], 2);
    assert_eq!(v["layout"]["label"], "L2");
    assert_eq!(v["layout"]["source"], "derived");
    assert_eq!(v["model"]["source"], "derived");
    assert_eq!(v["profiled_tokens"], 8_174_965);
    assert_eq!(v["tolerance_tokens"], 0);
    assert_eq!(v["defaults"]["matches_logged"], true);
    // Text: the breakdown, the reproduction and the what-ifs in words.
    let (rc, text, _) = size(&[s(&data), "--log", s(&log), "--gpu-mem-source", "driver"]);
    assert_eq!(rc, 0);
    for needle in [
        "layout L2 (0.5.5)",
        "baseline (pre)",
        "headroom pre × (1 − f)",
        "profiled 8174965",
        "observed 524288",
        "reproduced",
        "run time after the KV pool",
        "recommended mem_fraction_static 0.989",
        "post-capture sizing",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn what_ifs_on_the_recorded_run() {
    let data = run_data();
    let config = data.join("config.json");
    let (rc, v) = size_json(&[
        s(&data),
        "--model-config",
        s(&config),
        "--sglang-version",
        "0.5.5",
        "--gpu-mem-source",
        "driver",
        "--what-if-mem-fraction",
        "0.05",
        "--what-if-kv-cache-dtype",
        "fp8_e4m3",
        "--what-if-tp",
        "1",
        "--what-if-page-size",
        "64",
        "--what-if-gpu-mem-mib",
        "81559",
        "--margin-gib",
        "2",
    ]);
    assert_eq!(rc, 0, "{v:#}");
    let changes = v["what_if"]["changes"].as_array().unwrap();
    let find = |c: &str| changes.iter().find(|w| w["change"] == c).unwrap();
    let gib = (1u64 << 30) as f64;
    let (pre, avail) = (138.37603759765625f64, 137.88580322265625f64);
    // Uncapped here: at 0.905, 8174965 tokens. f 0.05: rest = avail − pre × 0.95.
    assert_eq!(v["tokens"], 8_174_965);
    let t = ((avail - pre * (1.0 - 0.05)) * gib / 16384.0).floor() as i64;
    assert_eq!(find("mem_fraction_static=0.05")["tokens"], t);
    // FP8: one byte per element, cell 8192, twice the tokens (to the float floor).
    let fp8 = find("kv_cache_dtype=fp8_e4m3");
    assert_eq!(fp8["cell_bytes"], 8192);
    assert_eq!(
        fp8["tokens"],
        ((avail - pre * (1.0 - 0.905)) * gib / 8192.0).floor() as i64
    );
    // TP 1: 8 KV heads per rank (cell 32768); weights 526385152 B × 2 on one rank.
    let tp1 = find("tp=1");
    assert_eq!(tp1["cell_bytes"], 32768);
    let avail1 = pre - (pre - avail) * 2.0;
    // The fraction was derived: re-derived for tp 1 (reserved 13568 − 128 MB) = 0.906.
    assert_eq!(tp1["mem_fraction_static"], 0.906);
    assert_eq!(
        tp1["tokens"],
        ((avail1 - pre * (1.0 - 0.906)) * gib / 32768.0).floor() as i64
    );
    // Page 64: floored to a multiple of 64.
    assert_eq!(find("page_size=64")["tokens"], 8_174_965 / 64 * 64);
    // 80 GB GPU: free memory shifts down by (143155.9375 − 81559) / 1024 GiB and the default
    // becomes round((81559 − 13568) / 81559, 3) = 0.834.
    let g = find("gpu_mem_mib=81559");
    assert_eq!(g["mem_fraction_static"], 0.834);
    let shift = (81559.0 - 143155.9375) / 1024.0;
    assert_eq!(
        g["tokens"],
        (((avail + shift) - (pre + shift) * (1.0 - 0.834)) * gib / 16384.0).floor() as i64
    );
    // Margin 2 GiB: the low point was measured with the run's pool of 524288 tokens (the
    // observed count), so the pool may hold t ≤ 524288 + (138994057216 − 2^31) / 16384.
    let rec = &v["what_if"]["recommended_mem_fraction_static"];
    let limit = 524_288 + (138_994_057_216i64 - (2i64 << 30)) / 16384;
    assert!(rec["uncapped_tokens"].is_null());
    assert!(rec["tokens"].as_i64().unwrap() <= limit);
    assert_eq!(rec["margin_bytes"], 2i64 << 30);
}

/// `../shared/logs`, or `None` when this checkout has none (the test is then skipped: counted
/// and explained by scripts/test.sh, a failure in CI).
fn logs() -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/logs");
    if d.is_dir() {
        Some(d)
    } else {
        support::skip::skip(&format!("{} is absent (real logs)", d.display()));
        None
    }
}

fn in_bounds(v: &Value, obs: i64) -> bool {
    let b = &v["tokens_bounds"];
    b[0].as_i64().unwrap() <= obs && obs <= b[1].as_i64().unwrap()
}

#[test]
fn real_sglang_logs_within_the_printed_tolerance() {
    let Some(l) = logs() else { return };
    let c = l.join("configs");
    // QwQ-32B, 4× L4, 0.4.3: layout L1 from the line formats alone; logged 0.85 = L1's table
    // for a < 25000 MiB GPU at tp 4. rest = 6.09 − 21.63 × 0.15 = 2.8455 GiB → 46620 ± 94;
    // logged 46611.
    let (rc, v) = size_json(&[
        "--log",
        s(&l.join("sglang-qwq-32b-l4-tp4-llmsinclouds.log")),
        "--model-config",
        s(&c.join("Qwen__QwQ-32B.json")),
        "--gpu-mem-mib",
        "23034",
    ]);
    assert_eq!(rc, 0);
    assert_eq!(v["layout"]["label"], "L1");
    assert_eq!(v["cell_bytes"], 65536);
    assert_eq!(v["tokens"], 46_620);
    assert_eq!(v["tolerance_tokens"], 94);
    assert_eq!(v["observed_tokens"], 46_611);
    assert_eq!(v["reproduced"], true);
    assert!(in_bounds(&v, 46_611));
    assert_eq!(v["mem_fraction_static"]["source"], "logged");
    assert_eq!(v["defaults"]["matches_logged"], true);

    // Llama-3.1-8B, 80 GB, 0.4.1 (KV line without #tokens → L1): 444520 ± 46, logged 444500;
    // default 0.88 on 81559 MiB.
    let (rc, v) = size_json(&[
        "--log",
        s(&l.join("sglang-meta-llama-3.1-8b-instruct-80gb-tp1-docsquickstart.log")),
        "--model-config",
        s(&c.join("meta-llama__Llama-3.1-8B-Instruct.json")),
        "--gpu-mem-mib",
        "81559",
    ]);
    assert_eq!(rc, 0);
    assert_eq!(v["layout"]["label"], "L1");
    assert_eq!(
        (v["tokens"].clone(), v["tolerance_tokens"].clone()),
        (444_520.into(), 46.into())
    );
    assert_eq!(v["observed_tokens"], 444_500);
    assert_eq!(v["reproduced"], true);
    assert_eq!(v["defaults"]["matches_logged"], true);

    // Kimi-K2.5, 8× MI355X, 0.5.8 → L2; MLA cell (512 + 64) × 61 × 2 = 70272; the logged auto
    // default 0.8260405859375 bit for bit needs the MoonViT tower (27 × 1152, from the model
    // card: the shared config keeps only text fields).
    let kimi: Value = serde_json::from_str(
        &std::fs::read_to_string(c.join("moonshotai__Kimi-K2.5.json")).unwrap(),
    )
    .unwrap();
    let mut kimi = kimi;
    kimi["vision_config"] = serde_json::json!({"num_hidden_layers": 27, "hidden_size": 1152});
    let kimi_config = tmp("kimi-config.json");
    std::fs::write(&kimi_config, kimi.to_string()).unwrap();
    let (rc, v) = size_json(&[
        "--log",
        s(&l.join("sglang-kimi-k2.5-mi355x-tp8-rocmtestlog.log")),
        "--model-config",
        s(&kimi_config),
        "--gpu-mem-mib",
        "294912",
        "--sglang-version",
        "0.5.8.post1",
    ]);
    assert_eq!(rc, 0);
    assert_eq!(v["cell_bytes"], 70272);
    assert_eq!(v["defaults"]["mem_fraction_static"], 0.8260405859375);
    assert_eq!(v["defaults"]["matches_logged"], true);
    assert_eq!(
        (
            v["defaults"]["chunked_prefill_size"].clone(),
            v["defaults"]["cuda_graph_max_bs"].clone()
        ),
        (16384.into(), 512.into())
    );
    assert_eq!(v["observed_tokens"], 2_454_421);
    assert!(in_bounds(&v, 2_454_421), "{}", v["tokens_bounds"]);
    assert_eq!(v["reproduced"], true);

    // Qwen2.5-0.5B capped by --max-total-tokens 20480 (docs CI): exactly the cap.
    let (rc, v) = size_json(&[
        "--log",
        s(&l.join("sglang-qwen2.5-0.5b-instruct-80gb-tp1-docsci-maxtotaltokens.log")),
        "--model-config",
        s(&c.join("Qwen__Qwen2.5-0.5B-Instruct.json")),
        "--sglang-version",
        "0.5.8",
        "--mem-fraction-static",
        "0.835",
        "--max-total-tokens",
        "20480",
        "--max-running-requests",
        "128",
    ]);
    assert_eq!(rc, 0);
    assert_eq!(
        (v["tokens"].clone(), v["observed_tokens"].clone()),
        (20480.into(), 20480.into())
    );
    assert_eq!(v["tolerance_tokens"], 0);
    assert_eq!(v["max_running_requests"], 128);
    assert_eq!(v["reproduced"], true);
}

#[test]
fn real_sglang_logs_failures_and_gaps_explained() {
    let Some(l) = logs() else { return };
    let c = l.join("configs");
    // Gemma-3-27B AWQ on an RTX 4090, ~0.4.4 (L1): the 0.4.x runner lowers 0.88 to 0.792 for a
    // multimodal model; rest = 3.64 − 22.46 × 0.208 = −1.03 GiB → "Not enough memory".
    // Smallest runner fraction 0.838; smallest --mem-fraction-static 0.932 (× 0.9 = 0.8388).
    let (rc, v) = size_json(&[
        "--log",
        s(&l.join("sglang-gemma-3-27b-it-int4-awq-rtx4090-tp1-issue4895.log")),
        "--model-config",
        s(&c.join("google__gemma-3-27b-it.json")),
        "--sglang-version",
        "0.4.4.post3",
        "--gpu-mem-mib",
        "24564",
    ]);
    assert_eq!(rc, 1);
    assert_eq!(v["mem_fraction_static"]["value"], 0.88);
    assert_eq!(v["mem_fraction_static"]["runner_value"], 0.792);
    assert_eq!(v["defaults"]["matches_logged"], true);
    let e = &v["error"];
    assert_eq!(e["check"], "tokens_not_positive");
    assert_eq!(
        e["reason"],
        "Not enough memory. Please try to increase --mem-fraction-static."
    );
    assert!(e["inequality"].as_str().unwrap().contains("<= 0"));
    assert_eq!(e["smallest_mem_fraction_static"], 0.932);
    let (rc, text, _) = size(&[
        "--log",
        s(&l.join("sglang-gemma-3-27b-it-int4-awq-rtx4090-tp1-issue4895.log")),
        "--model-config",
        s(&c.join("google__gemma-3-27b-it.json")),
        "--sglang-version",
        "0.4.4.post3",
    ]);
    assert_eq!(rc, 1);
    assert!(
        text.contains("DOES NOT FIT") && text.contains("0.932"),
        "{text}"
    );
    // What-ifs on the failure: 0.95 runs at 0.855 (rest 3.64 − 22.46 × 0.145 = 0.38 GiB, fits);
    // 0.9 runs at 0.81 (rest −0.63 GiB, fails again); another GPU needs the current one.
    let (rc, v) = size_json(&[
        "--log",
        s(&l.join("sglang-gemma-3-27b-it-int4-awq-rtx4090-tp1-issue4895.log")),
        "--model-config",
        s(&c.join("google__gemma-3-27b-it.json")),
        "--sglang-version",
        "0.4.4.post3",
        "--what-if-mem-fraction",
        "0.95",
        "--what-if-mem-fraction",
        "0.9",
        "--what-if-gpu-mem-mib",
        "49152",
    ]);
    assert_eq!(rc, 1);
    let w = &v["what_if"]["changes"];
    assert!(w[0]["error"].is_null() && w[0]["tokens"].as_i64().unwrap() > 700);
    assert!(w[1]["error"]
        .as_str()
        .unwrap()
        .starts_with("Not enough memory"));
    assert_eq!(w[1]["smallest_mem_fraction_static"], 0.932);
    assert!(w[2]["unavailable"]
        .as_str()
        .unwrap()
        .contains("--gpu-mem-mib"));

    // Llama-3.1-8B on a 24 GB desktop GPU (0.4.9, no server_args: the default for 24564 MiB is
    // 0.88): 38364 ± 51, the log says 38141: NOT reproduced; the count implies a fraction in
    // [0.8785, 0.8791], no layout's default.
    let (rc, v) = size_json(&[
        "--log",
        s(&l.join("sglang-llama-3.1-8b-instruct-24gb-tp1-dockerdesktop.log")),
        "--model-config",
        s(&c.join("meta-llama__Llama-3.1-8B-Instruct.json")),
        "--sglang-version",
        "0.4.9",
        "--gpu-mem-mib",
        "24564",
    ]);
    assert_eq!(rc, 0);
    assert_eq!(v["mem_fraction_static"]["source"], "derived");
    assert_eq!(v["reproduced"], false);
    let implied = &v["implied_mem_fraction_static"];
    assert!(implied[0].as_f64().unwrap() > 0.8785 && implied[1].as_f64().unwrap() < 0.8791);

    // DeepSeek-R1 on MI300X with DP attention (0.4.8): at 0.95 the formula leaves +12.31 GiB,
    // the log's profiled −561981 tokens means −36.78 GiB: an effective fraction of 0.6893.
    let (rc, v) = size_json(&[
        "--log",
        s(&l.join("sglang-deepseek-r1-mi300x-tp8-dp8-issue7691-negative.log")),
        "--model-config",
        s(&c.join("deepseek-ai__DeepSeek-R1.json")),
        "--sglang-version",
        "0.4.8.post1",
        "--mem-fraction-static",
        "0.95",
        "--max-total-tokens",
        "131072",
        "--tp",
        "8",
    ]);
    assert_eq!(rc, 0);
    assert_eq!(v["observed"]["profiled_tokens"], -561_981);
    assert_eq!(v["reproduced"], false);
    let implied = &v["implied_mem_fraction_static"];
    assert!(implied[0].as_f64().unwrap() > 0.689 && implied[1].as_f64().unwrap() < 0.6895);
}

#[test]
fn real_vllm_logs() {
    let Some(l) = logs() else { return };
    let c = l.join("configs");
    // T4, V0: 14.56 × 0.5 − (2.89 + 0.01 + 2.02) = 2.36 GiB; block 458752 B; blocks within
    // [5482, 5564], logged 5517; CPU blocks 4 GiB // 458752 = 9362 exactly.
    let (rc, v) = size_json(&[
        "--log",
        s(&l.join("vllm-qwen2.5-1.5b-instruct-t4-tp1-colabgrpo.log")),
        "--model-config",
        s(&c.join("Qwen__Qwen2.5-1.5B-Instruct.json")),
    ]);
    assert_eq!(rc, 0, "{v:#}");
    assert_eq!(v["engine"], "vllm");
    assert_eq!(v["layout"]["label"], "V0");
    assert_eq!(v["blocks_bounds"], serde_json::json!([5482, 5564]));
    assert_eq!(v["observed_blocks"], 5517);
    assert_eq!(v["reproduced"], true);
    assert_eq!(v["cpu_blocks"], 9362);
    assert_eq!(v["observed_cpu_blocks"], 9362);
    assert_eq!(v["gpu_memory_utilization"]["value"], 0.5);
    assert!(v["mem_fraction_static"].is_null());

    // Jetson: startup 1 fails (−7.83 GiB); with utilization 0.4 the total is
    // (−7.83 + 6.59 + 8.29 + 4.93) / 0.4 = 29.95 GiB and 0.67 is the smallest utilization that
    // holds 4096 tokens (256 blocks) on top of 19.81 GiB non-KV.
    let jetson = l.join("vllm-qwen2.5-vl-7b-instruct-awq-jetson-orin-agx-tp1-kvnegative.log");
    let vl = c.join("Qwen__Qwen2.5-VL-7B-Instruct-AWQ.json");
    let common = [
        "--log",
        s(&jetson),
        "--model-config",
        s(&vl),
        "--gpu-memory-utilization",
        "0.4",
        "--context-length",
        "4096",
    ];
    let mut first = common.to_vec();
    first.extend(["--attempt", "1"]);
    let (rc, v) = size_json(&first);
    assert_eq!(rc, 1);
    assert_eq!(v["attempts"], 2);
    assert_eq!(v["blocks"], 0);
    assert_eq!(v["error"]["smallest_gpu_memory_utilization"], 0.67);
    assert!(v["error"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("No available memory for the cache blocks"));
    // Startup 2 (the default: the last) fits.
    let (rc, v) = size_json(&common);
    assert_eq!(rc, 0);
    assert_eq!(v["attempt"], 2);
    assert!(v["blocks"].as_i64().unwrap() > 700);

    // dots.ocr, V1 (no config in shared/: the header's LM geometry, 28 layers, 2 KV heads,
    // head 128, bf16): 3.65 GiB // 16384 // 28 = 8543 blocks, ±0.005 GiB → logged 8537 inside.
    let dots = tmp("dots-config.json");
    std::fs::write(
        &dots,
        r#"{"architectures": ["DotsOCRForCausalLM"], "hidden_size": 1536,
            "num_attention_heads": 12, "num_hidden_layers": 28, "num_key_value_heads": 2,
            "torch_dtype": "bfloat16", "max_position_embeddings": 131072}"#,
    )
    .unwrap();
    let (rc, v) = size_json(&[
        "--log",
        s(&l.join("vllm-dots-ocr-wsl-consumer-tp1-dockerlog.log")),
        "--model-config",
        s(&dots),
    ]);
    assert_eq!(rc, 0);
    assert_eq!(v["layout"]["label"], "V1");
    assert_eq!(v["blocks"], 8543);
    assert_eq!(v["observed_blocks"], 8537);
    assert_eq!(v["observed_tokens"], 136_592);
    assert_eq!(v["reproduced"], true);
}

/// Exit 2 with exactly one message line naming the problem.
fn bad(args: &[&str], needle: &str) {
    let (rc, out, err) = size(args);
    assert_eq!(rc, 2, "{args:?}: stdout {out} stderr {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in stderr: {err}"
    );
    if err.starts_with("vramledger size:") {
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
    }
}

#[test]
fn bad_input_is_exit_2_with_one_message() {
    let data = run_data();
    let config = data.join("config.json");
    let (r, c) = (s(&data), s(&config));
    bad(&[r, "--model-config", c, "--tp", "0"], "--tp 0");
    bad(
        &[r, "--model-config", c, "--page-size", "0"],
        "--page-size 0",
    );
    bad(&[r, "--model-config", c, "--pp", "0"], "--pp 0");
    bad(
        &[r, "--model-config", c, "--mem-fraction-static", "1.5"],
        "outside (0, 1]",
    );
    bad(
        &[r, "--model-config", c, "--mem-fraction-static", "0"],
        "outside (0, 1]",
    );
    bad(
        &[r, "--model-config", c, "--gpu-memory-utilization", "0.9"],
        "vLLM's setting",
    );
    bad(
        &[r, "--model-config", c, "--gpu-mem-mib", "0"],
        "must be positive",
    );
    bad(
        &[r, "--gpu-mem-source", "nvml", "--gpu-mem-mib", "80000"],
        "contradicts",
    );
    bad(
        &[r, "--model-config", c, "--sglang-version", "main"],
        "not a version",
    );
    bad(
        &[r, "--model-config", c, "--kv-cache-dtype", "int3"],
        "kv_cache_dtype 'int3'",
    );
    bad(&["--tp", "-1"], "");
    // Nothing measured and no GPU.
    bad(&[], "nothing measured");
    // A config without the layer count.
    let broken = tmp("broken-config.json");
    std::fs::write(&broken, r#"{"num_attention_heads": 8, "hidden_size": 512}"#).unwrap();
    bad(&[r, "--model-config", s(&broken)], "num_hidden_layers");
    let not_json = tmp("not-json.json");
    std::fs::write(&not_json, "{ nope").unwrap();
    bad(&[r, "--model-config", s(&not_json)], "config.json");
    // Unreadable files and folders.
    bad(
        &["/nonexistent/run", "--model-config", c],
        "/nonexistent/run",
    );
    bad(
        &["--log", "/nonexistent/log.txt", "--model-config", c],
        "cannot read /nonexistent/log.txt",
    );
    bad(
        &[r, "--model-config", "/nonexistent/config.json"],
        "cannot read /nonexistent/config.json",
    );
    // A log with no sizing lines.
    let empty = tmp("no-sizing.log");
    std::fs::write(
        &empty,
        "hello\nINFO: Uvicorn running on http://0.0.0.0:30000\n",
    )
    .unwrap();
    bad(
        &["--log", s(&empty), "--model-config", c],
        "no SGLang or vLLM sizing lines",
    );
    // A log without the weight-load lines it needs: the message names what is missing.
    let partial = tmp("partial.log");
    std::fs::write(
        &partial,
        "[2025-01-01 00:00:00 TP0] Init torch distributed begin.\n\
         [2025-01-01 00:00:01 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=15.61 GB\n",
    )
    .unwrap();
    bad(
        &[
            "--log",
            s(&partial),
            "--model-config",
            c,
            "--mem-fraction-static",
            "0.8",
        ],
        "no 'Load weight begin",
    );
    // A log without a server_args line and no way to know the fraction.
    let nofrac = tmp("nofrac.log");
    std::fs::write(
        &nofrac,
        "[2025-01-01 00:00:01 TP0] Load weight begin. avail mem=20.00 GB\n\
         [2025-01-01 00:00:02 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=15.00 GB, mem usage=5.00 GB.\n",
    )
    .unwrap();
    bad(
        &["--log", s(&nofrac), "--model-config", c],
        "mem_fraction_static is unknown",
    );
    // A log needs a model config.
    bad(
        &["--log", s(&nofrac), "--mem-fraction-static", "0.8"],
        "--model-config is needed",
    );
}

#[test]
fn bad_settings_for_the_engine_of_a_real_log() {
    let Some(l) = logs() else { return };
    // vLLM settings on SGLang input and the reverse.
    let t4 = l.join("vllm-qwen2.5-1.5b-instruct-t4-tp1-colabgrpo.log");
    let q = l.join("configs/Qwen__Qwen2.5-1.5B-Instruct.json");
    bad(
        &[
            "--log",
            s(&t4),
            "--model-config",
            s(&q),
            "--mem-fraction-static",
            "0.8",
        ],
        "vLLM has no mem_fraction_static",
    );
    bad(
        &["--log", s(&t4), "--model-config", s(&q), "--attempt", "3"],
        "--attempt 3",
    );
    // The 2024 log has no free memory before the weights.
    bad(
        &[
            "--log",
            s(&l.join("sglang-qwen2-7b-instruct-gpu-tp2-issue744-oldformat.log")),
            "--model-config",
            s(&l.join("configs/Qwen__Qwen2-7B-Instruct.json")),
            "--mem-fraction-static",
            "0.7",
        ],
        "no free memory before the weights",
    );
}

#[test]
fn defaults_without_measurements() {
    // No run, no log: SGLang 0.5.5's defaults for an H100 (81559 MiB), tp 1: reserved = 512 +
    // 8192 × 1.5 + 256 × 2 + 128 = 13440 MB → round(68119 / 81559, 3) = 0.835.
    let config = run_data().join("config.json");
    let (rc, v) = size_json(&[
        "--gpu-mem-mib",
        "81559",
        "--sglang-version",
        "0.5.5",
        "--model-config",
        s(&config),
    ]);
    assert_eq!(rc, 0);
    assert_eq!(v["mem_fraction_static"]["value"], 0.835);
    assert_eq!(v["mem_fraction_static"]["source"], "derived");
    assert_eq!(v["defaults"]["reserved_mb"], 13440.0);
    assert!(v["tokens"].is_null() && v["pre_bytes"].is_null() && v["error"].is_null());
    // 8 KV heads × 128 × 8 layers × 2 × 2 B at tp 1.
    assert_eq!(v["cell_bytes"], 32768);
    let (rc, text, _) = size(&["--gpu-mem-mib", "81559"]);
    assert_eq!(rc, 0);
    assert!(text.contains("tokens need measurements"), "{text}");
    // The newest layout by default: 0.5.23 on the same GPU gives 0.83 (§5.5 worked example).
    // reserved = 512 + 12288 + 128 + (256 × 2 + 58 × 8) = 13904 MB → round(0.82952, 3).
    assert!(
        text.contains("mem_fraction_static 0.83 (reserved 13904 MB)"),
        "{text}"
    );
}

/// Replaces a synthetic journal's header with one whose command line is `cmdline`.
fn with_cmdline(journal: &[u8], pid: u32, cmdline: &str) -> Vec<u8> {
    use vramledger_format::frame::{encode_frame, frame_len};
    use vramledger_format::{preamble, Header, Kind, PREAMBLE_LEN};
    let at = PREAMBLE_LEN;
    let len = u32::from_le_bytes(journal[at + 4..at + 8].try_into().unwrap()) as usize;
    let rest = &journal[at + frame_len(len)..];
    let mut h = Header::default();
    h.push("pid", pid.to_string());
    h.push("ppid", "1");
    h.push("run_id", "r1");
    h.push("host", "testhost");
    h.push("cmdline", cmdline);
    h.push("start_unix_ns", "1700000000000000000");
    let payload = h.encode();
    let mut frame = vec![0u8; frame_len(payload.len())];
    encode_frame(Kind::Header as u16, &payload, &mut frame);
    let mut out = preamble().to_vec();
    out.extend(frame);
    out.extend_from_slice(rest);
    out
}

#[test]
fn a_run_reads_its_launch_flags_from_the_journal_header() {
    use support::synth::{Synth, GIB, MIB};
    use vramledger_format::Owner;
    let dir = tmp("cmdline-run");
    let model = dir.join("model");
    std::fs::create_dir_all(&model).unwrap();
    std::fs::copy(run_data().join("config.json"), model.join("config.json")).unwrap();
    let p = "[2025-06-01 10:00:00 TP0] ";
    let mut j = Synth::new(4242, "r1");
    j.module(1, "/x/libc10_cuda.so");
    j.stage(
        "dist_init",
        Some(&format!("{p}Init torch distributed begin.")),
        13 * GIB,
    );
    j.stage(
        "weight_load",
        Some(&format!("{p}Load weight begin. avail mem=12.00 GB")),
        12 * GIB,
    );
    j.alloc(0x1000_0000, 4 * GIB, Owner::Torch, 1);
    j.stage(
        "kv_pool",
        Some(&format!("{p}Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=8.00 GB, mem usage=4.00 GB.")),
        8 * GIB,
    );
    // The pool: (183488 + 16) rows × 32768 B.
    let pool = (183_488 + 16) * 32768;
    j.alloc(0x2_0000_0000, pool, Owner::Torch, 1);
    j.stage(
        "post_kv_init",
        Some(&format!("{p}Memory pool end. avail mem=2.40 GB")),
        8 * GIB - pool,
    );
    j.alloc(0x4_0000_0000, 100 * MIB, Owner::TorchGraphPool, 1);
    j.stage(
        "post_capture",
        Some(&format!("{p}Capture cuda graph end. Time elapsed: 1.00 s. mem usage=0.10 GB. avail mem=2.30 GB.")),
        8 * GIB - pool - 100 * MIB,
    );
    j.stage(
        "serving",
        Some(&format!("{p}max_total_num_tokens=183488, chunked_prefill_size=2048, max_prefill_tokens=16384, max_running_requests=2048, context_len=8192, available_gpu_mem=2.30 GB")),
        8 * GIB - pool - 100 * MIB,
    );
    let cmd = format!(
        "python3\0-m\0sglang.launch_server\0--model-path\0{}\0--mem-fraction-static\00.8\0--page-size\016",
        model.display()
    );
    std::fs::write(dir.join("r1.vlj"), with_cmdline(&j.bytes, 4242, &cmd)).unwrap();
    // No flags: fraction and page size from the recorded command line, the model from its
    // --model-path, the layout from the lines ("Load weight end. type=" → 0.5.5 or older).
    // One rank: pre 12 GiB, available 8 GiB; f 0.8: rest = 8 − 12 × (1 − 0.8) = 5.6 GiB;
    // cell 8 heads × 128 × 8 layers × 2 × 2 = 32768 B: 5.6 × 32768 = 183500.8 → 183500,
    // floored to the page: 11468 × 16 = 183488.
    let (rc, v) = size_json(&[s(&dir)]);
    assert_eq!(rc, 0, "{v:#}");
    assert_eq!(v["mem_fraction_static"]["value"], 0.8);
    assert_eq!(v["mem_fraction_static"]["source"], "logged");
    assert!(v["mem_fraction_static"]["detail"]
        .as_str()
        .unwrap()
        .contains("command line"));
    assert_eq!(v["settings"]["page_size"]["value"], 16);
    assert_eq!(v["model"]["source"], "derived");
    assert_eq!(v["layout"]["label"], "L2");
    assert_eq!(v["pre_bytes"], 12 * GIB);
    assert_eq!(v["available_bytes"], 8 * GIB);
    assert_eq!(v["cell_bytes"], 32768);
    assert_eq!(v["profiled_tokens"], 183_500);
    assert_eq!(v["tokens"], 183_488);
    assert_eq!(v["observed_tokens"], 183_488);
    assert_eq!(v["reproduced"], true);
    // The run's capacity (16 GiB in the synthetic samples) gives 0.5.5's default
    // round((16384 − 3728) / 16384, 3) = 0.772: not what the command line set.
    assert_eq!(v["defaults"]["mem_fraction_static"], 0.772);
    assert_eq!(v["defaults"]["matches_logged"], false);
    // Run time after the pool: 100 MiB of graph pool.
    assert_eq!(v["explanation"]["runtime"]["need_bytes"], 100 * MIB);
}

/// The calculator: every input a flag. `--pre-gib/--available-gib` are exact GiB floats
/// (tolerance 0); the numbers are those of SGLang 0.4.6.post5's own functions
/// (tests/data/sglang-reference/0.4.6.jsonl, first token row).
#[test]
fn calculator_flags_exact_failure_and_bad_input() {
    let cfg =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sglang-reference/llama.json");
    let base = [
        "--sglang-version",
        "0.4.6",
        "--gpu-mem-mib",
        "81559",
        "--model-config",
        s(&cfg),
    ];
    let mut ok = base.to_vec();
    ok.extend(["--pre-gib", "78.81", "--available-gib", "63.72"]);
    let (rc, v) = size_json(&ok);
    assert_eq!(rc, 0, "{v}");
    assert_eq!(v["measured"]["exact"], true);
    assert_eq!(v["tolerance_tokens"], 0);
    assert_eq!(v["tokens"], 444_520);
    assert_eq!(v["max_running_requests"], 2049);
    assert_eq!(v["mem_fraction_static"]["value"], 0.88);

    // Weights leave too little: SGLang raises "Not enough memory"; exit 1.
    let mut bad = base.to_vec();
    bad.extend(["--pre-gib", "23.3", "--available-gib", "2.01"]);
    let (rc, v) = size_json(&bad);
    assert_eq!(rc, 1, "{v}");
    assert!(!v["error"].is_null(), "{v}");

    // --pre-gib without --available-gib is bad input: exit 2.
    let mut half = base.to_vec();
    half.extend(["--pre-gib", "78.81"]);
    let (rc, _, err) = size(&half);
    assert_eq!(rc, 2, "{err}");
}
