//! Tensor parallel 2, vLLM-shaped, on the fake driver (issue 10's CPU side): two worker processes
//! of `tests/clients/vllm_tp_like.c` under the preload print vLLM 0.26's worker lines, create an
//! NCCL communicator (VMM buffers from libnccl.so.2), exchange custom all-reduce buffers through
//! CUDA IPC, load, profile, agree the block count and capture. Rank 1's GPU is smaller (14 GiB
//! against 16), so SGLang's imbalance rule fires on rank 0. The journals must give both ranks
//! their stages (dist_init from the line, the NCCL bytes in it), each device balanced, the
//! cross-rank minimum per stage, and `size RUN` the blocks vLLM's EngineCore agreed on.

mod support;

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::Value;
use support::clients;
use vramledger::journal;
use vramledger::ledger::{self, boundaries::SetBy};
use vramledger_format::Owner;

const MIB: i64 = 1 << 20;

fn shim() -> PathBuf {
    let lib = support::profile_dir().join("libvramledger.so");
    assert!(
        lib.is_file(),
        "{} missing: cargo build --workspace",
        lib.display()
    );
    lib
}

/// Runs both ranks at once; returns (run folder, their stdout, the clients' result lines).
fn run_tp2(test: &str) -> (PathBuf, String, Vec<Value>) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("vllm-tp2-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (out, swap) = (dir.join("run"), dir.join("swap"));
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&swap).unwrap();
    let shim = shim().display().to_string();
    let (out_s, swap_s) = (out.display().to_string(), swap.display().to_string());
    let children: Vec<_> = [("0", "17179869184"), ("1", "15032385536")]
        .iter()
        .map(|(rank, bytes)| {
            let env = [
                ("LD_PRELOAD", shim.as_str()),
                ("VRAMLEDGER_OUT", out_s.as_str()),
                ("VRAMLEDGER_RUN_ID", "run-tp2"),
                ("FAKECUDA_MEM_BYTES", bytes),
            ];
            clients()
                .command("vllm_tp_like", &[rank, "2", &swap_s, "0.5"], &env)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut stdout = String::new();
    for c in children {
        let o = c.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        stdout.push_str(&text);
    }
    let results = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("VLLM_TP_LIKE "))
        .map(|j| serde_json::from_str(j).unwrap())
        .collect();
    std::fs::write(dir.join("engine.log"), &stdout).unwrap();
    std::fs::write(
        out.join("config.json"),
        r#"{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_attention_heads": 32,
            "num_hidden_layers": 8, "num_key_value_heads": 8, "torch_dtype": "bfloat16",
            "max_position_embeddings": 4096}"#,
    )
    .unwrap();
    (dir, stdout, results)
}

