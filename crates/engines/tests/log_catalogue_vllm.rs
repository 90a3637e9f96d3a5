//! Every vLLM line of `docs/sglang-memory.md` §8.1 to §8.3, rendered by hand into a literal line,
//! with the stage, event and numbers expected.

mod log_support;

use log_support::{check, reject};
use vramledger_engines::log::{classify, event as ev, stage as st, Engine, LineKind::*};

#[test]
fn v0_0_8_5_memory_profiling_breakdown() {
    // One logger.info with embedded newlines: 4 physical lines (§8.2).
    let b = check(
        "Memory profiling takes 5.61 seconds",
        Boundary,
        st::KV_CACHE,
        ev::MEMORY_PROFILING_END,
        &[("time_s", 5.61)],
    );
    assert_eq!(b.engine, Engine::Vllm);
    check(
        "the current vLLM instance can use total_gpu_memory (14.56GiB) x gpu_memory_utilization (0.50) = 7.28GiB",
        Progress,
        st::KV_CACHE,
        ev::MEMORY_BUDGET,
        &[("total_gpu_gib", 14.56), ("gpu_memory_utilization", 0.5), ("budget_gib", 7.28)],
    );
    check(
        "model weights take 2.89GiB; non_torch_memory takes 0.01GiB; PyTorch activation peak memory takes 2.02GiB; \
         the rest of the memory reserved for KV Cache is 2.36GiB.",
        Progress,
        st::KV_CACHE,
        ev::MEMORY_PROFILE_RESULT,
        &[
            ("weights_gib", 2.89),
            ("non_torch_gib", 0.01),
            ("activation_peak_gib", 2.02),
            ("kv_cache_gib", 2.36),
        ],
    );
    check(
        "model weights take 6.59GiB; non_torch_memory takes -0.05GiB; PyTorch activation peak memory takes 4.93GiB; \
         the rest of the memory reserved for KV Cache is -7.83GiB.",
        Progress,
        st::KV_CACHE,
        ev::MEMORY_PROFILE_RESULT,
        &[
            ("weights_gib", 6.59),
            ("non_torch_gib", -0.05),
            ("activation_peak_gib", 4.93),
            ("kv_cache_gib", -7.83),
        ],
    );
}

#[test]
fn v0_other_lines() {
    check(
        "Model loading took 5.7174 GiB and 28.981453 seconds",
        Boundary,
        st::MEMORY_PROFILING,
        ev::LOAD_MODEL_END,
        &[("mem_usage_gib", 5.7174), ("time_s", 28.981453)],
    );
    // 0.7.x wording
    check(
        "Loading model weights took 2.8884 GB",
        Boundary,
        st::MEMORY_PROFILING,
        ev::LOAD_MODEL_END,
        &[("mem_usage_gib", 2.8884)],
    );
    let b = check(
        "# cuda blocks: 5517, # CPU blocks: 9362",
        Progress,
        st::KV_CACHE,
        ev::KV_CACHE_BLOCKS,
        &[("gpu_blocks", 5517.0), ("cpu_blocks", 9362.0)],
    );
    assert_eq!(b.words.pool_label, Some("cuda"));
    check(
        "# CUDA blocks: 5517, # CPU blocks: 9362",
        Progress,
        st::KV_CACHE,
        ev::KV_CACHE_BLOCKS,
        &[("gpu_blocks", 5517.0), ("cpu_blocks", 9362.0)],
    );
    check(
        "Maximum concurrency for 32768 tokens per request: 2.69x",
        Progress,
        st::KV_CACHE,
        ev::MAX_CONCURRENCY,
        &[("context_len", 32768.0), ("concurrency", 2.69)],
    );
    check(
        "Graph capturing finished in 49 secs, took 0.17 GiB",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_END,
        &[("time_s", 49.0), ("mem_usage_gib", 0.17)],
    );
    check(
        "Graph capturing finished in 3 secs, took -0.02 GiB",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_END,
        &[("time_s", 3.0), ("mem_usage_gib", -0.02)],
    );
    check(
        "init engine (profile, create kv cache, warmup model) took 61.80 seconds",
        Boundary,
        st::SERVING,
        ev::ENGINE_READY,
        &[("time_s", 61.8)],
    );
    check(
        "Starting to load model Qwen/Qwen2.5-1.5B-Instruct...",
        Boundary,
        st::WEIGHT_LOAD,
        ev::LOAD_MODEL_BEGIN,
        &[],
    );
    check(
        "Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static.",
        Boundary,
        st::GRAPH_CAPTURE,
        ev::CAPTURE_BEGIN,
        &[],
    );
    check(
        "Capturing CUDA graph shapes: 100% 35/35 [00:48<00:00,  1.39s/it]",
        Boundary,
        st::GRAPH_CAPTURE,
        ev::CAPTURE_PROGRESS,
        &[],
    );
    check(
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        Failure,
        st::KV_CACHE,
        ev::NO_KV_MEMORY,
        &[],
    );
}

