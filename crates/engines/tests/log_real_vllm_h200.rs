//! vLLM 0.26.0 on the H200 (V1 engine, V2 model runner): the engine's own stdout and stderr of
//! the exploration run (`tests/data/h200-vllm-explore`, `examples/engines/vllm_offline.py` under
//! `vramledger run`), classified line by line. Every recognised line — kind, stage, event and
//! every number — is written out below from reading the output; the V1 model runner's lines of
//! the same release (read from its source) are checked one by one after it.

mod log_support;

use std::path::PathBuf;

use log_support::{assert_numbers, check, reject};
use vramledger_engines::log::{
    classify, event as ev, stage as st, Engine, LineKind, LineKind::*, StageTracker,
};

fn data(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/h200-vllm-explore")
        .join(name);
    String::from_utf8(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .expect("UTF-8")
}

type Want = (
    LineKind,
    &'static str,
    &'static str,
    &'static [(&'static str, f64)],
);

#[test]
fn h200_stdout_every_recognised_line() {
    let want: &[Want] = &[
        (
            Boundary,
            st::DIST_INIT,
            ev::DIST_INIT_BEGIN,
            &[("world_size", 1.0), ("rank", 0.0), ("local_rank", 0.0)],
        ),
        (Boundary, st::WEIGHT_LOAD, ev::LOAD_MODEL_BEGIN, &[]),
        (
            Boundary,
            st::MEMORY_PROFILING,
            ev::LOAD_MODEL_END,
            &[("mem_usage_gib", 15.0), ("time_s", 2.121537)],
        ),
        (
            Progress,
            st::MEMORY_PROFILING,
            ev::PROFILING_RUN,
            &[("time_s", 0.12)],
        ),
        (
            Boundary,
            st::KV_CACHE,
            ev::AVAILABLE_KV_CACHE_MEMORY,
            &[("kv_cache_gib", 52.95)],
        ),
        (
            Boundary,
            st::KV_CACHE,
            ev::KV_CACHE_SIZE,
            &[("tokens", 433776.0)],
        ),
        (
            Progress,
            st::KV_CACHE,
            ev::MAX_CONCURRENCY,
            &[("context_len", 4096.0), ("concurrency", 105.9)],
        ),
        (
            Boundary,
            st::POST_CAPTURE,
            ev::CAPTURE_END,
            &[("time_s", 1.0), ("mem_usage_gib", 0.23)],
        ),
        (
            Progress,
            st::POST_CAPTURE,
            ev::KV_CACHE_MEMORY_SUGGESTION,
            &[
                ("avail_mem_gib", 139.29),
                ("total_gpu_gib", 139.8),
                ("gpu_memory_utilization", 0.5),
                ("budget_gib", 69.9),
                ("weights_gib", 15.0),
                ("activation_peak_gib", 1.72),
                ("non_torch_gib", 0.22),
                ("cuda_graph_gib", 0.23),
                ("kv_cache_memory_bytes", 56456781312.0),
                ("kv_cache_memory_full_bytes", 130959318528.0),
                ("kv_cache_gib", 52.95),
            ],
        ),
        (Boundary, st::SERVING, ev::ENGINE_READY, &[("time_s", 8.83)]),
    ];
    let text = data("engine-stdout.txt");
    let got: Vec<_> = text.lines().filter_map(classify).collect();
    for (i, (b, w)) in got.iter().zip(want).enumerate() {
        let ctx = format!("recognised line #{i}: {:?}", b.text);
        assert_eq!(b.engine, Engine::Vllm, "{ctx}");
        assert_eq!(b.rank.pid, Some(1008), "{ctx}");
        assert_eq!((b.kind, b.stage, b.event), (w.0, w.1, w.2), "{ctx}");
        assert_numbers(&ctx, &b.numbers, w.3);
    }
    let texts: Vec<_> = got.iter().map(|b| b.text).collect();
    assert_eq!(got.len(), want.len(), "{texts:#?}");
    assert_eq!(got[0].words.backend, Some("nccl"));
    assert_eq!(got[5].words.pool_label, Some("GPU"));
}

#[test]
fn h200_stderr_capture_bars_open_the_capture() {
    // tqdm writes "\r" + bar, no newline: each `\r` segment is read; the first is a boundary.
    let text = data("engine-stderr.txt");
    let bars: Vec<_> = text
        .lines()
        .flat_map(|l| vramledger_engines::log::classify_each(l).collect::<Vec<_>>())
        .collect();
    assert_eq!(bars.len(), 9, "5 PIECEWISE and 4 FULL bar updates");
    for b in &bars {
        assert_eq!(
            (b.kind, b.stage, b.event),
            (Boundary, st::GRAPH_CAPTURE, ev::CAPTURE_PROGRESS)
        );
    }
    assert!(bars[0]
        .text
        .starts_with("Capturing CUDA graphs (PIECEWISE):   0%"));
}

