//! SGLang message grammar (0.2.x to 0.5.23): one message (prefix already stripped) in, a
//! [`Hit`] out.
//!
//! Owns the catalogue of `docs/sglang-memory.md` §2: distributed init and baseline, weight load,
//! KV dtype and pools (MHA, MLA, labelled, VA-only, no-op, SWA split, Mamba), memory pool end,
//! graph captures (in `sglang_capture.rs`), post-capture KV sizing, the
//! `max_total_num_tokens=` summary and the fatal sizing errors. Messages are matched from their
//! start (errors anywhere, since tracebacks prepend `RuntimeError: `); fields are read by name so
//! older lines with fewer fields still match. Must never guess a stage from a line that does not
//! say it: such lines are `Progress`.

use super::numbers::{
    after, f64_at, f64_before, f64_field, i64_field, u64_at, u64_field, word_field,
};
use super::sglang_capture as capture;
use super::vocab::{event as ev, stage as st};
use super::{Hit, LineKind};

use LineKind::{Boundary, Failure, Progress};

/// Recognises an SGLang message.
pub(crate) fn parse(msg: &str) -> Option<Hit<'_>> {
    let anchored = match msg.as_bytes().first()? {
        b'I' => init(msg),
        b'M' => memory(msg).or_else(|| mamba(msg)),
        b'L' => load(msg),
        b'U' => using_dtype(msg).or_else(|| swa_split(msg)),
        b'R' => reserving(msg),
        b'm' => summary(msg)
            .or_else(|| user_cap(msg))
            .or_else(|| running_requests(msg)),
        b'K' => vmm_arena(msg),
        b'C' | b'[' => capture::capture(msg).or_else(|| capture::progress(msg)),
        b'P' => post_capture(msg),
        b'N' => nccl(msg),
        b'D' => disable_prefill(msg).or_else(|| deepgemm(msg)),
        b'S' => swa_too_small(msg),
        _ => None,
    };
    anchored
        .or_else(|| kv_cache(msg))
        .or_else(|| failure(msg))
        .or_else(|| unbalanced(msg))
}

fn init(msg: &str) -> Option<Hit<'_>> {
    let rest = msg.strip_prefix("Init ")?;
    if let Some(r) = rest
        .strip_prefix("torch distributed ")
        .or_else(|| rest.strip_prefix("parallel "))
    {
        if r.starts_with("begin.") {
            return Some(Hit::new(Boundary, st::DIST_INIT, ev::DIST_INIT_BEGIN));
        }
        if r.starts_with("ends.") {
            let mut h = Hit::new(Boundary, st::DIST_INIT, ev::DIST_INIT_END);
            h.numbers.time_s = f64_field(r, "elapsed=");
            h.numbers.mem_usage_gib = f64_field(r, "mem usage=");
            return Some(h);
        }
        return None;
    }
    let r = rest.strip_prefix("attention backend ")?;
    if r.starts_with("begin.") {
        return Some(Hit::new(Boundary, st::POST_KV_INIT, ev::ATTN_BACKEND_BEGIN));
    }
    if r.starts_with("end.") {
        let mut h = Hit::new(Boundary, st::POST_KV_INIT, ev::ATTN_BACKEND_END);
        h.numbers.time_s = f64_field(r, "elapsed=");
        return Some(h);
    }
    None
}

fn memory(msg: &str) -> Option<Hit<'_>> {
    if let Some(r) = msg.strip_prefix("Memory baseline taken.") {
        let mut h = Hit::new(Boundary, st::DIST_INIT, ev::MEMORY_BASELINE);
        h.numbers.mem_usage_gib = f64_field(r, "mem usage=");
        return Some(h);
    }
    let r = msg.strip_prefix("Memory pool end.")?;
    let mut h = Hit::new(Boundary, st::POST_KV_INIT, ev::MEMORY_POOL_END);
    h.numbers.avail_mem_gib = f64_field(r, "avail mem=");
    Some(h)
}

fn mamba(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Mamba Cache is allocated.")?;
    let mut h = Hit::new(Boundary, st::KV_POOL, ev::MAMBA_CACHE_ALLOCATED);
    let n = &mut h.numbers;
    n.mamba_cache_size = u64_field(r, "max_mamba_cache_size: ");
    n.conv_state_gib = f64_field(r, "conv_state size: ");
    n.ssm_state_gib = f64_field(r, "ssm_state size: ");
    n.intermediate_ssm_gib = f64_field(r, "intermediate_ssm_state_cache size: ");
    n.intermediate_conv_gib = f64_field(r, "intermediate_conv_window_cache size: ");
    Some(h)
}

