//! The fixed vocabulary: stage names and event names, as constants.
//!
//! Owns the words only; grammars and consumers refer to these constants so a typo is a compile
//! error. Names are snake_case and never change meaning once released (journals store them).

/// Stage names. A stage runs from the line that starts it to the line that starts the next one.
pub mod stage {
    /// Implicit: before any recognised line.
    pub const STARTUP: &str = "startup";
    /// Torch distributed / parallel init, up to the memory baseline (SGLang).
    pub const DIST_INIT: &str = "dist_init";
    /// Target weight loading (SGLang, vLLM).
    pub const WEIGHT_LOAD: &str = "weight_load";
    /// Draft-model weight loading (speculative decoding). Needs [`crate::log::StageTracker`]:
    /// the draft prints the same lines as the target.
    pub const DRAFT_WEIGHT_LOAD: &str = "draft_weight_load";
    /// From the end of weight loading until the memory pools are built (SGLang).
    pub const KV_POOL: &str = "kv_pool";
    /// After the KV pool, before the first graph capture: attention backend init etc. (SGLang).
    pub const POST_KV_INIT: &str = "post_kv_init";
    /// A graph capture whose line does not say which graph (≤0.5.12 "cuda graph": the decode
    /// or, with speculative decoding, verify runner), and vLLM's capture.
    pub const GRAPH_CAPTURE: &str = "graph_capture";
    /// Target prefill graph (SGLang ≥0.5.18).
    pub const GRAPH_CAPTURE_PREFILL: &str = "graph_capture_prefill";
    /// Target decode graph (SGLang ≥0.5.18).
    pub const GRAPH_CAPTURE_DECODE: &str = "graph_capture_decode";
    /// Target verify graph (speculative decoding, SGLang ≥0.5.18).
    pub const GRAPH_CAPTURE_VERIFY: &str = "graph_capture_verify";
    /// Piecewise CUDA graph (SGLang 0.5.x).
    pub const GRAPH_CAPTURE_PIECEWISE: &str = "graph_capture_piecewise";
    /// Any draft-model graph (EAGLE draft, draft extend, MTP).
    pub const GRAPH_CAPTURE_DRAFT: &str = "graph_capture_draft";
    /// After a graph capture ends.
    pub const POST_CAPTURE: &str = "post_capture";
    /// Post-capture KV sizing (SGLang ≥0.5.18, `SGLANG_ENABLE_POST_CAPTURE_KV_SIZING`).
    pub const POST_CAPTURE_RESIZE: &str = "post_capture_resize";
    /// The engine is up: SGLang's `max_total_num_tokens=` summary, vLLM's engine-ready lines.
    pub const SERVING: &str = "serving";
    /// vLLM: after the model is loaded, while the profile run measures activations.
    pub const MEMORY_PROFILING: &str = "memory_profiling";
    /// vLLM: from the profiling result until the graphs are captured (KV allocation, warm-up).
    pub const KV_CACHE: &str = "kv_cache";
    /// vLLM: warm-up runs for sizes outside the graph capture sizes, after the KV cache is
    /// allocated and before the graphs are captured ("Compile and warming up model for size N").
    pub const WARMUP: &str = "warmup";

    /// Every stage name.
    pub const ALL: &[&str] = &[
        STARTUP,
        DIST_INIT,
        WEIGHT_LOAD,
        DRAFT_WEIGHT_LOAD,
        KV_POOL,
        POST_KV_INIT,
        GRAPH_CAPTURE,
        GRAPH_CAPTURE_PREFILL,
        GRAPH_CAPTURE_DECODE,
        GRAPH_CAPTURE_VERIFY,
        GRAPH_CAPTURE_PIECEWISE,
        GRAPH_CAPTURE_DRAFT,
        POST_CAPTURE,
        POST_CAPTURE_RESIZE,
        SERVING,
        MEMORY_PROFILING,
        KV_CACHE,
        WARMUP,
    ];
}

