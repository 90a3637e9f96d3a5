//! Input the CLI refuses with one message and exit 2: files that are not regular (a FIFO must
//! never hang a verb), files too short or too large to be what they claim, damaged journals
//! (the one policy of docs/journal.md, the same for every verb), and numbers out of range in
//! flags, budgets, reports, model configs, logs and recorded command lines.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::synth::{Synth, GIB, MIB};
use vramledger_format::Owner;

fn cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vramledger"))
}

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-sglang-shape")
}

fn dir(test: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("inputs-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `vramledger ARGS` within 20 s: (exit code, stdout, stderr); never a panic.
fn vl<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (i32, String, String) {
    let mut cmd = Command::new(cli());
    cmd.args(args);
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    let out = support::run_within(cmd, 20).unwrap_or_else(|| panic!("hung: vramledger {shown:?}"));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{shown:?}: {err}");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        err,
    )
}

/// Exit 2, and `needle` in the message.
fn refused<S: AsRef<std::ffi::OsStr>>(args: &[S], needle: &str) {
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    let (rc, _, err) = vl(args);
    assert_eq!(rc, 2, "{shown:?}: {err}");
    assert!(
        err.contains(needle),
        "{shown:?}: expected {needle:?} in: {err}"
    );
}

fn p(x: &Path) -> String {
    x.display().to_string()
}

fn mkfifo(at: &Path) {
    assert!(Command::new("mkfifo").arg(at).status().unwrap().success());
}

#[test]
fn a_fifo_never_hangs_any_verb() {
    let d = dir("fifo");
    let run = d.join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::copy(data().join("pid2090.vlj"), run.join("pid2090.vlj")).unwrap();
    mkfifo(&run.join("x.vlj"));
    let fifo = d.join("f.json");
    mkfifo(&fifo);
    let (r, f, dat, cfg) = (
        p(&run),
        p(&fifo),
        p(&data()),
        p(&data().join("config.json")),
    );
    let o = p(&d.join("o.json"));
    let db = p(&d.join("h.db"));
    let cases: Vec<Vec<&str>> = vec![
        vec!["report", &r],
        vec!["report", &r, "--json"],
        vec!["report", &r, "--html", "-o", &o, "--force"],
        vec!["dump", &f],
        vec!["diff", &r, &dat],
        vec!["diff", &f, &dat],
        vec!["check", "--baseline", &r, &dat],
        vec!["check", "--baseline", &f, &dat],
        vec!["check", "--budgets", &f, &dat],
        vec!["snapshot", &r, "-o", &o, "--force"],
        vec!["size", &r, "--model-config", &cfg],
        vec!["size", &dat, "--model-config", &f],
        vec!["size", "--log", &f, "--model-config", &cfg],
        vec!["metrics", &r],
        vec!["export", "--sqlite", &db, &r],
    ];
    for args in cases {
        refused(&args, "is a FIFO, not a regular file");
    }
}

#[test]
fn files_too_short_to_be_journals_are_refused_everywhere() {
    let d = dir("short");
    for (name, bytes) in [
        ("empty.json", &b""[..]),
        ("five.vlj", b"hello"),
        ("magic.vlj", b"VRAMLJNL\x01\0"),
    ] {
        let f = d.join(name);
        std::fs::write(&f, bytes).unwrap();
        let (f, dat) = (p(&f), p(&data()));
        for args in [
            vec!["report", f.as_str()],
            vec!["dump", &f],
            vec!["diff", &f, &dat],
            vec!["diff", &dat, &f],
            vec!["check", "--baseline", &f, &dat],
            vec!["check", "--baseline", &dat, &f],
            vec!["size", &f],
        ] {
            refused(&args, "bytes long");
        }
        let o = p(&d.join("snap.json"));
        refused(&["snapshot", &f, "-o", &o], "bytes long");
        assert!(!d.join("snap.json").exists());
    }
}

#[test]
fn files_larger_than_any_input_are_refused_unread() {
    let d = dir("large");
    // Sparse: no disk is used, and nothing may read them.
    let big = |name: &str, len: u64| {
        let f = d.join(name);
        std::fs::File::create(&f).unwrap().set_len(len).unwrap();
        p(&f)
    };
    let journal = big("huge.vlj", (16 << 30) + 1);
    let config = big("config.json", (16 << 20) + 1);
    let budgets = big("budgets.json", (16 << 20) + 1);
    let dat = p(&data());
    refused(&["report", &journal], "larger than any journal");
    refused(
        &["diff", &journal, &dat],
        "larger than any journal or report",
    );
    refused(
        &["size", &dat, "--model-config", &config],
        "larger than any model config",
    );
    refused(
        &["check", "--budgets", &budgets, &dat],
        "larger than any budgets file",
    );
}

/// A journal of the recorded run cut in the middle of a record, and one that lost a record
/// in flight (a zero slot, then committed records).
fn damaged_and_killed(d: &Path) -> (PathBuf, PathBuf) {
    let bytes = std::fs::read(data().join("pid2090.vlj")).unwrap();
    let cut = d.join("cut");
    std::fs::create_dir_all(&cut).unwrap();
    std::fs::write(cut.join("pid2090.vlj"), &bytes[..bytes.len() - 30]).unwrap();
    let killed = d.join("killed");
    std::fs::create_dir_all(&killed).unwrap();
    let mut lost = bytes.clone();
    lost.truncate(bytes.len() - 104); // the writer's records are 104 bytes; keep alignment
    let mut j = lost[..lost.len() - 104 * 4].to_vec();
    j.extend(vec![0u8; 104]); // a slot reserved, never committed
    j.extend_from_slice(&lost[lost.len() - 104 * 3..]);
    std::fs::write(killed.join("pid2090.vlj"), &j).unwrap();
    (cut, killed)
}

#[test]
fn one_policy_for_damaged_journals() {
    let d = dir("policy");
    let (cut, killed) = damaged_and_killed(&d);
    let cfg = p(&data().join("config.json"));
    let dat = p(&data());
    let o = p(&d.join("o.json"));
    for (input, damaged) in [(p(&cut), true), (p(&killed), false)] {
        let journal = format!("{input}/pid2090.vlj");
        let db = format!("{}/h-{damaged}.db", d.display());
        let verbs: Vec<Vec<&str>> = vec![
            vec!["metrics", &input],
            vec!["export", "--sqlite", &db, &input],
            vec!["report", &input],
            vec!["report", &input, "--json", "-o", &o, "--force"],
            vec!["dump", &journal],
            vec!["diff", &dat, &input],
            vec!["check", "--baseline", &input, &input],
            vec!["snapshot", &input, "-o", &o, "--force"],
            vec!["size", &input, "--model-config", &cfg],
        ];
        for args in verbs {
            let (rc, _, err) = vl(&args);
            if damaged {
                assert_eq!(rc, 2, "{args:?}: {err}");
                assert!(err.contains("cut off"), "{args:?}: {err}");
            } else {
                // A record lost in flight is a warning, not damage.
                assert!(rc == 0 || (args[0] == "size" && rc == 1), "{args:?}: {err}");
                assert!(err.contains("in flight"), "{args:?}: {err}");
            }
        }
    }
}

#[test]
fn bytes_after_a_final_seal_are_damage_for_every_verb() {
    let d = dir("after-seal");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-vllm-tp1-l8");
    let bytes = std::fs::read(src.join("pid3381.vlj")).unwrap();
    let runs = [
        ("joined", [&bytes[..], &bytes[..]].concat(), true),
        ("zeros", [&bytes[..], &[0u8; 70_000][..]].concat(), false),
    ];
    for (name, b, damaged) in runs {
        let run = d.join(name);
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("pid3381.vlj"), &b).unwrap();
        let input = p(&run);
        let journal = format!("{input}/pid3381.vlj");
        let db = format!("{}/{name}.db", d.display());
        let o = p(&d.join(format!("{name}.json")));
        let verbs: Vec<Vec<&str>> = vec![
            vec!["report", &input],
            vec!["report", &input, "--html", "-o", &o, "--force"],
            vec!["dump", &journal],
            vec!["metrics", &input],
            vec!["export", "--sqlite", &db, &input],
            vec!["snapshot", &input, "-o", &o, "--force"],
            vec!["diff", &input, &input],
        ];
        for args in verbs {
            let (rc, _, err) = vl(&args);
            if damaged {
                assert_eq!(rc, 2, "{args:?}: {err}");
                assert!(
                    err.contains("follow the journal's final seal"),
                    "{args:?}: {err}"
                );
            } else {
                assert_eq!(rc, 0, "{args:?}: {err}");
                assert!(!err.contains("final seal"), "{args:?}: {err}");
            }
        }
    }
}