fn load(msg: &str) -> Option<Hit<'_>> {
    if let Some(r) = msg.strip_prefix("Load weight begin.") {
        let mut h = Hit::new(Boundary, st::WEIGHT_LOAD, ev::LOAD_WEIGHT_BEGIN);
        h.numbers.avail_mem_gib = f64_field(r, "avail mem=");
        return Some(h);
    }
    let r = msg.strip_prefix("Load weight end.")?;
    if let Some(c) = r.strip_prefix(" Committed real weights after CUDA graph capture in ") {
        let mut h = Hit::new(Boundary, st::POST_CAPTURE, ev::LOAD_WEIGHT_COMMIT);
        h.numbers.time_s = f64_at(c);
        return Some(h);
    }
    let mut h = Hit::new(Boundary, st::KV_POOL, ev::LOAD_WEIGHT_END);
    h.numbers.avail_mem_gib = f64_field(r, "avail mem=");
    h.numbers.mem_usage_gib = f64_field(r, "mem usage=");
    h.numbers.time_s = f64_field(r, "elapsed=");
    h.words.model_type = word_field(r, "type=");
    h.words.dtype = word_field(r, "dtype=");
    h.words.quant = word_field(r, "quant=");
    Some(h)
}

fn using_dtype(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Using KV cache dtype: ")?;
    let mut h = Hit::new(Progress, st::KV_POOL, ev::KV_CACHE_DTYPE);
    h.words.dtype = r.split_whitespace().next();
    Some(h)
}

fn swa_split(msg: &str) -> Option<Hit<'_>> {
    let r = msg
        .strip_prefix("Use sliding window memory pool")
        .or_else(|| msg.strip_prefix("Use Sliding window memory pool"))?;
    let mut h = Hit::new(Progress, st::KV_POOL, ev::SWA_SPLIT);
    h.numbers.full_layer_tokens = u64_field(r, "full_layer_tokens=");
    h.numbers.swa_layer_tokens = u64_field(r, "swa_layer_tokens=");
    (h.numbers.swa_layer_tokens.is_some()).then_some(h)
}

fn reserving(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Reserving ")?;
    if !r.contains(" of the KV budget") {
        return None;
    }
    let mut h = Hit::new(Progress, st::KV_POOL, ev::MM_RESERVATION);
    h.numbers.reserve_gib = Some(f64_at(r)?);
    Some(h)
}

fn summary(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("max_total_num_tokens=")?;
    let mut h = Hit::new(Boundary, st::SERVING, ev::SUMMARY);
    let n = &mut h.numbers;
    n.tokens = Some(u64_at(r)?);
    n.chunked_prefill_size = i64_field(r, "chunked_prefill_size=");
    n.max_prefill_tokens = u64_field(r, "max_prefill_tokens=");
    n.max_running_requests = u64_field(r, "max_running_requests=");
    n.context_len = u64_field(r, "context_len=");
    n.avail_mem_gib =
        f64_field(r, "available_gpu_mem=").or_else(|| f64_field(r, "available_cpu_mem="));
    Some(h)
}

fn user_cap(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("max_total_tokens=")?;
    let profiled = after(r, "is larger than the profiled value ")?;
    let mut h = Hit::new(Progress, st::KV_POOL, ev::MAX_TOTAL_TOKENS_CAPPED);
    h.numbers.max_total_tokens = u64_at(r);
    h.numbers.profiled_tokens = super::numbers::i64_at(profiled);
    Some(h)
}

fn running_requests(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("max_running_requests ")?;
    if let Some(v) = r.strip_prefix("was reduced from the requested ") {
        let mut h = Hit::new(Progress, st::KV_POOL, ev::MAX_RUNNING_REQUESTS_REDUCED);
        h.numbers.max_running_requests_before = u64_at(v);
        h.numbers.max_running_requests = u64_field(v, "to ");
        return Some(h);
    }
    let v = r.strip_prefix("is capped to ")?;
    let mut h = Hit::new(Progress, st::KV_POOL, ev::MAX_RUNNING_REQUESTS_CAPPED);
    h.numbers.max_running_requests = u64_at(v);
    h.numbers.mamba_cache_size = u64_field(v, "max_mamba_cache_size=");
    h.numbers.slots_per_req = f64_before(v, " state slots per request")
        .filter(|s| *s >= 0.0)
        .map(|s| s as u64);
    Some(h)
}

