//! scripts/gpu_metrics.sh, the lead's H200 run, exercised here end to end with a workload over
//! the fake driver instead of vLLM: serve is scraped every second while the program starts, the
//! last scrape must equal the report, and the checker must catch a scrape that does not.

mod metrics_support;
mod support;

use std::process::Command;

use metrics_support::{cli, scratch, skip, steps_exe, text, tool};
use support::clients;

#[test]
fn the_gpu_script_scrapes_a_starting_run_and_its_checker_catches_a_mismatch() {
    let t = "metrics_gpu_script";
    if tool("python3").is_none() {
        skip(t, "python3 is not installed");
        return;
    }
    let dir = scratch("gpu-script");
    let steps = steps_exe();
    let workload = format!(
        "(echo 'stage weight_load'; sleep 1.2; echo 'torch 0 256'; sleep 1.2; \
          echo 'say [2026-01-01 00:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=10.00 GB, mem usage=0.25 GB.'; \
          sleep 1.2; echo 'malloc 1 32'; sleep 1.2; echo 'oom 0'; echo quit) | '{}' >/dev/null",
        steps.display()
    );
    let root = support::manifest_dir();
    let out = Command::new("bash")
        .arg(root.join("scripts/gpu_metrics.sh"))
        .arg(&dir)
        .current_dir(&root)
        .env("CLI", cli())
        .env("WORKLOAD", &workload)
        .env("MODEL_NAME", "fake-llama")
        .env("LD_LIBRARY_PATH", &clients().driver_dir)
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    let said = format!("{}\n{}", text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "gpu_metrics.sh failed:\n{said}");
    for want in [
        "ok: the scraped series match the report",
        "-> weight_load",
        "weight_load -> kv_pool",
        "one scrape while it started",
        "model_name=\"fake-llama\"",
        "gpu_metrics: ok",
    ] {
        assert!(said.contains(want), "no {want:?} in:\n{said}");
    }
    if tool("tmux").is_some() {
        assert!(
            said.contains("top at the end:") && said.contains("ended in stage kv_pool"),
            "{said}"
        );
    }

    // The checker on a final scrape that lies about one figure.
    let x = dir.join("x");
    std::fs::create_dir_all(&x).unwrap();
    let tar = Command::new("tar")
        .args([
            "xzf",
            dir.join("gpu-metrics.tar.gz").to_str().unwrap(),
            "-C",
            x.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(tar.success());
    let final_prom = x.join("scrapes/final.prom");
    let good = std::fs::read_to_string(&final_prom).unwrap();
    let line = good
        .lines()
        .find(|l| {
            l.starts_with("vramledger_live_bytes{")
                && l.contains("owner=\"torch\"")
                && !l.ends_with(" 0")
        })
        .expect("a torch line")
        .to_string();
    let (head, v) = line.rsplit_once(' ').unwrap();
    let lie = format!("{head} {}", v.parse::<u64>().unwrap() + 4096);
    std::fs::write(&final_prom, good.replace(&line, &lie)).unwrap();
    let out = Command::new("python3")
        .arg(root.join("scripts/check_metrics.py"))
        .args(["compare", "--report"])
        .arg(x.join("report.json"))
        .arg("--final")
        .arg(&final_prom)
        .arg("--scrapes")
        .arg(x.join("scrapes"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("MISMATCH: vramledger_live_bytes"),
        "{}",
        text(&out.stdout)
    );
}
