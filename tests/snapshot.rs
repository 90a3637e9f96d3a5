//! `vramledger snapshot`: every point (`--at STAGE`, `--at-end`, `--at-peak`, `--at-oom`) and
//! every format (JSON, memory_viz pickle, Perfetto trace JSON) on a synthetic run whose
//! answers are worked out below; bad input; overwriting; the recorded H200 journals.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};
use support::synth::{Synth, GIB, MIB};
use vramledger_format::{Api, Event, Kind, MemKind, Owner};

use support::cli;

fn dir(test: &str) -> PathBuf {
    support::fresh_dir("snapshot", test)
}

/// Runs the CLI: (exit code, stderr).
fn vramledger(args: &[&str]) -> (i32, String) {
    let out = Command::new(cli()).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    (out.status.code().unwrap_or(-1), err)
}

/// `vramledger snapshot PATH ARGS -o OUT --force`, required to succeed.
fn snapshot(path: &Path, args: &[&str], out: &Path) -> Vec<u8> {
    let mut all = vec!["snapshot", path.to_str().unwrap()];
    all.extend_from_slice(args);
    all.extend(["-o", out.to_str().unwrap(), "--force"]);
    let (rc, err) = vramledger(&all);
    assert_eq!(rc, 0, "{all:?}: {err}");
    std::fs::read(out).unwrap()
}

/// The JSON snapshot, which must also be in the one canonical form: what pretty-printing its
/// own tree gives, byte for byte (every object's keys in byte order; the writer streams it).
fn snapshot_json(path: &Path, args: &[&str], out: &Path) -> Value {
    let bytes = snapshot(path, args, out);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    let canonical = serde_json::to_string_pretty(&v).unwrap() + "\n";
    assert!(
        bytes == canonical.as_bytes(),
        "{args:?}: the snapshot is not in canonical form:\n{}",
        String::from_utf8_lossy(&bytes)
    );
    v
}

/// A journal written record by record, on a clock that advances 1 µs per record.
struct Run {
    s: Synth,
    t: u64,
}

const A: u64 = 0x1000_0000;
const B: u64 = 0x2_0000_0000;
const C: u64 = 0x10_0000_0000;
const G: u64 = 0x4_0000_0000;
const T: u64 = 0x3_0000_0000;
const NCCL_VA: u64 = 0x5_0000_0000;
const NCCL_VA2: u64 = 0x5_1000_0000;
const HOST: u64 = 0x7f00_0000_0000;
const VA: u64 = 0x6_0000_0000;

const F0: u64 = 16 * GIB - 512 * MIB;
const F1: u64 = F0 - 4 * GIB - 64 * MIB;
const F2: u64 = F1 - 8 * GIB + 64 * MIB;
const F3: u64 = F2 - 32 * MIB - 256 * MIB;
const F_OOM: u64 = F3 + 8 * GIB;

impl Run {
    fn new(pid: u32) -> Run {
        // Synth::new writes the header and the `startup` stage record at t = 2000.
        Run {
            s: Synth::new(pid, "snap"),
            t: 2000,
        }
    }

    fn ev(&mut self, kind: Kind, api: Api) -> Event {
        self.t += 1000;
        Event {
            kind: kind as u16,
            api: api as u16,
            t_ns: self.t,
            tid: 7,
            device: 0,
            ..Event::default()
        }
    }

    fn put(&mut self, e: Event) -> &mut Self {
        self.s.push(e);
        self
    }

    fn module(&mut self, id: u32, path: &str) -> &mut Self {
        let mut e = self.ev(Kind::Module, Api::None);
        e.module = id;
        e.text = path.into();
        self.put(e)
    }

    fn stage(&mut self, name: &str, free: u64) -> &mut Self {
        let mut e = self.ev(Kind::Stage, Api::VramledgerStage);
        e.text = name.into();
        self.put(e).sample(free)
    }

    fn sample(&mut self, free: u64) -> &mut Self {
        let mut e = self.ev(Kind::MemInfo, Api::VramledgerSample);
        e.arg0 = free;
        e.arg1 = 16 * GIB;
        self.put(e)
    }

    fn context(&mut self, before: u64, size: u64) -> &mut Self {
        let mut e = self.ev(Kind::Context, Api::cuDevicePrimaryCtxRetain);
        e.owner = Owner::Context as u8;
        e.size = size;
        e.arg0 = before;
        e.arg1 = before - size;
        self.put(e)
    }

    fn alloc(&mut self, addr: u64, size: u64, owner: Owner, module: u32) -> &mut Self {
        let mut e = self.ev(Kind::Alloc, Api::cuMemAlloc_v2);
        e.addr = addr;
        e.size = size;
        e.owner = owner as u8;
        e.module = module;
        self.put(e)
    }

    fn free(&mut self, addr: u64) -> &mut Self {
        let mut e = self.ev(Kind::Free, Api::cuMemFree_v2);
        e.addr = addr;
        self.put(e)
    }

    fn vmm(&mut self, handle: u64, addr: u64, size: u64, owner: Owner, module: u32) -> &mut Self {
        let mut e = self.ev(Kind::VmmCreate, Api::cuMemCreate);
        e.handle = handle;
        e.size = size;
        e.owner = owner as u8;
        e.module = module;
        self.put(e);
        let mut m = self.ev(Kind::VmmMap, Api::cuMemMap);
        m.addr = addr;
        m.size = size;
        m.handle = handle;
        self.put(m)
    }

    fn unmap_release(&mut self, handle: u64, addr: u64, size: u64) -> &mut Self {
        let mut u = self.ev(Kind::VmmUnmap, Api::cuMemUnmap);
        u.addr = addr;
        u.size = size;
        self.put(u);
        let mut r = self.ev(Kind::VmmRelease, Api::cuMemRelease);
        r.handle = handle;
        self.put(r)
    }

    fn host_alloc(&mut self, addr: u64, size: u64) -> &mut Self {
        let mut e = self.ev(Kind::HostAlloc, Api::cuMemHostAlloc);
        e.device = -1;
        e.addr = addr;
        e.size = size;
        e.owner = Owner::Torch as u8;
        e.module = 1;
        e.mem = MemKind::HostPinned as u8;
        self.put(e)
    }

    fn va_reserve(&mut self, addr: u64, size: u64) -> &mut Self {
        let mut e = self.ev(Kind::VaReserve, Api::cuMemAddressReserve);
        e.device = -1;
        e.addr = addr;
        e.size = size;
        e.owner = Owner::Nccl as u8;
        e.module = 3;
        e.mem = MemKind::Virtual as u8;
        self.put(e)
    }

    fn oom(&mut self, size: u64) -> &mut Self {
        let mut e = self.ev(Kind::AllocFailed, Api::cuMemAlloc_v2);
        e.result = 2;
        e.size = size;
        e.arg0 = size;
        e.owner = Owner::Torch as u8;
        e.module = 1;
        self.put(e)
    }

