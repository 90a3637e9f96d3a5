//! vLLM message grammar (V0 0.7/0.8, V1 0.8.5 to 0.33): one message (prefix already stripped)
//! in, a [`Hit`] out.
//!
//! Owns the lines of `docs/sglang-memory.md` §8: the distributed environment, model loading, the
//! memory-profiling result (V0's four-line breakdown, also when a copy wrapped it onto several
//! lines), the KV budget and size, warm-up, graph capture, the after-capture summary and the
//! engine-ready lines, for both V1 model runners (0.26's `gpu_model_runner.py` and
//! `gpu/model_runner.py`). vLLM's stages are `dist_init` → `weight_load` → `memory_profiling` →
//! `kv_cache` → (`warmup`) → `graph_capture` → `post_capture` → `serving`. Must never claim a
//! line SGLang also prints (the SGLang grammar runs first).

use super::numbers::{
    after, f64_at, f64_before, f64_field, i64_field, u64_at, u64_field, word_field,
};
use super::vocab::{event as ev, stage as st};
use super::{Hit, LineKind};

use LineKind::{Boundary, Failure, Progress};

/// Recognises a vLLM message.
pub(crate) fn parse(msg: &str) -> Option<Hit<'_>> {
    let anchored = match msg.as_bytes().first()? {
        b'S' => starting(msg),
        b'L' | b'M' => model_loaded(msg)
            .or_else(|| loading_from_scratch(msg))
            .or_else(|| profiling_done(msg))
            .or_else(|| concurrency(msg)),
        b't' | b'm' | b'n' | b'P' => budget(msg)
            .or_else(|| profile_result(msg))
            .or_else(|| graph_profiling(msg)),
        b'w' => dist_environment(msg),
        b'A' => available(msg),
        b'I' => specified(msg).or_else(|| profiling_run(msg)),
        b'#' => blocks(msg),
        b'G' => capture_done(msg),
        b'C' => capture(msg)
            .or_else(|| warmup(msg))
            .or_else(|| graph_pool(msg)),
        b'F' => suggestion(msg),
        b'E' => estimate(msg).or_else(|| engine_blocks(msg)),
        b'i' => engine_ready(msg),
        _ => None,
    };
    anchored.or_else(|| kv_size(msg)).or_else(|| failure(msg))
}

fn starting(msg: &str) -> Option<Hit<'_>> {
    if msg.starts_with("Starting to load model") {
        return Some(Hit::new(Boundary, st::WEIGHT_LOAD, ev::LOAD_MODEL_BEGIN));
    }
    msg.starts_with("Starting vLLM API server")
        .then(|| Hit::new(Boundary, st::SERVING, ev::API_SERVER_START))
}

/// "world_size=%d rank=%d local_rank=%d distributed_init_method=%s backend=%s"
/// (`init_distributed_environment`, before torch.distributed and the communicators exist).
fn dist_environment(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("world_size=")?;
    if !r.contains(" distributed_init_method=") {
        return None;
    }
    let mut h = Hit::new(Boundary, st::DIST_INIT, ev::DIST_INIT_BEGIN);
    let n = &mut h.numbers;
    n.world_size = Some(u64_at(r)?);
    n.rank = u64_field(r, "rank=");
    n.local_rank = u64_field(r, "local_rank=");
    h.words.backend = word_field(r, "backend=");
    Some(h)
}

/// "Loading model from scratch..." (V2 model runner; 0.11 V1 after "Starting to load model").
fn loading_from_scratch(msg: &str) -> Option<Hit<'_>> {
    msg.starts_with("Loading model from scratch")
        .then(|| Hit::new(Boundary, st::WEIGHT_LOAD, ev::LOAD_MODEL_BEGIN))
}

/// "Profiling CUDA graph memory: PIECEWISE=8 (largest=128), FULL=8 (largest=128)" (V1 model
/// runner: throwaway graphs captured while profiling, before the KV budget).
fn graph_profiling(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Profiling CUDA graph memory: ")?;
    let mut h = Hit::new(Progress, st::MEMORY_PROFILING, ev::CUDA_GRAPH_PROFILING);
    h.numbers.num_tokens = u64_field(r, "largest=");
    Some(h)
}

