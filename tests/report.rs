//! The books and `vramledger report` / `vramledger run`: synthetic journals with known
//! answers (worked out in the comments), truncated tails, multi-process runs, bad input.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::synth::{Synth, GIB, MIB};
use vramledger_format::Owner;

use support::cli;

fn dir(test: &str) -> PathBuf {
    support::fresh_dir("report", test)
}

fn report_json(path: &Path) -> (i32, Value, String) {
    let out = Command::new(cli())
        .args(["report", "--json"])
        .arg(path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v, stderr)
}

/// An SGLang-shaped process: context 512 MiB, weights 4 GiB (torch) + 64 MiB cuBLAS
/// workspace (direct), KV pool 8 GiB (torch), graphs 256 MiB (graph pool) + 32 MiB NCCL, and
/// 10 MiB that no hook saw during capture.
fn sglang_like(pid: u32, start_free: u64) -> Synth {
    let mut s = Synth::new(pid, "r1");
    s.module(1, "/x/libc10_cuda.so")
        .module(2, "/x/libcublas.so.13")
        .module(3, "/x/libnccl.so.2");
    s.context(start_free, 512 * MIB);
    let f0 = start_free - 512 * MIB;
    s.sample(f0);
    s.stage(
        "dist_init",
        Some("[2025-06-01 10:00:00 TP0] Init torch distributed begin."),
        f0,
    );
    s.stage(
        "weight_load",
        Some("[2025-06-01 10:00:01 TP0] Load weight begin. avail mem=15.50 GB"),
        f0,
    );
    s.alloc(0x1000_0000, 4 * GIB, Owner::Torch, 1)
        .alloc(0x9000_0000, 64 * MIB, Owner::Direct, 2);
    let f1 = f0 - 4 * GIB - 64 * MIB;
    s.stage(
        "kv_pool",
        Some("[2025-06-01 10:00:04 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=11.44 GB, mem usage=4.06 GB."),
        f1,
    );
    s.alloc(0x2_0000_0000, 8 * GIB, Owner::Torch, 1);
    let f2 = f1 - 8 * GIB;
    s.stage("graph_capture", Some("[2025-06-01 10:00:05 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=3.44 GB"), f2);
    s.alloc(0x4_0000_0000, 256 * MIB, Owner::TorchGraphPool, 1);
    s.vmm(77, 0x5_0000_0000, 32 * MIB, Owner::Nccl, 3);
    let f3 = f2 - 256 * MIB - 32 * MIB - 10 * MIB;
    s.stage(
        "post_capture",
        Some("[2025-06-01 10:00:20 TP0] Capture cuda graph end. Time elapsed: 15.21 s. mem usage=0.29 GB. avail mem=3.15 GB."),
        f3,
    );
    s.free(0x9000_0000);
    s.sample(f3 + 64 * MIB);
    s
}

