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

/// vLLM 0.26.0 on the H200 (tests/data/h200-vllm-explore, recorded by today's shim before the
/// grammar knew 0.26's lines): on replay the journal gains `weight_load` (from the duration
/// "Model loading took 15.0 GiB and 2.121537 seconds" prints) and a `graph_capture` opened by
/// the first stream capture, so every graph-pool byte lands in the capture stage, and the books
/// still balance to the byte.
#[test]
fn recorded_vllm_gains_its_stages_on_replay() {
    use vramledger::ledger::boundaries::SetBy;
    use vramledger_format::Owner;

    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-vllm-explore");
    let files = journal::find(&dir).unwrap();
    let journals: Vec<_> = files.iter().map(|f| journal::read(f).unwrap()).collect();
    assert!(journals.iter().all(|j| !j.corrupt && j.warnings.is_empty()));
    let books = ledger::build(&journals);
    assert_eq!(books.processes.len(), 1);
    let d = &books.processes[0].devices[0];
    assert!(d.balanced());
    assert_eq!(d.start_free, Some(150_106_472_448));
    assert_eq!(d.end_free, Some(76_366_872_576));
    let rows: Vec<(&str, SetBy)> = d
        .stages
        .iter()
        .map(|s| (s.name.as_str(), s.start_set_by))
        .collect();
    assert_eq!(
        rows,
        [
            ("startup", SetBy::Implicit),
            ("weight_load", SetBy::EngineLine),
            ("memory_profiling", SetBy::EngineLine),
            ("kv_cache", SetBy::EngineLine),
            ("graph_capture", SetBy::ApiEvent),
            ("post_capture", SetBy::EngineLine),
            ("serving", SetBy::EngineLine),
        ]
    );
    let stage = |n: &str| d.stages.iter().find(|s| s.name == n).unwrap();
    let (w, gc, kv) = (
        stage("weight_load"),
        stage("graph_capture"),
        stage("kv_cache"),
    );
    assert!(!w.start_recorded && !gc.start_recorded);
    // The load began 2.121537 s before its line (within the events' spacing).
    let took = (stage("memory_profiling").start_t_ns - w.start_t_ns) as f64 / 1e9;
    assert!((took - 2.121537).abs() < 0.01, "{took}");
    // Weights are torch's, 15.004 GiB reserved for vLLM's "15.0 GiB" allocated.
    assert_eq!(w.by_owner.get(Owner::Torch), 16_110_321_664);
    let gib = (1u64 << 30) as f64;
    assert!((w.by_owner.get(Owner::Torch) as f64 / gib - 15.0).abs() < 0.01);
    // Every graph-pool byte is in the capture stage, none in the KV cache's.
    assert_eq!(gc.by_owner.get(Owner::TorchGraphPool), 159_383_552);
    assert_eq!(d.live_at_end.get(Owner::TorchGraphPool), 159_383_552);
    assert_eq!(kv.by_owner.get(Owner::TorchGraphPool), 0);
    // The KV cache: 32 layers of 27111 blocks × 64 KiB, each rounded to 2 MiB (1696 MiB).
    assert!(kv.by_owner.get(Owner::Torch) >= 32 * 1696 * (1 << 20));
    assert_eq!(kv.by_owner.get(Owner::Unattributed), 0);
    // The text report says what opened each stage and names the boundaries no line marked.
    let text = vramledger::output::report_text::render(
        &books,
        vramledger::output::report_text::Units::Gib,
    );
    assert!(
        text.contains("boundaries no line marked: weight_load at 2.121537 s before"),
        "{text}"
    );
    assert!(text.contains("graph_capture at a stream capture began (cuStreamBeginCapture_v2)"));
}
