//! `vramledger diff` and `vramledger check` on synthetic runs with known answers: two runs that
//! differ in CUDA-graph pool bytes (256 MiB vs 512 MiB) and in one extra module; budgets;
//! and every kind of bad input (one message, exit 2).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use support::synth::{Synth, GIB, MIB};
use vramledger_format::Owner;

use support::cli;

fn dir(test: &str) -> PathBuf {
    support::fresh_dir("diffcheck", test)
}

/// An SGLang-shaped rank (as in tests/report.rs): context 512 MiB, weights 4 GiB, KV 8 GiB,
/// graph capture `graph` bytes of graph pool + 32 MiB NCCL + 10 MiB unhooked. With `extra`,
/// a 16 MiB allocation by libextra.so after capture.
fn rank(pid: u32, tp: u32, graph: u64, extra: bool) -> Synth {
    let start_free = 16 * GIB;
    let mut s = Synth::new(pid, "r1");
    s.module(1, "/x/libc10_cuda.so")
        .module(2, "/x/libcublas.so.13")
        .module(3, "/x/libnccl.so.2")
        .module(4, "/x/libextra.so");
    s.context(start_free, 512 * MIB);
    let f0 = start_free - 512 * MIB;
    s.sample(f0);
    let line = |t: &str| format!("[2025-06-01 10:00:00 TP{tp}] {t}");
    s.stage(
        "dist_init",
        Some(&line("Init torch distributed begin.")),
        f0,
    );
    s.stage(
        "weight_load",
        Some(&line("Load weight begin. avail mem=15.50 GB")),
        f0,
    );
    s.alloc(0x1000_0000, 4 * GIB, Owner::Torch, 1);
    let f1 = f0 - 4 * GIB;
    s.stage("kv_pool", Some(&line("Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=11.50 GB, mem usage=4.00 GB.")), f1);
    s.alloc(0x2_0000_0000, 8 * GIB, Owner::Torch, 1);
    let f2 = f1 - 8 * GIB;
    s.stage(
        "graph_capture",
        Some(&line(
            "Capture cuda graph begin. This can take up to several minutes. avail mem=3.50 GB",
        )),
        f2,
    );
    s.alloc(0x4_0000_0000, graph, Owner::TorchGraphPool, 1);
    s.vmm(77, 0x5_0000_0000, 32 * MIB, Owner::Nccl, 3);
    let f3 = f2 - graph - 32 * MIB - 10 * MIB;
    s.stage("post_capture", None, f3);
    if extra {
        s.alloc(0x6_0000_0000, 16 * MIB, Owner::Direct, 4);
        s.sample(f3 - 16 * MIB);
    }
    s
}

/// A run folder of two ranks.
fn run(d: &Path, name: &str, graph: u64, extra: bool) -> PathBuf {
    let out = d.join(name);
    std::fs::create_dir_all(&out).unwrap();
    rank(100, 0, graph, extra).write(&out.join("r0.vlj"));
    rank(101, 1, graph, extra).write(&out.join("r1.vlj"));
    out
}

