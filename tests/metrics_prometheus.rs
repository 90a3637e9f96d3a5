//! A real Prometheus server (Debian's `prometheus` package) scrapes `vramledger serve` on
//! loopback while a client under the preload moves memory, and queries through its HTTP API
//! return the bytes the report gives for the run once it ended.

mod metrics_support;
mod support;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use metrics_support::{http, report_json, scratch, skip, tool, wait_for, Live, Serve};
use serde_json::Value;

struct Prometheus {
    child: Child,
    addr: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_prometheus(bin: &PathBuf, dir: &std::path::Path, target: &str) -> Prometheus {
    let cfg = dir.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: vramledger\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let child = Command::new(bin)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .expect("start prometheus");
    Prometheus { child, addr }
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of an instant query that returns one series.
fn query(p: &Prometheus, q: &str) -> Option<f64> {
    let (status, _, body) = http(
        &p.addr,
        "GET",
        &format!("/api/v1/query?query={}", encode(q)),
        None,
    );
    if status != 200 {
        return None;
    }
    let v: Value = serde_json::from_str(&body).ok()?;
    let result = v.pointer("/data/result")?.as_array()?;
    if result.len() != 1 {
        return None;
    }
    result[0].pointer("/value/1")?.as_str()?.parse().ok()
}

#[test]
fn prometheus_scrapes_serve_and_its_queries_give_the_reports_bytes() {
    let t = "metrics_prometheus";
    let Some(bin) = tool("prometheus") else {
        skip(
            t,
            "the prometheus server is not installed (Debian's prometheus package)",
        );
        return;
    };
    let dir = scratch("prometheus");
    let run = dir.join("run");
    std::fs::create_dir_all(&run).unwrap();
    let serve = Serve::start(&run, &[]);
    let prom = start_prometheus(&bin, &dir, &serve.addr);
    let ready = wait_for(Duration::from_secs(60), || {
        (http_ok(&prom.addr, "/-/ready")).then_some(())
    });
    let log = || std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
    assert!(
        ready.is_some(),
        "prometheus did not become ready:\n{}",
        log()
    );

    let mut live = Live::start(&run, &[]);
    let pid = live.child.id();
    live.send("stage weight_load");
    live.send("torch 0 256");
    let torch = format!(
        "vramledger_live_bytes{{job=\"vramledger\",pid=\"{pid}\",device=\"0\",owner=\"torch\"}}"
    );
    let seen = wait_for(Duration::from_secs(30), || {
        query(&prom, &torch).filter(|v| *v > 0.0)
    });
    assert_eq!(seen, Some(256.0 * 1048576.0), "prometheus log:\n{}", log());
    // It keeps scraping: a change shows up.
    live.send("torch 0 64");
    let seen = wait_for(Duration::from_secs(30), || {
        query(&prom, &torch).filter(|v| *v > 256.0 * 1048576.0)
    });
    assert_eq!(seen, Some(320.0 * 1048576.0));
    let up = query(&prom, "up{job=\"vramledger\"}");
    assert_eq!(up, Some(1.0), "the scrape target is up");
    live.send("stage kv_pool");
    live.send("malloc 1 48");
    live.quit();

    // After the end: every owner's live bytes as Prometheus holds them equal the report's.
    let report = report_json(&run);
    let p = report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"].as_u64() == Some(pid as u64))
        .expect("the process is in the report");
    let running = format!("vramledger_process_running{{pid=\"{pid}\"}}");
    assert_eq!(
        wait_for(Duration::from_secs(30), || query(&prom, &running)
            .filter(|v| *v == 0.0)),
        Some(0.0),
        "prometheus sees the end"
    );
    let mut compared = 0;
    for d in p["devices"].as_array().unwrap() {
        let dev = d["device"].as_i64().unwrap();
        for (owner, bytes) in d["live_at_end"]["by_owner"].as_object().unwrap() {
            if owner == "unattributed" {
                continue;
            }
            let q = format!(
                "vramledger_live_bytes{{pid=\"{pid}\",device=\"{dev}\",owner=\"{owner}\"}}"
            );
            assert_eq!(query(&prom, &q), bytes.as_f64(), "{q}");
            compared += 1;
        }
        let q = format!("sum(vramledger_stage_delta_bytes{{pid=\"{pid}\",device=\"{dev}\"}})");
        let sum: i64 = d["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["device_delta_bytes"].as_i64().unwrap())
            .sum();
        assert_eq!(query(&prom, &q), Some(sum as f64), "{q}");
    }
    assert_eq!(compared, 12, "2 devices x 6 owners");
    let stage = format!("vramledger_current_stage_info{{pid=\"{pid}\",stage=\"kv_pool\"}}");
    assert_eq!(query(&prom, &stage), Some(1.0));
}

fn http_ok(addr: &str, path: &str) -> bool {
    std::net::TcpStream::connect(addr).is_ok() && http(addr, "GET", path, None).0 == 200
}
