//! Every SGLang format string of `docs/sglang-memory.md` §2.2 and regex of §2.3, per version,
//! rendered by hand into a literal line, with the stage, event and numbers expected: init,
//! weights, pools, summary, errors, prefixes. Graph captures: `log_catalogue_sglang_capture.rs`.

mod log_support;

use log_support::{check, reject};
use vramledger_engines::log::{event as ev, stage as st, Engine, LineKind::*};

#[test]
fn distributed_init_and_baseline() {
    // 0.4.6, 0.5.5
    let b = check(
        "Init torch distributed begin.",
        Boundary,
        st::DIST_INIT,
        ev::DIST_INIT_BEGIN,
        &[],
    );
    assert_eq!(b.engine, Engine::Sglang);
    check(
        "Init torch distributed ends. mem usage=0.13 GB",
        Boundary,
        st::DIST_INIT,
        ev::DIST_INIT_END,
        &[("mem_usage_gib", 0.13)],
    );
    // 0.5.12, 0.5.18
    check(
        "Init torch distributed ends. elapsed=17.24 s, mem usage=3.81 GB",
        Boundary,
        st::DIST_INIT,
        ev::DIST_INIT_END,
        &[("time_s", 17.24), ("mem_usage_gib", 3.81)],
    );
    // 0.5.23
    check(
        "Init parallel begin.",
        Boundary,
        st::DIST_INIT,
        ev::DIST_INIT_BEGIN,
        &[],
    );
    check(
        "Init parallel ends. elapsed=2.51 s",
        Boundary,
        st::DIST_INIT,
        ev::DIST_INIT_END,
        &[("time_s", 2.51)],
    );
    check(
        "Memory baseline taken. mem usage=0.45 GB",
        Boundary,
        st::DIST_INIT,
        ev::MEMORY_BASELINE,
        &[("mem_usage_gib", 0.45)],
    );
    // "all numbers may be negative"
    check(
        "Memory baseline taken. mem usage=-0.01 GB",
        Boundary,
        st::DIST_INIT,
        ev::MEMORY_BASELINE,
        &[("mem_usage_gib", -0.01)],
    );
    // 0.5.12 and 0.5.23 NCCL prewarm
    check(
        "NCCL/RCCL warmup completed in 1.234s (tp_size=8, pp_size=1, ep_size=1)",
        Progress,
        st::DIST_INIT,
        ev::NCCL_WARMUP,
        &[
            ("time_s", 1.234),
            ("tp_size", 8.0),
            ("pp_size", 1.0),
            ("ep_size", 1.0),
        ],
    );
    check(
        "NCCL/RCCL/HCCL warmup completed in 0.512s (tp_size=2, pp_size=2, ep_size=4)",
        Progress,
        st::DIST_INIT,
        ev::NCCL_WARMUP,
        &[
            ("time_s", 0.512),
            ("tp_size", 2.0),
            ("pp_size", 2.0),
            ("ep_size", 4.0),
        ],
    );
}

#[test]
fn memory_unbalanced() {
    // 0.4.6 / 0.5.5: raised as ValueError (the traceback's last line).
    check(
        "ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. \
         min_per_gpu_memory=70.5, local_gpu_memory=78.9, local_gpu_memory * 0.9=71.01",
        Failure,
        st::DIST_INIT,
        ev::MEMORY_UNBALANCED,
        &[("min_gpu_mem_gib", 70.5), ("local_gpu_mem_gib", 78.9)],
    );
    // 0.5.12+: a logged warning with pre_model_load_memory= naming.
    check(
        "The memory capacity is unbalanced. Some GPUs may be occupied by other processes. \
         pre_model_load_memory=70.5, local_gpu_memory=78.9, local_gpu_memory * 0.9=71.01",
        Progress,
        st::DIST_INIT,
        ev::MEMORY_UNBALANCED,
        &[("min_gpu_mem_gib", 70.5), ("local_gpu_mem_gib", 78.9)],
    );
}