fn vl(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    let mut c = Command::new(cli());
    for a in args {
        c.arg(a);
    }
    c.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The exit code, stdout and stderr.
fn run_cli(args: &[&dyn AsRef<std::ffi::OsStr>]) -> (i32, String, String) {
    let o = vl(args);
    (
        o.status.code().unwrap_or(-1),
        text(&o.stdout),
        text(&o.stderr),
    )
}

#[test]
fn diff_puts_the_graph_pool_change_first() {
    let d = dir("diff");
    let a = run(&d, "a", 256 * MIB, false);
    let b = run(&d, "b", 512 * MIB, true);
    let (rc, out, err) = run_cli(&[&"diff", &a, &b]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.contains("matched: rank 0 (pid 100 → 100), rank 1 (pid 101 → 101)"),
        "{out}"
    );
    // The first figure line: +256 MiB of graph pool in graph_capture, rank 0.
    let first = out
        .lines()
        .skip_while(|l| !l.starts_with("stage × owner × device"))
        .nth(1)
        .unwrap();
    assert!(first.contains("+256.0 MiB"), "{out}");
    assert!(first.contains("rank 0 dev 0"), "{first}");
    assert!(first.contains("graph_capture"), "{first}");
    assert!(first.contains("torch_graph_pool"), "{first}");
    assert!(first.contains("256.0 MiB → 512.0 MiB"), "{first}");
    assert!(
        out.contains("appeared  libextra.so [direct] peak 16.0 MiB"),
        "{out}"
    );
    assert!(
        out.contains("peak 12.781 GiB in graph_capture → 13.047 GiB in post_capture"),
        "{out}"
    );
    // --bytes: exact figures.
    let (_, out, _) = run_cli(&[&"diff", &"--bytes", &a, &b]);
    assert!(out.contains(&format!("+{} B", 256 * MIB)), "{out}");

    // JSON: schema, the same first figure, live and peak changes, modules.
    let (rc, out, err) = run_cli(&[&"diff", &"--json", &a, &b]);
    assert_eq!(rc, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "vramledger.diff/1");
    assert_eq!(v["a"]["kind"], "journals");
    let f = &v["figures"][0];
    assert_eq!(
        (
            f["owner"].as_str(),
            f["stage"].as_str(),
            f["change_bytes"].as_u64()
        ),
        (
            Some("torch_graph_pool"),
            Some("graph_capture"),
            Some(256 * MIB)
        )
    );
    let figures = v["figures"].as_array().unwrap();
    // Per rank: graph pool +256 MiB in graph_capture (the free samples moved with it, so
    // unattributed is unchanged) and libextra's 16 MiB (direct) in post_capture; nothing else.
    let of = |owner: &str, stage: &str, process: &str| {
        figures
            .iter()
            .find(|f| f["owner"] == owner && f["stage"] == stage && f["process"] == process)
            .map(|f| f["change_bytes"].as_i64().unwrap())
    };
    for p in ["rank 0", "rank 1"] {
        assert_eq!(
            of("torch_graph_pool", "graph_capture", p),
            Some((256 * MIB) as i64)
        );
        assert_eq!(of("direct", "post_capture", p), Some((16 * MIB) as i64));
        assert_eq!(
            of("torch", "kv_pool", p),
            None,
            "unchanged figures are left out"
        );
    }
    assert_eq!(figures.len(), 4, "{figures:#?}");
    let dev = &v["devices"][0];
    assert_eq!(
        dev["live_at_end"]["by_owner"]["torch_graph_pool"]["change"],
        256 * MIB
    );
    assert_eq!(dev["live_at_end"]["total_bytes"]["change"], 272 * MIB);
    assert_eq!(dev["peak"]["total"]["change"], 272 * MIB);
    assert_eq!(dev["peak"]["total"]["b"]["stage"], "post_capture");
    let modules = dev["modules"].as_array().unwrap();
    assert!(modules
        .iter()
        .any(|m| m["module"] == "libextra.so" && m["in"] == "b"));
    assert!(modules
        .iter()
        .any(|m| m["module"] == "libc10_cuda.so" && m["peak_bytes"]["change"] == 256 * MIB));
    let stages = v["stages"].as_array().unwrap();
    assert!(stages.iter().all(|s| s["in"] == "both"));
    assert!(stages.iter().all(|s| s["duration_ns"]["a"].is_u64()));
    let gc = stages
        .iter()
        .find(|s| s["stage"] == "graph_capture")
        .unwrap();
    assert_eq!(gc["device_delta_bytes"]["change"], 256 * MIB);

    // A report JSON reads as the run it came from.
    let (rc, report, _) = run_cli(&[&"report", &"--json", &a]);
    assert_eq!(rc, 0);
    let a_json = d.join("a.json");
    std::fs::write(&a_json, report).unwrap();
    let (rc, out2, err) = run_cli(&[&"diff", &"--json", &a_json, &b]);
    assert_eq!(rc, 0, "{err}");
    let v2: Value = serde_json::from_str(&out2).unwrap();
    assert_eq!(v2["a"]["kind"], "report");
    assert_eq!(v2["figures"], v["figures"]);
    assert_eq!(v2["devices"], v["devices"]);
    // A run against itself: nothing changed.
    let (rc, out, _) = run_cli(&[&"diff", &a_json, &a]);
    assert_eq!(rc, 0);
    assert!(out.contains("no figure changed"), "{out}");
}

#[test]
fn check_fails_on_graph_pool_drift_and_passes_within_tolerance() {
    let d = dir("check");
    let a = run(&d, "a", 256 * MIB, false);
    let b = run(&d, "b", 512 * MIB, false);
    // Default tolerance 64 MiB: +256 MiB of graph pool is drift, on both ranks.
    let (rc, out, err) = run_cli(&[&"check", &"--baseline", &a, &b]);
    assert_eq!(rc, 1, "{out}{err}");
    assert!(out.starts_with("DRIFT: 2 of 84 figures"), "{out}");
    assert!(
        out.contains("moved by more than 64.0 MiB from the baseline"),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.contains("torch_graph_pool"))
        .expect("the figure is named");
    assert!(line.contains("+256.0 MiB"), "{line}");
    assert!(
        line.contains("rank 0 dev 0 stage graph_capture owner torch_graph_pool"),
        "{line}"
    );
    assert!(
        line.contains("256.0 MiB → 512.0 MiB (+100.0%; allowed ±64.0 MiB)"),
        "{line}"
    );
    assert!(
        out.contains("rank 1 dev 0 stage graph_capture owner torch_graph_pool"),
        "{out}"
    );
    // A large enough tolerance passes.
    for ok in ["300MiB", "0.5GiB", "100%", "268435456"] {
        let (rc, out, err) = run_cli(&[&"check", &"--baseline", &a, &b, &"--tolerance", &ok]);
        assert_eq!(rc, 0, "{ok}: {out}{err}");
        assert!(out.starts_with("ok: "), "{out}");
    }
    for drift in ["2%", "255MiB", "99%"] {
        let (rc, out, _) = run_cli(&[&"check", &"--baseline", &a, &b, &"--tolerance", &drift]);
        assert_eq!(rc, 1, "{drift}: {out}");
    }
    // Two tolerances: drift only beyond both.
    let (rc, out, _) = run_cli(&[
        &"check",
        &"--baseline",
        &a,
        &b,
        &"--tolerance",
        &"2%",
        &"--tolerance",
        &"300MiB",
    ]);
    assert_eq!(rc, 0, "{out}");
    // The baseline may be a report JSON; a run against itself never drifts.
    let (_, report, _) = run_cli(&[&"report", &"--json", &a]);
    let base = d.join("baseline-report.json");
    std::fs::write(&base, report).unwrap();
    let (rc, out, _) = run_cli(&[&"check", &"--baseline", &base, &b]);
    assert_eq!(rc, 1, "{out}");
    let (rc, out, _) = run_cli(&[&"check", &"--baseline", &base, &a, &"--tolerance", &"0"]);
    assert_eq!(rc, 0, "{out}");
}

#[test]
fn budgets_pass_and_fail() {
    let d = dir("budgets");
    let a = run(&d, "a", 256 * MIB, false);
    let b = run(&d, "b", 512 * MIB, false);
    let budgets = d.join("budgets.json");
    std::fs::write(
        &budgets,
        r#"{"budgets": [
            {"owner": "nccl", "max": "1.5GiB"},
            {"stage": "graph_capture", "max": "2GiB"},
            {"owner": "torch_graph_pool", "stage": "graph_capture", "max": "300MiB", "device": 0},
            {"peak": true, "max": "130GiB"},
            {"live": true, "owner": "torch", "max": "12GiB", "rank": 1, "note": "weights + KV"}
        ]}"#,
    )
    .unwrap();
    // Without a baseline: only the budgets.
    let (rc, out, err) = run_cli(&[&"check", &"--budgets", &budgets, &a]);
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains("ok: 5 budgets met"), "{out}");
    let (rc, out, _) = run_cli(&[&"check", &"--budgets", &budgets, &b]);
    assert_eq!(rc, 1, "{out}");
    assert!(
        out.starts_with("BUDGET EXCEEDED: 2 figures over budget"),
        "{out}"
    );
    assert!(out.contains("budget #3"), "{out}");
    assert!(
        out.contains("rank 0 dev 0 stage graph_capture: torch_graph_pool in stage graph_capture is 512.0 MiB > max 300.0 MiB (over by 212.0 MiB)"),
        "{out}"
    );
    assert!(!out.contains("budget #1"), "{out}");
    // With a baseline too: both verdicts, and a wide tolerance does not hide the budget.
    let (rc, out, _) = run_cli(&[
        &"check",
        &"--baseline",
        &a,
        &b,
        &"--tolerance",
        &"1GiB",
        &"--budgets",
        &budgets,
    ]);
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains("ok: 84 figures"), "{out}");
    assert!(out.contains("BUDGET EXCEEDED"), "{out}");
    // A budget that matches nothing is a note, not a failure.
    std::fs::write(&budgets, r#"{"budgets": [{"stage": "warmup", "max": 0}]}"#).unwrap();
    let (rc, out, _) = run_cli(&[&"check", &"--budgets", &budgets, &a]);
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("note: budget #1"), "{out}");
}