fn vmm_arena(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("KvVmmArena[")?;
    let (name, rest) = r.split_once("] ready:")?;
    let mut h = Hit::new(Progress, st::KV_POOL, ev::VMM_ARENA_READY);
    h.words.pool_label = Some(name);
    h.numbers.device = u64_field(rest, "device=");
    h.numbers.reserve_gib = f64_field(rest, "reserved_va=");
    h.numbers.granularity_kib = u64_field(rest, "granularity=");
    Some(h)
}

fn post_capture(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("Post-capture KV sizing: ")?;
    let boundary = |e| Hit::new(Boundary, st::POST_CAPTURE_RESIZE, e);
    let mut h;
    if r.starts_with("decode CUDA graph max_bs=") {
        h = boundary(ev::POST_CAPTURE_DECODE_GAP);
        h.numbers.bs_max = u64_field(r, "max_bs=");
        h.numbers.max_running_requests = u64_field(r, "max_running_requests=");
    } else if let Some(v) = r.strip_prefix("KV-canary per-forward workspace ") {
        h = boundary(ev::POST_CAPTURE_WORKSPACE);
        h.numbers.reserve_gib = f64_at(v);
    } else if let Some(v) = r.strip_prefix("max_running_requests ") {
        h = boundary(ev::POST_CAPTURE_MAX_RUNNING_REQUESTS);
        h.numbers.max_running_requests_before = u64_at(v);
        h.numbers.max_running_requests = u64_field(v, "-> ");
    } else if r.starts_with("full_layer_tokens=") {
        h = boundary(ev::POST_CAPTURE_TOKENS);
        h.numbers.full_layer_tokens = u64_field(r, "full_layer_tokens=");
        h.numbers.swa_layer_tokens = u64_field(r, "swa_layer_tokens=");
    } else if r.starts_with("KV cache allocated.") || r.starts_with("draft KV cache allocated.") {
        h = boundary(if r.starts_with('d') {
            ev::POST_CAPTURE_DRAFT_KV_ALLOCATED
        } else {
            ev::POST_CAPTURE_KV_ALLOCATED
        });
        h.words.dtype = word_field(r, "dtype: ");
        h.numbers.tokens = u64_field(r, "#tokens: ");
        h.numbers.kv_size_gib = f64_field(r, "KV size: ");
        h.numbers.avail_mem_gib = f64_field(r, "avail mem=");
    } else {
        h = boundary(ev::POST_CAPTURE_NOTE);
    }
    Some(h)
}

fn nccl(msg: &str) -> Option<Hit<'_>> {
    if !msg.starts_with("NCCL/") {
        return None;
    }
    let t = after(msg, "warmup completed in ")?;
    let mut h = Hit::new(Progress, st::DIST_INIT, ev::NCCL_WARMUP);
    h.numbers.time_s = f64_at(t);
    h.numbers.tp_size = u64_field(t, "tp_size=");
    h.numbers.pp_size = u64_field(t, "pp_size=");
    h.numbers.ep_size = u64_field(t, "ep_size=");
    Some(h)
}

fn disable_prefill(msg: &str) -> Option<Hit<'_>> {
    msg.starts_with("Disable prefill CUDA graph")
        .then(|| Hit::new(Progress, st::POST_KV_INIT, ev::PREFILL_GRAPH_DISABLED))
}

fn deepgemm(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("DeepGEMM masked layout budget: ")?;
    let mut h = Hit::new(Progress, st::POST_KV_INIT, ev::DEEPGEMM_BUDGET);
    h.numbers.reserve_gib = Some(f64_at(r)?);
    h.numbers.avail_mem_gib = f64_field(r, "from ");
    Some(h)
}

fn swa_too_small(msg: &str) -> Option<Hit<'_>> {
    let r = msg.strip_prefix("SWA pool (")?;
    if !r.contains("cannot hold even one request") {
        return None;
    }
    let mut h = Hit::new(Failure, st::KV_POOL, ev::SWA_POOL_TOO_SMALL);
    h.numbers.swa_layer_tokens = u64_at(r);
    Some(h)
}

