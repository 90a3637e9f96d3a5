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
    let Some(l) = logs() else {
        return;
    };
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
    let Some(l) = logs() else {
        return;
    };
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
    let Some(l) = logs() else {
        return;
    };
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
    use vramledger_format::memwriter::MemJournal;
    use vramledger_format::Header;
    // The same records under another header (written again: the shim's journals are of
    // format 2, whose records are not frames that could be spliced).
    let j = vramledger::journal::parse(std::path::Path::new("j.vlj"), journal).unwrap();
    let mut h = Header::default();
    h.push("pid", pid.to_string());
    h.push("ppid", "1");
    h.push("run_id", "r1");
    h.push("host", "testhost");
    h.push("cmdline", cmdline);
    h.push("start_unix_ns", "1700000000000000000");
    let mut w = MemJournal::new(&h);
    for e in &j.events {
        w.event(e);
    }
    w.finish(true)
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

/// Builds tests/clients/sglang_startup.c against the fake cudart (once per test binary).
fn sglang_startup_client() -> PathBuf {
    use std::sync::OnceLock;
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let c = support::clients();
        let exe = c.bin_dir.join("sglang_startup");
        support::compile_executable(
            &support::manifest_dir().join("tests/clients/sglang_startup.c"),
            &exe,
            &[c.bin_dir.join("libcudart.so.13"), PathBuf::from("-lm")],
            &c.driver_dir,
        );
        exe
    })
    .clone()
}

const TINY_LLAMA: &str = r#"{"architectures": ["LlamaForCausalLM"], "head_dim": 128, "hidden_size": 2048,
  "intermediate_size": 5632, "max_position_embeddings": 8192, "num_attention_heads": 16,
  "num_hidden_layers": 8, "num_key_value_heads": 8, "torch_dtype": "bfloat16", "vocab_size": 32000}"#;

/// Runs the SGLang-shaped startup under the shim and the fake driver in `dir` (the model folder
/// `models/tiny-llama` relative to it); returns (the run folder, the count the program sized).
fn record_sglang_startup(dir: &Path, mfs: &str, chunk: &str) -> (PathBuf, i64) {
    let _ = std::fs::remove_dir_all(dir);
    let model = dir.join("models/tiny-llama");
    std::fs::create_dir_all(&model).unwrap();
    std::fs::write(model.join("config.json"), TINY_LLAMA).unwrap();
    let run = dir.join("run");
    let shim = support::profile_dir().join("libvramledger.so");
    let c = support::clients();
    let mut cmd = support::command(
        &sglang_startup_client(),
        // The flags after the four the program reads are for the header's command line.
        &[
            "models/tiny-llama",
            mfs,
            "1536",
            chunk,
            "--api-key",
            "SECRET-ARG",
        ],
        &c.driver_dir,
        &[
            ("LD_PRELOAD", s(&shim)),
            ("VRAMLEDGER_OUT", s(&run)),
            ("FAKECUDA_MEM_BYTES", "25769803776"),
            ("VLLM_API_KEY", "SECRET-ENV"),
        ],
    );
    cmd.current_dir(dir);
    let out = support::run(cmd);
    assert!(out.success(), "{}", out.dump());
    let tokens = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("tokens "))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no token count\n{}", out.dump()));
    (run, tokens)
}