#[test]
fn weights() {
    // all versions
    check(
        "Load weight begin. avail mem=78.81 GB",
        Boundary,
        st::WEIGHT_LOAD,
        ev::LOAD_WEIGHT_BEGIN,
        &[("avail_mem_gib", 78.81)],
    );
    // 0.4.6, 0.5.5
    let b = check(
        "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.72 GB, mem usage=15.09 GB.",
        Boundary,
        st::KV_POOL,
        ev::LOAD_WEIGHT_END,
        &[("avail_mem_gib", 63.72), ("mem_usage_gib", 15.09)],
    );
    assert_eq!(b.words.model_type, Some("LlamaForCausalLM"));
    assert_eq!(b.words.dtype, Some("torch.bfloat16"));
    assert_eq!(b.words.quant, None);
    // 0.5.12 to 0.5.23, with and without quant_str
    let b = check(
        "Load weight end. elapsed=3.21 s, type=DeepseekV3ForCausalLM, quant=fp8, fmt=e4m3, avail mem=120.50 GB, mem usage=80.25 GB.",
        Boundary,
        st::KV_POOL,
        ev::LOAD_WEIGHT_END,
        &[("time_s", 3.21), ("avail_mem_gib", 120.5), ("mem_usage_gib", 80.25)],
    );
    assert_eq!(b.words.model_type, Some("DeepseekV3ForCausalLM"));
    assert_eq!(b.words.quant, Some("fp8"));
    assert_eq!(b.words.dtype, None);
    check(
        "Load weight end. elapsed=0.38 s, type=Qwen2ForCausalLM, avail mem=77.45 GB, mem usage=-0.02 GB.",
        Boundary,
        st::KV_POOL,
        ev::LOAD_WEIGHT_END,
        &[("time_s", 0.38), ("avail_mem_gib", 77.45), ("mem_usage_gib", -0.02)],
    );
    // 0.5.18+ with startup weight-load overlap
    check(
        "Load weight end. Committed real weights after CUDA graph capture in 12.34 s \
         (capture overlap window 5.00 s, startup overlap total 20.10 s)",
        Boundary,
        st::POST_CAPTURE,
        ev::LOAD_WEIGHT_COMMIT,
        &[("time_s", 12.34)],
    );
}