/// "Initial profiling/warmup run took %.2f s".
fn profiling_run(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Initial profiling/warmup run took ")?;
    let mut h = Hit::new(Progress, st::MEMORY_PROFILING, ev::PROFILING_RUN);
    h.numbers.time_s = Some(f64_at(r)?);
    Some(h)
}

/// "Compile and warming up model for size %d" (`compile_or_warm_up_model`, before capture).
fn warmup(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Compile and warming up model for size ")?;
    let mut h = Hit::new(Boundary, st::WARMUP, ev::WARMUP_BEGIN);
    h.numbers.num_tokens = Some(u64_at(r)?);
    Some(h)
}

/// "CUDA graph pool memory: %s GiB (actual), %s GiB (estimated), difference: …".
fn graph_pool(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("CUDA graph pool memory: ")?;
    let mut h = Hit::new(Progress, st::POST_CAPTURE, ev::CUDA_GRAPH_POOL);
    h.numbers.cuda_graph_gib = Some(f64_at(r)?);
    h.numbers.reserve_gib = f64_field(r, "(actual), ");
    Some(h)
}

/// The after-capture summary (`compile_or_warm_up_model`): "Free memory on device (F/T GiB) on
/// startup. Desired GPU memory utilization is (U, R GiB). Actual usage is W GiB for weight, A
/// GiB for peak activation, N GiB for non-torch memory, and G GiB for CUDAGraph memory. Replace
/// gpu_memory_utilization config with `--kv-cache-memory=B` (… GiB) to fit into requested
/// memory, or `--kv-cache-memory=B2` (… GiB) to fully utilize gpu memory. Current kv cache
/// memory in use is K GiB."
fn suggestion(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Free memory on device (")?;
    if !r.contains("--kv-cache-memory=") {
        return None;
    }
    let mut h = Hit::new(Progress, st::POST_CAPTURE, ev::KV_CACHE_MEMORY_SUGGESTION);
    let n = &mut h.numbers;
    n.avail_mem_gib = f64_at(r);
    n.total_gpu_gib = r.split_once('/').and_then(|(_, t)| f64_at(t));
    n.gpu_memory_utilization = f64_field(r, "utilization is (");
    n.budget_gib = after(r, "utilization is (")
        .and_then(|t| t.split_once(", "))
        .and_then(|(_, t)| f64_at(t));
    n.weights_gib = f64_before(r, " GiB for weight");
    n.activation_peak_gib = f64_before(r, " GiB for peak activation");
    n.non_torch_gib = f64_before(r, " GiB for non-torch memory");
    n.cuda_graph_gib = f64_before(r, " GiB for CUDAGraph memory");
    n.kv_cache_memory_bytes = i64_field(r, "`--kv-cache-memory=");
    n.kv_cache_memory_full_bytes =
        after(r, "requested memory, or ").and_then(|t| i64_field(t, "`--kv-cache-memory="));
    n.kv_cache_gib = f64_field(r, "kv cache memory in use is ");
    Some(h)
}

/// "Model loading took %.4f GiB and %.6f seconds" (0.8.5), "… GiB memory and …" (0.33),
/// "Loading model weights took %.4f GB" (0.7).
fn model_loaded(msg: &str) -> Option<Hit<'_>> {
    let r = msg
        .strip_prefix("Model loading took ")
        .or_else(|| msg.strip_prefix("Loading model weights took "))?;
    let mut h = Hit::new(Boundary, st::MEMORY_PROFILING, ev::LOAD_MODEL_END);
    h.numbers.mem_usage_gib = Some(f64_at(r)?);
    h.numbers.time_s = f64_field(r, "and ");
    Some(h)
}