/// Event names: what a line says.
pub mod event {
    macro_rules! events {
        ($($(#[$doc:meta])* $konst:ident = $name:literal,)*) => {
            $($(#[$doc])* pub const $konst: &str = $name;)*
            /// Every event name.
            pub const ALL: &[&str] = &[$($name,)*];
        };
    }

    events! {
        /// "Init torch distributed begin." / "Init parallel begin."; vLLM "world_size=… rank=…
        /// local_rank=… distributed_init_method=… backend=…"
        DIST_INIT_BEGIN = "dist_init_begin",
        /// "Init torch distributed ends. …" / "Init parallel ends. …"
        DIST_INIT_END = "dist_init_end",
        /// "Memory baseline taken. mem usage=…"
        MEMORY_BASELINE = "memory_baseline",
        /// "NCCL/RCCL(/HCCL) warmup completed in …"
        NCCL_WARMUP = "nccl_warmup",
        /// "The memory capacity is unbalanced. …"
        MEMORY_UNBALANCED = "memory_unbalanced",
        /// "Load weight begin. avail mem=…"
        LOAD_WEIGHT_BEGIN = "load_weight_begin",
        /// "Load weight end. … avail mem=…, mem usage=…"
        LOAD_WEIGHT_END = "load_weight_end",
        /// "Load weight end. Committed real weights after CUDA graph capture in …"
        LOAD_WEIGHT_COMMIT = "load_weight_commit",
        /// "Using KV cache dtype: …"
        KV_CACHE_DTYPE = "kv_cache_dtype",
        /// "Mamba Cache is allocated. …"
        MAMBA_CACHE_ALLOCATED = "mamba_cache_allocated",
        /// "Use sliding window memory pool. …"
        SWA_SPLIT = "swa_split",
        /// "Reserving … GB of the KV budget for post-sizing multimodal allocations …"
        MM_RESERVATION = "mm_reservation",
        /// "[label ]KV Cache is allocated. …"
        KV_CACHE_ALLOCATED = "kv_cache_allocated",
        /// "[label ]KV Cache VA upper bound. …" (post-capture sizing: address space only)
        KV_CACHE_VA_RESERVED = "kv_cache_va_reserved",
        /// "KV Cache skipped (no-op pool). …"
        KV_CACHE_SKIPPED = "kv_cache_skipped",
        /// "KvVmmArena[…] ready: …"
        VMM_ARENA_READY = "vmm_arena_ready",
        /// "max_total_tokens=… is larger than the profiled value …"
        MAX_TOTAL_TOKENS_CAPPED = "max_total_tokens_capped",
        /// "max_running_requests was reduced from the requested … to …"
        MAX_RUNNING_REQUESTS_REDUCED = "max_running_requests_reduced",
        /// "max_running_requests is capped to … by the mamba state cache …"
        MAX_RUNNING_REQUESTS_CAPPED = "max_running_requests_capped",
        /// "Memory pool end. avail mem=…"
        MEMORY_POOL_END = "memory_pool_end",
        /// "Init attention backend begin."
        ATTN_BACKEND_BEGIN = "attn_backend_begin",
        /// "Init attention backend end. elapsed=…"
        ATTN_BACKEND_END = "attn_backend_end",
        /// "Disable prefill CUDA graph because …"
        PREFILL_GRAPH_DISABLED = "prefill_graph_disabled",
        /// "DeepGEMM masked layout budget: … GiB from … GiB free."
        DEEPGEMM_BUDGET = "deepgemm_budget",
        /// "Capture cuda graph begin. …" (graph not named), vLLM "Capturing cudagraphs …"
        CAPTURE_BEGIN = "capture_begin",
        /// "Capture cuda graph end. …", vLLM "Graph capturing finished …"
        CAPTURE_END = "capture_end",
        /// "Capture target prefill CUDA graph begin. …"
        CAPTURE_PREFILL_BEGIN = "capture_prefill_begin",
        /// "Capture target prefill CUDA graph end. …"
        CAPTURE_PREFILL_END = "capture_prefill_end",
        /// "Capture target decode … graph begin. …"
        CAPTURE_DECODE_BEGIN = "capture_decode_begin",
        /// "Capture target decode … graph end. …"
        CAPTURE_DECODE_END = "capture_decode_end",
        /// "Capture target verify … graph begin. …"
        CAPTURE_VERIFY_BEGIN = "capture_verify_begin",
        /// "Capture target verify … graph end. …"
        CAPTURE_VERIFY_END = "capture_verify_end",
        /// "Capture piecewise CUDA graph begin. …"
        CAPTURE_PIECEWISE_BEGIN = "capture_piecewise_begin",
        /// "Capture piecewise CUDA graph end. …"
        CAPTURE_PIECEWISE_END = "capture_piecewise_end",
        /// "Capture draft (decode) cuda graph begin. …", Frozen-KV MTP draft
        CAPTURE_DRAFT_BEGIN = "capture_draft_begin",
        /// "Capture draft (decode) cuda graph end. …"
        CAPTURE_DRAFT_END = "capture_draft_end",
        /// "Capture draft extend … graph begin …"
        CAPTURE_DRAFT_EXTEND_BEGIN = "capture_draft_extend_begin",
        /// "Capture draft extend … graph end. …"
        CAPTURE_DRAFT_EXTEND_END = "capture_draft_extend_end",
        /// "Capture draft prefill CUDA graph begin. …"
        CAPTURE_DRAFT_PREFILL_BEGIN = "capture_draft_prefill_begin",
        /// "Capture draft prefill CUDA graph end. …"
        CAPTURE_DRAFT_PREFILL_END = "capture_draft_prefill_end",
        /// "Capture draft verify … graph begin. …"
        CAPTURE_DRAFT_VERIFY_BEGIN = "capture_draft_verify_begin",
        /// "Capture draft verify … graph end. …"
        CAPTURE_DRAFT_VERIFY_END = "capture_draft_verify_end",
        /// "Capture cuda graph bs [1, 2, 4, 8]"
        CAPTURE_BATCH_SIZES = "capture_batch_sizes",
        /// tqdm "Capturing batches (bs=… avail_mem=… GB)" and friends; vLLM "Capturing CUDA graph …" bars
        CAPTURE_PROGRESS = "capture_progress",
        /// tqdm "Compiling num tokens (num_tokens=…)"
        COMPILE_PROGRESS = "compile_progress",
        /// "Post-capture KV sizing: decode CUDA graph max_bs=… < max_running_requests=…; …"
        POST_CAPTURE_DECODE_GAP = "post_capture_decode_gap",
        /// "Post-capture KV sizing: KV-canary per-forward workspace … GB"
        POST_CAPTURE_WORKSPACE = "post_capture_workspace",
        /// "Post-capture KV sizing: max_running_requests … -> …"
        POST_CAPTURE_MAX_RUNNING_REQUESTS = "post_capture_max_running_requests",
        /// "Post-capture KV sizing: full_layer_tokens=…, swa_layer_tokens=…"
        POST_CAPTURE_TOKENS = "post_capture_tokens",
        /// "Post-capture KV sizing: KV cache allocated. …"
        POST_CAPTURE_KV_ALLOCATED = "post_capture_kv_allocated",
        /// "Post-capture KV sizing: draft KV cache allocated. …"
        POST_CAPTURE_DRAFT_KV_ALLOCATED = "post_capture_draft_kv_allocated",
        /// Any other "Post-capture KV sizing: …" line.
        POST_CAPTURE_NOTE = "post_capture_note",
        /// "max_total_num_tokens=…, …" (the server summary)
        SUMMARY = "summary",
        /// "Not enough memory. Please try to increase --mem-fraction-static."
        NOT_ENOUGH_MEMORY = "not_enough_memory",
        /// "Loaded weights leave no GPU memory for the KV cache under …"
        NO_KV_ROOM = "no_kv_room",
        /// "Not enough GPU memory for hybrid … state cache" / "… state cache is too small …"
        MAMBA_CACHE_TOO_SMALL = "mamba_cache_too_small",
        /// "SWA pool (… tokens) cannot hold even one request: …"
        SWA_POOL_TOO_SMALL = "swa_pool_too_small",
        /// vLLM "Starting to load model …" / "Loading model from scratch..."
        LOAD_MODEL_BEGIN = "load_model_begin",
        /// vLLM "Model loading took … GiB and … seconds" / "Loading model weights took … GB"
        LOAD_MODEL_END = "load_model_end",
        /// vLLM "Memory profiling takes … seconds"
        MEMORY_PROFILING_END = "memory_profiling_end",
        /// vLLM "the current vLLM instance can use total_gpu_memory (…) x gpu_memory_utilization (…) = …"
        MEMORY_BUDGET = "memory_budget",
        /// vLLM "model weights take …; non_torch_memory takes …; … reserved for KV Cache is …"
        MEMORY_PROFILE_RESULT = "memory_profile_result",
        /// vLLM "Available KV cache memory: … GiB"
        AVAILABLE_KV_CACHE_MEMORY = "available_kv_cache_memory",
        /// vLLM "Initial free memory …, reserved … GiB memory for KV Cache as specified by kv_cache_memory_bytes …"
        KV_CACHE_MEMORY_SPECIFIED = "kv_cache_memory_specified",
        /// vLLM "# cuda blocks: …, # CPU blocks: …" / "num_gpu_blocks is: …"
        KV_CACHE_BLOCKS = "kv_cache_blocks",
        /// vLLM "GPU KV cache size: … tokens"
        KV_CACHE_SIZE = "kv_cache_size",
        /// vLLM "Maximum concurrency for … tokens per request: …x"
        MAX_CONCURRENCY = "max_concurrency",
        /// vLLM "Estimated CUDA graph memory: … GiB total"
        CUDA_GRAPH_ESTIMATE = "cuda_graph_estimate",
        /// vLLM "init engine (profile, create kv cache, warmup model) took …"
        ENGINE_READY = "engine_ready",
        /// vLLM "Starting vLLM API server …"
        API_SERVER_START = "api_server_start",
        /// vLLM "Profiling CUDA graph memory: PIECEWISE=… (largest=…), …" (V1 model runner)
        CUDA_GRAPH_PROFILING = "cuda_graph_profiling",
        /// vLLM "Initial profiling/warmup run took … s"
        PROFILING_RUN = "profiling_run",
        /// vLLM "Compile and warming up model for size …"
        WARMUP_BEGIN = "warmup_begin",
        /// vLLM "CUDA graph pool memory: … GiB (actual), … GiB (estimated), difference: …"
        CUDA_GRAPH_POOL = "cuda_graph_pool",
        /// vLLM "Free memory on device (…/… GiB) on startup. … Replace gpu_memory_utilization
        /// config with `--kv-cache-memory=…` …" (the after-capture summary and suggestion)
        KV_CACHE_MEMORY_SUGGESTION = "kv_cache_memory_suggestion",
        /// vLLM "No available memory for the cache blocks. …"
        NO_KV_MEMORY = "no_kv_memory",
        /// vLLM "… KV cache is needed, which is larger than the available KV cache memory (…)"
        KV_CACHE_TOO_SMALL = "kv_cache_too_small",
    }
}