#[test]
fn stage_by_owner_table_balances_to_the_byte() {
    let d = dir("books");
    sglang_like(101, 16 * GIB).write(&d.join("a.vlj"));
    let (rc, v, err) = report_json(&d);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(v["schema"], "vramledger.report/1");
    let dev = &v["processes"][0]["devices"][0];
    let stages: Vec<&str> = dev["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        [
            "startup",
            "dist_init",
            "weight_load",
            "kv_pool",
            "graph_capture",
            "post_capture"
        ]
    );
    let st = |name: &str| {
        dev["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    let b = |s: &Value, o: &str| s["by_owner"][o].as_i64().unwrap();
    // startup: free went from 16 GiB (NVML, before the context) to 16 GiB − 512 MiB: the context.
    let startup = st("startup");
    assert_eq!(startup["device_delta_bytes"], 512 * MIB);
    assert_eq!(b(&startup, "context"), (512 * MIB) as i64);
    assert_eq!(b(&startup, "unattributed"), 0);
    // weight_load: 4 GiB torch + 64 MiB cuBLAS; the engine's own figure sits beside it.
    let w = st("weight_load");
    assert_eq!(w["device_delta_bytes"], 4 * GIB + 64 * MIB);
    assert_eq!(
        (b(&w, "torch"), b(&w, "direct")),
        ((4 * GIB) as i64, (64 * MIB) as i64)
    );
    assert_eq!(w["engine"]["mem_usage_gib"], 4.06);
    assert_eq!(w["engine"]["event"], "load_weight_end");
    assert_eq!(w["engine"]["avail_mem_gib"], 15.5);
    assert_eq!(st("kv_pool")["by_owner"]["torch"], 8 * GIB);
    // graph capture: 256 MiB graph pool, 32 MiB NCCL, and 10 MiB nobody hooked.
    let g = st("graph_capture");
    assert_eq!(g["device_delta_bytes"], 298 * MIB);
    assert_eq!(
        (
            b(&g, "torch_graph_pool"),
            b(&g, "nccl"),
            b(&g, "unattributed")
        ),
        ((256 * MIB) as i64, (32 * MIB) as i64, (10 * MIB) as i64)
    );
    // post_capture: the cuBLAS workspace is freed.
    let p = st("post_capture");
    assert_eq!(
        (p["device_delta_bytes"].as_i64(), b(&p, "direct")),
        (Some(-((64 * MIB) as i64)), -((64 * MIB) as i64))
    );
    // Balance: 16 GiB = Σ deltas + end free.
    let r = &dev["reconciliation"];
    assert_eq!(r["start_free_bytes"], 16 * GIB);
    let end = 16 * GIB - 512 * MIB - 4 * GIB - 8 * GIB - 298 * MIB;
    assert_eq!(r["end_free_bytes"], end);
    assert_eq!(r["sum_stage_deltas_bytes"], 16 * GIB - end);
    assert_eq!(r["unattributed_bytes"], 10 * MIB);
    assert_eq!(r["balanced"], true);
    // Live at end and peaks.
    let live = &dev["live_at_end"]["by_owner"];
    assert_eq!(
        (live["torch"].as_u64(), live["direct"].as_u64()),
        (Some(12 * GIB), Some(0))
    );
    assert_eq!(dev["peak"]["by_owner"]["direct"]["bytes"], 64 * MIB);
    assert_eq!(dev["peak"]["by_owner"]["direct"]["stage"], "weight_load");
    assert_eq!(
        dev["peak"]["total"]["bytes"],
        512 * MIB + 12 * GIB + 64 * MIB + 288 * MIB
    );
    let modules: Vec<&str> = dev["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["module"].as_str().unwrap())
        .collect();
    assert_eq!(
        modules,
        ["libc10_cuda.so", "libcublas.so.13", "libnccl.so.2"]
    );
    // Every owner key is there, and only those.
    let kv = st("kv_pool");
    let keys: Vec<&String> = kv["by_owner"].as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 7);
}

#[test]
fn text_report_shows_units_and_the_balance() {
    let d = dir("text");
    sglang_like(102, 16 * GIB).write(&d.join("a.vlj"));
    let out = Command::new(cli()).arg("report").arg(&d).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("device 0 (GiB;"), "{text}");
    assert!(text.contains("[balanced]"), "{text}");
    assert!(text.contains("mem usage=4.06 GB"), "{text}");
    let bytes = Command::new(cli())
        .args(["report", "--bytes"])
        .arg(&d)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&bytes.stdout).contains(&format!("{}", 8 * GIB)));
}

