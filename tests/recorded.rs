//! Journals recorded on the H200 machine (tests/data/h200-sglang-shape: the SGLang-shaped
//! example over two GPUs under `vramledger run`, trimmed of their zero tails), replayed by
//! today's code. The program printed the exact bytes behind each SGLang `mem usage` figure
//! (`VRAMLEDGER_SGLANG` lines in program-output.txt); the books must agree with them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use vramledger::journal;
use vramledger::ledger;

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-sglang-shape")
}

/// (pid, SGLang event) → the program's own figures.
fn program_lines() -> BTreeMap<(u64, String), Value> {
    let text = std::fs::read_to_string(data().join("program-output.txt")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("VRAMLEDGER_SGLANG "))
        .map(|j| serde_json::from_str::<Value>(j).unwrap())
        .map(|v| {
            (
                (
                    v["pid"].as_u64().unwrap(),
                    v["line"].as_str().unwrap().to_string(),
                ),
                v,
            )
        })
        .collect()
}

#[test]
fn recorded_sglang_startup_balances_and_matches_the_engine() {
    let files = journal::find(&data()).unwrap();
    let journals: Vec<_> = files.iter().map(|f| journal::read(f).unwrap()).collect();
    assert!(journals.iter().all(|j| !j.corrupt && j.warnings.is_empty()));
    let books = ledger::build(&journals);
    let program = program_lines();
    let workers: Vec<_> = books
        .processes
        .iter()
        .filter(|p| !p.devices.is_empty())
        .collect();
    assert_eq!(
        workers.iter().map(|p| p.rank).collect::<Vec<_>>(),
        [Some(0), Some(1)]
    );
    for p in workers {
        let d = &p.devices[0];
        assert_eq!(d.device as u32, p.rank.unwrap());
        assert!(d.balanced(), "rank {:?}", p.rank);
        let names: Vec<&str> = d.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            &names[..7],
            [
                "startup",
                "dist_init",
                "weight_load",
                "kv_pool",
                "post_kv_init",
                "graph_capture",
                "post_capture"
            ]
        );
        let stage = |n: &str| d.stages.iter().find(|s| s.name == n).unwrap();
        let usage = |ev: &str| {
            program[&(p.pid as u64, ev.to_string())]["mem_usage_bytes"]
                .as_i64()
                .unwrap()
        };
        // Weight load and graph capture: bracketed by the same readings the engine took.
        assert_eq!(stage("weight_load").device_delta, usage("load_weight_end"));
        assert_eq!(stage("graph_capture").device_delta, usage("capture_end"));
        // dist_init: the engine's "before" reading is taken before its begin line is written.
        let gib = (1u64 << 30) as f64;
        let di = (stage("dist_init").device_delta - usage("dist_init_end")).abs() as f64 / gib;
        assert!(di <= 0.01, "dist_init differs by {di} GiB");
        // The engine's printed figures sit beside the measured deltas, within their rounding.
        let w = stage("weight_load");
        assert!((w.device_delta as f64 / gib - w.engine.mem_usage_gib.unwrap()).abs() <= 0.005);
        // What the hooks explain: the KV pool is PyTorch's, graph memory is in the private pool.
        let kv = stage("kv_pool");
        let kv_bytes = program[&(p.pid as u64, "kv_cache_allocated".to_string())].clone();
        let k_plus_v =
            kv_bytes["k_bytes"].as_i64().unwrap_or(0) + kv_bytes["v_bytes"].as_i64().unwrap_or(0);
        assert!(
            kv.by_owner.get(vramledger_format::Owner::Torch) >= k_plus_v,
            "{kv_bytes}"
        );
        assert!(
            stage("graph_capture")
                .by_owner
                .get(vramledger_format::Owner::TorchGraphPool)
                > 0
        );
        assert!(
            stage("dist_init")
                .by_owner
                .get(vramledger_format::Owner::Nccl)
                > 0
        );
    }
    // Both ranks saw the same minimum after distributed init, as SGLang requires.
    let dist = books
        .cross_rank
        .iter()
        .find(|s| s.name == "dist_init")
        .unwrap();
    assert!(dist.ranks.iter().all(|r| !r.unbalanced));
}

/// Two H200 runs that differ only in the CUDA-graph batch sizes (1–16 vs 1–256): the diff
/// leads with the graph private pool of the capture stage, and a check against the first run
/// fails on it, naming the figure.
#[test]
fn recorded_graph_batch_sizes_drift_in_the_graph_pool() {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-graph-bs");
    let cli = env!("CARGO_BIN_EXE_vramledger");
    let diff = std::process::Command::new(cli)
        .arg("diff")
        .arg(base.join("a"))
        .arg(base.join("b"))
        .output()
        .unwrap();
    assert_eq!(diff.status.code(), Some(0));
    let text = String::from_utf8_lossy(&diff.stdout);
    let first_change = text
        .lines()
        .skip_while(|l| !l.starts_with("stage × owner × device"))
        .nth(1)
        .unwrap();
    assert!(first_change.contains("graph_capture"), "{text}");
    assert!(first_change.contains("torch_graph_pool"), "{text}");
    assert!(first_change.contains("24.0 MiB → 220.0 MiB"), "{text}");

    let check = std::process::Command::new(cli)
        .arg("check")
        .arg("--baseline")
        .arg(base.join("a"))
        .arg(base.join("b"))
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(1));
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(
        text.contains("stage graph_capture owner torch_graph_pool: 24.0 MiB → 220.0 MiB"),
        "{text}"
    );
    // Against itself it passes.
    let same = std::process::Command::new(cli)
        .args(["check", "--baseline"])
        .arg(base.join("a"))
        .arg(base.join("a"))
        .output()
        .unwrap();
    assert_eq!(same.status.code(), Some(0));
}