#[test]
fn a_run_with_its_recorded_server_args_needs_no_flag() {
    // The tap keeps the server_args line (about 10 KiB: two records) and the model folder it
    // names; `size RUN` then takes the logged fraction (not SGLang's default for the fake GPU)
    // and the logged folder's config.json, and reproduces the program's own count exactly.
    for chunk in ["1000000", "700"] {
        let dir = tmp(&format!("recorded-settings-{chunk}"));
        let (run, tokens) = record_sglang_startup(&dir, "0.87", chunk);
        let (rc, v) = size_json(&[s(&run)]);
        assert_eq!(rc, 0, "{v:#}");
        assert_eq!(v["mem_fraction_static"]["value"], 0.87);
        assert_eq!(v["mem_fraction_static"]["source"], "logged");
        let detail = v["mem_fraction_static"]["detail"].as_str().unwrap();
        assert!(detail.contains("server_args line recorded"), "{detail}");
        assert_ne!(v["defaults"]["mem_fraction_static"], 0.87);
        let config = dir.join("models/tiny-llama/config.json");
        assert_eq!(v["model"]["config"], s(&config));
        assert!(v["model"]["detail"]
            .as_str()
            .unwrap()
            .contains("logged model folder"));
        assert_eq!(v["settings"]["tp"]["source"], "logged");
        assert_eq!(v["cell_bytes"], 32768);
        assert_eq!(v["tokens"], tokens);
        assert_eq!(v["observed_tokens"], tokens);
        assert_eq!(v["tolerance_tokens"], 0);
        assert_eq!(v["reproduced"], true);
        // The secret never reached the journal; the record says it was there.
        let files = vramledger::journal::find(&run).unwrap();
        let all: Vec<u8> = files
            .iter()
            .flat_map(|f| std::fs::read(f).unwrap())
            .collect();
        let text = String::from_utf8_lossy(&all);
        assert!(!text.contains("SECRET"), "a secret reached the journal");
        assert!(text.contains("api_key='<redacted>'"));
        let j = vramledger::journal::read(&files[0]).unwrap();
        assert!(j
            .header
            .get("cmdline")
            .unwrap()
            .ends_with("--api-key\0<redacted>"));
        assert_eq!(j.header.get("env.VLLM_API_KEY"), Some("<redacted>"));
        // Text output names the source of each input.
        let (rc, out, _) = size(&[s(&run)]);
        assert_eq!(rc, 0);
        assert!(out.contains("mem_fraction_static 0.87 (logged: mem_fraction_static from the server_args line recorded"), "{out}");
    }
}

#[test]
fn the_recorded_line_outranks_the_command_line_and_flags_outrank_both() {
    let dir = tmp("recorded-vs-cmdline");
    let (run, _) = record_sglang_startup(&dir, "0.85", "1000000");
    let files = vramledger::journal::find(&run).unwrap();
    assert_eq!(files.len(), 1);
    let bytes = std::fs::read(&files[0]).unwrap();
    let cmd = [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/nowhere",
        "--mem-fraction-static",
        "0.5",
        "--page-size",
        "16",
    ]
    .join("\0");
    std::fs::write(&files[0], with_cmdline(&bytes, 77, &cmd)).unwrap();
    let (rc, v) = size_json(&[s(&run)]);
    assert_eq!(rc, 0, "{v:#}");
    // server_args printed mem_fraction_static and page_size: they win over the command line.
    assert_eq!(v["mem_fraction_static"]["value"], 0.85);
    assert!(v["mem_fraction_static"]["detail"]
        .as_str()
        .unwrap()
        .contains("server_args line recorded"));
    assert_eq!(v["settings"]["page_size"]["value"], 1);
    assert_eq!(v["reproduced"], true);
    let (rc, v) = size_json(&[s(&run), "--mem-fraction-static", "0.6", "--page-size", "4"]);
    assert_eq!(rc, 0);
    assert_eq!(v["mem_fraction_static"]["source"], "given");
    assert_eq!(v["settings"]["page_size"]["source"], "given");
    assert_eq!(v["reproduced"], false);
}

/// Writes `text` through `tap_writer` under the shim, `chunk` bytes per write(2); returns the
/// settings lines the journal holds and the stage names it entered.
fn tap_settings(name: &str, text: &str, chunk: usize) -> (Vec<Assembled>, Vec<String>) {
    use vramledger_format::{Api, Kind};
    let dir = tmp(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("in.log"), text).unwrap();
    let shim = support::profile_dir().join("libvramledger.so");
    let out = dir.join("run");
    let chunk = chunk.to_string();
    let r = support::clients().run(
        "tap_writer",
        &[s(&dir.join("in.log")), &chunk, "2"],
        &[("LD_PRELOAD", s(&shim)), ("VRAMLEDGER_OUT", s(&out))],
    );
    assert!(r.success(), "{}", r.dump());
    assert_eq!(r.stderr, text, "the program's output must be unchanged");
    let files = vramledger::journal::find(&out).unwrap();
    let j = vramledger::journal::read(&files[0]).unwrap();
    let mut a = Assembler::default();
    let mut lines = Vec::new();
    let mut stages = Vec::new();
    for e in &j.events {
        match e.kind() {
            Some(Kind::Warning) if e.api == Api::VramledgerSettings as u16 => {
                lines.extend(a.push(&e.text))
            }
            Some(Kind::Stage) => stages.push(e.text.lines().next().unwrap_or("").to_string()),
            _ => {}
        }
    }
    lines.extend(a.finish());
    (lines, stages)
}