/// "Memory profiling takes %.2f seconds" (V0 INFO; 0.33 DEBUG adds the totals).
fn profiling_done(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Memory profiling takes ")?;
    let mut h = Hit::new(Boundary, st::KV_CACHE, ev::MEMORY_PROFILING_END);
    let n = &mut h.numbers;
    n.time_s = Some(f64_at(r)?);
    n.non_kv_cache_gib = f64_field(r, "Total non KV cache memory: ");
    n.activation_peak_gib = f64_field(r, "torch peak memory increase: ");
    n.consumed_gib = f64_field(r, "total consumed (from mem_get_info): ");
    n.weights_gib = f64_field(r, "weights memory: ");
    Some(h)
}

/// "Maximum concurrency for %s tokens per request: %.2fx".
fn concurrency(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Maximum concurrency for ")?;
    let mut h = Hit::new(Progress, st::KV_CACHE, ev::MAX_CONCURRENCY);
    h.numbers.context_len = Some(u64_at(r)?);
    h.numbers.concurrency = f64_field(r, "tokens per request: ");
    Some(h)
}

/// "the current vLLM instance can use total_gpu_memory (X GiB) x gpu_memory_utilization (U) = B GiB".
fn budget(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("the current vLLM instance can use ")?;
    let mut h = Hit::new(Progress, st::KV_CACHE, ev::MEMORY_BUDGET);
    let n = &mut h.numbers;
    n.total_gpu_gib = f64_field(r, "total_gpu_memory (");
    n.gpu_memory_utilization = f64_field(r, "gpu_memory_utilization (");
    n.budget_gib = f64_field(r, ") = ");
    Some(h)
}

/// V0's breakdown: "model weights take …; non_torch_memory takes …; PyTorch activation peak
/// memory takes …; the rest of the memory reserved for KV Cache is …". Copies that wrapped it
/// give fragments; each fragment starting with one of the four clauses is read alone.
fn profile_result(msg: &str) -> Option<Hit<'_>> {
    const CLAUSES: [&str; 4] = [
        "model weights take ",
        "non_torch_memory takes ",
        "PyTorch activation peak memory takes ",
        "the rest of the memory reserved for KV Cache is ",
    ];
    if !CLAUSES.iter().any(|c| msg.starts_with(c)) {
        return None;
    }
    let mut h = Hit::new(Progress, st::KV_CACHE, ev::MEMORY_PROFILE_RESULT);
    let n = &mut h.numbers;
    n.weights_gib = f64_field(msg, CLAUSES[0]);
    n.non_torch_gib = f64_field(msg, CLAUSES[1]);
    n.activation_peak_gib = f64_field(msg, CLAUSES[2]);
    n.kv_cache_gib = f64_field(msg, CLAUSES[3]);
    Some(h)
}

/// "Available KV cache memory: %.2f GiB" / "%s GiB" (0 to 2 decimals).
fn available(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Available KV cache memory: ")?;
    let mut h = Hit::new(Boundary, st::KV_CACHE, ev::AVAILABLE_KV_CACHE_MEMORY);
    h.numbers.kv_cache_gib = Some(f64_at(r)?);
    Some(h)
}

/// "Initial free memory X GiB, reserved Y GiB memory for KV Cache as specified by
/// kv_cache_memory_bytes config …" (profiling skipped).
fn specified(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Initial free memory ")?;
    if !r.contains("memory for KV Cache") {
        return None;
    }
    let mut h = Hit::new(Boundary, st::KV_CACHE, ev::KV_CACHE_MEMORY_SPECIFIED);
    h.numbers.avail_mem_gib = f64_at(r);
    h.numbers.kv_cache_gib = f64_field(r, "reserved ");
    Some(h)
}

/// "# %s blocks: %d, # CPU blocks: %d" (V0 executor).
fn blocks(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("# ")?;
    let (device, rest) = r.split_once(" blocks: ")?;
    if device.is_empty() || device.len() > 16 || device.contains(' ') {
        return None;
    }
    let mut h = Hit::new(Progress, st::KV_CACHE, ev::KV_CACHE_BLOCKS);
    h.numbers.gpu_blocks = Some(u64_at(rest)?);
    h.numbers.cpu_blocks = u64_field(rest, "CPU blocks: ");
    h.words.pool_label = Some(device);
    Some(h)
}

