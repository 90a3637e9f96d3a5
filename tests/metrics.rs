//! `vramledger metrics`: the exposition parsed by the reference parsers (Python's
//! prometheus_client, both formats), linted by `promtool check metrics`, and compared to the
//! byte with `vramledger report --json` on the journals recorded on the H200; labels checked
//! on synthetic journals (cardinality, secrets, GPU join labels, OOM counter).

mod metrics_support;
mod support;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use metrics_support::{
    assert_matches_report, data, parse, report_json, scratch, skip, text, tool, value, vramledger,
    Sample,
};
use support::synth::{Synth, GIB, MIB};
use vramledger_format::frame::{decode_frame, encode_frame, frame_len};
use vramledger_format::{preamble, Api, Event, Header, Kind, MemKind, Owner, PREAMBLE_LEN};

const RECORDED: &[&str] = &[
    "h200-sglang-shape",
    "h200-sglang-uncapped",
    "h200-graph-bs/a",
    "h200-graph-bs/b",
];

fn metrics(path: &Path, openmetrics: bool) -> String {
    let mut args = vec!["metrics", path.to_str().unwrap()];
    if openmetrics {
        args.push("--openmetrics");
    }
    let out = vramledger(&args);
    assert!(
        out.status.success(),
        "metrics failed: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn recorded_runs_parse_in_both_formats_and_match_the_report() {
    let mut compared = 0;
    for run in RECORDED {
        let dir = data(run);
        let report = report_json(&dir);
        let prom = metrics(&dir, false);
        let om = metrics(&dir, true);
        assert!(om.ends_with("# EOF\n"), "OpenMetrics ends with # EOF");
        let Some(a) = parse("metrics::recorded", &prom, false) else {
            return;
        };
        let Some(b) = parse("metrics::recorded", &om, true) else {
            return;
        };
        compared += assert_matches_report(&a, &report);
        assert_eq!(
            assert_matches_report(&b, &report),
            assert_matches_report(&a, &report)
        );
        // The same series in both formats; OpenMetrics declares units and real info/counter types.
        let names = |s: &[Sample]| {
            s.iter()
                .map(|x| (x.name.clone(), format!("{:?}", x.labels), x.value.to_bits()))
                .collect::<BTreeSet<_>>()
        };
        let (na, nb) = (names(&a), names(&b));
        let lag = |n: &(String, String, u64)| n.0 == "vramledger_journal_lag_seconds";
        assert_eq!(
            na.iter().filter(|n| !lag(n)).collect::<Vec<_>>(),
            nb.iter().filter(|n| !lag(n)).collect::<Vec<_>>(),
            "{run}: the formats differ"
        );
        let fam = |name: &str| b.iter().find(|s| s.family == name).unwrap();
        assert_eq!(fam("vramledger_live_bytes").unit, "bytes");
        assert_eq!(fam("vramledger_oom").kind, "counter");
        assert_eq!(fam("vramledger_process").kind, "info");
        assert_eq!(fam("vramledger_current_stage").kind, "info");
        // Join labels: CUDA_VISIBLE_DEVICES was unset, so the ordinal is the GPU index.
        for s in a.iter().filter(|s| s.name == "vramledger_live_bytes") {
            assert_eq!(s.labels.get("gpu"), s.labels.get("device"), "{s:?}");
        }
    }
    // 2 ranks x 1 device x (6 owners x 2 + 3 + ~8 stages x 8 + current stage) per run.
    assert!(compared > 4 * 2 * 60, "only {compared} figures compared");
}

#[test]
fn promtool_finds_nothing_to_lint() {
    let Some(promtool) = tool("promtool") else {
        skip(
            "metrics::promtool",
            "promtool is not installed (Debian's prometheus package)",
        );
        return;
    };
    for run in RECORDED {
        let exposition = metrics(&data(run), false);
        let mut child = Command::new(&promtool)
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(exposition.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(
            out.status.success() && said.trim().is_empty(),
            "promtool on {run}: {said}"
        );
    }
}

/// `synth`'s journal with another header.
fn with_header(s: &Synth, pairs: &[(&str, &str)]) -> Vec<u8> {
    let (_, _, used) = decode_frame(&s.bytes[PREAMBLE_LEN..]).unwrap();
    let mut h = Header::default();
    for (k, v) in pairs {
        h.push(*k, *v);
    }
    let payload = h.encode();
    let mut frame = vec![0u8; frame_len(payload.len())];
    encode_frame(Kind::Header as u16, &payload, &mut frame);
    let mut out = preamble().to_vec();
    out.extend(frame);
    out.extend_from_slice(&s.bytes[PREAMBLE_LEN + used..]);
    out
}

fn failed(dev: i32, result: i32, mem: MemKind, t: u64) -> Event {
    Event {
        kind: Kind::AllocFailed as u16,
        api: Api::cuMemAlloc_v2 as u16,
        t_ns: t,
        device: dev,
        result,
        size: 1 << 40,
        mem: mem as u8,
        ..Event::default()
    }
}

fn alloc_on(dev: i32, addr: u64, size: u64, t: u64) -> Event {
    Event {
        kind: Kind::Alloc as u16,
        api: Api::cuMemAlloc_v2 as u16,
        t_ns: t,
        device: dev,
        addr,
        size,
        owner: Owner::Nccl as u8,
        mem: MemKind::Device as u8,
        ..Event::default()
    }
}

#[test]
fn labels_stay_few_and_carry_no_secrets_or_addresses() {
    let dir = scratch("labels");
    let mut s = Synth::new(4242, "runL");
    s.stage("weight_load", None, 15 * GIB);
    s.alloc(0xdead_b000, 512 * MIB, Owner::Torch, 0);
    // A program marking one stage per request: 100 names.
    for i in 0..100u64 {
        s.stage(
            &format!("request_{i}"),
            None,
            15 * GIB - 512 * MIB - i * MIB,
        );
        s.alloc(0x1_0000_0000 + i * 0x10_0000, MIB, Owner::Direct, 0);
    }
    s.push(failed(0, 2, MemKind::Device, 9_000_000));
    s.push(failed(0, 2, MemKind::Device, 9_000_001));
    s.push(failed(0, 2, MemKind::HostPinned, 9_000_002)); // host memory: a failure, not a device OOM
    s.push(failed(0, 999, MemKind::Device, 9_000_003));
    s.push(alloc_on(1, 0xbeef_0000, 64 * MIB, 9_000_004));
    let journal = with_header(
        &s,
        &[
            ("pid", "4242"),
            ("run_id", "runL"),
            ("host", "testhost"),
            ("cmdline", "python3\0-m\0sglang.launch_server\0--model-path\0/models/llama\0--api-key\0s3cr3t-token\0--tp\x001"),
            ("start_unix_ns", "1700000000000000000"),
            ("start_mono_ns", "1000"),
            ("cuda_visible_devices", "2,3"),
        ],
    );
    std::fs::write(dir.join("runL.testhost.4242.1.vlj"), &journal).unwrap();
    let exposition = metrics(&dir, false);
    assert!(!exposition.contains("s3cr3t"), "a secret reached a label");
    assert!(
        !exposition.contains("dead") && !exposition.contains("beef"),
        "an address reached a label"
    );
    let Some(samples) = parse("metrics::labels", &exposition, false) else {
        return;
    };
    let stages: BTreeSet<&str> = samples
        .iter()
        .filter_map(|s| s.labels.get("stage").map(String::as_str))
        .collect();
    assert!(
        stages.len() <= 32,
        "{} stage names: {stages:?}",
        stages.len()
    );
    assert!(stages.contains("other") && stages.contains("weight_load"));
    // What `other` collects still adds up: every MiB the requests took is in some stage.
    let direct: f64 = samples
        .iter()
        .filter(|s| s.name == "vramledger_stage_delta_bytes" && s.labels["owner"] == "direct")
        .map(|s| s.value)
        .sum();
    assert_eq!(direct, (100 * MIB) as f64);
    let names: BTreeSet<&str> = samples.iter().map(|s| s.name.as_str()).collect();
    assert!(names.len() < 25, "{names:?}");
    for s in &samples {
        for k in s.labels.keys() {
            assert!(
                [
                    "host",
                    "pid",
                    "run_id",
                    "rank",
                    "tp_rank",
                    "command",
                    "model_name",
                    "device",
                    "gpu",
                    "UUID",
                    "owner",
                    "stage",
                    "journal",
                    "corrupt",
                    "pp_rank",
                    "dp_rank"
                ]
                .contains(&k.as_str()),
                "unexpected label {k} on {}",
                s.name
            );
        }
    }
    let p = [("pid", "4242")];
    let dev = |d: &'static str, extra: &[(&'static str, &'static str)]| {
        let mut v = vec![("pid", "4242"), ("device", d)];
        v.extend_from_slice(extra);
        v
    };
    assert_eq!(
        value(
            &samples,
            "vramledger_live_bytes",
            &dev("1", &[("owner", "nccl"), ("gpu", "3")])
        ),
        Some((64 * MIB) as f64)
    );
    assert_eq!(
        value(
            &samples,
            "vramledger_live_bytes",
            &dev("0", &[("owner", "torch"), ("gpu", "2")])
        ),
        Some((512 * MIB) as f64)
    );
    assert_eq!(
        value(&samples, "vramledger_oom_total", &dev("0", &[])),
        Some(2.0)
    );
    assert_eq!(
        value(&samples, "vramledger_alloc_failures_total", &dev("0", &[])),
        Some(4.0)
    );
    assert_eq!(
        value(&samples, "vramledger_oom_total", &dev("1", &[])),
        Some(0.0)
    );
    assert_eq!(
        value(
            &samples,
            "vramledger_current_stage_info",
            &[p[0], ("stage", "other")]
        ),
        Some(1.0),
        "a current stage past the label cap is `other`, as in the stage rows"
    );
    let info = samples
        .iter()
        .find(|s| s.name == "vramledger_process_info")
        .unwrap();
    assert_eq!(info.labels["model_name"], "/models/llama");
    assert_eq!(info.labels["command"], "sglang.launch_server");
    // Started at unix 1_700_000_000 s, mono 1000 ns: the last record is ~9 ms later.
    let lag = value(&samples, "vramledger_journal_lag_seconds", &p).unwrap();
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        - 1_700_000_000.0;
    assert!((lag - since).abs() < 60.0, "lag {lag} vs {since}");
}

#[test]
fn uuids_from_cuda_visible_devices_become_the_uuid_label() {
    let dir = scratch("uuid");
    let uuid = "GPU-5f3c2a1e-89ab-4cde-8f01-23456789abcd";
    let mut s = Synth::new(77, "runU");
    s.alloc(0x1000, 2 * MIB, Owner::Torch, 0);
    let cvd = format!("{uuid},GPU-0000");
    let journal = with_header(
        &s,
        &[
            ("pid", "77"),
            ("host", "h"),
            ("run_id", "runU"),
            ("cuda_visible_devices", &cvd),
        ],
    );
    std::fs::write(dir.join("j.vlj"), journal).unwrap();
    let Some(samples) = parse("metrics::uuid", &metrics(&dir, true), true) else {
        return;
    };
    let live = samples
        .iter()
        .find(|s| s.name == "vramledger_live_bytes")
        .unwrap();
    assert_eq!(live.labels.get("UUID").map(String::as_str), Some(uuid));
    assert_eq!(live.labels.get("gpu"), None, "a UUID list names no index");
}

#[test]
fn bad_input_is_exit_2_and_an_empty_run_is_an_empty_exposition() {
    let out = vramledger(&["metrics", "/nonexistent/run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("/nonexistent/run"),
        "{}",
        text(&out.stderr)
    );

    let dir = scratch("empty");
    let out = vramledger(&["metrics", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("\nvramledger_journals 0\n"));
    assert!(!text(&out.stdout).contains("vramledger_live_bytes{"));

    std::fs::write(dir.join("x.vlj"), "#!/bin/sh\nnot a journal\n").unwrap();
    let mut s = Synth::new(5, "r");
    s.alloc(0x1000, 2 * MIB, Owner::Torch, 0);
    s.write(&dir.join("good.vlj"));
    let out = vramledger(&["metrics", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("is not a vramledger journal"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("vramledger_live_bytes{host=\"testhost\",pid=\"5\""),
        "the readable journal is still shown"
    );
    assert!(text(&out.stdout).contains("\nvramledger_unreadable_journals 1\n"));
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// A journal of random records whose header and stage names hold what label escaping must
/// survive: quotes, backslashes, newlines, braces, non-ASCII.
fn hostile_journal(seed: u64, path: &Path) {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut s = Synth::new(seed as u32, "fuzz");
    let kinds: Vec<u16> = Kind::ALL
        .iter()
        .map(|k| *k as u16)
        .chain([0xBEEF])
        .collect();
    let big = [0u64, 1, 2 << 20, 0x1000, 0x2000, u64::MAX, 1 << 63];
    let names = [
        "weight_load",
        "a\"b",
        "back\\slash",
        "x\ny",
        "{brace}",
        "ünï",
        "",
        "kv_pool",
    ];
    for _ in 0..(r.next() % 300 + 1) {
        let mut e = Event {
            kind: r.pick(&kinds),
            t_ns: r.next() % (1 << 40),
            device: r.pick(&[-1, 0, 1, 7, 4095, 4096, i32::MAX]),
            stage: (r.next() % 6) as u32,
            owner: (r.next() % 10) as u8,
            mem: (r.next() % 7) as u8,
            api: r.pick(&[0u16, 1, 4, 5, 20, 22, 70, 100, 9999]),
            result: r.pick(&[0, 0, 0, 2, 900, -1]),
            addr: r.pick(&big),
            size: r.pick(&big),
            handle: r.pick(&big),
            arg0: r.pick(&big),
            arg1: r.pick(&big),
            arg2: r.pick(&big),
            ..Event::default()
        };
        if e.kind == Kind::Stage as u16 || r.next().is_multiple_of(3) {
            e.text = r.pick(&names).to_string();
        }
        s.push(e);
    }
    let host = r.pick(&["h\"ost", "back\\host", "new\nline", "vm"]);
    let cmd = "python3\0-m\0sglang.launch_server\0--model-path\0/m/\"quoted\"\\x\0--api-key\0k";
    std::fs::write(
        path,
        with_header(
            &s,
            &[
                ("pid", &seed.to_string()),
                ("run_id", "fuzz\"run"),
                ("host", host),
                ("cmdline", cmd),
                (
                    "cuda_visible_devices",
                    r.pick(&["", "0,1", "GPU-x", "junk"]),
                ),
                ("start_unix_ns", "1700000000000000000"),
                ("start_mono_ns", "5"),
            ],
        ),
    )
    .unwrap();
}

#[test]
fn hostile_journals_give_an_exposition_that_parses_and_never_a_panic() {
    let root = scratch("hostile");
    let promtool = tool("promtool");
    for seed in 1..=20u64 {
        let dir = root.join(seed.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        hostile_journal(seed, &dir.join("j.vlj"));
        for om in [false, true] {
            let mut args = vec!["metrics", dir.to_str().unwrap()];
            if om {
                args.push("--openmetrics");
            }
            let out = vramledger(&args);
            let code = out.status.code().unwrap_or(-1);
            let err = text(&out.stderr);
            assert!(
                (0..=2).contains(&code) && !err.contains("panicked"),
                "seed {seed}: {code}\n{err}"
            );
            let exposition = text(&out.stdout);
            if parse("metrics::hostile", &exposition, om).is_none() {
                return;
            }
            if let (Some(p), false) = (&promtool, om) {
                let mut child = Command::new(p)
                    .args(["check", "metrics"])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(exposition.as_bytes())
                    .unwrap();
                let out = child.wait_with_output().unwrap();
                assert!(
                    out.status.success(),
                    "seed {seed}: promtool: {}{}",
                    text(&out.stdout),
                    text(&out.stderr)
                );
            }
            assert!(!exposition.contains("--api-key") && !exposition.contains("\"k\""));
        }
        let db = root.join("fuzz.db");
        let out = vramledger(&[
            "export",
            "--sqlite",
            db.to_str().unwrap(),
            dir.to_str().unwrap(),
        ]);
        let code = out.status.code().unwrap_or(-1);
        let err = text(&out.stderr);
        assert!(
            (0..=2).contains(&code) && !err.contains("panicked"),
            "seed {seed}: export {code}\n{err}"
        );
    }
}

#[test]
fn the_current_stage_is_the_reports_even_where_an_api_event_opened_it() {
    // vLLM prints no line when its CUDA-graph capture starts: the first stream capture opens
    // `graph_capture` (docs/stages.md). A scrape taken during the capture must say so, as the
    // report of the same journal does, not the last stage a line opened (`kv_cache`).
    let dir = scratch("api-stage");
    let mut s = Synth::new(4343, "runA");
    s.stage(
        "kv_cache",
        Some("GPU KV cache size: 1,000 tokens"),
        10 * GIB,
    );
    s.alloc(0xa000_0000, 2 * GIB, Owner::Torch, 0);
    s.push(Event {
        kind: Kind::CaptureBegin as u16,
        api: Api::cuStreamBeginCapture_v2 as u16,
        t_ns: 5_000_000,
        handle: 7,
        ..Event::default()
    });
    s.alloc(0xb000_0000, 64 * MIB, Owner::TorchGraphPool, 0);
    s.write(&dir.join("runA.testhost.4343.1.vlj"));
    let report = report_json(&dir);
    let stages: Vec<&str> = report["processes"][0]["devices"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(stages.last(), Some(&"graph_capture"), "{stages:?}");
    let exposition = metrics(&dir, false);
    let current: Vec<&str> = exposition
        .lines()
        .filter(|l| l.starts_with("vramledger_current_stage_info{"))
        .collect();
    assert_eq!(current.len(), 1, "{current:?}");
    assert!(
        current[0].contains("stage=\"graph_capture\""),
        "{}",
        current[0]
    );
}