use vramledger_engines::log::settings::{Assembled, Assembler, SettingsKind, MAX_LINE};

#[test]
fn long_settings_lines_are_kept_to_their_bound_and_say_when_cut() {
    let next = "[2025-06-01 10:00:01 TP0] Load weight begin. avail mem=12.00 GB\n";
    // 20 KiB (over the tap's 16 KiB bound for other partial lines) in 4 KiB writes: whole.
    let pad: String = (0..1500).map(|i| format!(", setting_{i:04}={i}")).collect();
    let line = format!(
        "[2025-06-01 10:00:00] server_args=ServerArgs(tp_size=2, max_total_tokens=4096{pad})"
    );
    assert!(line.len() > 16 * 1024 && line.len() < MAX_LINE);
    let (got, stages) = tap_settings("settings-20k", &format!("{line}\n{next}"), 4096);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].kind, SettingsKind::SglangServerArgs);
    assert_eq!(got[0].line, line);
    assert!(!got[0].cut && !got[0].incomplete);
    assert_eq!(stages.last().map(String::as_str), Some("weight_load"));
    // 80 KiB: the first 64 KiB, marked cut, less its last, partial word (the start of a token
    // would be too short for its shape to be told); the rest is dropped up to the line's end,
    // and the next line is still a stage boundary.
    let pad: String = (0..6000).map(|i| format!(", setting_{i:04}={i}")).collect();
    let line = format!("[2025-06-01 10:00:00] server_args=ServerArgs(tp_size=2{pad})");
    assert!(line.len() > MAX_LINE + 8192);
    let (got, stages) = tap_settings("settings-80k", &format!("{line}\n{next}"), 4096);
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].cut);
    let kept = got[0].line.len();
    assert!(kept <= MAX_LINE && kept > MAX_LINE - 32, "{kept}");
    assert!(line.starts_with(&got[0].line));
    assert!(
        got[0].line.ends_with([' ', ',', '=']),
        "cut at a word's end"
    );
    assert_eq!(stages.last().map(String::as_str), Some("weight_load"));
    // vLLM's two lines, in one write each.
    let vllm = "INFO 05-01 12:00:00 [api_utils.py:273] non-default args: {'model': '/m/x', 'api_key': 'abc', 'gpu_memory_utilization': 0.5}\n\
                (EngineCore_DP0 pid=9) INFO 05-01 12:00:01 [core.py:117] Initializing a V1 LLM engine (v0.26.0) with config: model='/m/x', max_seq_len=4096, tensor_parallel_size=1\n";
    let (got, _) = tap_settings("settings-vllm", vllm, 1 << 16);
    let kinds: Vec<SettingsKind> = got.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [
            SettingsKind::VllmNonDefaultArgs,
            SettingsKind::ModelPath,
            SettingsKind::VllmEngineConfig,
            SettingsKind::ModelPath
        ]
    );
    assert!(got[0].line.contains("'api_key': '<redacted>'"));
    assert_eq!(got[1].line, "/m/x");
}

#[test]
fn the_uncapped_h200_run_with_its_printed_server_args_as_a_record() {
    // The H200 journals predate settings records (their test above keeps its flag). Given the
    // line the program printed, as the tap now records it (appended to the main process's
    // journal), the run needs no flag: the logged 0.905, not the 0.906 SGLang's rule gives
    // NVML's total, and the observed count exactly, with no cap blamed.
    use vramledger_format::frame::{encode_frame, frame_len};
    use vramledger_format::{Api, Event, Kind};
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-sglang-uncapped");
    let dir = tmp("uncapped-with-record");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["pid716.vlj", "pid760.vlj", "pid761.vlj", "config.json"] {
        std::fs::copy(data.join(f), dir.join(f)).unwrap();
    }
    let printed = std::fs::read_to_string(data.join("program-output.txt")).unwrap();
    let line = printed
        .lines()
        .find(|l| l.contains("server_args="))
        .unwrap();
    let mut bytes = std::fs::read(dir.join("pid716.vlj")).unwrap();
    for part in vramledger_engines::log::settings::encode(SettingsKind::SglangServerArgs, line) {
        let e = Event {
            kind: Kind::Warning as u16,
            api: Api::VramledgerSettings as u16,
            device: -1,
            text: part,
            ..Event::default()
        };
        let payload = e.encode();
        let mut frame = vec![0u8; frame_len(payload.len())];
        encode_frame(Kind::Warning as u16, &payload, &mut frame);
        bytes.extend(frame);
    }
    std::fs::write(dir.join("pid716.vlj"), bytes).unwrap();
    let (rc, v) = size_json(&[s(&dir)]);
    assert_eq!(rc, 0, "{v:#}");
    assert_eq!(v["mem_fraction_static"]["value"], 0.905);
    assert_eq!(v["mem_fraction_static"]["source"], "logged");
    assert_eq!(v["defaults"]["mem_fraction_static"], 0.906);
    assert_eq!(v["tokens"], 8_174_965);
    assert_eq!(v["observed_tokens"], 8_174_965);
    assert_eq!(v["reproduced"], true);
    assert!(v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| !n.as_str().unwrap().contains("cap would explain")));
}