#[test]
fn h200_stage_sequence_through_both_streams() {
    // stdout up to the capture, the bars, then the rest of stdout: the order the engine wrote.
    let out = data("engine-stdout.txt");
    let err = data("engine-stderr.txt");
    let lines: Vec<&str> = out.lines().collect();
    let cut = lines
        .iter()
        .position(|l| l.contains("Graph capturing finished"))
        .unwrap();
    let mut tracker = StageTracker::new();
    let mut seq = Vec::new();
    for l in lines[..cut]
        .iter()
        .copied()
        .chain(err.lines())
        .chain(lines[cut..].iter().copied())
    {
        if let Some(t) = classify(l).and_then(|b| tracker.observe(&b)) {
            seq.push(t.to);
        }
    }
    assert_eq!(
        seq,
        [
            st::DIST_INIT,
            st::WEIGHT_LOAD,
            st::MEMORY_PROFILING,
            st::KV_CACHE,
            st::GRAPH_CAPTURE,
            st::POST_CAPTURE,
            st::SERVING
        ]
    );
}

#[test]
fn v1_runner_lines_of_0_26() {
    // gpu_model_runner.py (V1 runner) of the same release: its load, CUDA-graph profiling,
    // warm-up and pool lines; gpu_worker.py's warm-up line is shared by both runners.
    check(
        "Starting to load model /tmp/vllm-model...",
        Boundary,
        st::WEIGHT_LOAD,
        ev::LOAD_MODEL_BEGIN,
        &[],
    );
    check(
        "Model loading took 14.99 GiB memory and 2.500000 seconds",
        Boundary,
        st::MEMORY_PROFILING,
        ev::LOAD_MODEL_END,
        &[("mem_usage_gib", 14.99), ("time_s", 2.5)],
    );
    check(
        "Profiling CUDA graph memory: PIECEWISE=8 (largest=128), FULL=8 (largest=128)",
        Progress,
        st::MEMORY_PROFILING,
        ev::CUDA_GRAPH_PROFILING,
        &[("num_tokens", 128.0)],
    );
    check(
        "Estimated CUDA graph memory: 0.25 GiB total",
        Progress,
        st::MEMORY_PROFILING,
        ev::CUDA_GRAPH_ESTIMATE,
        &[("reserve_gib", 0.25)],
    );
    check(
        "Compile and warming up model for size 16384",
        Boundary,
        st::WARMUP,
        ev::WARMUP_BEGIN,
        &[("num_tokens", 16384.0)],
    );
    check(
        "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/8 [00:00<?, ?it/s]",
        Boundary,
        st::GRAPH_CAPTURE,
        ev::CAPTURE_PROGRESS,
        &[],
    );
    check(
        "CUDA graph pool memory: 0.23 GiB (actual), 0.25 GiB (estimated), difference: 0.02 GiB (8.7%).",
        Progress,
        st::POST_CAPTURE,
        ev::CUDA_GRAPH_POOL,
        &[("cuda_graph_gib", 0.23), ("reserve_gib", 0.25)],
    );
    // A distributed environment of rank 3 of 4 behind a TP worker prefix.
    let b = check(
        "(Worker_TP3 pid=4242) INFO 12-01 09:43:26 [parallel_state.py:1615] world_size=4 rank=3 \
         local_rank=3 distributed_init_method=tcp://127.0.0.1:29500 backend=nccl",
        Boundary,
        st::DIST_INIT,
        ev::DIST_INIT_BEGIN,
        &[("world_size", 4.0), ("rank", 3.0), ("local_rank", 3.0)],
    );
    assert_eq!((b.rank.tp, b.rank.pid), (Some(3), Some(4242)));
    // The suggestion with negative budgets (a configuration that does not fit).
    check(
        "Free memory on device (10.5/79.19 GiB) on startup. Desired GPU memory utilization is (0.9, 71.27 GiB). \
         Actual usage is 70.1 GiB for weight, 2.5 GiB for peak activation, 0.3 GiB for non-torch memory, and 0 GiB \
         for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=-1879048192` (-1.75 GiB) \
         to fit into requested memory, or `--kv-cache-memory=-66571993088` (-62.0 GiB) to fully utilize gpu memory. \
         Current kv cache memory in use is 0.1 GiB.",
        Progress,
        st::POST_CAPTURE,
        ev::KV_CACHE_MEMORY_SUGGESTION,
        &[
            ("avail_mem_gib", 10.5),
            ("total_gpu_gib", 79.19),
            ("gpu_memory_utilization", 0.9),
            ("budget_gib", 71.27),
            ("weights_gib", 70.1),
            ("activation_peak_gib", 2.5),
            ("non_torch_gib", 0.3),
            ("cuda_graph_gib", 0.0),
            ("kv_cache_memory_bytes", -1879048192.0),
            ("kv_cache_memory_full_bytes", -66571993088.0),
            ("kv_cache_gib", 0.1),
        ],
    );
}

#[test]
fn near_misses_of_the_new_lines() {
    for line in [
        "world_size=1",
        "world_size=x distributed_init_method=env:// backend=nccl",
        "Loading model weights",
        "Loading model config from the hub",
        "Profiling CUDA graph memory",
        "Initial profiling/warmup run took a while",
        "Compile and warming up model for size large",
        "CUDA graph pool memory: unknown",
        "Free memory on device (1.0/2.0 GiB) on startup.",
        "Free memory on device is low",
    ] {
        reject(line);
    }
}
