//! Shared by the tests of `metrics`, `serve`, `top` and `export` (tests/metrics*.rs):
//! skips that fail in CI, the CLI, a live C client under the preload, a `serve` child, a
//! raw HTTP GET, the reference exposition parser, and the comparison with the report.
#![allow(dead_code)] // each test binary uses a different part

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{self, clients, profile_dir};

/// A test that cannot run here: fails under `VRAMLEDGER_CI=1` (CI installs every tool, so a
/// skip there is a broken CI), else says why on stderr and appends the reason to the file
/// named by `VRAMLEDGER_SKIP_LOG` (where a runner counts skips).
pub fn skip(test: &str, reason: &str) {
    if std::env::var("VRAMLEDGER_CI").is_ok_and(|v| v == "1") {
        panic!("{test}: {reason} (VRAMLEDGER_CI=1: skips are failures; .ci/run installs it)");
    }
    eprintln!("SKIPPED {test}: {reason}");
    if let Ok(log) = std::env::var("VRAMLEDGER_SKIP_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = writeln!(f, "{test}: {reason}");
        }
    }
}

/// A program on PATH.
pub fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

pub fn cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vramledger"))
}

pub fn vramledger(args: &[&str]) -> Output {
    Command::new(cli())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run vramledger")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh folder under the target's temp dir.
pub fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("metrics-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn data(name: &str) -> PathBuf {
    support::manifest_dir().join("tests/data").join(name)
}

pub fn report_json(path: &Path) -> Value {
    let out = vramledger(&["report", "--json", path.to_str().unwrap()]);
    assert!(out.status.success(), "report failed: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// One parsed sample.
#[derive(Debug, Clone)]
pub struct Sample {
    pub family: String,
    pub kind: String,
    pub unit: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses an exposition with prometheus_client; `None` (after `skip`) when it is missing.
/// A parse error fails the test.
pub fn parse(test: &str, exposition: &str, openmetrics: bool) -> Option<Vec<Sample>> {
    let script = support::manifest_dir().join("tests/metrics_parse.py");
    let mut child = match Command::new("python3")
        .arg(&script)
        .arg(if openmetrics {
            "openmetrics"
        } else {
            "prometheus"
        })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            skip(test, &format!("python3 cannot be run: {e}"));
            return None;
        }
    };
    // A parser that exits before reading (no prometheus_client: exit 3) closes the pipe; its
    // exit status, not the write, says why.
    let written = child.stdin.take().unwrap().write_all(exposition.as_bytes());
    if let Err(e) = written {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{test}: {e}");
    }
    let out = child.wait_with_output().unwrap();
    if out.status.code() == Some(3) {
        skip(
            test,
            "Python's prometheus_client is not installed (pip install prometheus_client)",
        );
        return None;
    }
    assert!(
        out.status.success(),
        "prometheus_client rejected the exposition: {}\n{exposition}",
        text(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    Some(
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| Sample {
                family: s["family"].as_str().unwrap().into(),
                kind: s["type"].as_str().unwrap().into(),
                unit: s["unit"].as_str().unwrap_or("").into(),
                name: s["name"].as_str().unwrap().into(),
                labels: s["labels"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect(),
                value: s["value"].as_f64().unwrap(),
            })
            .collect(),
    )
}

/// The value of the one sample named `name` whose labels include `want`.
pub fn value(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> Option<f64> {
    let hits: Vec<&Sample> = samples
        .iter()
        .filter(|s| {
            s.name == name
                && want
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert!(
        hits.len() <= 1,
        "{name} {want:?} matches {} samples: {hits:?}",
        hits.len()
    );
    hits.first().map(|s| s.value)
}

fn owners(v: &Value) -> BTreeMap<String, i64> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

/// Every per-device figure the exposition shares with `report --json`, compared to the byte:
/// live and peak per owner, the hooked peak, unattributed, free at the end, per stage × owner
/// deltas (summed over repeats), the current stage. Returns how many figures were compared.
pub fn assert_matches_report(samples: &[Sample], report: &Value) -> usize {
    let mut compared = 0;
    for p in report["processes"].as_array().unwrap() {
        let pid = p["pid"].as_u64().unwrap().to_string();
        let host = p["host"].as_str().unwrap();
        let proc_l = [("pid", pid.as_str()), ("host", host)];
        for d in p["devices"].as_array().unwrap() {
            let dev = d["device"].as_i64().unwrap().to_string();
            fn l<'a>(
                proc_l: &[(&'a str, &'a str)],
                dev: &'a str,
                extra: &[(&'a str, &'a str)],
            ) -> Vec<(&'a str, &'a str)> {
                let mut v: Vec<(&str, &str)> = proc_l.to_vec();
                v.push(("device", dev));
                v.extend_from_slice(extra);
                v
            }
            let mut eq = |name: &str, labels: Vec<(&str, &str)>, want: i64| {
                let got = value(samples, name, &labels)
                    .unwrap_or_else(|| panic!("no {name} {labels:?} in the exposition"));
                assert_eq!(got, want as f64, "{name} {labels:?}");
                compared += 1;
            };
            for (o, live) in owners(&d["live_at_end"]["by_owner"]) {
                if o == "unattributed" {
                    continue;
                }
                eq(
                    "vramledger_live_bytes",
                    l(&proc_l, &dev, &[("owner", &o)]),
                    live,
                );
                let peak = d["peak"]["by_owner"][&o]["bytes"].as_i64().unwrap_or(0);
                eq(
                    "vramledger_peak_bytes",
                    l(&proc_l, &dev, &[("owner", &o)]),
                    peak,
                );
            }
            eq(
                "vramledger_hooked_peak_bytes",
                l(&proc_l, &dev, &[]),
                d["peak"]["total"]["bytes"].as_i64().unwrap(),
            );
            eq(
                "vramledger_unattributed_bytes",
                l(&proc_l, &dev, &[]),
                d["reconciliation"]["unattributed_bytes"].as_i64().unwrap(),
            );
            if let Some(free) = d["reconciliation"]["end_free_bytes"].as_i64() {
                eq("vramledger_free_bytes", l(&proc_l, &dev, &[]), free);
            }
            let mut by_stage: BTreeMap<(String, String), i64> = BTreeMap::new();
            let mut device_delta: BTreeMap<String, i64> = BTreeMap::new();
            for s in d["stages"].as_array().unwrap() {
                let name = s["name"].as_str().unwrap().to_string();
                *device_delta.entry(name.clone()).or_default() +=
                    s["device_delta_bytes"].as_i64().unwrap();
                for (o, b) in owners(&s["by_owner"]) {
                    *by_stage.entry((name.clone(), o)).or_default() += b;
                }
            }
            for ((stage, o), b) in &by_stage {
                eq(
                    "vramledger_stage_delta_bytes",
                    l(&proc_l, &dev, &[("stage", stage), ("owner", o)]),
                    *b,
                );
            }
            for (stage, b) in &device_delta {
                eq(
                    "vramledger_stage_device_delta_bytes",
                    l(&proc_l, &dev, &[("stage", stage)]),
                    *b,
                );
            }
            let last = d["stages"].as_array().unwrap().last().unwrap()["name"]
                .as_str()
                .unwrap();
            let stage = value(
                samples,
                "vramledger_current_stage_info",
                &[proc_l[0], proc_l[1], ("stage", last)],
            );
            assert_eq!(stage, Some(1.0), "current stage of pid {pid} is {last}");
            compared += 1;
        }
    }
    compared
}

/// `metrics_steps` (tests/clients), built next to the shared clients.
pub use support::steps_exe;

pub fn shim() -> PathBuf {
    let lib = profile_dir().join("libvramledger.so");
    assert!(
        lib.is_file(),
        "{} is missing: cargo build --workspace first",
        lib.display()
    );
    lib
}

/// A running `metrics_steps` under the preload, writing its journal into `out`.
pub struct Live {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    done: usize,
}

impl Live {
    pub fn start(out: &Path, env: &[(&str, &str)]) -> Live {
        let exe = steps_exe();
        let shim = shim();
        let out_s = out.display().to_string();
        let shim_s = shim.display().to_string();
        let mut all: Vec<(&str, &str)> = vec![
            ("LD_PRELOAD", shim_s.as_str()),
            ("VRAMLEDGER_OUT", out_s.as_str()),
        ];
        all.extend_from_slice(env);
        let mut cmd = support::command(&exe, &[], &clients().driver_dir, &all);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("start metrics_steps");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Live {
            child,
            stdin,
            stdout,
            done: 0,
        }
    }

    /// Sends one command and waits until the client says it is done.
    pub fn send(&mut self, cmd: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{cmd}").unwrap();
        stdin.flush().unwrap();
        self.done += 1;
        let want = format!("ok {}", self.done);
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "metrics_steps ended before {cmd:?} was done");
            assert!(!line.starts_with("failed"), "metrics_steps: {line}");
            if line.trim_end() == want {
                return;
            }
        }
    }

    /// Sends `quit` and waits for the exit.
    pub fn quit(mut self) {
        let mut stdin = self.stdin.take().unwrap();
        let _ = writeln!(stdin, "quit");
        drop(stdin);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "metrics_steps: {status}");
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A `vramledger serve` child on a free loopback port.
pub struct Serve {
    pub child: Child,
    pub addr: String,
}

impl Serve {
    pub fn start(run: &Path, extra: &[&str]) -> Serve {
        let mut child = Command::new(cli())
            .arg("serve")
            .arg(run)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve");
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(
                err.read_line(&mut line).unwrap() > 0,
                "serve ended before it listened"
            );
            if let Some(rest) = line.split("at http://").nth(1) {
                break rest.split('/').next().unwrap().to_string();
            }
        };
        // Keep draining stderr so serve never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            let _ = err.read_to_string(&mut sink);
        });
        Serve { child, addr }
    }

    pub fn scrape(&self) -> String {
        let (status, _, body) = http(&self.addr, "GET", "/metrics", None);
        assert_eq!(status, 200, "{body}");
        body
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request over a new connection: status, head, body.
pub fn http(addr: &str, method: &str, path: &str, accept: Option<&str>) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    if let Err(e) = s.read_to_end(&mut raw) {
        return (0, format!("read failed: {e}"), String::new());
    }
    let raw = text(&raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// Waits up to `limit` for `f` to give a value.
pub fn wait_for<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if t0.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