#[test]
fn kv_dtype_and_pools() {
    // 0.5.5, 0.5.12 (rank 0)
    let b = check(
        "Using KV cache dtype: torch.float8_e4m3fn",
        Progress,
        st::KV_POOL,
        ev::KV_CACHE_DTYPE,
        &[],
    );
    assert_eq!(b.words.dtype, Some("torch.float8_e4m3fn"));
    // 0.4.6, 0.5.5, 0.5.12: MHA and MLA
    check(
        "KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB",
        Boundary,
        st::KV_POOL,
        ev::KV_CACHE_ALLOCATED,
        &[
            ("tokens", 46611.0),
            ("k_size_gib", 1.42),
            ("v_size_gib", 1.42),
        ],
    );
    check(
        "KV Cache is allocated. #tokens: 2454421, KV size: 160.63 GB",
        Boundary,
        st::KV_POOL,
        ev::KV_CACHE_ALLOCATED,
        &[("tokens", 2454421.0), ("kv_size_gib", 160.63)],
    );
    // 0.5.18, 0.5.23: dtype, labels, VA upper bound
    let b = check(
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 491520, K size: 30.00 GB, V size: 30.00 GB",
        Boundary,
        st::KV_POOL,
        ev::KV_CACHE_ALLOCATED,
        &[("tokens", 491520.0), ("k_size_gib", 30.0), ("v_size_gib", 30.0)],
    );
    assert_eq!(
        (b.words.dtype, b.words.pool_label),
        (Some("torch.bfloat16"), None)
    );
    let b = check(
        "Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100000, K size: 2.50 GB, V size: 2.50 GB",
        Boundary,
        st::KV_POOL,
        ev::KV_CACHE_ALLOCATED,
        &[("tokens", 100000.0), ("k_size_gib", 2.5), ("v_size_gib", 2.5)],
    );
    assert_eq!(b.words.pool_label, Some("Full"));
    let b = check(
        "SWA KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 50000, K size: 1.00 GB, V size: 1.00 GB",
        Boundary,
        st::KV_POOL,
        ev::KV_CACHE_VA_RESERVED,
        &[("tokens", 50000.0), ("k_size_gib", 1.0), ("v_size_gib", 1.0)],
    );
    assert_eq!(b.words.pool_label, Some("SWA"));
    let b = check(
        "KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 900000, KV size: 55.00 GB",
        Boundary,
        st::KV_POOL,
        ev::KV_CACHE_VA_RESERVED,
        &[("tokens", 900000.0), ("kv_size_gib", 55.0)],
    );
    assert_eq!(b.words.pool_label, None);
    let b = check(
        "MiniMax MSA-v1 main NVFP4 KV Cache is allocated. dtype: torch.float4_e2m1fn_x2, #tokens: 1000, KV size: 0.50 GB",
        Boundary,
        st::KV_POOL,
        ev::KV_CACHE_ALLOCATED,
        &[("tokens", 1000.0), ("kv_size_gib", 0.5)],
    );
    assert_eq!(b.words.pool_label, Some("MiniMax MSA-v1 main NVFP4"));
    assert_eq!(b.words.dtype, Some("torch.float4_e2m1fn_x2"));
    let b = check(
        "MiniMax … index KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000, KV size: 0.01 GB",
        Boundary,
        st::KV_POOL,
        ev::KV_CACHE_ALLOCATED,
        &[("tokens", 1000.0), ("kv_size_gib", 0.01)],
    );
    assert_eq!(b.words.pool_label, Some("MiniMax … index"));
    // 0.5.23 no-op pool
    check(
        "KV Cache skipped (no-op pool). Logical #tokens: 4096, physical K/V size: ~1.0 KB placeholder",
        Boundary,
        st::KV_POOL,
        ev::KV_CACHE_SKIPPED,
        &[("tokens", 4096.0), ("kv_size_gib", 1.0 / 1048576.0)],
    );
    // SWA split: 0.5.5 (capital S), 0.5.12+, all-SWA
    check(
        "Use Sliding window memory pool. full_layer_tokens=200000, swa_layer_tokens=160000",
        Progress,
        st::KV_POOL,
        ev::SWA_SPLIT,
        &[
            ("full_layer_tokens", 200000.0),
            ("swa_layer_tokens", 160000.0),
        ],
    );
    check(
        "Use sliding window memory pool. full_layer_tokens=300000, swa_layer_tokens=240000",
        Progress,
        st::KV_POOL,
        ev::SWA_SPLIT,
        &[
            ("full_layer_tokens", 300000.0),
            ("swa_layer_tokens", 240000.0),
        ],
    );
    check(
        "Use sliding window memory pool (all SWA). swa_layer_tokens=80000",
        Progress,
        st::KV_POOL,
        ev::SWA_SPLIT,
        &[("swa_layer_tokens", 80000.0)],
    );
    // 0.5.5+ Mamba, plain and with speculative intermediate caches (no space before GB, trailing space)
    check(
        "Mamba Cache is allocated. max_mamba_cache_size: 38, conv_state size: 0.03GB, ssm_state size: 2.74GB ",
        Boundary,
        st::KV_POOL,
        ev::MAMBA_CACHE_ALLOCATED,
        &[("mamba_cache_size", 38.0), ("conv_state_gib", 0.03), ("ssm_state_gib", 2.74)],
    );
    check(
        "Mamba Cache is allocated. max_mamba_cache_size: 64, conv_state size: 0.05GB, ssm_state size: 4.61GB \
         intermediate_ssm_state_cache size: 1.20GB intermediate_conv_window_cache size: 0.02GB ",
        Boundary,
        st::KV_POOL,
        ev::MAMBA_CACHE_ALLOCATED,
        &[
            ("mamba_cache_size", 64.0),
            ("conv_state_gib", 0.05),
            ("ssm_state_gib", 4.61),
            ("intermediate_ssm_gib", 1.2),
            ("intermediate_conv_gib", 0.02),
        ],
    );
    // 0.5.18+ multimodal reservation
    check(
        "Reserving 1.50 GB of the KV budget for post-sizing multimodal allocations \
         (feature-transport pools + embedding cache).",
        Progress,
        st::KV_POOL,
        ev::MM_RESERVATION,
        &[("reserve_gib", 1.5)],
    );
    // all versions
    check(
        "Memory pool end. avail mem=8.34 GB",
        Boundary,
        st::POST_KV_INIT,
        ev::MEMORY_POOL_END,
        &[("avail_mem_gib", 8.34)],
    );
    check(
        "max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value instead.",
        Progress,
        st::KV_POOL,
        ev::MAX_TOTAL_TOKENS_CAPPED,
        &[("max_total_tokens", 131072.0), ("profiled_tokens", -561981.0)],
    );
    // 0.5.23
    check(
        "max_running_requests was reduced from the requested 1024 to 512 (per dp worker) due to the available KV cache capacity.",
        Progress,
        st::KV_POOL,
        ev::MAX_RUNNING_REQUESTS_REDUCED,
        &[("max_running_requests_before", 1024.0), ("max_running_requests", 512.0)],
    );
    check(
        "max_running_requests is capped to 38 by the mamba state cache (max_mamba_cache_size=38, 1 state slots per request).",
        Progress,
        st::KV_POOL,
        ev::MAX_RUNNING_REQUESTS_CAPPED,
        &[("max_running_requests", 38.0), ("mamba_cache_size", 38.0), ("slots_per_req", 1.0)],
    );
    let b = check(
        "KvVmmArena[kv_k] ready: device=0 reserved_va=64.0 GiB granularity=2048 KiB handle_type=posix_fd",
        Progress,
        st::KV_POOL,
        ev::VMM_ARENA_READY,
        &[("device", 0.0), ("reserve_gib", 64.0), ("granularity_kib", 2048.0)],
    );
    assert_eq!(b.words.pool_label, Some("kv_k"));
}