#[test]
fn ambiguous_layouts_never_contradict_what_the_log_reports() {
    // "Load weight end. type=" bounds the release at 0.5.5 or older: 0.4.6 and 0.5.5 both fit
    // the lines. For a multimodal model with a logged fraction they size differently (the 0.4.x
    // runner lowers 0.88 to 0.792). Whichever count the log reports picks the layout; with no
    // count, the newest is kept; the report says the layouts were ambiguous and shows both.
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sglang-reference/llama-vision.json");
    let head = "[2025-06-01 10:00:00] server_args=ServerArgs(model_path='/m/v', mem_fraction_static=0.88, tp_size=1, page_size=1, context_length=8192)\n\
                [2025-06-01 10:00:01 TP0] Load weight begin. avail mem=78.81 GB\n\
                [2025-06-01 10:00:04 TP0] Load weight end. type=LlavaForConditionalGeneration, dtype=torch.bfloat16, avail mem=63.72 GB, mem usage=15.09 GB.\n";
    let log = tmp("ambiguous-head.log");
    std::fs::write(&log, head).unwrap();
    let each: Vec<i64> = ["0.4.6", "0.5.5"]
        .iter()
        .map(|v| {
            let (rc, j) = size_json(&[
                "--log",
                s(&log),
                "--model-config",
                s(&config),
                "--sglang-version",
                v,
            ]);
            assert_eq!(rc, 0);
            j["tokens"].as_i64().unwrap()
        })
        .collect();
    assert!(
        (each[0] - each[1]).abs() > 1000,
        "the layouts must differ: {each:?}"
    );
    for (count, want) in [(each[0], "L1"), (each[1], "L2")] {
        let log = tmp(&format!("ambiguous-{want}.log"));
        std::fs::write(
            &log,
            format!("{head}[2025-06-01 10:00:04 TP0] KV Cache is allocated. #tokens: {count}, K size: 1.00 GB, V size: 1.00 GB\n"),
        )
        .unwrap();
        let (rc, v) = size_json(&["--log", s(&log), "--model-config", s(&config)]);
        assert_eq!(rc, 0, "{v:#}");
        assert_eq!(v["layout"]["label"], want, "{v:#}");
        assert_eq!(v["reproduced"], true);
        assert_eq!(v["layout"]["ambiguous"], true);
        let c = v["layout"]["candidates"].as_array().unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c.iter().filter(|c| c["chosen"] == true).count(), 1);
        assert!(c.iter().any(|c| c["reproduced"] == false));
    }
    // Nothing after the weights, and both fit: the newest, said to be a guess.
    let (rc, text, _) = size(&["--log", s(&log), "--model-config", s(&config)]);
    assert_eq!(rc, 0);
    assert!(text.contains("LAYOUT AMBIGUOUS"), "{text}");
    assert!(
        text.contains(&format!("L1 (0.4.6.post5): {} tokens", each[0])),
        "{text}"
    );
    assert!(
        text.contains(&format!("L2 (0.5.5): {} tokens [kept]", each[1])),
        "{text}"
    );
    assert!(text.contains("--sglang-version settles it"), "{text}");
    // A version settles it: one layout, nothing ambiguous.
    let (_, v) = size_json(&[
        "--log",
        s(&log),
        "--model-config",
        s(&config),
        "--sglang-version",
        "0.4.9",
    ]);
    assert_eq!(v["layout"]["ambiguous"], false);
    assert!(v["layout"]["candidates"].is_null());
}