#[test]
fn v1_0_8_5_and_intermediate() {
    check(
        "GPU KV cache size: 136,592 tokens",
        Boundary,
        st::KV_CACHE,
        ev::KV_CACHE_SIZE,
        &[("tokens", 136592.0)],
    );
    check(
        "Maximum concurrency for 131,072 tokens per request: 1.04x",
        Progress,
        st::KV_CACHE,
        ev::MAX_CONCURRENCY,
        &[("context_len", 131072.0), ("concurrency", 1.04)],
    );
    check(
        "Available KV cache memory: 3.65 GiB",
        Boundary,
        st::KV_CACHE,
        ev::AVAILABLE_KV_CACHE_MEMORY,
        &[("kv_cache_gib", 3.65)],
    );
    check(
        "Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: 8537",
        Progress,
        st::SERVING,
        ev::KV_CACHE_BLOCKS,
        &[("gpu_blocks", 8537.0)],
    );
    check(
        "Starting vLLM API server 0 on http://0.0.0.0:8000",
        Boundary,
        st::SERVING,
        ev::API_SERVER_START,
        &[],
    );
    check(
        "ValueError: To serve at least one request with the models's max seq len (131072), (7.00 GiB KV cache is needed, \
         which is larger than the available KV cache memory (3.65 GiB). Based on the available memory, the estimated maximum model length is 68000.",
        Failure,
        st::KV_CACHE,
        ev::KV_CACHE_TOO_SMALL,
        &[("kv_cache_gib", 3.65), ("context_len", 131072.0)],
    );
}

#[test]
fn v1_0_33() {
    // format_gib: Python round, 0 to 2 decimals
    for (text, v) in [("61.5", 61.5), ("62", 62.0), ("-0.37", -0.37)] {
        let line = format!("Available KV cache memory: {text} GiB");
        check(
            &line,
            Boundary,
            st::KV_CACHE,
            ev::AVAILABLE_KV_CACHE_MEMORY,
            &[("kv_cache_gib", v)],
        );
    }
    check(
        "Model loading took 15.26 GiB memory and 3.500000 seconds",
        Boundary,
        st::MEMORY_PROFILING,
        ev::LOAD_MODEL_END,
        &[("mem_usage_gib", 15.26), ("time_s", 3.5)],
    );
    check(
        "Model loading took 15 GiB memory and 3.500000 seconds",
        Boundary,
        st::MEMORY_PROFILING,
        ev::LOAD_MODEL_END,
        &[("mem_usage_gib", 15.0), ("time_s", 3.5)],
    );
    let b = check(
        "GPU KV cache size: 1,005,056 tokens, Maximum concurrency for 131,072 tokens per request: 7.67x",
        Boundary,
        st::KV_CACHE,
        ev::KV_CACHE_SIZE,
        &[("tokens", 1005056.0), ("context_len", 131072.0), ("concurrency", 7.67)],
    );
    assert_eq!(b.words.pool_label, Some("GPU"));
    let b = check(
        "GPU + host KV cache size: 2,000,000 tokens, Maximum concurrency for 32,768 tokens per request: 61.04x",
        Boundary,
        st::KV_CACHE,
        ev::KV_CACHE_SIZE,
        &[("tokens", 2000000.0), ("context_len", 32768.0), ("concurrency", 61.04)],
    );
    assert_eq!(b.words.pool_label, Some("GPU + host"));
    check(
        "Estimated CUDA graph memory: 0.45 GiB total",
        Progress,
        st::MEMORY_PROFILING,
        ev::CUDA_GRAPH_ESTIMATE,
        &[("reserve_gib", 0.45)],
    );
    check(
        "Initial free memory 78.50 GiB, reserved 20.00 GiB memory for KV Cache as specified by kv_cache_memory_bytes \
         config and skipped memory profiling. This does not respect the gpu_memory_utilization config.",
        Boundary,
        st::KV_CACHE,
        ev::KV_CACHE_MEMORY_SPECIFIED,
        &[("avail_mem_gib", 78.5), ("kv_cache_gib", 20.0)],
    );
    // DEBUG-only MemoryProfilingResult.__repr__
    check(
        "Memory profiling takes 12.34 seconds. Total non KV cache memory: 18.5GiB; torch peak memory increase: 2.1GiB; \
         total consumed (from mem_get_info): 16.4GiB; weights memory: 15.0GiB.",
        Boundary,
        st::KV_CACHE,
        ev::MEMORY_PROFILING_END,
        &[
            ("time_s", 12.34),
            ("non_kv_cache_gib", 18.5),
            ("activation_peak_gib", 2.1),
            ("consumed_gib", 16.4),
            ("weights_gib", 15.0),
        ],
    );
    check(
        "init engine (profile, create kv cache, warmup model) took 40.12 s",
        Boundary,
        st::SERVING,
        ev::ENGINE_READY,
        &[("time_s", 40.12)],
    );
    check(
        "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|\u{2588}\u{2588}| 67/67 [00:05<00:00, 12.3it/s]",
        Boundary,
        st::GRAPH_CAPTURE,
        ev::CAPTURE_PROGRESS,
        &[],
    );
}

