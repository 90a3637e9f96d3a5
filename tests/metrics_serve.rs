//! `vramledger serve`: a live run (a C client under the preload over the fake driver, its
//! memory moved step by step) scraped as it grows and compared with the report when it ends;
//! concurrent, slow and odd HTTP clients; busy ports and bad addresses.

mod metrics_support;
mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use metrics_support::{
    assert_matches_report, data, http, parse, report_json, scratch, text, value, vramledger,
    wait_for, Live, Sample, Serve,
};

const MIB: f64 = 1048576.0;

fn scrape_parsed(s: &Serve, test: &str) -> Option<Vec<Sample>> {
    parse(test, &s.scrape(), false)
}

#[test]
fn serve_follows_a_live_run_from_a_folder_that_does_not_exist_yet() {
    let t = "metrics_serve::live";
    let run = scratch("serve-live").join("run");
    let serve = Serve::start(&run, &[]);
    let Some(first) = scrape_parsed(&serve, t) else {
        return;
    };
    assert_eq!(value(&first, "vramledger_journals", &[]), Some(0.0));

    let mut live = Live::start(&run, &[]);
    let pid = live.child.id().to_string();
    live.send("malloc 0 64");
    let p = pid.as_str();
    let dev0 = |extra: &[(&'static str, &'static str)]| {
        let mut v = vec![("pid", p), ("device", "0")];
        v.extend_from_slice(extra);
        v
    };
    // The folder and the journal appear; the next rescan finds them.
    let s = wait_for(Duration::from_secs(10), || {
        let s = scrape_parsed(&serve, t)?;
        value(&s, "vramledger_live_bytes", &dev0(&[("owner", "direct")])).map(|_| s)
    })
    .expect("the new process appears");
    assert_eq!(
        value(&s, "vramledger_live_bytes", &dev0(&[("owner", "direct")])),
        Some(64.0 * MIB)
    );
    assert_eq!(
        value(&s, "vramledger_process_running", &[("pid", p)]),
        Some(1.0)
    );

    live.send("stage weight_load");
    live.send("torch 0 300");
    let s = scrape_parsed(&serve, t).unwrap();
    assert_eq!(
        value(&s, "vramledger_live_bytes", &dev0(&[("owner", "torch")])),
        Some(300.0 * MIB)
    );
    assert_eq!(
        value(
            &s,
            "vramledger_stage_delta_bytes",
            &dev0(&[("stage", "weight_load"), ("owner", "torch")])
        ),
        Some(300.0 * MIB)
    );
    assert_eq!(
        value(
            &s,
            "vramledger_current_stage_info",
            &[("pid", p), ("stage", "weight_load")]
        ),
        Some(1.0)
    );

    // An SGLang line read by the stdout tap moves the stage and names the TP rank.
    live.send("say [2026-01-01 00:00:00 TP1] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=10.00 GB, mem usage=0.30 GB.");
    live.send("oom 0");
    live.send("malloc 1 32");
    live.send("free 0");
    let s = scrape_parsed(&serve, t).unwrap();
    assert_eq!(
        value(
            &s,
            "vramledger_current_stage_info",
            &[("pid", p), ("stage", "kv_pool"), ("tp_rank", "1")]
        ),
        Some(1.0)
    );
    assert_eq!(value(&s, "vramledger_oom_total", &dev0(&[])), Some(1.0));
    assert_eq!(
        value(&s, "vramledger_live_bytes", &dev0(&[("owner", "direct")])),
        Some(0.0)
    );
    assert_eq!(
        value(
            &s,
            "vramledger_live_bytes",
            &[("pid", p), ("device", "1"), ("owner", "direct")]
        ),
        Some(32.0 * MIB)
    );
    assert_eq!(
        value(&s, "vramledger_peak_bytes", &dev0(&[("owner", "direct")])),
        Some(64.0 * MIB)
    );

    // A second process joins the run.
    let mut second = Live::start(&run, &[]);
    let pid2 = second.child.id().to_string();
    second.send("torch 0 20");
    wait_for(Duration::from_secs(10), || {
        let s = scrape_parsed(&serve, t)?;
        value(
            &s,
            "vramledger_live_bytes",
            &[("pid", pid2.as_str()), ("device", "0"), ("owner", "torch")],
        )
    })
    .expect("the second process appears");

    live.quit();
    second.quit();
    let s = scrape_parsed(&serve, t).unwrap();
    assert_eq!(
        value(&s, "vramledger_process_running", &[("pid", p)]),
        Some(0.0),
        "ended, still shown"
    );
    assert_eq!(value(&s, "vramledger_journals", &[]), Some(2.0));
    let compared = assert_matches_report(&s, &report_json(&run));
    assert!(compared > 40, "{compared}");
}