#[test]
fn bad_input_is_one_message_and_exit_2() {
    let d = dir("bad");
    let a = run(&d, "a", 256 * MIB, false);
    let snapshot = d.join("snap.json");
    std::fs::write(
        &snapshot,
        r#"{"schema": "vramledger.snapshot/1", "allocations": []}"#,
    )
    .unwrap();
    let plain = d.join("plain.json");
    std::fs::write(&plain, r#"{"processes": []}"#).unwrap();
    let notes = d.join("notes.txt");
    std::fs::write(&notes, "not a journal at all\n").unwrap();
    let budgets = |name: &str, text: &str| {
        let p = d.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let unknown_owner = budgets(
        "owner.json",
        r#"{"budgets": [{"owner": "ncl", "max": "1GiB"}]}"#,
    );
    let bad_size = budgets(
        "size.json",
        r#"{"budgets": [{"owner": "nccl", "max": "1.5 GB"}]}"#,
    );
    let unknown_key = budgets(
        "key.json",
        r#"{"budgets": [{"owner": "nccl", "maximum": "1GiB"}]}"#,
    );
    let missing = d.join("missing");
    let s = |p: &PathBuf| p.display().to_string();
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            vec!["diff".into(), s(&a), s(&missing)],
            vec!["cannot read", "missing"],
        ),
        (
            vec!["check".into(), "--baseline".into(), s(&missing), s(&a)],
            vec!["cannot read"],
        ),
        (
            vec!["diff".into(), s(&snapshot), s(&a)],
            vec!["snap.json is a vramledger.snapshot/1 file, not a vramledger report"],
        ),
        (
            vec!["check".into(), "--baseline".into(), s(&a), s(&snapshot)],
            vec!["is a vramledger.snapshot/1 file, not a vramledger report"],
        ),
        (
            vec!["diff".into(), s(&plain), s(&a)],
            vec!["without a \"schema\" field"],
        ),
        (
            vec!["diff".into(), s(&notes), s(&a)],
            vec!["is not a vramledger journal"],
        ),
        (
            vec![
                "check".into(),
                "--baseline".into(),
                s(&a),
                s(&a),
                "--tolerance".into(),
                "64 MB?".into(),
            ],
            vec![
                "'64 MB?'",
                "unknown unit",
                "64MiB, 1.5GiB, 512KiB, 100MB (decimal), 12345 (bytes)",
                "2%",
            ],
        ),
        (
            vec![
                "check".into(),
                "--baseline".into(),
                s(&a),
                s(&a),
                "--tolerance".into(),
                "-5%".into(),
            ],
            vec!["'-5%'", "negative", "accepted forms"],
        ),
        (
            vec!["check".into(), "--budgets".into(), s(&unknown_owner), s(&a)],
            vec!["budget #1", "unknown owner \"ncl\"", "torch_graph_pool"],
        ),
        (
            vec!["check".into(), "--budgets".into(), s(&bad_size), s(&a)],
            vec!["budget #1", "bad size \"1.5 GB\"", "accepted forms"],
        ),
        (
            vec!["check".into(), "--budgets".into(), s(&unknown_key), s(&a)],
            vec!["budget #1", "unknown key \"maximum\""],
        ),
        (
            vec!["check".into(), "--budgets".into(), s(&missing), s(&a)],
            vec!["cannot read"],
        ),
        (
            vec!["check".into(), s(&a)],
            vec!["--baseline BASE", "--budgets FILE"],
        ),
        (vec!["diff".into(), s(&a)], vec!["<B>"]),
    ];
    for (args, expected) in cases {
        let out = Command::new(cli()).args(&args).output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        for e in expected {
            assert!(err.contains(e), "{args:?}: expected {e:?} in {err}");
        }
        let messages = err
            .lines()
            .filter(|l| l.starts_with("vramledger:") || l.starts_with("error:"))
            .count();
        assert_eq!(messages, 1, "{args:?}: one message, got {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}

#[test]
fn tolerance_parser_accepts_the_documented_forms() {
    use vramledger::size_arg::{parse_size, parse_tolerance, Tolerance};
    assert_eq!(parse_tolerance("64MiB"), Ok(Tolerance::Bytes(64 * MIB)));
    assert_eq!(parse_tolerance("1.5GiB"), Ok(Tolerance::Bytes(3 * GIB / 2)));
    assert_eq!(parse_tolerance("512KiB"), Ok(Tolerance::Bytes(512 << 10)));
    assert_eq!(parse_tolerance("100MB"), Ok(Tolerance::Bytes(100_000_000)));
    assert_eq!(parse_tolerance("12345"), Ok(Tolerance::Bytes(12345)));
    assert_eq!(parse_tolerance("2%"), Ok(Tolerance::Percent(2.0)));
    for bad in ["64 MB?", "-5%", "", "5x", "1.5", "%", "GiB"] {
        let e = parse_tolerance(bad).unwrap_err().to_string();
        assert!(e.contains("accepted forms: 64MiB"), "{bad:?}: {e}");
    }
    assert!(parse_size("2%").is_err());
}