#[test]
fn ranks_across_processes_and_the_imbalance_rule() {
    let d = dir("ranks");
    // Rank 1 starts with 2 GiB less free memory (another process shares its GPU): 12.98 GiB
    // vs 14.98 GiB after init, and 12.98 < 0.9 × 14.98 on rank 0.
    let text0 = "[2025-06-01 10:00:00 TP0] Init torch distributed begin.";
    let text1 = "[2025-06-01 10:00:00 TP1] Init torch distributed begin.";
    for (pid, free, line, name) in [
        (201u32, 16 * GIB, text0, "r0.vlj"),
        (202, 14 * GIB, text1, "r1.vlj"),
    ] {
        let mut s = Synth::new(pid, "r1");
        s.context(free, GIB);
        s.stage("dist_init", Some(line), free - GIB);
        s.stage("weight_load", None, free - GIB);
        s.write(&d.join(name));
    }
    let (rc, v, err) = report_json(&d);
    assert_eq!(rc, 0, "{err}");
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(
        procs.iter().map(|p| p["rank"].as_u64()).collect::<Vec<_>>(),
        [Some(0), Some(1)]
    );
    let cr = v["cross_rank"]["stages"].as_array().unwrap();
    let dist = cr.iter().find(|s| s["name"] == "dist_init").unwrap();
    assert_eq!(dist["min_free_bytes"], 13 * GIB);
    let flags: Vec<bool> = dist["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["unbalanced"].as_bool().unwrap())
        .collect();
    assert_eq!(flags, [true, false]);
}

#[test]
fn kill_9_tails_and_corrupt_journals() {
    let d = dir("tails");
    let s = sglang_like(301, 16 * GIB);
    // A zero tail (the writer grows files in chunks) is normal: exit 0, no warning.
    let mut zero_tail = s.bytes.clone();
    zero_tail.extend(vec![0u8; 4096]);
    std::fs::write(d.join("ok.vlj"), &zero_tail).unwrap();
    let (rc, v, err) = report_json(&d.join("ok.vlj"));
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        v["processes"][0]["devices"][0]["reconciliation"]["balanced"],
        true
    );

    // Cut in the middle of the last record: what precedes is reported, exit 2 with a warning.
    let cut = &s.bytes[..s.bytes.len() - 30];
    std::fs::write(d.join("cut.vlj"), cut).unwrap();
    let (rc, v, err) = report_json(&d.join("cut.vlj"));
    assert_eq!(rc, 2);
    assert!(err.contains("cut off"), "{err}");
    assert_eq!(
        v["processes"][0]["devices"][0]["stages"]
            .as_array()
            .unwrap()
            .len(),
        6
    );

    // Garbage in the middle: skipped with a warning, the rest still read.
    let mut bad = s.bytes.clone();
    let mid = bad.len() / 2;
    bad[mid..mid + 16].fill(0xAB);
    std::fs::write(d.join("bad.vlj"), &bad).unwrap();
    let (rc, v, err) = report_json(&d.join("bad.vlj"));
    assert_eq!(rc, 2);
    assert!(err.contains("corrupt"), "{err}");
    assert!(!v["processes"].as_array().unwrap().is_empty());
}

#[test]
fn bad_input_is_one_message_and_exit_2() {
    let d = dir("bad");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["report".into(), d.join("missing").display().to_string()],
            "cannot read",
        ),
        (
            vec!["report".into(), d.display().to_string()],
            "no journals",
        ),
        (
            vec![
                "report".into(),
                "--frobnicate".into(),
                d.display().to_string(),
            ],
            "unexpected argument",
        ),
        (
            vec!["dump".into(), d.join("missing.vlj").display().to_string()],
            "cannot read",
        ),
    ];
    for (args, expected) in cases {
        let out = Command::new(cli()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    std::fs::write(d.join("notes.vlj"), "just some text, not a journal").unwrap();
    let mut newer = Synth::new(1, "r").bytes;
    newer[8] = 7;
    std::fs::write(d.join("newer.vlj"), newer).unwrap();
    for (name, expected) in [
        ("notes.vlj", "is not a vramledger journal"),
        ("newer.vlj", "newer vramledger"),
    ] {
        let out = Command::new(cli())
            .args(["report"])
            .arg(d.join(name))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains(expected));
    }
}

#[test]
fn run_passes_the_exit_code_through_and_follows_children() {
    let d = dir("run");
    let out = Command::new(cli())
        .args(["run", "--out"])
        .arg(&d)
        .args(["--", "sh", "-c", "exit 7"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A parent that spawns two children: each child that prints a stage line writes its own
    // journal, under the same run id, and the report has one section per process.
    let lines = d.join("lines.txt");
    std::fs::write(
        &lines,
        "[2025-06-01 10:00:00 TP0] Init torch distributed begin.\n",
    )
    .unwrap();
    let script = format!("cat {0} & cat {0} & wait", lines.display());
    let out = Command::new(cli())
        .args(["run", "--json", "--out"])
        .arg(&d)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // stdout is the JSON alone (the program's output went to stderr).
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2, "{stdout}");
    let run_ids: std::collections::BTreeSet<&str> = procs
        .iter()
        .map(|p| p["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(run_ids.len(), 1);
}

#[test]
fn owner_names_are_the_documented_ones() {
    let names: Vec<&str> = vramledger::ledger::REPORT_OWNERS
        .iter()
        .map(|o| o.name())
        .collect();
    assert_eq!(
        names,
        [
            "torch",
            "torch_graph_pool",
            "nccl",
            "direct",
            "vmm",
            "context",
            "unattributed"
        ]
    );
    assert_eq!(Owner::Unattributed.name(), "unattributed");
}