    fn capture(&mut self, kind: Kind, stream: u64) -> &mut Self {
        let api = if kind == Kind::CaptureBegin {
            Api::cuStreamBeginCapture_v2
        } else {
            Api::cuStreamEndCapture
        };
        let mut e = self.ev(kind, api);
        e.handle = stream;
        self.put(e)
    }

    fn write(&self, path: &Path) {
        self.s.write(path);
    }
}

/// The run, record by record (index: t_ns in µs):
///
/// ```text
///  0:2 stage startup          1-3:3-5 modules 1 libc10_cuda, 2 libcublas, 3 libnccl
///  4:6 context 512 MiB
///  5:7 stage weight_load      6:8 sample F0    7:9 A 4 GiB torch    8:10 B 64 MiB direct
///  9:11 stage kv_pool        10:12 sample F1  11:13 C 8 GiB torch  12:14 free B
/// 13:15 stage graph_capture  14:16 sample F2  15,16:17,18 NCCL handle 77 (32 MiB) mapped
/// 17-20:19-22 NCCL handle 78 (2 MiB) created, mapped, unmapped, released
/// 21:23 G 256 MiB graph pool 22:24 T 1 GiB torch (the peak)   23:25 free T
/// 24:26 stage serving        25:27 sample F3  26:28 free C
/// 27:29 pinned host 2 MiB    28:30 VA reserve 1 GiB  29:31 OOM (2 GiB)  30:32 sample F_OOM
/// 31:33 free A
/// ```
fn run(pid: u32) -> Run {
    let mut r = Run::new(pid);
    r.module(1, "/x/libc10_cuda.so")
        .module(2, "/x/libcublas.so.13")
        .module(3, "/x/libnccl.so.2")
        .context(16 * GIB, 512 * MIB)
        .stage("weight_load", F0)
        .alloc(A, 4 * GIB, Owner::Torch, 1)
        .alloc(B, 64 * MIB, Owner::Direct, 2)
        .stage("kv_pool", F1)
        .alloc(C, 8 * GIB, Owner::Torch, 1)
        .free(B)
        .stage("graph_capture", F2)
        .vmm(77, NCCL_VA, 32 * MIB, Owner::Nccl, 3)
        .vmm(78, NCCL_VA2, 2 * MIB, Owner::Nccl, 3)
        .unmap_release(78, NCCL_VA2, 2 * MIB)
        .alloc(G, 256 * MIB, Owner::TorchGraphPool, 1)
        .alloc(T, GIB, Owner::Torch, 1)
        .free(T)
        .stage("serving", F3)
        .free(C)
        .host_alloc(HOST, 2 * MIB)
        .va_reserve(VA, GIB)
        .oom(2 * GIB)
        .sample(F_OOM)
        .free(A);
    r
}

fn owners(torch: u64, graph: u64, nccl: u64, direct: u64, context: u64) -> Value {
    json!({"torch": torch, "torch_graph_pool": graph, "nccl": nccl, "direct": direct,
           "vmm": 0, "context": context})
}

fn alloc(addr: u64, bytes: u64, owner: &str, module: &str, stage: &str, t_ns: u64) -> Value {
    json!({"kind": "alloc", "address": addr, "handle": null, "device": 0, "bytes": bytes,
           "owner": owner, "mem": "device", "module": module, "stage": stage, "t_ns": t_ns,
           "mappings": []})
}

fn nccl_handle() -> Value {
    json!({"kind": "vmm", "address": null, "handle": 77, "device": 0, "bytes": 32 * MIB,
           "owner": "nccl", "mem": "device", "module": "libnccl.so.2", "stage": "graph_capture",
           "t_ns": 17000, "mappings": [{"address": NCCL_VA, "bytes": 32 * MIB, "offset": 0}]})
}

#[test]
fn json_golden_at_a_stage() {
    let d = dir("stage");
    run(601).write(&d.join("a.vlj"));
    let v = snapshot_json(&d, &["--at", "kv_pool"], &d.join("s.json"));
    assert_eq!(v["schema"], "vramledger.snapshot/1");
    assert_eq!(v["at"], json!({"mode": "stage", "stage": "kv_pool"}));
    let p = &v["processes"][0];
    // The end of kv_pool is where graph_capture begins: record 13, at 15 µs.
    let point = json!({"events": 13, "t_ns": 15000, "stage": "kv_pool"});
    assert_eq!(p["point"], point);
    assert_eq!(p["pid"], 601);
    assert_eq!(p["oom"], Value::Null);
    let expected = json!({
        "device": 0,
        "point": point,
        "peak_bytes": null,
        "total_bytes": 512 * MIB + 12 * GIB,
        "by_owner": owners(12 * GIB, 0, 0, 0, 512 * MIB),
        "by_stage": [
            {"stage": "startup", "total_bytes": 512 * MIB, "by_owner": owners(0, 0, 0, 0, 512 * MIB)},
            {"stage": "weight_load", "total_bytes": 4 * GIB, "by_owner": owners(4 * GIB, 0, 0, 0, 0)},
            {"stage": "kv_pool", "total_bytes": 8 * GIB, "by_owner": owners(8 * GIB, 0, 0, 0, 0)},
        ],
        "context": {"bytes": 512 * MIB, "stage": "startup", "t_ns": 6000},
        // The last reading (F1, before C and the free of B) corrected by what moved since.
        "free_bytes": F2,
        "allocations": [
            alloc(A, 4 * GIB, "torch", "libc10_cuda.so", "weight_load", 9000),
            alloc(C, 8 * GIB, "torch", "libc10_cuda.so", "kv_pool", 13000),
        ],
    });
    assert_eq!(p["devices"], json!([expected]));
    let empty = json!({"total_bytes": 0, "allocations": []});
    assert_eq!(p["host_pinned"], empty);
    assert_eq!(p["peer"], empty);
    assert_eq!(
        p["virtual_reserved"],
        json!({"total_bytes": 0, "reservations": []})
    );
    assert_eq!(v["skipped"], json!([]));
}