/// "[label ]KV Cache is allocated. …", "… VA upper bound. …", "KV Cache skipped (no-op pool). …".
fn kv_cache(msg: &str) -> Option<Hit<'_>> {
    const KEY: &str = "KV Cache ";
    let pos = msg.find(KEY)?;
    if pos > 64 {
        return None;
    }
    let label = match pos {
        0 => None,
        _ => {
            let l = msg.get(..pos)?.strip_suffix(' ')?;
            if !pool_label(l) {
                return None;
            }
            Some(l)
        }
    };
    let rest = msg.get(pos + KEY.len()..)?;
    let mut h = if rest.starts_with("is allocated.") {
        Hit::new(Boundary, st::KV_POOL, ev::KV_CACHE_ALLOCATED)
    } else if rest.starts_with("VA upper bound.") {
        Hit::new(Boundary, st::KV_POOL, ev::KV_CACHE_VA_RESERVED)
    } else if rest.starts_with("skipped (no-op pool).") {
        let mut h = Hit::new(Boundary, st::KV_POOL, ev::KV_CACHE_SKIPPED);
        h.numbers.tokens = u64_field(rest, "#tokens: ");
        h.numbers.kv_size_gib = after(rest, "~")
            .and_then(f64_at)
            .map(|kib| kib / (1024.0 * 1024.0));
        h.words.pool_label = label;
        return Some(h);
    } else {
        return None;
    };
    h.words.pool_label = label;
    h.words.dtype = word_field(rest, "dtype: ");
    let n = &mut h.numbers;
    n.tokens = u64_field(rest, "#tokens: ");
    n.k_size_gib = f64_field(rest, "K size: ");
    n.v_size_gib = f64_field(rest, "V size: ");
    n.kv_size_gib = f64_field(rest, "KV size: ");
    Some(h)
}

/// A plausible pool label ("Full", "SWA", "MiniMax MSA-v1 main NVFP4"): a capitalised name of
/// at most five words, not a sentence that happens to mention the KV cache.
fn pool_label(l: &str) -> bool {
    let bad = |c: char| matches!(c, ':' | '[' | ']' | '=' | '(' | ')' | ',' | ';');
    l.as_bytes().first().is_some_and(u8::is_ascii_uppercase)
        && l.len() <= 48
        && l.split(' ').count() <= 5
        && !l.contains(bad)
        && !l.contains(". ")
        && !l.contains("  ")
}

/// Fatal sizing errors, anywhere in the message (tracebacks prefix them with the exception type).
fn failure(msg: &str) -> Option<Hit<'_>> {
    if msg.contains("Not enough memory. Please try to increase --mem-fraction-static") {
        let mut h = Hit::new(Failure, st::KV_POOL, ev::NOT_ENOUGH_MEMORY);
        h.numbers.mem_fraction_static = f64_field(msg, "mem_fraction_static=");
        return Some(h);
    }
    if let Some(r) = after(msg, "Loaded weights leave no GPU memory for the KV cache") {
        let mut h = Hit::new(Failure, st::KV_POOL, ev::NO_KV_ROOM);
        let n = &mut h.numbers;
        n.mem_fraction_static = f64_field(r, "--mem-fraction-static=");
        n.suggested_mem_fraction_static = f64_field(r, "--mem-fraction-static above ");
        n.minimum_mem_fraction_static = f64_field(r, "available/pre = ");
        return Some(h);
    }
    if msg.contains("Not enough GPU memory for hybrid")
        || msg.contains("state cache is too small to serve any requests")
    {
        let mut h = Hit::new(Failure, st::KV_POOL, ev::MAMBA_CACHE_TOO_SMALL);
        h.numbers.mamba_cache_size = u64_field(msg, "max_mamba_cache_size=");
        return Some(h);
    }
    None
}

/// "The memory capacity is unbalanced. …": a warning (0.5.12+) or, raised, an error (≤0.5.5).
fn unbalanced(msg: &str) -> Option<Hit<'_>> {
    const KEY: &str = "The memory capacity is unbalanced.";
    let pos = msg.find(KEY)?;
    let raised = msg.get(..pos).is_some_and(|p| p.contains("Error"));
    let kind = if raised { Failure } else { Progress };
    let mut h = Hit::new(kind, st::DIST_INIT, ev::MEMORY_UNBALANCED);
    let r = msg.get(pos..)?;
    h.numbers.min_gpu_mem_gib =
        f64_field(r, "min_per_gpu_memory=").or_else(|| f64_field(r, "pre_model_load_memory="));
    h.numbers.local_gpu_mem_gib = f64_field(r, "local_gpu_memory=");
    Some(h)
}
