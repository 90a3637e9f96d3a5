//! Every recorded real vLLM run under tests/data/h200-vllm-*/ (journals trimmed to their used
//! size, the engine's stdout, config.json: what `scripts/gpu_engines.sh check` saves): each device
//! balances to the byte, every worker has the stages of real vLLM, the graph pool lies in the
//! capture stage, and `size RUN --log engine-stdout.txt` gives exactly the `num_gpu_blocks` the
//! program read back from vLLM (its `VRAMLEDGER_VLLM` ready line). Runs with `tp2` in the folder
//! name also need two ranks with NCCL bytes in `dist_init` and the cross-rank view. A folder
//! copied in by the lead is checked with no code change.

use std::path::{Path, PathBuf};

use serde_json::Value;
use vramledger::journal;
use vramledger::ledger;
use vramledger_format::Owner;

fn folders() -> Vec<PathBuf> {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("h200-vllm-"))
        })
        .collect();
    out.sort();
    out
}

fn engine(dir: &Path, phase: &str) -> Value {
    let text = std::fs::read_to_string(dir.join("engine-stdout.txt")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("VRAMLEDGER_VLLM "))
        .map(|j| serde_json::from_str::<Value>(j).unwrap())
        .find(|v| v["phase"] == phase)
        .unwrap_or_else(|| panic!("{}: no {phase} line", dir.display()))
}

#[test]
fn every_recorded_vllm_run_balances_stages_and_sizes() {
    let all = folders();
    assert!(!all.is_empty(), "tests/data/h200-vllm-explore at least");
    for dir in all {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let tp2 = name.contains("tp2");
        // Recorded before the grammar knew the distributed-environment line.
        let old_shim = name == "h200-vllm-explore";
        let files = journal::find(&dir).unwrap();
        let journals: Vec<_> = files.iter().map(|f| journal::read(f).unwrap()).collect();
        assert!(
            journals.iter().all(|j| !j.corrupt),
            "{name}: corrupt journal"
        );
        let books = ledger::build(&journals);
        // Workers load weights; another process may hold only a context (the EngineCore).
        let workers: Vec<_> = books
            .processes
            .iter()
            .filter(|p| {
                p.devices
                    .iter()
                    .any(|d| d.stages.iter().any(|s| s.name == "weight_load"))
            })
            .collect();
        assert_eq!(workers.len(), if tp2 { 2 } else { 1 }, "{name}");
        for p in &workers {
            let d = &p.devices[0];
            assert!(d.balanced(), "{name} pid {}", p.pid);
            let names: Vec<&str> = d.stages.iter().map(|s| s.name.as_str()).collect();
            let mut want = vec![
                "weight_load",
                "memory_profiling",
                "kv_cache",
                "graph_capture",
                "post_capture",
            ];
            if !old_shim {
                want.insert(0, "dist_init");
            }
            if !tp2 {
                want.push("serving"); // with TP > 1 the EngineCore prints the ready line
            }
            for w in want {
                assert!(
                    names.contains(&w),
                    "{name} pid {}: no {w} in {names:?}",
                    p.pid
                );
            }
            let graph: i64 = d
                .stages
                .iter()
                .filter(|s| s.name.starts_with("graph_capture"))
                .map(|s| s.by_owner.get(Owner::TorchGraphPool))
                .sum();
            let live = d.live_at_end.get(Owner::TorchGraphPool);
            assert!(
                live > 0 && graph >= live,
                "{name}: graph pool {graph} in capture, {live} live"
            );
            if tp2 {
                let dist = d.stages.iter().find(|s| s.name == "dist_init").unwrap();
                assert!(
                    dist.by_owner.get(Owner::Nccl) > 0,
                    "{name} pid {}: NCCL in dist_init",
                    p.pid
                );
            }
        }
        if tp2 {
            let ranks: Vec<_> = workers.iter().map(|p| p.rank).collect();
            assert_eq!(ranks, [Some(0), Some(1)], "{name}");
            assert!(
                books.cross_rank.iter().any(|s| s.name == "kv_cache"),
                "{name}"
            );
        }
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramledger"))
            .arg("size")
            .arg(&dir)
            .arg("--log")
            .arg(dir.join("engine-stdout.txt"))
            .arg("--json")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let blocks = engine(&dir, "ready")["num_gpu_blocks"].as_i64().unwrap();
        assert_eq!(
            v["blocks_bounds"],
            serde_json::json!([blocks, blocks]),
            "{name}"
        );
        assert_eq!(v["reproduced"], true, "{name}");
        for r in v["run"]["ranks"].as_array().unwrap() {
            assert_eq!(
                r["kv_cache_memory_suggestion"]["reproduced"], true,
                "{name} {}",
                r["label"]
            );
        }
    }
}