#[test]
fn prefixes_of_every_era() {
    let msg = "Available KV cache memory: 61.5 GiB";
    // 0.8.5 main process; worker with _add_prefix colours; 0.33 format; docker compose; custom.
    let lines = [
        format!("INFO 05-30 06:40:49 [gpu_worker.py:227] {msg}"),
        format!("\x1b[1;36m(VllmWorker rank=1 pid=4242)\x1b[0;0m INFO 05-30 06:40:49 [gpu_worker.py:227] {msg}"),
        format!("(EngineCore_DP2 pid=77) INFO 10-02 12:00:00 [gpu_worker.py:298] {msg}"),
        format!("(Worker_PP1_TP3 pid=78) INFO 10-02 12:00:00.123 [gpu_worker.py:298] {msg}\r\n"),
        format!("2025-11-24 14:00:30.181 | INFO 11-23 23:00:30 [gpu_worker.py:227] {msg}"),
        format!("22:12:16  INFO [worker.py:295] {msg}"),
        format!("INFO 05-30 06:40:49 gpu_worker.py:227] {msg}"),
        format!("\x1b[32mINFO\x1b[0m \x1b[90m10-02 12:00:00\x1b[0m [\x1b[90mgpu_worker.py:298\x1b[0m] {msg}"),
    ];
    for line in &lines {
        let b = check(
            line,
            Boundary,
            st::KV_CACHE,
            ev::AVAILABLE_KV_CACHE_MEMORY,
            &[("kv_cache_gib", 61.5)],
        );
        assert_eq!(b.text, msg, "{line:?}");
    }
    let r = classify(&lines[1]).unwrap().rank;
    assert_eq!((r.worker_rank, r.pid), (Some(1), Some(4242)));
    let r = classify(&lines[2]).unwrap().rank;
    assert_eq!((r.dp, r.pid), (Some(2), Some(77)));
    let r = classify(&lines[3]).unwrap().rank;
    assert_eq!((r.pp, r.tp, r.pid), (Some(1), Some(3), Some(78)));
}

#[test]
fn near_misses_are_rejected() {
    for line in [
        "Loading weights took 28.76 seconds",
        "Loading safetensors checkpoint shards: 100% Completed | 4/4 [05:42<00:00, 85.53s/it]",
        "Model loading took",
        "Model loading took a while",
        "Memory profiling takes a while",
        "Available KV cache memory: lots",
        "GPU KV cache size: many tokens",
        "my GPU KV cache size: 1 tokens",
        "# source: somewhere",
        "# x blocks: y",
        "Graph capturing finished",
        "init engine",
        "Maximum concurrency for many tokens",
        "the current vLLM instance is fine",
        "Engine 000: Avg prompt throughput: 0.0 tokens/s",
        "Starting the engine",
        "Capturing the flag",
        "Initial free memory is low",
        "Estimated CUDA graph memory: unknown",
        "vLLM API server version 0.9.1",
        "Automatically detected platform cuda.",
    ] {
        reject(line);
    }
}