#[test]
fn summary() {
    // 0.4.6
    check(
        "max_total_num_tokens=46611, chunked_prefill_size=2048, max_prefill_tokens=16384, max_running_requests=2049, context_len=131072",
        Boundary,
        st::SERVING,
        ev::SUMMARY,
        &[
            ("tokens", 46611.0),
            ("chunked_prefill_size", 2048.0),
            ("max_prefill_tokens", 16384.0),
            ("max_running_requests", 2049.0),
            ("context_len", 131072.0),
        ],
    );
    // 0.5.5+ (gpu and cpu), chunked prefill disabled (-1) and None
    check(
        "max_total_num_tokens=38141, chunked_prefill_size=-1, max_prefill_tokens=16384, max_running_requests=2048, context_len=131072, available_gpu_mem=0.83 GB",
        Boundary,
        st::SERVING,
        ev::SUMMARY,
        &[
            ("tokens", 38141.0),
            ("chunked_prefill_size", -1.0),
            ("max_prefill_tokens", 16384.0),
            ("max_running_requests", 2048.0),
            ("context_len", 131072.0),
            ("avail_mem_gib", 0.83),
        ],
    );
    check(
        "max_total_num_tokens=1000, chunked_prefill_size=None, max_prefill_tokens=16384, max_running_requests=8, context_len=4096, available_cpu_mem=120.50 GB",
        Boundary,
        st::SERVING,
        ev::SUMMARY,
        &[
            ("tokens", 1000.0),
            ("max_prefill_tokens", 16384.0),
            ("max_running_requests", 8.0),
            ("context_len", 4096.0),
            ("avail_mem_gib", 120.5),
        ],
    );
}

