//! `vramledger report --html -o FILE`: one self-contained page (no external asset, an inline
//! SVG timeline, the stage names and the owner legend), the timeline replay behind it, the
//! file rules (-o required, no overwrite without --force), and a screenshot in headless
//! Chromium when it is installed (required when VRAMLEDGER_REQUIRE_CHROMIUM is set, as in CI).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::skip::skip;
use support::synth::{Synth, GIB, MIB};
use vramledger::ledger::OwnerBytes;
use vramledger_format::Owner;

use support::cli;

fn dir(test: &str) -> PathBuf {
    support::fresh_dir("html", test)
}

const STAGES: [&str; 5] = [
    "dist_init",
    "weight_load",
    "kv_pool",
    "graph_capture",
    "post_capture",
];

/// Context 512 MiB, weights 4 GiB + 64 MiB cuBLAS workspace (freed after capture), KV 8 GiB,
/// graphs 256 MiB + 32 MiB NCCL; a name that needs escaping in the command line.
fn journal(d: &Path) -> PathBuf {
    let mut s = Synth::new(4242, "run-html");
    s.module(1, "/x/libc10_cuda.so")
        .module(2, "/x/libcublas.so.13")
        .module(3, "/x/libnccl.so.2");
    let free0 = 16 * GIB;
    s.context(free0, 512 * MIB);
    let mut free = free0 - 512 * MIB;
    s.sample(free);
    s.stage("dist_init", None, free);
    s.stage("weight_load", None, free);
    s.alloc(0x1000_0000, 4 * GIB, Owner::Torch, 1)
        .alloc(0x9000_0000, 64 * MIB, Owner::Direct, 2);
    free -= 4 * GIB + 64 * MIB;
    s.stage("kv_pool", None, free);
    s.alloc(0x2_0000_0000, 8 * GIB, Owner::Torch, 1);
    free -= 8 * GIB;
    s.stage("graph_capture", None, free);
    s.alloc(0x4_0000_0000, 256 * MIB, Owner::TorchGraphPool, 1);
    s.vmm(77, 0x5_0000_0000, 32 * MIB, Owner::Nccl, 3);
    free -= 288 * MIB;
    s.stage("post_capture", None, free);
    s.free(0x9000_0000);
    s.sample(free + 64 * MIB);
    let p = d.join("run").join("p4242.vlj");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    s.write(&p);
    p
}