#[test]
fn the_failed_gemma_startup_is_not_called_a_fit() {
    // SGLang issue 4895: Gemma-3-27B AWQ on a 4090, "Not enough memory". Its log ends after the
    // weights. 0.4.6's sizing fails there (the runner's 0.792 leaves a negative rest), 0.5.5's
    // would fit 2399 tokens; the lines allow both, so the failing one is kept, with both shown.
    let Some(l) = logs() else {
        return;
    };
    let log = l.join("sglang-gemma-3-27b-it-int4-awq-rtx4090-tp1-issue4895.log");
    let config = l.join("configs/google__gemma-3-27b-it.json");
    let (rc, v) = size_json(&[
        "--log",
        s(&log),
        "--model-config",
        s(&config),
        "--gpu-mem-mib",
        "24564",
    ]);
    assert_eq!(rc, 1, "{v:#}");
    assert_eq!(v["layout"]["label"], "L1");
    assert_eq!(v["layout"]["ambiguous"], true);
    assert_eq!(v["error"]["check"], "tokens_not_positive");
    let c = v["layout"]["candidates"].as_array().unwrap();
    let l2 = c.iter().find(|c| c["label"] == "L2").unwrap();
    assert_eq!(l2["tokens"], 2399);
    assert_eq!(l2["chosen"], false);
    let (rc, text, _) = size(&["--log", s(&log), "--model-config", s(&config)]);
    assert_eq!(rc, 1);
    assert!(
        text.contains("LAYOUT AMBIGUOUS") && text.contains("DOES NOT FIT"),
        "{text}"
    );
}

#[test]
fn post_capture_what_ifs_only_where_they_mean_something() {
    // Llama-3.1-8B on a 24 GB GPU: 22.40 GiB before the weights, 7.37 after, 1.46 after the
    // pool, 0.83 after the graph captures.
    let config = tmp("llama-8b-config.json");
    std::fs::write(
        &config,
        r#"{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32,
            "num_hidden_layers": 32, "num_key_value_heads": 8, "torch_dtype": "bfloat16",
            "max_position_embeddings": 131072}"#,
    )
    .unwrap();
    let lines = "[2025-01-23 19:34:55] server_args=ServerArgs(model_path='/m/llama', mem_fraction_static=0.88, tp_size=1, page_size=1, context_length=8192)\n\
                 [2025-01-23 19:35:00 TP0] Load weight begin. avail mem=22.40 GB\n\
                 [2025-01-23 19:35:10 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=7.37 GB, mem usage=15.03 GB.\n\
                 [2025-01-23 19:35:10 TP0] Memory pool end. avail mem=1.46 GB\n\
                 [2025-01-23 19:35:20 TP0] Capture cuda graph end. Time elapsed: 18.07 s. avail mem=0.83 GB\n";
    // A 0.4.x summary (no available_gpu_mem): not emulated, and the note says why.
    let old = tmp("post-capture-0.4.log");
    std::fs::write(&old, format!("{lines}[2025-01-23 19:35:27 TP0] max_total_num_tokens=38354, max_prefill_tokens=16384, max_running_requests=2049, context_len=8192\n")).unwrap();
    let (rc, v) = size_json(&[
        "--log",
        s(&old),
        "--model-config",
        s(&config),
        "--gpu-mem-mib",
        "24564",
    ]);
    assert_eq!(rc, 0, "{v:#}");
    assert_eq!(v["layout"]["label"], "L1");
    assert_eq!(v["what_if"]["post_capture"], serde_json::json!([]));
    assert!(v["notes"].as_array().unwrap().iter().any(|n| n
        .as_str()
        .unwrap()
        .contains("not emulated for a 0.4.x layout")));
    // 0.5.5: emulated, but 0.5.23 keeps more headroom than the free memory after capture:
    // said as "no room", not as a 2-token pool with 1 request.
    let newer = tmp("post-capture-0.5.log");
    std::fs::write(&newer, format!("{lines}[2025-01-23 19:35:27 TP0] max_total_num_tokens=38354, chunked_prefill_size=2048, max_prefill_tokens=16384, max_running_requests=2048, context_len=8192, available_gpu_mem=0.83 GB\n")).unwrap();
    let args = [
        "--log",
        s(&newer),
        "--model-config",
        s(&config),
        "--gpu-mem-mib",
        "24564",
        "--sglang-version",
        "0.5.5",
    ];
    let (rc, v) = size_json(&args);
    assert_eq!(rc, 0, "{v:#}");
    let pc = v["what_if"]["post_capture"].as_array().unwrap();
    assert!(!pc.is_empty());
    for p in pc {
        assert_eq!(p["no_room"], true);
        assert!(p["headroom_bytes"].as_i64() >= p["free_after_capture_bytes"].as_i64());
    }
    let (_, text, _) = size(&args);
    assert!(text.contains("it keeps: no room"), "{text}");
    assert!(!text.contains("max_running_requests 1\n"), "{text}");
}