#[test]
fn two_vllm_ranks_replay_with_their_stages_nccl_ipc_and_the_imbalance_rule() {
    let (dir, _stdout, results) = run_tp2("replay");
    assert_eq!(results.len(), 2);
    let files = journal::find(&dir.join("run")).unwrap();
    let journals: Vec<_> = files.iter().map(|f| journal::read(f).unwrap()).collect();
    assert!(journals.iter().all(|j| !j.corrupt), "corrupt journal");
    let books = ledger::build(&journals);
    let workers: Vec<_> = books
        .processes
        .iter()
        .filter(|p| !p.devices.is_empty())
        .collect();
    assert_eq!(
        workers.iter().map(|p| p.rank).collect::<Vec<_>>(),
        [Some(0), Some(1)]
    );
    for p in &workers {
        let rank = p.rank.unwrap();
        let d = &p.devices[0];
        assert_eq!(d.device as u32, rank, "each rank on its own GPU");
        assert!(d.balanced(), "rank {rank} balanced");
        let rows: Vec<(&str, SetBy)> = d
            .stages
            .iter()
            .map(|s| (s.name.as_str(), s.start_set_by))
            .collect();
        assert_eq!(
            rows,
            [
                ("startup", SetBy::Implicit),
                ("dist_init", SetBy::EngineLine),
                ("weight_load", SetBy::EngineLine),
                ("memory_profiling", SetBy::EngineLine),
                ("kv_cache", SetBy::EngineLine),
                ("graph_capture", SetBy::ApiEvent), // no capture line: the stream capture opens it
                ("post_capture", SetBy::EngineLine),
            ],
            "rank {rank}"
        );
        let stage = |n: &str| d.stages.iter().find(|s| s.name == n).unwrap();
        let dist = stage("dist_init");
        // NCCL's 4 × 8 MiB device buffers and the all-reduce buffer (torch, exported over IPC).
        assert_eq!(dist.by_owner.get(Owner::Nccl), 32 * MIB, "rank {rank}");
        assert_eq!(dist.by_owner.get(Owner::Torch), 16 * MIB, "rank {rank}");
        // A 6 MiB private-pool request takes a 20 MiB segment (the caching allocator's rounding).
        assert_eq!(
            stage("graph_capture").by_owner.get(Owner::TorchGraphPool),
            20 * MIB
        );
        // The peer's buffer is mapped here, not local VRAM: apart from the books, closed at the end.
        assert_eq!(
            (p.peer_imported.peak, p.peer_imported.live),
            (16 * MIB, 0),
            "rank {rank}"
        );
        let r = results.iter().find(|v| v["rank"] == rank).unwrap();
        assert_eq!(
            stage("weight_load").by_owner.get(Owner::Torch),
            8 * 96 * MIB
        );
        assert!(r["non_torch"].as_i64().unwrap() == 32 * MIB, "{r}");
    }
    // The cross-rank view: rank 1's smaller GPU is the minimum of every stage; rank 0 is more
    // than 10% above it, which SGLang's rule calls unbalanced.
    let cross = &books.cross_rank;
    let names: Vec<&str> = cross.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "startup",
            "dist_init",
            "weight_load",
            "memory_profiling",
            "kv_cache",
            "graph_capture",
            "post_capture"
        ]
    );
    for s in cross {
        let r1 = s.ranks.iter().find(|r| r.rank == 1).unwrap();
        let r0 = s.ranks.iter().find(|r| r.rank == 0).unwrap();
        assert_eq!(s.min_free, r1.free, "{}", s.name);
        assert_eq!((r0.unbalanced, r1.unbalanced), (true, false), "{}", s.name);
    }
    let text = vramledger::output::report_text::render(
        &books,
        vramledger::output::report_text::Units::Gib,
    );
    assert!(
        text.contains(" rank 0: ") && text.contains(" rank 1: "),
        "{text}"
    );
    assert!(
        text.contains("across ranks") && text.contains("UNBALANCED"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn size_run_agrees_with_the_blocks_of_both_ranks() {
    let (dir, _stdout, results) = run_tp2("size");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramledger"))
        .arg("size")
        .arg(dir.join("run"))
        .arg("--log")
        .arg(dir.join("engine.log"))
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let agreed = results[0]["num_gpu_blocks"].as_i64().unwrap();
    assert_eq!(results[1]["num_gpu_blocks"].as_i64().unwrap(), agreed);
    assert_eq!(v["blocks_bounds"], serde_json::json!([agreed, agreed]));
    assert_eq!(v["reproduced"], true);
    assert_eq!(v["settings"]["tp"]["value"], 2);
    let ranks = v["run"]["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2);
    for r in ranks {
        let rank = r["rank"].as_i64().unwrap();
        let mine = results.iter().find(|x| x["rank"] == rank).unwrap();
        // Each rank's own budget, to the byte: the journal measures what the client computed.
        assert_eq!(r["available_bytes"]["lo"], mine["available"]);
        assert_eq!(r["available_bytes"]["exact"], true);
        assert_eq!(r["blocks"][0], mine["blocks"]);
        assert_eq!(r["inputs"]["non_torch_bytes"]["lo"], mine["non_torch"]);
        assert_eq!(r["inputs"]["cuda_graph_bytes"]["lo"], mine["graphs"]);
        assert_eq!(r["kv_cache_memory_suggestion"]["reproduced"], true);
        assert_eq!(
            r["kv_cache_memory_suggestion"]["printed"][0],
            mine["to_requested"]
        );
    }
    // The smaller GPU limits the run, and the recommendation.
    let limited = v["run"]["recommendation"]["limited_by"].as_str().unwrap();
    assert!(limited.starts_with("rank 1"), "{limited}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn size_run_reads_the_recorded_settings_without_a_log() {
    // The tap keeps vLLM's engine-config and non-default-args lines as settings records: the
    // journals alone give tp, gpu_memory_utilization and max_model_len.
    let (dir, _stdout, results) = run_tp2("settings");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramledger"))
        .arg("size")
        .arg(dir.join("run"))
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["gpu_memory_utilization"]["value"], 0.5);
    assert_eq!(v["gpu_memory_utilization"]["source"], "logged");
    assert_eq!(v["settings"]["tp"]["value"], 2);
    assert_eq!(v["settings"]["max_model_len"]["value"], 4096);
    assert_eq!(v["run"]["settings_line"], true);
    // Without the after-capture summary the printed available memory bounds the blocks.
    let agreed = results[0]["num_gpu_blocks"].as_i64().unwrap();
    let b = &v["blocks_bounds"];
    assert!(
        b[0].as_i64().unwrap() <= agreed && agreed <= b[1].as_i64().unwrap(),
        "{b}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