fn write_html(d: &Path) -> PathBuf {
    let j = journal(d);
    let out = d.join("report.html");
    let o = Command::new(cli())
        .args(["report", "--html", "-o"])
        .arg(&out)
        .arg(j.parent().unwrap())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

#[test]
fn html_report_is_self_contained() {
    let d = dir("contained");
    let out = write_html(&d);
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    // Nothing is fetched: no URL anywhere, no script, no stylesheet link, no image source.
    for bad in [
        "http://", "https://", "<script", "<link", "<img", "<iframe", "@import", "url(",
    ] {
        assert!(!html.contains(bad), "{bad} in the page");
    }
    for attr in ["src=", "href="] {
        for (i, _) in html.match_indices(attr) {
            let value = &html[i + attr.len()..];
            assert!(
                value.starts_with("\"#"),
                "{attr} outside the page: {}",
                &value[..40.min(value.len())]
            );
        }
    }
    // The timeline: an inline SVG per device with one area per owner that held memory, the
    // stages as bands with their names, and the legend.
    assert_eq!(html.matches("<svg").count(), 1);
    for stage in STAGES.iter().chain(["startup"].iter()) {
        assert!(
            html.contains(&format!(">{stage}</text>")),
            "stage {stage} labelled"
        );
        assert!(
            html.contains(&format!("<td>{stage}</td>")),
            "stage {stage} in the table"
        );
    }
    for owner in ["context", "torch", "torch_graph_pool", "nccl", "direct"] {
        assert!(
            html.contains(&format!("data-owner=\"{owner}\"")),
            "area of {owner}"
        );
        assert!(
            html.contains(&format!(">{owner} (peak ")),
            "legend of {owner}"
        );
    }
    assert!(!html.contains("data-owner=\"vmm\""), "vmm held nothing");
    assert!(html.contains("<g class=\"legend\""));
    // The table and the reconciliation line.
    assert!(html.contains(
        "<th><span class=\"sw\" style=\"background:#f28e2b\"></span>torch_graph_pool</th>"
    ));
    assert!(html.contains("[balanced]"), "reconciliation");
    assert!(html.contains("reconciliation: start free 16.000 = Σ stage deltas"));
    assert!(html.contains("<td>8.000</td>"), "the KV pool in GiB");
    assert!(html.contains("process 4242 on testhost"));
    assert!(html.contains("python -m sglang.launch_server"));
}

#[test]
fn timeline_replays_held_bytes_per_owner() {
    let d = dir("timeline");
    let j = vramledger::journal::read(&journal(&d)).unwrap();
    let tls = vramledger::timeline::replay(&j, 2000);
    assert_eq!(tls.len(), 1);
    let tl = &tls[0];
    assert_eq!(tl.device, 0);
    let names: Vec<&str> = tl.bands.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names[0], "startup");
    assert_eq!(&names[1..], STAGES);
    assert!(tl
        .bands
        .windows(2)
        .all(|w| w[0].end_t_ns == w[1].start_t_ns));
    assert_eq!(tl.bands[0].start_t_ns, tl.t0);
    assert_eq!(tl.bands.last().unwrap().end_t_ns, tl.t1);
    // Starts empty; ends with the context, weights + KV, the graph pool and NCCL.
    assert_eq!(tl.points[0].held, OwnerBytes::default());
    let end = tl.points.last().unwrap().held;
    let held = |o| end.get(o) as u64;
    assert_eq!(held(Owner::Context), 512 * MIB);
    assert_eq!(held(Owner::Torch), 12 * GIB);
    assert_eq!(held(Owner::TorchGraphPool), 256 * MIB);
    assert_eq!(held(Owner::Nccl), 32 * MIB);
    assert_eq!(held(Owner::Direct), 0);
    // The peak: everything plus the cuBLAS workspace, before it was freed.
    assert_eq!(
        tl.max_total() as u64,
        512 * MIB + 12 * GIB + 64 * MIB + 288 * MIB
    );
    assert!(tl.points.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
    assert!(!tl.free.is_empty());
}

#[test]
fn output_file_rules() {
    let d = dir("rules");
    let out = write_html(&d);
    let run = d.join("run");
    let before = std::fs::read(&out).unwrap();
    // Never over an existing file without --force.
    let o = Command::new(cli())
        .args(["report", "--html", "-o"])
        .arg(&out)
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("already exists; pass --force"));
    assert_eq!(std::fs::read(&out).unwrap(), before);
    std::fs::write(&out, "old").unwrap();
    let o = Command::new(cli())
        .args(["report", "--html", "--force", "--output"])
        .arg(&out)
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(std::fs::read(&out).unwrap(), before);
    // --html needs -o; --html and --json exclude each other.
    for args in [vec!["--html"], vec!["--html", "--json", "-o", "x.html"]] {
        let o = Command::new(cli())
            .arg("report")
            .args(&args)
            .arg(&run)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
    // -o alone writes the text report; with --json the JSON one.
    let txt = d.join("report.txt");
    let o = Command::new(cli())
        .args(["report", "-o"])
        .arg(&txt)
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(std::fs::read_to_string(&txt)
        .unwrap()
        .contains("[balanced]"));
    let json = d.join("report.json");
    let o = Command::new(cli())
        .args(["report", "--json", "-o"])
        .arg(&json)
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(std::fs::read_to_string(&json)
        .unwrap()
        .contains("\"schema\": \"vramledger.report/1\""));
}

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for name in ["chromium", "chromium-browser"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Width and height from a PNG's IHDR chunk (which must come first).
fn png_size(b: &[u8]) -> Option<(u32, u32)> {
    if b.len() < 33 || &b[..8] != b"\x89PNG\r\n\x1a\n" || &b[12..16] != b"IHDR" {
        return None;
    }
    let be = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    (be(8) == 13).then(|| (be(16), be(20)))
}

/// Takes a screenshot of `html` with headless Chromium (at most 120 s).
fn screenshot(chrome: &Path, html: &Path, png: &Path, profile: &Path) -> Result<(), String> {
    let mut child = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1400,1000")
        .arg(format!("file://{}", html.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", chrome.display()))?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(()),
            Ok(Some(st)) => return Err(format!("chromium exited with {st}")),
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("chromium did not finish within 120 s".into());
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(e.to_string()),
        }
    }
}

#[test]
fn html_report_renders_in_headless_chromium() {
    let Some(chrome) = chromium() else {
        assert!(
            std::env::var_os("VRAMLEDGER_REQUIRE_CHROMIUM").is_none(),
            "VRAMLEDGER_REQUIRE_CHROMIUM is set but neither chromium nor chromium-browser is on PATH"
        );
        return skip("chromium is not installed (apt-get install chromium)");
    };
    let d = dir("chromium");
    let html = write_html(&d);
    let png = d.join("report.png");
    let html = html.canonicalize().unwrap();
    screenshot(&chrome, &html, &png, &d.join("profile")).unwrap();
    let bytes = std::fs::read(&png).expect("the screenshot was written");
    assert_eq!(
        png_size(&bytes),
        Some((1400, 1000)),
        "a PNG of the window size"
    );
    // A blank 1400×1000 page compresses to about 6 KB; tables, text and the chart do not.
    assert!(bytes.len() > 20_000, "{} bytes: blank?", bytes.len());
}

/// Twenty stages in the first hundredth of a run, then a long one: every label inside the
/// chart, none over another, those with no room named under it.
fn flood_html(d: &Path) -> PathBuf {
    let mut s = Synth::new(4343, "run-flood");
    s.module(1, "/x/libc10_cuda.so");
    let free = 16 * GIB;
    s.context(free, 512 * MIB);
    let names: Vec<String> = (0..20).map(|i| format!("warmup_batch_size_{i}")).collect();
    for (i, n) in names.iter().enumerate() {
        s.stage(n, None, free - 512 * MIB);
        s.alloc(
            0x1000_0000 + i as u64 * 0x100_0000,
            8 * MIB,
            Owner::Torch,
            1,
        );
    }
    s.stage("serving", None, free - 512 * MIB - 160 * MIB);
    for _ in 0..4000 {
        s.sample(free - 512 * MIB - 160 * MIB);
    }
    let p = d.join("flood").join("p4343.vlj");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    s.write(&p);
    let out = d.join("flood.html");
    let o = Command::new(cli())
        .args(["report", "--html", "-o"])
        .arg(&out)
        .arg(p.parent().unwrap())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

#[test]
fn stages_too_short_to_label_are_named_under_the_chart() {
    let d = dir("flood");
    let html = std::fs::read_to_string(flood_html(&d)).unwrap();
    let labelled = html.matches("<text class=\"stage\"").count();
    let caption = html
        .split("too short to name on the chart (hover a band, or see the table): ")
        .nth(1)
        .and_then(|c| c.split("</p>").next())
        .expect("a line naming the unlabelled stages");
    let unlabelled = caption.split(", ").count();
    // startup, the twenty, serving: each either on the chart or in the line, once.
    assert_eq!(labelled + unlabelled, 22, "{labelled} + {unlabelled}");
    assert!(labelled >= 5, "{labelled}");
    assert!(
        html.contains(">serving</text>"),
        "the long stage is labelled"
    );
    // Every band keeps its name as a tooltip.
    assert_eq!(html.matches("<rect class=\"band\"").count(), 22);
}

/// The page in Chromium at 1400, 800 and 500 px (scripts/viewers/html_check.mjs): no sideways
/// scrolling of the page, each chart in the window, no stage label clipped or over another.
#[test]
fn the_page_reflows_and_no_label_is_clipped_in_chromium() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if Command::new("node").arg("--version").output().is_err() {
        return skip("node is not installed");
    }
    if !root
        .join("scripts/viewers/node_modules/playwright-core")
        .is_dir()
    {
        return skip("playwright-core is not installed: npm ci --prefix scripts/viewers");
    }
    let chromium =
        std::env::var_os("CHROMIUM").map_or_else(|| "/usr/bin/chromium".into(), PathBuf::from);
    if !chromium.is_file() {
        return skip(&format!(
            "{} is missing: apt-get install chromium",
            chromium.display()
        ));
    }
    let d = dir("reflow");
    let recorded = d.join("recorded.html");
    let o = Command::new(cli())
        .args(["report", "--html", "-o"])
        .arg(&recorded)
        .arg(root.join("tests/data/h200-sglang-shape"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    for page in [write_html(&d), flood_html(&d), recorded] {
        let out = Command::new("node")
            .arg(root.join("scripts/viewers/html_check.mjs"))
            .arg(&page)
            .args(["--widths", "1400,800,500"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}:\n{text}{}",
            page.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