#[test]
fn an_ended_process_stays_until_scraped_after_its_end() {
    let t = "metrics_serve::ended";
    let run = scratch("serve-ended");
    let serve = Serve::start(&run, &["--keep-finished", "0"]);
    // Without the parser the test is skipped here, not after waiting for what it cannot read.
    if scrape_parsed(&serve, t).is_none() {
        return;
    }
    let mut live = Live::start(&run, &[]);
    let pid = live.child.id().to_string();
    live.send("malloc 0 8");
    let present = |s: &[Sample]| {
        value(
            s,
            "vramledger_live_bytes",
            &[("pid", pid.as_str()), ("device", "0"), ("owner", "direct")],
        )
    };
    wait_for(Duration::from_secs(10), || {
        present(&scrape_parsed(&serve, t)?)
    })
    .expect("appears");
    live.send("malloc 0 8");
    live.quit();
    let Some(last) = scrape_parsed(&serve, t) else {
        return;
    };
    assert_eq!(
        present(&last),
        Some(16.0 * MIB),
        "the scrape after the end has its last records"
    );
    assert_eq!(
        value(
            &last,
            "vramledger_process_running",
            &[("pid", pid.as_str())]
        ),
        Some(0.0)
    );
    let after = scrape_parsed(&serve, t).unwrap();
    assert_eq!(
        present(&after),
        None,
        "gone once it was scraped after its end"
    );
    assert_eq!(value(&after, "vramledger_journals", &[]), Some(0.0));
}

#[test]
fn concurrent_slow_and_odd_clients() {
    let t = "metrics_serve::clients";
    let serve = Serve::start(&data("h200-sglang-shape"), &[]);
    let addr = serve.addr.clone();
    // A client that connects and says nothing, and one that stops half-way through its head.
    let mut silent = TcpStream::connect(&addr).unwrap();
    let mut half = TcpStream::connect(&addr).unwrap();
    half.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .unwrap();

    let t0 = Instant::now();
    let bodies: Vec<String> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..8)
            .map(|_| {
                sc.spawn(|| {
                    (0..5)
                        .map(|_| {
                            let (status, head, body) = http(&addr, "GET", "/metrics", None);
                            assert_eq!(status, 200, "{head}");
                            body
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    // Served one after the other behind them, two silent clients would cost 2 x 5 s.
    assert!(
        t0.elapsed() < Duration::from_secs(9),
        "scrapes waited on the silent clients"
    );
    let strip = |b: &str| {
        b.lines()
            .filter(|l| !l.starts_with("vramledger_journal_lag"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for b in &bodies {
        assert_eq!(strip(b), strip(&bodies[0]), "40 concurrent scrapes agree");
    }
    if parse(t, &bodies[0], false).is_none() {
        return;
    }

    let (status, head, body) = http(&addr, "HEAD", "/metrics", None);
    assert_eq!(status, 200);
    assert!(body.is_empty(), "HEAD has no body");
    // The same exposition but for the lag's digits.
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Content-Length in {head}"));
    assert!(
        length.abs_diff(bodies[0].len()) <= 8,
        "{head} vs {}",
        bodies[0].len()
    );
    assert_eq!(http(&addr, "GET", "/nope", None).0, 404);
    let (status, head, _) = http(&addr, "POST", "/metrics", None);
    assert_eq!(status, 405);
    assert!(head.contains("Allow: GET, HEAD"), "{head}");
    let prom_accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let (status, head, body) = http(&addr, "GET", "/metrics", Some(prom_accept));
    assert_eq!(status, 200);
    assert!(
        head.contains("Content-Type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    assert!(body.ends_with("# EOF\n"));
    parse(t, &body, true).unwrap();

    // A head larger than 8 KiB (by far: much of it is still unread when serve answers), and
    // bytes that are not HTTP.
    let mut big = TcpStream::connect(&addr).unwrap();
    let _ = write!(
        big,
        "GET /metrics HTTP/1.1\r\nX-Pad: {}\r\n",
        "a".repeat(40_000)
    );
    // Read only once serve has answered and closed: a close with the head's rest unread
    // would reset the connection, and the answer with it.
    std::thread::sleep(Duration::from_millis(100));
    let mut answer = String::new();
    big.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    let mut junk = TcpStream::connect(&addr).unwrap();
    junk.write_all(b"\x16\x03\x01\x02\x00 not http\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    junk.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");

    // The silent clients are let go after the read timeout.
    for s in [&mut silent, &mut half] {
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut buf = [0u8; 64];
        let t1 = Instant::now();
        let n = s.read(&mut buf).unwrap_or(0);
        assert_eq!(n, 0, "closed without an answer");
        assert!(t1.elapsed() < Duration::from_secs(12));
    }
}

#[test]
fn busy_ports_bad_addresses_and_missing_folders_are_exit_2() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let run = data("h200-sglang-shape");
    let run = run.to_str().unwrap();
    let busy = format!("127.0.0.1:{port}");
    for (listen, says) in [
        (busy.as_str(), "already in use"),
        ("127.0.0.1", "HOST:PORT"),
        ("127.0.0.1:65536", "HOST:PORT"),
        ("192.0.2.1:9464", "no such address"),
    ] {
        let out = vramledger(&["serve", run, "--listen", listen]);
        assert_eq!(out.status.code(), Some(2), "--listen {listen}");
        let err = text(&out.stderr);
        assert!(
            err.contains(says) && err.lines().count() == 1,
            "--listen {listen}: {err}"
        );
    }
    let out = vramledger(&[
        "serve",
        "/nonexistent/parent/run",
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("neither it nor its parent"),
        "{}",
        text(&out.stderr)
    );
}