#[test]
fn fatal_sizing_errors() {
    // 0.4.6
    check(
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        Failure,
        st::KV_POOL,
        ev::NOT_ENOUGH_MEMORY,
        &[],
    );
    // 0.5.5
    check(
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: self.server_args.mem_fraction_static=0.835",
        Failure,
        st::KV_POOL,
        ev::NOT_ENOUGH_MEMORY,
        &[("mem_fraction_static", 0.835)],
    );
    // 0.5.12+
    check(
        "Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.88",
        Failure,
        st::KV_POOL,
        ev::NOT_ENOUGH_MEMORY,
        &[("mem_fraction_static", 0.88)],
    );
    // 0.5.18+
    check(
        "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88. \
         Raise --mem-fraction-static above 0.913 (minimum viable = 1 - available/pre = 0.9124). \
         If using speculative decoding, draft weights are now counted.",
        Failure,
        st::KV_POOL,
        ev::NO_KV_ROOM,
        &[
            ("mem_fraction_static", 0.88),
            ("suggested_mem_fraction_static", 0.913),
            ("minimum_mem_fraction_static", 0.9124),
        ],
    );
    check(
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.5. \
         Raise --mem-fraction-static above 0.001 (minimum viable = 1 - available/pre = -0.0500). \
         If using speculative decoding, draft weights are now counted.",
        Failure,
        st::KV_POOL,
        ev::NO_KV_ROOM,
        &[
            ("mem_fraction_static", 0.5),
            ("suggested_mem_fraction_static", 0.001),
            ("minimum_mem_fraction_static", -0.05),
        ],
    );
    check(
        "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed max_mamba_cache_size=0 \
         (total_rest_memory=0.10 GB, mamba_cache_per_req=72.00 MB). Try: raise --mem-fraction-static.",
        Failure,
        st::KV_POOL,
        ev::MAMBA_CACHE_TOO_SMALL,
        &[("mamba_cache_size", 0.0)],
    );
    check(
        "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. Raise --mem-fraction-static.",
        Failure,
        st::KV_POOL,
        ev::MAMBA_CACHE_TOO_SMALL,
        &[],
    );
    check(
        "SWA pool (2048 tokens) cannot hold even one request: the prefill admission floor is sliding_window_size (4096) \
         + page_size (1). Increase --swa-full-tokens-ratio or the total KV budget.",
        Failure,
        st::KV_POOL,
        ev::SWA_POOL_TOO_SMALL,
        &[("swa_layer_tokens", 2048.0)],
    );
}

#[test]
fn attention_backend_lines_seen_in_logs() {
    check(
        "Init attention backend begin.",
        Boundary,
        st::POST_KV_INIT,
        ev::ATTN_BACKEND_BEGIN,
        &[],
    );
    check(
        "Init attention backend end. elapsed=0.02 s",
        Boundary,
        st::POST_KV_INIT,
        ev::ATTN_BACKEND_END,
        &[("time_s", 0.02)],
    );
}