#[test]
fn json_at_end_peak_and_oom() {
    let d = dir("points");
    run(602).write(&d.join("a.vlj"));

    // At the end: A and C are freed; the NCCL handle (mapped), the graph pool and the context
    // are live; pinned host and the reservation are apart from VRAM.
    let v = snapshot_json(&d, &[], &d.join("end.json"));
    assert_eq!(v["at"], json!({"mode": "end", "stage": null}));
    let p = &v["processes"][0];
    let dev = &p["devices"][0];
    assert_eq!(
        dev["point"],
        json!({"events": 32, "t_ns": 33000, "stage": "serving"})
    );
    assert_eq!(
        dev["by_owner"],
        owners(0, 256 * MIB, 32 * MIB, 0, 512 * MIB)
    );
    assert_eq!(
        dev["allocations"],
        json!([
            alloc(
                G,
                256 * MIB,
                "torch_graph_pool",
                "libc10_cuda.so",
                "graph_capture",
                23000
            ),
            nccl_handle(),
        ])
    );
    assert_eq!(dev["free_bytes"], F_OOM + 4 * GIB);
    assert_eq!(
        p["host_pinned"],
        json!({"total_bytes": 2 * MIB, "allocations": [{
            "kind": "host", "address": HOST, "handle": null, "device": -1, "bytes": 2 * MIB,
            "owner": "torch", "mem": "host_pinned", "module": "libc10_cuda.so",
            "stage": "serving", "t_ns": 29000, "mappings": []}]})
    );
    assert_eq!(
        p["virtual_reserved"],
        json!({"total_bytes": GIB, "reservations": [{
            "address": VA, "bytes": GIB, "device": -1, "owner": "nccl",
            "module": "libnccl.so.2", "stage": "serving", "t_ns": 30000}]})
    );
    // --at-end is the default.
    assert_eq!(snapshot_json(&d, &["--at-end"], &d.join("end2.json")), v);

    // At the peak: just after T (record 22), in graph_capture: the report's peak.total.
    let v = snapshot_json(&d, &["--at-peak"], &d.join("peak.json"));
    let dev = &v["processes"][0]["devices"][0];
    let peak = 512 * MIB + 12 * GIB + 32 * MIB + 256 * MIB + GIB;
    assert_eq!(
        dev["point"],
        json!({"events": 23, "t_ns": 24000, "stage": "graph_capture"})
    );
    assert_eq!(dev["peak_bytes"], peak);
    assert_eq!(dev["total_bytes"], peak);
    let report = Command::new(cli())
        .args(["report", "--json"])
        .arg(&d)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    let report_peak = &report["processes"][0]["devices"][0]["peak"]["total"];
    assert_eq!(report_peak["bytes"], peak);
    assert_eq!(report_peak["stage"], dev["point"]["stage"]);
    assert_eq!(report_peak["t_ns"], dev["point"]["t_ns"]);
    let addrs: Vec<Value> = dev["allocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["address"].clone())
        .collect();
    assert_eq!(addrs, [json!(A), json!(T), json!(G), json!(C), Value::Null]);
    assert_eq!(
        dev["by_stage"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (
                s["stage"].as_str().unwrap(),
                s["total_bytes"].as_u64().unwrap()
            ))
            .collect::<Vec<_>>(),
        [
            ("startup", 512 * MIB),
            ("weight_load", 4 * GIB),
            ("kv_pool", 8 * GIB),
            ("graph_capture", 32 * MIB + 256 * MIB + GIB)
        ]
    );

    // At the OOM: just after the failed record; its reading is the one taken right after.
    let v = snapshot_json(&d, &["--at-oom"], &d.join("oom.json"));
    let p = &v["processes"][0];
    assert_eq!(
        p["oom"],
        json!({"device": 0, "requested_bytes": 2 * GIB, "owner": "torch",
               "module": "libc10_cuda.so", "api": "cuMemAlloc_v2", "result": 2,
               "stage": "serving", "t_ns": 31000, "free_bytes": F_OOM})
    );
    let dev = &p["devices"][0];
    assert_eq!(
        dev["point"],
        json!({"events": 30, "t_ns": 31000, "stage": "serving"})
    );
    assert_eq!(
        dev["by_owner"],
        owners(4 * GIB, 256 * MIB, 32 * MIB, 0, 512 * MIB)
    );
    assert_eq!(p["host_pinned"]["total_bytes"], 2 * MIB);

    // Every point: the stages add up to the owners.
    for at in [
        &[][..],
        &["--at-peak"],
        &["--at-oom"],
        &["--at", "graph_capture"],
    ] {
        let v = snapshot_json(&d, at, &d.join("sum.json"));
        let dev = &v["processes"][0]["devices"][0];
        let by_stage: u64 = dev["by_stage"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["total_bytes"].as_u64().unwrap())
            .sum();
        assert_eq!(by_stage, dev["total_bytes"].as_u64().unwrap(), "{at:?}");
    }
}

#[test]
fn every_stage_and_processes_without_it() {
    let d = dir("stages");
    run(603).write(&d.join("a.vlj"));
    // A second process that never reached kv_pool.
    let mut r = Run::new(604);
    r.context(16 * GIB, 512 * MIB)
        .stage("weight_load", F0)
        .alloc(A, GIB, Owner::Torch, 0);
    r.write(&d.join("b.vlj"));
    let totals = |v: &Value| -> Vec<(u64, u64)> {
        v["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["pid"].as_u64().unwrap(),
                    p["devices"][0]["total_bytes"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    for (stage, expected) in [
        ("startup", vec![(603, 512 * MIB), (604, 512 * MIB)]),
        (
            "weight_load",
            vec![
                (603, 512 * MIB + 4 * GIB + 64 * MIB),
                (604, 512 * MIB + GIB),
            ],
        ),
        ("kv_pool", vec![(603, 512 * MIB + 12 * GIB)]),
        (
            "graph_capture",
            vec![(603, 512 * MIB + 12 * GIB + 288 * MIB)],
        ),
        ("serving", vec![(603, 512 * MIB + 288 * MIB)]),
    ] {
        let v = snapshot_json(&d, &["--at", stage], &d.join("s.json"));
        assert_eq!(totals(&v), expected, "{stage}");
    }
    let out = Command::new(cli())
        .args(["snapshot", d.to_str().unwrap(), "--at", "kv_pool", "-o"])
        .arg(d.join("k.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("(pid 604) left out: no stage named \"kv_pool\""),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&std::fs::read(d.join("k.json")).unwrap()).unwrap();
    assert_eq!(v["skipped"][0]["pid"], 604);
    // At the peak, each process at its own.
    let v = snapshot_json(&d, &["--at-peak"], &d.join("p.json"));
    assert_eq!(
        totals(&v),
        [
            (603, 512 * MIB + 13 * GIB + 288 * MIB),
            (604, 512 * MIB + GIB)
        ]
    );
}

#[test]
fn bad_input_is_one_message_and_exit_2() {
    let d = dir("bad");
    run(605).write(&d.join("a.vlj"));
    let out = d.join("out.json");
    let o = out.to_str().unwrap();
    let dd = d.to_str().unwrap();
    let missing = d.join("missing");
    let m = missing.to_str().unwrap();
    // Our own errors: exactly one line.
    for (args, expected) in [
        (vec!["snapshot", m, "-o", o], "cannot read"),
        (
            vec!["snapshot", dd, "--at", "nope", "-o", o],
            "no process has a stage named \"nope\"; the stages of this run are: startup, weight_load, kv_pool, graph_capture, serving",
        ),
    ] {
        let (rc, err) = vramledger(&args);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(!out.exists());
    }
    // No OOM in the run.
    let quiet = dir("bad-no-oom");
    let mut r = Run::new(606);
    r.context(16 * GIB, 512 * MIB);
    r.write(&quiet.join("q.vlj"));
    let (rc, err) = vramledger(&["snapshot", quiet.to_str().unwrap(), "--at-oom", "-o", o]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("no allocation failed with out-of-memory"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // An empty folder.
    let empty = dir("bad-empty");
    let (rc, err) = vramledger(&["snapshot", empty.to_str().unwrap(), "-o", o]);
    assert_eq!((rc, err.lines().count()), (2, 1), "{err}");
    assert!(err.contains("no journals"), "{err}");
    // A corrupt journal: nothing is written.
    let corrupt = dir("bad-corrupt");
    let mut bytes = run(607).s.bytes;
    let mid = bytes.len() / 2;
    bytes[mid..mid + 16].fill(0xAB);
    std::fs::write(corrupt.join("c.vlj"), bytes).unwrap();
    let (rc, err) = vramledger(&["snapshot", corrupt.to_str().unwrap(), "-o", o]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("is corrupt"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!out.exists());
    // Usage errors (clap): exit 2, the reason named.
    for (args, expected) in [
        (
            vec!["snapshot", dd, "--format", "svg", "-o", o],
            "invalid value 'svg'",
        ),
        (vec!["snapshot", dd], "--output <FILE>"),
        (
            vec!["snapshot", dd, "--at-peak", "--at-oom", "-o", o],
            "cannot be used with",
        ),
        (
            vec!["snapshot", dd, "--at", "kv_pool", "--at-end", "-o", o],
            "cannot be used with",
        ),
    ] {
        let (rc, err) = vramledger(&args);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!out.exists());
    }
}

#[test]
fn refuses_to_overwrite_without_force() {
    let d = dir("overwrite");
    run(608).write(&d.join("a.vlj"));
    let out = d.join("s.json");
    std::fs::write(&out, "keep me").unwrap();
    let (rc, err) = vramledger(&["snapshot", d.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(rc, 2);
    assert!(err.contains("already exists; pass --force"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");
    let (rc, err) = vramledger(&[
        "snapshot",
        d.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(rc, 0, "{err}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["schema"], "vramledger.snapshot/1");
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

// ---------------------------------------------------------------------------------------
// memory_viz

/// A test-only unpickler for exactly the opcodes the viewer accepts (anything else fails the
/// test): pickle → JSON (tuples become arrays).
fn unpickle(b: &[u8]) -> Value {
    enum Item {
        Mark,
        V(Value),
    }
    let mut stack: Vec<Item> = Vec::new();
    let mut at = 0usize;
    let take = |at: &mut usize, n: usize| -> &[u8] {
        let s = &b[*at..*at + n];
        *at += n;
        s
    };
    let pop = |stack: &mut Vec<Item>| match stack.pop() {
        Some(Item::V(v)) => v,
        _ => panic!("stack underflow"),
    };
    let since_mark = |stack: &mut Vec<Item>| -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            match stack.pop() {
                Some(Item::Mark) => break,
                Some(Item::V(v)) => out.push(v),
                None => panic!("no mark"),
            }
        }
        out.reverse();
        out
    };
    let int = |v: i128| -> Value {
        if let Ok(i) = i64::try_from(v) {
            json!(i)
        } else {
            json!(u64::try_from(v).unwrap())
        }
    };
    assert_eq!(&b[..2], &[0x80, 2], "PROTO 2");
    at += 2;
    loop {
        let op = b[at];
        at += 1;
        match op {
            b'.' => return pop(&mut stack),
            b'(' => stack.push(Item::Mark),
            b'}' => stack.push(Item::V(json!({}))),
            b']' => stack.push(Item::V(json!([]))),
            b'N' => stack.push(Item::V(Value::Null)),
            0x88 => stack.push(Item::V(json!(true))),
            0x89 => stack.push(Item::V(json!(false))),
            b'K' => stack.push(Item::V(int(take(&mut at, 1)[0] as i128))),
            b'M' => {
                let s = take(&mut at, 2);
                stack.push(Item::V(int(u16::from_le_bytes([s[0], s[1]]) as i128)))
            }
            b'J' => {
                let s = take(&mut at, 4);
                stack.push(Item::V(int(
                    i32::from_le_bytes(s.try_into().unwrap()) as i128
                )))
            }
            0x8a => {
                let n = take(&mut at, 1)[0] as usize;
                assert!((1..=8).contains(&n), "LONG1 of {n} bytes");
                let s = take(&mut at, n);
                let fill = if s[n - 1] & 0x80 != 0 { 0xff } else { 0 };
                let mut full = [fill; 16];
                full[..n].copy_from_slice(s);
                stack.push(Item::V(int(i128::from_le_bytes(full))))
            }
            0x8c | b'X' => {
                let n = if op == 0x8c {
                    take(&mut at, 1)[0] as usize
                } else {
                    u32::from_le_bytes(take(&mut at, 4).try_into().unwrap()) as usize
                };
                let s = std::str::from_utf8(take(&mut at, n)).unwrap().to_string();
                stack.push(Item::V(Value::String(s)))
            }
            b'G' => {
                let f = f64::from_be_bytes(take(&mut at, 8).try_into().unwrap());
                stack.push(Item::V(json!(f)))
            }
            0x86 => {
                let b2 = pop(&mut stack);
                let a2 = pop(&mut stack);
                stack.push(Item::V(json!([a2, b2])))
            }
            b'a' => {
                let v = pop(&mut stack);
                let Some(Item::V(Value::Array(list))) = stack.last_mut() else {
                    panic!("APPEND to a non-list")
                };
                list.push(v);
            }
            b'e' => {
                let items = since_mark(&mut stack);
                let Some(Item::V(Value::Array(list))) = stack.last_mut() else {
                    panic!("APPENDS to a non-list")
                };
                list.extend(items);
            }
            b's' | b'u' => {
                let items = if op == b's' {
                    let v = pop(&mut stack);
                    let k = pop(&mut stack);
                    vec![k, v]
                } else {
                    since_mark(&mut stack)
                };
                let Some(Item::V(Value::Object(map))) = stack.last_mut() else {
                    panic!("SETITEM(S) to a non-dict")
                };
                for kv in items.chunks(2) {
                    map.insert(kv[0].as_str().unwrap().to_string(), kv[1].clone());
                }
            }
            other => panic!("opcode {other:#x} is not one the viewer accepts"),
        }
    }
}

/// What the viewer needs, checked the way it reads the file: keys; blocks tiling their
/// segments; a `unknown` category whenever categories are used; and, replaying each device
/// trace backwards from the final segments (as "Allocator State History" does), every
/// block inside a segment at every step and nothing left before the first entry.
fn check_viewer_invariants(v: &Value) {
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["allocator_settings", "device_traces", "segments"]);
    let segments = v["segments"].as_array().unwrap();
    let traces = v["device_traces"].as_array().unwrap();
    let mut categories = Vec::new();
    for t in traces.iter().flat_map(|t| t.as_array().unwrap()) {
        for k in ["action", "addr", "size", "stream", "time_us", "frames"] {
            assert!(t.get(k).is_some(), "{k} missing in {t}");
        }
        // Wall-clock µs since the epoch (the viewer shows `new Date(time_us / 1000)`): after
        // 2001, not a monotonic clock's few days.
        assert!(
            t["time_us"].as_u64().unwrap() > 1_000_000_000_000_000,
            "{t}"
        );
        if let Some(c) = t["category"].as_str() {
            if !categories.contains(&c) {
                categories.push(c);
            }
        }
        if t["action"] == "oom" {
            assert!(t["device_free"].is_u64(), "{t}");
        }
    }
    assert!(
        categories.is_empty() || categories.contains(&"unknown"),
        "{categories:?}"
    );
    for s in segments {
        let blocks = s["blocks"].as_array().unwrap();
        let sum: u64 = blocks.iter().map(|b| b["size"].as_u64().unwrap()).sum();
        assert_eq!(sum, s["total_size"].as_u64().unwrap(), "blocks tile {s}");
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0]["state"], "active_allocated");
        let dev = s["device"].as_u64().unwrap() as usize;
        assert!(
            dev < traces.len(),
            "segment of device {dev} without a trace"
        );
    }
    for (dev, trace) in traces.iter().enumerate() {
        // A driver free is synchronous: each `free_completed` right after its
        // `free_requested` (the viewer folds the pair into `free`; alone it is drawn red).
        let t = trace.as_array().unwrap();
        for (i, e) in t.iter().enumerate() {
            if e["action"] == "free_completed" {
                let prev = &t[i.saturating_sub(1)];
                assert!(
                    i > 0 && prev["action"] == "free_requested" && prev["addr"] == e["addr"],
                    "{dev}/{i}: free_completed without free_requested just before: {e}"
                );
            }
        }
        let mut segs: Vec<(u64, u64)> = segments
            .iter()
            .filter(|s| s["device"] == dev)
            .map(|s| {
                (
                    s["address"].as_u64().unwrap(),
                    s["total_size"].as_u64().unwrap(),
                )
            })
            .collect();
        let mut blocks: std::collections::BTreeMap<u64, u64> = segs.iter().copied().collect();
        let inside = |segs: &[(u64, u64)], a: u64| segs.iter().any(|&(s, n)| s <= a && a < s + n);
        for (i, e) in trace.as_array().unwrap().iter().enumerate().rev() {
            let (addr, size) = (e["addr"].as_u64().unwrap(), e["size"].as_u64().unwrap());
            match e["action"].as_str().unwrap() {
                "free_completed" => {
                    blocks.insert(addr, size);
                }
                "free_requested" => {}
                "alloc" => assert!(blocks.remove(&addr).is_some(), "{dev}/{i}: {e}"),
                "segment_free" | "segment_unmap" => segs.push((addr, size)),
                "segment_alloc" | "segment_map" => {
                    let k = segs
                        .iter()
                        .position(|&(s, n)| s <= addr && addr + size <= s + n)
                        .unwrap_or_else(|| panic!("{dev}/{i}: no segment holds {e}"));
                    let (s, n) = segs.remove(k);
                    if s < addr {
                        segs.push((s, addr - s));
                    }
                    if addr + size < s + n {
                        segs.push((addr + size, s + n - addr - size));
                    }
                }
                "oom" | "snapshot" => {}
                other => panic!("unexpected action {other}"),
            }
            for &b in blocks.keys() {
                assert!(
                    inside(&segs, b),
                    "{dev}/{i}: block {b:#x} outside every segment"
                );
            }
        }
        assert!(
            segs.is_empty() && blocks.is_empty(),
            "{dev}: {segs:?} {blocks:?}"
        );
    }
}

/// The same checks from Python's own unpickler, when python3 is installed.
const PY_CHECK: &str = r#"
import pickle, sys
d = pickle.load(open(sys.argv[1], 'rb'))
assert sorted(d) == ['allocator_settings', 'device_traces', 'segments'], sorted(d)
traces = d['device_traces']
assert isinstance(traces, list) and all(isinstance(t, list) for t in traces)
devs = {s['device'] for s in d['segments']}
assert not devs or max(devs) < len(traces), (devs, len(traces))
for s in d['segments']:
    pool = s['segment_pool_id']
    assert isinstance(pool, tuple) and len(pool) == 2 and all(isinstance(x, int) for x in pool)
    assert s['total_size'] == sum(b['size'] for b in s['blocks'])
    for k in ('address', 'allocated_size', 'active_size', 'requested_size', 'stream',
              'segment_type', 'is_expandable', 'frames'):
        assert k in s, k
cats = []
for t in traces:
    for e in t:
        assert isinstance(e['addr'], int) and isinstance(e['size'], int)
        if 'category' in e and e['category'] not in cats:
            cats.append(e['category'])
assert not cats or 'unknown' in cats, cats
print('python ok', len(d['segments']), [len(t) for t in traces], sorted(cats))
"#;

fn python_check(file: &Path) {
    if Command::new("python3").arg("--version").output().is_err() {
        println!("note: python3 is not installed; the Python unpickling check is skipped");
        return;
    }
    let out = Command::new("python3")
        .args(["-c", PY_CHECK])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python3 rejected {}:\n{}{}",
        file.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn memory_viz(path: &Path, args: &[&str], out: &Path) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "memory-viz"]);
    let bytes = snapshot(path, &all, out);
    let v = unpickle(&bytes);
    check_viewer_invariants(&v);
    python_check(out);
    v
}

fn frames(module: &str, owner: &str) -> Value {
    json!([{"filename": module, "line": 0, "name": owner}])
}

/// Wall-clock µs of journal time `t_ns` for `Run::new(pid)`: the synthetic header's
/// `start_unix_ns` (1.7e18 + pid) at its first record (t = 2000 ns).
fn wall_us(pid: u64, t_ns: u64) -> u64 {
    (1_700_000_000_000_000_000 + pid + t_ns - 2000) / 1000
}

fn entry(
    action: &str,
    addr: u64,
    size: u64,
    t_ns: u64,
    owner: &str,
    module: &str,
    stage: &str,
) -> Value {
    json!({"action": action, "addr": addr, "size": size, "stream": 0,
           "time_us": wall_us(609, t_ns), "frames": frames(module, owner), "category": owner,
           "user_metadata": stage})
}

fn segment(addr: u64, size: u64, expandable: bool, owner: &str, module: &str) -> Value {
    json!({"device": 0, "address": addr, "total_size": size, "allocated_size": size,
           "active_size": size, "requested_size": size, "stream": 0, "segment_type": "large",
           "segment_pool_id": [0, 0], "is_expandable": expandable, "frames": frames(module, owner),
           "blocks": [{"address": addr, "size": size, "requested_size": size,
                       "state": "active_allocated", "frames": frames(module, owner)}]})
}

#[test]
fn memory_viz_gives_each_capture_its_private_pool_id() {
    let d = dir("viz-pools");
    let mut r = Run::new(620);
    r.module(1, "/x/libc10_cuda.so")
        .stage("graph_capture", F0)
        .alloc(A, GIB, Owner::Torch, 1)
        .capture(Kind::CaptureBegin, 5)
        .alloc(G, 64 * MIB, Owner::TorchGraphPool, 1)
        .capture(Kind::CaptureEnd, 5)
        .capture(Kind::CaptureBegin, 5)
        .alloc(T, 32 * MIB, Owner::TorchGraphPool, 1)
        .alloc(C, 16 * MIB, Owner::TorchGraphPool, 1)
        .capture(Kind::CaptureEnd, 5);
    // A segment whose pool PyTorch's hooks told the shim: that id, capture window or not.
    let mut told = r.ev(Kind::Alloc, Api::cuMemAlloc_v2);
    told.addr = NCCL_VA;
    told.size = 8 * MIB;
    told.owner = Owner::TorchGraphPool as u8;
    told.module = 1;
    told.flags |= vramledger_format::record::flags::TORCH_POOL;
    (told.arg1, told.arg2) = (0, 7);
    r.put(told);
    r.write(&d.join("a.vlj"));
    let v = memory_viz(&d, &[], &d.join("s.pickle"));
    let pools: Vec<(u64, Value)> = v["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["address"].as_u64().unwrap(), s["segment_pool_id"].clone()))
        .collect();
    assert_eq!(
        pools,
        [
            (A, json!([0, 0])),
            (T, json!([2, 0])),
            (G, json!([1, 0])),
            (NCCL_VA, json!([0, 7])),
            (C, json!([2, 0])),
        ]
    );
}

#[test]
fn memory_viz_golden() {
    let d = dir("viz");
    run(609).write(&d.join("a.vlj"));
    let v = memory_viz(&d, &[], &d.join("s.pickle"));
    let (c10, nccl, cublas) = ("libc10_cuda.so", "libnccl.so.2", "libcublas.so.13");
    assert_eq!(
        v["segments"],
        json!([
            segment(G, 256 * MIB, false, "torch_graph_pool", c10),
            segment(NCCL_VA, 32 * MIB, true, "nccl", nccl),
        ])
    );
    assert_eq!(v["allocator_settings"], json!({}));
    let pair = |a: &str, b: &str, addr, size, t, owner, module, stage| {
        if a == "free" {
            // A free: requested and completed at once, then the segment is gone.
            vec![
                entry("free_requested", addr, size, t, owner, module, stage),
                entry("free_completed", addr, size, t, owner, module, stage),
                entry(b, addr, size, t, owner, module, stage),
            ]
        } else {
            vec![
                entry(a, addr, size, t, owner, module, stage),
                entry(b, addr, size, t, owner, module, stage),
            ]
        }
    };
    let mut expected = Vec::new();
    expected.extend(pair(
        "segment_alloc",
        "alloc",
        A,
        4 * GIB,
        9000,
        "torch",
        c10,
        "weight_load",
    ));
    expected.extend(pair(
        "segment_alloc",
        "alloc",
        B,
        64 * MIB,
        10000,
        "direct",
        cublas,
        "weight_load",
    ));
    expected.extend(pair(
        "segment_alloc",
        "alloc",
        C,
        8 * GIB,
        13000,
        "torch",
        c10,
        "kv_pool",
    ));
    expected.extend(pair(
        "free",
        "segment_free",
        B,
        64 * MIB,
        14000,
        "direct",
        cublas,
        "kv_pool",
    ));
    expected.extend(pair(
        "segment_alloc",
        "alloc",
        NCCL_VA,
        32 * MIB,
        18000,
        "nccl",
        nccl,
        "graph_capture",
    ));
    expected.extend(pair(
        "segment_alloc",
        "alloc",
        NCCL_VA2,
        2 * MIB,
        20000,
        "nccl",
        nccl,
        "graph_capture",
    ));
    expected.extend(pair(
        "free",
        "segment_free",
        NCCL_VA2,
        2 * MIB,
        21000,
        "nccl",
        nccl,
        "graph_capture",
    ));
    expected.extend(pair(
        "segment_alloc",
        "alloc",
        G,
        256 * MIB,
        23000,
        "torch_graph_pool",
        c10,
        "graph_capture",
    ));
    expected.extend(pair(
        "segment_alloc",
        "alloc",
        T,
        GIB,
        24000,
        "torch",
        c10,
        "graph_capture",
    ));
    expected.extend(pair(
        "free",
        "segment_free",
        T,
        GIB,
        25000,
        "torch",
        c10,
        "graph_capture",
    ));
    expected.extend(pair(
        "free",
        "segment_free",
        C,
        8 * GIB,
        28000,
        "torch",
        c10,
        "serving",
    ));
    expected.push(
        json!({"action": "oom", "addr": 0, "size": 2 * GIB, "device_free": F_OOM,
        "stream": 0, "time_us": wall_us(609, 31000), "frames": frames(c10, "torch"),
        "category": "torch",
        "user_metadata": "serving"}),
    );
    expected.extend(pair(
        "free",
        "segment_free",
        A,
        4 * GIB,
        33000,
        "torch",
        c10,
        "serving",
    ));
    expected.push(
        json!({"action": "snapshot", "addr": 0, "size": 0, "stream": 0,
        "time_us": wall_us(609, 33000), "frames": [], "category": "unknown",
        "user_metadata": "serving"}),
    );
    assert_eq!(v["device_traces"], json!([expected]));

    // At a stage: the history stops there and the segments are those live then.
    let v = memory_viz(&d, &["--at", "kv_pool"], &d.join("k.pickle"));
    let addrs: Vec<&Value> = v["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["address"])
        .collect();
    assert_eq!(addrs, [&json!(A), &json!(C)]);
    assert_eq!(v["device_traces"][0].as_array().unwrap().len(), 10);
    // At the peak and at the OOM.
    let v = memory_viz(&d, &["--at-peak"], &d.join("p.pickle"));
    assert_eq!(v["segments"].as_array().unwrap().len(), 5);
    let v = memory_viz(&d, &["--at-oom"], &d.join("o.pickle"));
    let trace = v["device_traces"][0].as_array().unwrap();
    assert_eq!(trace[trace.len() - 2]["action"], "oom");
}

#[test]
fn memory_viz_gives_shared_ordinals_their_own_slot() {
    let d = dir("viz-slots");
    run(610).write(&d.join("a.vlj"));
    let mut r = Run::new(611);
    r.context(16 * GIB, 512 * MIB)
        .stage("weight_load", F0)
        .alloc(A, GIB, Owner::Torch, 0);
    r.write(&d.join("b.vlj"));
    let out = d.join("s.pickle");
    let (rc, err) = vramledger(&[
        "snapshot",
        d.to_str().unwrap(),
        "--format",
        "memory-viz",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("pid 611 cuda:0 is device 1"), "{err}");
    let v = unpickle(&std::fs::read(&out).unwrap());
    check_viewer_invariants(&v);
    python_check(&out);
    let devices: Vec<u64> = v["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["device"].as_u64().unwrap())
        .collect();
    assert_eq!(devices, [0, 0, 1]);
    assert_eq!(v["device_traces"].as_array().unwrap().len(), 2);
}

// ---------------------------------------------------------------------------------------
// Perfetto

/// The trace-event format's rules, as chrome://tracing and Perfetto's JSON importer read
/// them.
fn check_trace_events(v: &Value) {
    assert_eq!(v["displayTimeUnit"], "ms");
    let events = v["traceEvents"].as_array().unwrap();
    let mut last_ts: std::collections::BTreeMap<(u64, String), f64> = Default::default();
    // Complete events of one thread nest or follow each other; importers drop a slice that
    // overlaps another partly (Perfetto: `slice_drop_overlapping_complete_event`).
    let mut last_end: std::collections::BTreeMap<(u64, u64), u64> = Default::default();
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        assert!(["M", "C", "X", "i"].contains(&ph), "{e}");
        assert!(e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        assert!(e["name"].is_string(), "{e}");
        // A category on every event (viewers name tracks `cat.name`), whole µs timestamps.
        assert!(e["cat"].as_str().is_some_and(|c| !c.is_empty()), "{e}");
        assert!(e["ts"].is_u64(), "{e}");
        match ph {
            "M" => {
                assert!(["process_name", "thread_name"].contains(&e["name"].as_str().unwrap()));
                assert!(e["args"]["name"].is_string(), "{e}");
            }
            "C" => {
                let ts = e["ts"].as_f64().unwrap();
                assert!(ts >= 0.0);
                let args = e["args"].as_object().unwrap();
                assert!(
                    !args.is_empty() && args.values().all(Value::is_number),
                    "{e}"
                );
                // One event per distinct timestamp per counter, in time order.
                let key = (
                    e["pid"].as_u64().unwrap(),
                    e["name"].as_str().unwrap().to_string(),
                );
                if let Some(&prev) = last_ts.get(&key) {
                    assert!(ts > prev, "{e}: after {prev}");
                }
                last_ts.insert(key, ts);
            }
            "X" => {
                let (ts, dur) = (e["ts"].as_u64().unwrap(), e["dur"].as_u64().unwrap());
                let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
                let prev = last_end.insert(key, ts + dur).unwrap_or(0);
                assert!(
                    ts >= prev,
                    "{e} starts before the slice before it ends ({prev})"
                );
            }
            "i" => {
                assert!(e["ts"].as_f64().unwrap() >= 0.0, "{e}");
                assert_eq!(e["s"], "p");
            }
            _ => unreachable!(),
        }
    }
}

fn perfetto(path: &Path, args: &[&str], out: &Path) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "perfetto"]);
    let v: Value = serde_json::from_slice(&snapshot(path, &all, out)).unwrap();
    check_trace_events(&v);
    v
}

fn of<'a>(v: &'a Value, ph: &str, name: &str) -> Vec<&'a Value> {
    v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == ph && e["name"] == name)
        .collect()
}

/// The trace's `ts` (whole wall-clock µs) of journal time `t_ns` for `Run::new(pid)`.
fn wall_ts(pid: i128, t_ns: i128) -> f64 {
    ((1_700_000_000_000_000_000i128 + pid + t_ns - 2000) / 1000) as f64
}

#[test]
fn perfetto_golden() {
    let d = dir("perfetto");
    run(612).write(&d.join("a.vlj"));
    let v = perfetto(&d, &[], &d.join("t.json"));
    // Wall-clock µs since the epoch; below, relative to the journal start (its first
    // record, at 2 µs).
    let t0 = wall_ts(612, 2000);
    let rel = |ts: f64| ts - t0;
    assert_eq!(v["otherData"]["origin_unix_ns"], "0");
    assert_eq!(v["otherData"]["run_start_unix_ns"], "1700000000000000612");
    let meta = of(&v, "M", "process_name");
    assert_eq!(
        meta,
        [
            &json!({"ph": "M", "cat": "__metadata", "name": "process_name", "pid": 612,
                 "tid": 0, "ts": 0, "args": {"name": "vramledger pid 612"}})
        ]
    );
    // Every event has a category (viewers name tracks `cat.name`).
    for e in v["traceEvents"].as_array().unwrap() {
        assert!(e["cat"].as_str().is_some_and(|c| !c.is_empty()), "{e}");
    }
    let stages: Vec<(String, f64, f64, u64)> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                rel(e["ts"].as_f64().unwrap()),
                e["dur"].as_f64().unwrap(),
                e["tid"].as_u64().unwrap(),
            )
        })
        .collect();
    let s = |n: &str, ts: f64, dur: f64| (n.to_string(), ts, dur, 1);
    assert_eq!(
        stages,
        [
            s("startup", 0.0, 5.0),
            s("weight_load", 5.0, 4.0),
            s("kv_pool", 9.0, 4.0),
            s("graph_capture", 13.0, 11.0),
            s("serving", 24.0, 7.0)
        ]
    );
    let vram = of(&v, "C", "vram cuda:0");
    let series: Vec<(f64, u64, u64, u64)> = vram
        .iter()
        .map(|e| {
            let a = &e["args"];
            let total: u64 = a
                .as_object()
                .unwrap()
                .values()
                .map(|x| x.as_u64().unwrap())
                .sum();
            (
                rel(e["ts"].as_f64().unwrap()),
                a["torch"].as_u64().unwrap(),
                a["context"].as_u64().unwrap(),
                total,
            )
        })
        .collect();
    let ctx = 512 * MIB;
    assert_eq!(
        series,
        [
            (4.0, 0, ctx, ctx),
            (7.0, 4 * GIB, ctx, ctx + 4 * GIB),
            (8.0, 4 * GIB, ctx, ctx + 4 * GIB + 64 * MIB),
            (11.0, 12 * GIB, ctx, ctx + 12 * GIB + 64 * MIB),
            (12.0, 12 * GIB, ctx, ctx + 12 * GIB),
            (15.0, 12 * GIB, ctx, ctx + 12 * GIB + 32 * MIB),
            (17.0, 12 * GIB, ctx, ctx + 12 * GIB + 34 * MIB),
            (20.0, 12 * GIB, ctx, ctx + 12 * GIB + 32 * MIB),
            (21.0, 12 * GIB, ctx, ctx + 12 * GIB + 288 * MIB),
            (22.0, 13 * GIB, ctx, ctx + 13 * GIB + 288 * MIB),
            (23.0, 12 * GIB, ctx, ctx + 12 * GIB + 288 * MIB),
            (26.0, 4 * GIB, ctx, ctx + 4 * GIB + 288 * MIB),
            (31.0, 0, ctx, ctx + 288 * MIB),
        ]
    );
    let keys: Vec<&String> = vram[0]["args"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "context",
            "direct",
            "nccl",
            "torch",
            "torch_graph_pool",
            "vmm"
        ]
    );
    let free: Vec<(f64, u64)> = of(&v, "C", "free cuda:0")
        .iter()
        .map(|e| {
            (
                rel(e["ts"].as_f64().unwrap()),
                e["args"]["free"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        free,
        [(6.0, F0), (10.0, F1), (14.0, F2), (25.0, F3), (30.0, F_OOM)]
    );
    let oom = of(&v, "i", "out of memory cuda:0");
    assert_eq!(oom.len(), 1);
    assert_eq!(rel(oom[0]["ts"].as_f64().unwrap()), 29.0);
    assert_eq!(oom[0]["args"]["requested_bytes"], 2 * GIB);

    // Up to a stage: the counters and the spans stop there.
    let v = perfetto(&d, &["--at", "kv_pool"], &d.join("k.json"));
    assert_eq!(of(&v, "C", "vram cuda:0").len(), 5);
    let last = of(&v, "X", "kv_pool");
    assert_eq!(
        (last[0]["ts"].as_f64().map(rel), last[0]["dur"].as_f64()),
        (Some(9.0), Some(4.0))
    );
    assert!(of(&v, "X", "graph_capture").is_empty());
    perfetto(&d, &["--at-peak"], &d.join("p.json"));
    perfetto(&d, &["--at-oom"], &d.join("o.json"));
}

#[test]
fn perfetto_coalesces_equal_times_and_keeps_time_order() {
    // Records whose clock reads go backwards (a time is read before the slot is taken) and
    // two changes within the same nanosecond.
    let d = dir("perfetto-clock");
    let mut r = Run::new(613);
    r.context(16 * GIB, 512 * MIB); // t = 3000
    let mut a = r.ev(Kind::Alloc, Api::cuMemAlloc_v2);
    a.t_ns = 9000;
    a.addr = A;
    a.size = GIB;
    a.owner = Owner::Torch as u8;
    r.put(a.clone());
    a.t_ns = 8000; // earlier than the record before it
    a.addr = B;
    r.put(a.clone());
    a.t_ns = 9000;
    a.addr = C;
    r.put(a);
    r.write(&d.join("a.vlj"));
    let v = perfetto(&d, &[], &d.join("t.json"));
    let t0 = wall_ts(613, 2000);
    let rel = |ts: f64| ts - t0;
    let series: Vec<(f64, u64)> = of(&v, "C", "vram cuda:0")
        .iter()
        .map(|e| {
            (
                rel(e["ts"].as_f64().unwrap()),
                e["args"]["torch"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(series, [(1.0, 0), (7.0, 3 * GIB)]);
}

// ---------------------------------------------------------------------------------------
// The recorded H200 journals

#[test]
fn recorded_h200_run_snapshots_in_every_format() {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-sglang-shape");
    let d = dir("h200");
    let report = Command::new(cli())
        .args(["report", "--json"])
        .arg(&data)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    let report_device = |pid: &Value, dev: &Value| -> Value {
        report["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| &p["pid"] == pid)
            .and_then(|p| {
                p["devices"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|d| &d["device"] == dev)
                    .cloned()
            })
            .unwrap()
    };
    for at in ["--at-end", "--at-peak"] {
        let v = snapshot_json(&data, &[at], &d.join("s.json"));
        let procs = v["processes"].as_array().unwrap();
        let devices: Vec<&Value> = procs
            .iter()
            .flat_map(|p| p["devices"].as_array().unwrap())
            .collect();
        assert_eq!(devices.len(), 2, "{at}");
        for p in procs {
            for dev in p["devices"].as_array().unwrap() {
                let r = report_device(&p["pid"], &dev["device"]);
                let total = dev["total_bytes"].as_i64().unwrap();
                if at == "--at-peak" {
                    assert_eq!(total, r["peak"]["total"]["bytes"].as_i64().unwrap());
                    assert_eq!(dev["point"]["stage"], r["peak"]["total"]["stage"]);
                    assert_eq!(dev["point"]["t_ns"], r["peak"]["total"]["t_ns"]);
                } else {
                    assert_eq!(total, r["live_at_end"]["total_bytes"].as_i64().unwrap());
                }
                // What is listed adds up: allocations + the context = the owners' total.
                let listed: i64 = dev["allocations"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a["bytes"].as_i64().unwrap())
                    .sum();
                let context = dev["context"]["bytes"].as_i64().unwrap_or(0);
                assert_eq!(listed + context, total, "{at}");
                let by_stage: i64 = dev["by_stage"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s["total_bytes"].as_i64().unwrap())
                    .sum();
                assert_eq!(by_stage, total, "{at}");
            }
        }
        let viz = memory_viz(&data, &[at], &d.join("s.pickle"));
        assert!(!viz["segments"].as_array().unwrap().is_empty());
        let trace = perfetto(&data, &[at], &d.join("t.json"));
        assert_eq!(of(&trace, "M", "process_name").len(), procs.len());
    }
    // The graph-capture stage of the recording holds graph-pool memory at its end.
    let v = snapshot_json(&data, &["--at", "graph_capture"], &d.join("g.json"));
    for p in v["processes"].as_array().unwrap() {
        assert!(
            p["devices"][0]["by_owner"]["torch_graph_pool"]
                .as_u64()
                .unwrap()
                > 0
        );
    }
}

#[test]
fn at_oom_on_a_journal_the_shim_recorded() {
    // The `oom` client allocates 64 MiB blocks through cudart until the fake driver's 1 GiB
    // runs out, under the preloaded shim.
    let shim = support::profile_dir().join("libvramledger.so");
    assert!(
        shim.is_file(),
        "{} is missing: run `cargo build --workspace` first",
        shim.display()
    );
    let d = dir("shim-oom");
    let out_dir = d.join("run");
    let (shim_s, out_s) = (
        shim.to_string_lossy().into_owned(),
        out_dir.to_string_lossy().into_owned(),
    );
    let run = support::clients().run(
        "oom",
        &[],
        &[
            ("FAKECUDA_MEM_BYTES", "1073741824"),
            ("FAKECUDA_CONTEXT_BYTES", "0"),
            ("LD_PRELOAD", &shim_s),
            ("VRAMLEDGER_OUT", &out_s),
        ],
    );
    assert!(run.success(), "{}", run.dump());
    let v = snapshot_json(&out_dir, &["--at-oom"], &d.join("oom.json"));
    let p = &v["processes"][0];
    let oom = &p["oom"];
    assert_eq!(
        (
            &oom["requested_bytes"],
            &oom["result"],
            &oom["owner"],
            &oom["free_bytes"]
        ),
        (&json!(64 * MIB), &json!(2), &json!("direct"), &json!(0))
    );
    let dev = &p["devices"][oom["device"].as_u64().unwrap() as usize];
    let allocations = dev["allocations"].as_array().unwrap();
    assert_eq!(allocations.len(), 16);
    assert!(allocations
        .iter()
        .all(|a| a["bytes"] == 64 * MIB && a["owner"] == "direct" && a["kind"] == "alloc"));
    assert_eq!(dev["by_owner"]["direct"], GIB);
    let viz = memory_viz(&out_dir, &["--at-oom"], &d.join("oom.pickle"));
    assert_eq!(viz["segments"].as_array().unwrap().len(), 16);
    let trace = perfetto(&out_dir, &["--at-oom"], &d.join("oom.trace.json"));
    assert_eq!(of(&trace, "i", "out of memory cuda:0").len(), 1);
}