#[test]
fn budgets_out_of_range_are_refused() {
    let d = dir("budgets");
    let dat = p(&data());
    for (text, why) in [
        (
            r#"{"budgets": [{"peak": true, "max": 18446744073709551615}]}"#,
            "more than any device holds",
        ),
        (
            r#"{"budgets": [{"device": 18446744073709551615, "max": "1GiB"}]}"#,
            "not a device ordinal",
        ),
    ] {
        let f = d.join("b.json");
        std::fs::write(&f, text).unwrap();
        refused(&["check", "--budgets", &p(&f), &dat], why);
    }
}

#[test]
fn reports_with_figures_out_of_range_are_refused() {
    let d = dir("reports");
    let (rc, report, err) = vl(&["report", "--json", &p(&data())]);
    assert_eq!(rc, 0, "{err}");
    let good = d.join("good.json");
    std::fs::write(&good, &report).unwrap();
    let (rc, _, err) = vl(&["check", "--baseline", &p(&good), &p(&data())]);
    assert_eq!(rc, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    for (key, value) in [
        ("device_delta_bytes", serde_json::json!(1e300)),
        ("device_delta_bytes", serde_json::json!(i64::MIN)),
        ("end_t_ns", serde_json::json!(u64::MAX)),
    ] {
        let mut bad = v.clone();
        bad["processes"][1]["devices"][0]["stages"][0][key] = value;
        let f = d.join("bad.json");
        std::fs::write(&f, serde_json::to_string(&bad).unwrap()).unwrap();
        refused(&["check", "--baseline", &p(&f), &p(&data())], key);
        refused(&["diff", &p(&f), &p(&data())], key);
    }
    // Free memory and peaks are never negative; a stage's net bytes may be.
    let dev = "/processes/1/devices/0";
    for (at, key) in [
        ("/peak/total", "bytes"),
        ("/peak/by_owner/torch", "bytes"),
        ("/reconciliation", "end_free_bytes"),
        ("/reconciliation", "start_free_bytes"),
        ("/modules/0", "peak_bytes"),
    ] {
        let mut bad = v.clone();
        let field = bad
            .pointer_mut(&format!("{dev}{at}"))
            .unwrap_or_else(|| panic!("{at} in the report"));
        field[key] = serde_json::json!(-5);
        let f = d.join("negative.json");
        std::fs::write(&f, serde_json::to_string(&bad).unwrap()).unwrap();
        refused(&["diff", &p(&f), &p(&data())], key);
        refused(&["check", "--baseline", &p(&f), &p(&data())], key);
    }
    let mut signed = v.clone();
    signed["processes"][1]["devices"][0]["stages"][0]["device_delta_bytes"] = serde_json::json!(-5);
    let f = d.join("signed.json");
    std::fs::write(&f, serde_json::to_string(&signed).unwrap()).unwrap();
    let (rc, _, err) = vl(&["diff", &p(&f), &p(&data())]);
    assert_eq!(rc, 0, "{err}");
}

#[test]
fn reports_with_figures_of_the_wrong_shape_are_refused_never_read_as_zero() {
    // Each of these read as 0 before: "live at end 3.3 GiB -> 0 B", and `check` said ok.
    let d = dir("report-shapes");
    let (rc, report, err) = vl(&["report", "--json", &p(&data())]);
    assert_eq!(rc, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    let dev = "/processes/1/devices/0";
    for (at, value, named) in [
        ("/live_at_end", serde_json::json!(7), "live_at_end"),
        (
            "/live_at_end/by_owner",
            serde_json::json!([1, 2]),
            "by_owner",
        ),
        ("/peak/total", serde_json::json!(123), "total"),
        ("/peak/by_owner", serde_json::json!("torch"), "by_owner"),
        ("/peak/by_owner/torch", serde_json::json!(5), "torch"),
        ("/stages/0/by_owner", serde_json::json!([1, 2]), "by_owner"),
        ("/stages/0/by_owner/torch", serde_json::Value::Null, "torch"),
        (
            "/live_at_end/by_owner/torch",
            serde_json::Value::Null,
            "torch",
        ),
        ("/peak/total/bytes", serde_json::Value::Null, "bytes"),
        ("/stages", serde_json::json!({}), "stages"),
        ("/reconciliation", serde_json::json!(true), "reconciliation"),
    ] {
        let mut bad = v.clone();
        *bad.pointer_mut(&format!("{dev}{at}"))
            .unwrap_or_else(|| panic!("{at} in the report")) = value;
        let f = d.join("bad.json");
        std::fs::write(&f, serde_json::to_string(&bad).unwrap()).unwrap();
        refused(&["diff", &p(&f), &p(&data())], named);
        refused(&["check", "--baseline", &p(&f), &p(&data())], named);
    }
    let mut bad = v.clone();
    bad["processes"] = serde_json::json!({});
    let f = d.join("bad.json");
    std::fs::write(&f, serde_json::to_string(&bad).unwrap()).unwrap();
    refused(&["diff", &p(&f), &p(&data())], "processes");
    // What a report writes null for when it is not known stays accepted.
    let mut unknown = v.clone();
    unknown
        .pointer_mut(&format!("{dev}/reconciliation"))
        .unwrap()["start_free_bytes"] = serde_json::Value::Null;
    unknown.pointer_mut(&format!("{dev}/stages/0")).unwrap()["end_free_bytes"] =
        serde_json::Value::Null;
    let f = d.join("unknown.json");
    std::fs::write(&f, serde_json::to_string(&unknown).unwrap()).unwrap();
    let (rc, _, err) = vl(&["diff", &p(&f), &p(&data())]);
    assert_eq!(rc, 0, "{err}");
}

#[test]
fn size_numbers_out_of_range_are_refused() {
    let d = dir("size");
    let dat = p(&data());
    let cfg = p(&data().join("config.json"));
    let calc = [
        "--sglang-version",
        "0.5.5",
        "--gpu-mem-mib",
        "81559",
        "--tp",
        "2",
        "--pre-gib",
        "78.81",
        "--available-gib",
        "63.72",
    ];
    for (extra, why) in [
        (
            vec!["--chunked-prefill-size", "9223372036854775807"],
            "--chunked-prefill-size 9223372036854775807",
        ),
        (vec!["--page-size", "18446744073709551615"], "--page-size"),
        (
            vec!["--cuda-graph-max-bs", "9223372036854775807"],
            "--cuda-graph-max-bs",
        ),
        (vec!["--what-if-tp", "18446744073709551615"], "--what-if-tp"),
        (
            vec!["--pre-gib", "1e300", "--available-gib", "1"],
            "--pre-gib",
        ),
    ] {
        let mut args = vec!["size", &dat, "--model-config", &cfg];
        args.extend(extra.iter().copied());
        refused(&args, why);
        let mut args = vec!["size", "--model-config", &cfg];
        args.extend(calc);
        args.extend(extra.iter().copied());
        refused(&args, why);
    }
    // num_hidden_layers = 2^53 used to abort allocating a 2^53-entry layer list.
    let text = std::fs::read_to_string(data().join("config.json")).unwrap();
    let big = d.join("config.json");
    std::fs::write(
        &big,
        text.replace(
            "\"num_hidden_layers\": 8",
            "\"num_hidden_layers\": 9007199254740992",
        ),
    )
    .unwrap();
    let mut args = vec!["size", "--model-config", big.to_str().unwrap()];
    args.extend(calc);
    refused(
        &args,
        "`num_hidden_layers` is 9007199254740992: out of range",
    );
    // The same numbers from a log's server_args line.
    let log = std::fs::read_to_string(data().join("program-output.txt")).unwrap();
    assert!(log.contains("chunked_prefill_size=8192"));
    let f = d.join("server.log");
    std::fs::write(
        &f,
        log.replace(
            "chunked_prefill_size=8192",
            "chunked_prefill_size=9223372036854775807",
        ),
    )
    .unwrap();
    refused(
        &["size", "--log", &p(&f), "--model-config", &cfg],
        "chunked_prefill_size 9223372036854775807",
    );
}

/// Replaces a synthetic journal's header with one whose command line is `cmdline`.
fn with_cmdline(journal: &[u8], cmdline: &str) -> Vec<u8> {
    use vramledger_format::frame::{encode_frame, frame_len};
    use vramledger_format::{preamble, Header, Kind, PREAMBLE_LEN};
    let at = PREAMBLE_LEN;
    let len = u32::from_le_bytes(journal[at + 4..at + 8].try_into().unwrap()) as usize;
    let rest = &journal[at + frame_len(len)..];
    let mut h = Header::default();
    h.push("pid", "4242");
    h.push("run_id", "r1");
    h.push("cmdline", cmdline);
    let payload = h.encode();
    let mut frame = vec![0u8; frame_len(payload.len())];
    encode_frame(Kind::Header as u16, &payload, &mut frame);
    let mut out = preamble().to_vec();
    out.extend(frame);
    out.extend_from_slice(rest);
    out
}

#[test]
fn a_recorded_command_line_is_held_to_the_same_ranges() {
    let d = dir("cmdline");
    let p0 = "[2025-06-01 10:00:00 TP0] ";
    let mut j = Synth::new(4242, "r1");
    j.stage(
        "weight_load",
        Some(&format!("{p0}Load weight begin. avail mem=12.00 GB")),
        12 * GIB,
    );
    j.alloc(0x1000_0000, 4 * GIB, Owner::Torch, 1);
    j.stage(
        "kv_pool",
        Some(&format!("{p0}Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=8.00 GB, mem usage=4.00 GB.")),
        8 * GIB,
    );
    j.alloc(0x2_0000_0000, 512 * MIB, Owner::Torch, 1);
    j.stage("serving", None, 7 * GIB);
    for (flag, value, why) in [
        (
            "--chunked-prefill-size",
            "9223372036854775807",
            "chunked_prefill_size",
        ),
        (
            "--max-running-requests",
            "9223372036854775807",
            "max_running_requests",
        ),
        ("--tp-size", "100000", "tp_size"),
    ] {
        let cmd = format!("python3\0-m\0sglang.launch_server\0{flag}\0{value}");
        std::fs::write(d.join("r1.vlj"), with_cmdline(&j.bytes, &cmd)).unwrap();
        refused(
            &[
                "size",
                &p(&d),
                "--model-config",
                &p(&data().join("config.json")),
            ],
            why,
        );
    }
}

#[test]
fn folder_links_are_followed_once_and_never_loop() {
    let d = dir("loops");
    let run = d.join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::copy(data().join("pid2090.vlj"), run.join("pid2090.vlj")).unwrap();
    // Two links back to the folder: walked naively, 2^40 paths before the kernel says ELOOP.
    std::os::unix::fs::symlink(".", run.join("a")).unwrap();
    std::os::unix::fs::symlink("..", run.join("b")).unwrap();
    let (rc, out, err) = vl(&["report", "--json", &p(&run)]);
    assert_eq!(rc, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["processes"].as_array().unwrap().len(), 1, "{err}");
}

#[test]
fn long_reports_never_hang_diff_or_check() {
    // 20,000 stages and modules on one device, 3,000 processes of one rank: pairing them by
    // scanning took minutes to hours (quadratic, and cubic for repeated labels).
    let d = dir("long");
    let (rc, report, err) = vl(&["report", "--json", &p(&data())]);
    assert_eq!(rc, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    let proc1 = v["processes"][1].clone();
    let mut long = v.clone();
    let dev = &mut long["processes"][1]["devices"][0];
    let stage = dev["stages"][0].clone();
    let stages: Vec<serde_json::Value> = (0..20_000)
        .map(|i| {
            let mut s = stage.clone();
            s["name"] = format!("s{}", i % 7).into();
            s
        })
        .collect();
    dev["stages"] = stages.into();
    let modules: Vec<serde_json::Value> = (0..20_000)
        .map(|i| serde_json::json!({"module": format!("m{i}"), "owner": "torch", "live_bytes": i, "peak_bytes": i}))
        .collect();
    dev["modules"] = modules.into();
    let many = {
        let mut m = v.clone();
        let procs: Vec<serde_json::Value> = (0..3_000)
            .map(|i| {
                let mut p = proc1.clone();
                p["pid"] = (i + 10).into();
                p["rank"] = 0.into();
                p
            })
            .collect();
        m["processes"] = procs.into();
        m
    };
    for (name, doc) in [("long.json", long), ("many.json", many)] {
        let f = d.join(name);
        std::fs::write(&f, serde_json::to_string(&doc).unwrap()).unwrap();
        let (rc, _, err) = vl(&["diff", &p(&f), &p(&f)]);
        assert_eq!(rc, 0, "{err}");
        let (rc, _, err) = vl(&["check", "--baseline", &p(&f), &p(&f)]);
        assert_eq!(rc, 0, "{err}");
    }
}

#[test]
fn a_record_before_the_opening_stage_is_read() {
    // Another thread's record can land before the startup stage record; the ledger's first
    // span then started late and the replay underflowed (found by fuzz journal_records).
    use vramledger_format::frame::{decode_frame, encode_frame, frame_len};
    use vramledger_format::{Event, Kind, PREAMBLE_LEN};
    let d = dir("opening");
    let mut s = Synth::new(77, "r");
    s.stage("weight_load", None, 10 * GIB);
    s.alloc(0x1000_0000, GIB, Owner::Torch, 0);
    let b = &s.bytes;
    let header_len = decode_frame(&b[PREAMBLE_LEN..]).unwrap().2;
    let at = PREAMBLE_LEN + header_len;
    let early = Event {
        kind: Kind::Module as u16,
        text: "/usr/lib/libearly.so".into(),
        module: 9,
        ..Event::default()
    };
    let payload = early.encode();
    let mut frame = vec![0u8; frame_len(payload.len())];
    encode_frame(early.kind, &payload, &mut frame);
    let mut j = b[..at].to_vec();
    j.extend(frame);
    j.extend_from_slice(&b[at..]);
    std::fs::write(d.join("j.vlj"), j).unwrap();
    let (rc, out, err) = vl(&["report", "--json", &p(&d)]);
    assert_eq!(rc, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let stages: Vec<&str> = v["processes"][0]["devices"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["startup", "weight_load"], "{v:#}");
}

#[test]
fn a_run_of_which_nothing_could_be_read_gets_no_report() {
    // The report of no journal was printed (or an HTML page written) below the reasons,
    // with a second line saying "the report covers what could be read".
    let d = dir("nothing");
    let run = d.join("run");
    std::fs::create_dir(&run).unwrap();
    std::os::unix::fs::symlink("missing.vlj", run.join("a.vlj")).unwrap();
    std::fs::write(run.join("b.vlj"), b"").unwrap();
    let html = d.join("r.html");
    for (input, reasons) in [(p(&run), 2), ("/dev/zero".to_string(), 1)] {
        for extra in [
            vec![],
            vec!["--json"],
            vec!["--html", "-o", html.to_str().unwrap()],
        ] {
            let mut args = vec!["report", input.as_str()];
            args.extend(extra);
            let (rc, out, err) = vl(&args);
            assert_eq!(rc, 2, "{args:?}: {err}");
            assert_eq!(out, "", "{args:?}");
            assert_eq!(err.lines().count(), reasons, "{args:?}: {err}");
            assert!(
                !err.contains("covers what could be read"),
                "{args:?}: {err}"
            );
            assert!(!html.exists(), "{args:?} wrote a page of nothing");
        }
    }
}

/// The GPU processes a `report --json` of `run` lists (the helper process has no device).
fn gpu_processes(run: &Path) -> (i32, usize, String) {
    let (rc, out, err) = vl(&["report".as_ref(), "--json".as_ref(), run.as_os_str()]);
    let r: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    let n = r["processes"].as_array().map_or(0, |ps| {
        ps.iter()
            .filter(|p| p["devices"].as_array().is_some_and(|d| !d.is_empty()))
            .count()
    });
    (rc, n, err)
}

#[test]
fn a_process_whose_journal_is_reached_twice_is_read_once() {
    // A `latest.vlj` link, a hard link and a copy in a backup folder: one process each, not
    // two (every verb reads the run the same way).
    let run = dir("twice");
    for f in ["pid2046.vlj", "pid2090.vlj", "pid2091.vlj"] {
        std::fs::copy(data().join(f), run.join(f)).unwrap();
    }
    let (rc, alone, err) = gpu_processes(&run);
    assert_eq!((rc, alone), (0, 2), "{err}");
    std::os::unix::fs::symlink("pid2090.vlj", run.join("latest.vlj")).unwrap();
    std::fs::hard_link(run.join("pid2090.vlj"), run.join("hard.vlj")).unwrap();
    std::fs::create_dir(run.join("backup")).unwrap();
    std::fs::copy(run.join("pid2091.vlj"), run.join("backup/pid2091.vlj")).unwrap();
    let (rc, n, err) = gpu_processes(&run);
    assert_eq!((rc, n), (0, alone), "{err}");
    // The copy is named (links reach the same file: nothing to say), the original is read.
    assert!(
        err.contains("backup/pid2091.vlj")
            && err.contains("journals of one process")
            && err.contains(&format!(
                "read once, from {}",
                run.join("pid2091.vlj").display()
            )),
        "{err}"
    );
    assert!(
        !err.contains("latest.vlj") && !err.contains("hard.vlj"),
        "{err}"
    );
    // Nothing moved against the run itself.
    let (rc, out, err) = vl(&[
        "check".as_ref(),
        "--baseline".as_ref(),
        data().as_os_str(),
        run.as_os_str(),
    ]);
    assert_eq!(rc, 0, "{out}{err}");
    let (rc, out, _) = vl(&[
        "snapshot".as_ref(),
        run.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
        "-o".as_ref(),
        "-".as_ref(),
    ]);
    assert_eq!(rc, 0);
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["processes"].as_array().map(Vec::len), Some(3), "{out}");
}

#[test]
fn a_folder_that_cannot_be_looked_into_is_named_and_the_rest_is_read() {
    // A path longer than the system takes (as root, a folder without permission is still
    // readable): the journal down there is named, the one at the top is still reported.
    let run = dir("deep");
    std::fs::copy(data().join("pid2090.vlj"), run.join("top.vlj")).unwrap();
    // Made by relative steps (a shell's `cd` keeps the whole path, which the system refuses).
    let made = Command::new("python3")
        .arg("-c")
        .arg("import os, shutil, sys\nos.chdir(sys.argv[1])\nfor _ in range(1100):\n    os.mkdir('dddd'); os.chdir('dddd')\nshutil.copy(sys.argv[2], 'deep.vlj')")
        .arg(&run)
        .arg(data().join("pid2091.vlj"))
        .status()
        .unwrap();
    assert!(made.success());
    let (rc, n, err) = gpu_processes(&run);
    assert_eq!((rc, n), (2, 1), "{err}");
    assert!(err.contains("File name too long"), "{err}");
    // Alone, it is named too: never "no journals found".
    std::fs::remove_file(run.join("top.vlj")).unwrap();
    let (rc, _, err) = vl(&["report".as_ref(), run.as_os_str()]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("File name too long") && !err.contains("no journals"),
        "{err}"
    );
    refused(
        &[
            "snapshot".as_ref(),
            run.as_os_str(),
            "-o".as_ref(),
            "-".as_ref(),
        ],
        "File name too long",
    );
    let _ = Command::new("python3")
        .arg("-c")
        .arg("import shutil, sys\nshutil.rmtree(sys.argv[1])")
        .arg(&run)
        .status();
}

#[test]
fn a_journal_that_warns_at_every_record_says_twenty_then_how_many_more() {
    // Forty records damaged apart (bytes that are no journal, appended to one, do the same at
    // every record): twenty warnings, then how many more, not one line each.
    let d = dir("flood");
    let mut bytes = std::fs::read(data().join("../h200-vllm-explore/pid1008.vlj")).unwrap();
    for k in 0..40 {
        bytes[20_000 + k * 15_000] ^= 0x55;
    }
    let f = d.join("flipped.vlj");
    std::fs::write(&f, &bytes).unwrap();
    let (rc, _, err) = vl(&["report", &p(&f)]);
    assert_eq!(rc, 2, "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning:")).collect();
    assert_eq!(warnings.len(), 21, "{err}");
    assert!(
        warnings[20].ends_with("more warnings like the ones above were left out")
            && warnings[20].contains("flipped.vlj: "),
        "{err}"
    );
}