/// "Graph capturing finished in %.0f secs, took %.2f GiB".
fn capture_done(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Graph capturing finished in ")?;
    let mut h = Hit::new(Boundary, st::POST_CAPTURE, ev::CAPTURE_END);
    h.numbers.time_s = f64_at(r);
    h.numbers.mem_usage_gib = f64_field(r, "took ");
    Some(h)
}

/// V0 "Capturing cudagraphs for decoding. …"; tqdm "Capturing CUDA graph shapes: …" (0.7 to
/// 0.9) and "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): …" (V1).
fn capture(msg: &str) -> Option<Hit<'_>> {
    if msg.starts_with("Capturing cudagraphs for decoding") {
        return Some(Hit::new(Boundary, st::GRAPH_CAPTURE, ev::CAPTURE_BEGIN));
    }
    msg.starts_with("Capturing CUDA graph")
        .then(|| Hit::new(Boundary, st::GRAPH_CAPTURE, ev::CAPTURE_PROGRESS))
}

/// "Estimated CUDA graph memory: %.2f GiB total" (0.33 profiler).
fn estimate(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Estimated CUDA graph memory: ")?;
    let mut h = Hit::new(Progress, st::MEMORY_PROFILING, ev::CUDA_GRAPH_ESTIMATE);
    h.numbers.reserve_gib = Some(f64_at(r)?);
    Some(h)
}

/// "Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: 8537".
fn engine_blocks(msg: &str) -> Option<Hit<'_>> {
    if !msg.starts_with("Engine ") {
        return None;
    }
    let mut h = Hit::new(Progress, st::SERVING, ev::KV_CACHE_BLOCKS);
    h.numbers.gpu_blocks = Some(u64_field(msg, "num_gpu_blocks is: ")?);
    Some(h)
}

/// "init engine (profile, create kv cache, warmup model) took %.2f seconds" and its variants.
fn engine_ready(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("init engine (")?;
    let mut h = Hit::new(Boundary, st::SERVING, ev::ENGINE_READY);
    h.numbers.time_s = Some(f64_field(r, "took ")?);
    Some(h)
}

/// "GPU KV cache size: 136,592 tokens" (0.8.5 to 0.9) and "%s KV cache size: %s tokens,
/// Maximum concurrency for %s tokens per request: %.2fx" (0.33; `%s` = GPU, GPU + host, …).
fn kv_size(msg: &str) -> Option<Hit<'_>> {
    let (pool, r) = msg.split_once(" KV cache size: ")?;
    let pool_ok = pool.as_bytes().first().is_some_and(u8::is_ascii_uppercase)
        && pool.len() <= 16
        && pool
            .bytes()
            .all(|c| c.is_ascii_alphabetic() || c == b' ' || c == b'+');
    if !pool_ok {
        return None;
    }
    let mut h = Hit::new(Boundary, st::KV_CACHE, ev::KV_CACHE_SIZE);
    h.numbers.tokens = Some(u64_at(r)?);
    h.numbers.context_len = u64_field(r, "Maximum concurrency for ");
    h.numbers.concurrency = f64_field(r, "tokens per request: ");
    h.words.pool_label = Some(pool);
    Some(h)
}

fn failure(msg: &str) -> Option<Hit<'_>> {
    if msg.contains("No available memory for the cache blocks") {
        return Some(Hit::new(Failure, st::KV_CACHE, ev::NO_KV_MEMORY));
    }
    let r = after(msg, "larger than the available KV cache memory (")?;
    let mut h = Hit::new(Failure, st::KV_CACHE, ev::KV_CACHE_TOO_SMALL);
    h.numbers.kv_cache_gib = f64_at(r);
    h.numbers.context_len = u64_field(msg, "max seq len (");
    Some(h)
}