#[test]
fn readme_sizing_examples_run_as_written() {
    // Every `vramledger size` line of README.md's sizing block, from the repository root.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = &readme[readme
        .find("## KV-cache sizing")
        .expect("the sizing section")..];
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block");
    let mut ran = 0;
    for line in block.lines() {
        let Some(rest) = line.strip_prefix("vramledger size ") else {
            continue;
        };
        let command = rest.split(" # ").next().unwrap().trim();
        let args: Vec<&str> = command.split_whitespace().collect();
        let out = Command::new(cli())
            .arg("size")
            .args(&args)
            .current_dir(&root)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "README: vramledger size {command}\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if args.contains(&"--json") {
            let v: Value = serde_json::from_str(&stdout).unwrap();
            assert_eq!(v["reproduced"], true, "README: {command}");
        } else if !args.contains(&"--pre-gib") {
            assert!(
                stdout.contains("): reproduced"),
                "README: {command}\n{stdout}"
            );
        }
        ran += 1;
    }
    assert_eq!(ran, 6, "the README's sizing examples");
}

#[test]
fn hybrid_mamba_log_is_refused_with_the_reason() {
    // granite-4.0-h-micro (PR 18040): hybrid Mamba2 + attention. The pool's size depends on the
    // per-request Mamba state, which config.json does not give: size says so (exit 2).
    let Some(l) = logs() else {
        return;
    };
    let config = tmp("granite-config.json");
    std::fs::write(
        &config,
        r#"{"architectures": ["GraniteMoeHybridForCausalLM"], "hidden_size": 2048,
            "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
            "torch_dtype": "bfloat16", "max_position_embeddings": 131072,
            "layer_types": ["mamba", "attention"], "mamba_n_heads": 64}"#,
    )
    .unwrap();
    let log = l.join("sglang-granite-4.0-h-micro-16gb-tp1-pr18040.log");
    let (rc, out, err) = size(&[
        "--log",
        s(&log),
        "--model-config",
        s(&config),
        "--gpu-mem-mib",
        "16384",
    ]);
    assert_eq!(rc, 2, "{out}");
    assert!(
        err.contains("hybrid Mamba") && err.contains("not modelled"),
        "{err}"
    );
}