#[test]
fn prefixes_colours_and_line_endings() {
    let cases = [
        "[2025-06-01 12:00:00] Memory pool end. avail mem=8.34 GB",
        "[2025-06-01 12:00:00.123 DP1 PP0 ATTN_CP0 MOE_DP1 TP3 EP3] Memory pool end. avail mem=8.34 GB\r\n",
        "\x1b[32m[2025-06-01 12:00:00 TP3]\x1b[0m Memory pool end. avail mem=8.34 GB\x1b[0m\n",
        "[gpu_id=3] Memory pool end. avail mem=8.34 GB",
        "Memory pool end. avail mem=8.34 GB\r",
        "   Memory pool end. avail mem=8.34 GB   ",
    ];
    for line in cases {
        let b = check(
            line,
            Boundary,
            st::POST_KV_INIT,
            ev::MEMORY_POOL_END,
            &[("avail_mem_gib", 8.34)],
        );
        assert_eq!(b.text, "Memory pool end. avail mem=8.34 GB");
    }
    let b = vramledger_engines::log::classify(cases[1]).unwrap();
    let r = b.rank;
    assert_eq!(
        (r.dp, r.pp, r.attn_cp, r.moe_dp, r.tp, r.ep),
        (Some(1), Some(0), Some(0), Some(1), Some(3), Some(3))
    );
    assert_eq!(
        vramledger_engines::log::classify(cases[2]).unwrap().rank.tp,
        Some(3)
    );
    assert_eq!(
        vramledger_engines::log::classify(cases[3])
            .unwrap()
            .rank
            .gpu_id,
        Some(3)
    );
    // A log line glued behind a progress bar (newline lost) is still found.
    let glued =
        "  0%|     | 0/13 [00:00<?, ?it/s][2025-03-08 12:29:21 TP1] Capture cuda graph begin. \
                 This can take up to several minutes. avail mem=1.45 GB";
    let b = check(
        glued,
        Boundary,
        st::GRAPH_CAPTURE,
        ev::CAPTURE_BEGIN,
        &[("avail_mem_gib", 1.45)],
    );
    assert_eq!(b.rank.tp, Some(1));
    // A bar then a log line after `\r`.
    let b = check(
        "Capturing batches (bs=1 avail_mem=2.91 GB): 100%|##| 4/4\r[2026-02-01 00:05:04 TP0] Capture cuda graph end. \
         Time elapsed: 1.24 s. mem usage=0.09 GB. avail mem=2.89 GB.",
        Boundary,
        st::POST_CAPTURE,
        ev::CAPTURE_END,
        &[("time_s", 1.24), ("mem_usage_gib", 0.09), ("avail_mem_gib", 2.89)],
    );
    assert_eq!(b.rank.tp, Some(0));
}

#[test]
fn near_misses_are_rejected() {
    for line in [
        "Init torch distributed",
        "Init torch distributed failed.",
        "Init parallel begin",
        "Load weight",
        "Load weight begins. avail mem=1.00 GB",
        "Loading weights took 1.21 seconds",
        "Beginning to load weights",
        "Memory pool",
        "Memory pool end avail mem=1.00 GB",
        "KV Cache is",
        "KV Cache was freed. #tokens: 1",
        "the KV Cache is allocated lazily",
        "KV cache is allocated. #tokens: 1, K size: 1.00 GB, V size: 1.00 GB",
        "Capture cuda graph",
        "Capture cuda graph failed: out of memory",
        "Capture the moment begin.",
        "Capture cuda graph bs []",
        "Capture cuda graph bs [1, 2",
        "Capturing batches",
        "Capturing batches (bs=1)",
        "max_total_num_tokens=",
        "max_total_num_tokens=abc",
        "max_total_tokens=131072",
        "Post-capture",
        "Using KV cache",
        "Use sliding window memory pool.",
        "Reserving 1.50 GB for something else",
        "Reserving x GB of the KV budget",
        "NCCL version 2.21.5+cuda12.4",
        "NCCL_CUMEM_ENABLE is set to 0, skipping override.",
        "Not enough SMs to use max_autotune_gemm mode",
        "Mamba Cache",
        "The memory capacity",
        "server_args=ServerArgs(kv_cache_dtype='auto', mem_fraction_static=0.88, max_total_tokens=None, chunked_prefill_size=2048)",
        "# Capture cuda graph begin. avail mem=1.00 GB",
        "> Load weight begin. avail mem=1.00 GB",
    ] {
        reject(line);
    }
}