#[test]
fn every_shared_log_is_reproduced_or_explained_somewhere() {
    // The real logs and the test that reproduces each (or explains why it cannot be): a new log
    // in ../shared/logs fails here until it has one.
    let Some(l) = logs() else {
        return;
    };
    let covered = [
        ("sglang-qwq-32b-l4-tp4-llmsinclouds.log", "real_sglang_logs_within_the_printed_tolerance: reproduced"),
        ("sglang-meta-llama-3.1-8b-instruct-80gb-tp1-docsquickstart.log", "real_sglang_logs_within_the_printed_tolerance: reproduced"),
        ("sglang-kimi-k2.5-mi355x-tp8-rocmtestlog.log", "real_sglang_logs_within_the_printed_tolerance: reproduced"),
        ("sglang-qwen2.5-0.5b-instruct-80gb-tp1-docsci-maxtotaltokens.log", "real_sglang_logs_within_the_printed_tolerance: reproduced (the cap)"),
        ("sglang-gemma-3-27b-it-int4-awq-rtx4090-tp1-issue4895.log", "the_failed_gemma_startup_is_not_called_a_fit: the failure reproduced"),
        ("sglang-llama-3.1-8b-instruct-24gb-tp1-dockerdesktop.log", "real_sglang_logs_failures_and_gaps_explained: not reproduced, the implied fraction is no layout's default"),
        ("sglang-deepseek-r1-mi300x-tp8-dp8-issue7691-negative.log", "real_sglang_logs_failures_and_gaps_explained: the negative profile explained by its implied fraction"),
        ("sglang-qwen2-7b-instruct-gpu-tp2-issue744-oldformat.log", "bad_input_is_exit_2_with_one_message: no free memory before the weights"),
        ("sglang-granite-4.0-h-micro-16gb-tp1-pr18040.log", "hybrid_mamba_log_is_refused_with_the_reason"),
        ("vllm-qwen2.5-1.5b-instruct-t4-tp1-colabgrpo.log", "real_vllm_logs: reproduced"),
        ("vllm-dots-ocr-wsl-consumer-tp1-dockerlog.log", "real_vllm_logs"),
        ("vllm-qwen2.5-vl-7b-instruct-awq-jetson-orin-agx-tp1-kvnegative.log", "real_vllm_logs: the failing startup reproduced"),
    ];
    let mut present: Vec<String> = std::fs::read_dir(&l)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    present.sort();
    let mut listed: Vec<String> = covered.iter().map(|(n, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(present, listed, "a real log without a sizing test");
}

#[test]
fn the_implied_fraction_interval_is_printed_with_its_width() {
    // The uncapped H200 run sized with NVML's capacity (0.906, not the program's 0.905): the
    // count implies a fraction interval one token wide (about 1e-7), which must print as two
    // different numbers around 0.905.
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-sglang-uncapped");
    let (rc, text, _) = size(&[s(&data)]);
    assert_eq!(rc, 0);
    let line = text
        .lines()
        .find(|l| l.contains("implies an effective fraction in ["))
        .unwrap_or_else(|| panic!("{text}"));
    let inner = line.rsplit('[').next().unwrap().trim_end_matches(')');
    let (lo, hi) = inner.split_once(", ").unwrap();
    let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
    assert!(lo < hi && lo <= 0.905 && 0.905 < hi, "{line}");
    assert!(hi - lo < 1e-6, "{line}");
    let (_, v) = size_json(&[s(&data)]);
    let implied = &v["implied_mem_fraction_static"];
    assert!(implied[0].as_f64().unwrap() >= lo && implied[1].as_f64().unwrap() <= hi);
}

#[test]
fn logged_prefill_graph_settings_are_used_for_the_defaults() {
    // SGLang's own values (tests/data/sglang-reference, 24576 MiB, TP 1, PP 2, Llama-style):
    // 0.5.12 with piecewise graphs off (its rule for PP > 1) 0.842, priced 0.828; 0.5.23 with
    // breakable prefill graphs off (its PP rule) 0.715, priced 0.699. A server_args line that
    // logged the resolved graphs wins over the rule.
    let config =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sglang-reference/llama.json");
    let cases = [
        ("0.5.12", "", 0.842),
        ("0.5.12", ", disable_piecewise_cuda_graph=True", 0.842),
        ("0.5.12", ", disable_piecewise_cuda_graph=False", 0.828),
        ("0.5.23", "", 0.715),
        (
            "0.5.23",
            ", cuda_graph_config=CudaGraphConfig(decode=PhaseConfig(backend='full', max_bs=None), prefill=PhaseConfig(backend='breakable', max_bs=None))",
            0.699,
        ),
        ("0.5.23", ", cuda_graph_backend_prefill='breakable'", 0.699),
    ];
    for (i, (version, extra, want)) in cases.iter().enumerate() {
        let log = tmp(&format!("logged-graphs-{i}.log"));
        std::fs::write(
            &log,
            format!(
                "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='/m', mem_fraction_static=0.8, tp_size=1, pp_size=2{extra}, page_size=1)\n\
                 [2026-01-01 00:00:01 PP1 TP0] Load weight begin. avail mem=23.30 GB\n\
                 [2026-01-01 00:00:02 PP1 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=15.00 GB, mem usage=8.30 GB.\n"
            ),
        )
        .unwrap();
        let (rc, v) = size_json(&[
            "--log",
            s(&log),
            "--model-config",
            s(&config),
            "--sglang-version",
            version,
            "--gpu-mem-mib",
            "24576",
            "--pp-min-tokens-from-other-stages",
            "100000000",
        ]);
        assert_eq!(rc, 0, "{v:#}");
        assert_eq!(
            v["defaults"]["mem_fraction_static"], *want,
            "{version}{extra}"
        );
    }
}
