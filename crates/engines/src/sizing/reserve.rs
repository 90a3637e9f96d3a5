//! The run-time reserve terms behind SGLang's default `mem_fraction_static` (L2 onward): the
//! capacity tier that picks the chunk size and decode graph batch, the prefill graph batch-size
//! generator, the graph reserve (`reserve_for_graph_mb`) and the pre-capture activation reserve.
//! `defaults.rs` adds them up in SGLang's order.

use super::defaults_input::{DefaultsInput, Disaggregation, Platform, PrefillGraph};
use super::layout::Layout;

/// SGLang's `(chunked_prefill_size, decode max_bs)` capacity tier (L2+); 0.5.5 has two Ascend
/// tiers of its own (below 32 GiB and 64 GiB, each after the CUDA tier below it).
pub(super) fn tier(layout: Layout, platform: Platform, gpu: Option<f64>, tp: u64) -> (i64, u64) {
    let g = 1024.0;
    let pick = |small: u64, large: u64| if tp < 4 { small } else { large };
    let npu = platform == Platform::Npu && layout == Layout::V0_5_5;
    match gpu {
        None => (4096, 160),
        Some(m) if m < 20.0 * g => (2048, 8),
        Some(m) if npu && m < 32.0 * g => (32768, pick(16, 64)),
        Some(m) if m < 35.0 * g && layout == Layout::V0_5_23 => (4096, pick(48, 160)),
        Some(m) if m < 35.0 * g => (2048, pick(24, 80)),
        Some(m) if m < 60.0 * g => (4096, pick(32, 160)),
        Some(m) if npu && m < 64.0 * g => (32768, pick(64, 128)),
        Some(m) if m < 160.0 * g => (8192, pick(256, 512)),
        Some(_) => (16384, 512),
    }
}

/// SGLang's prefill CUDA-graph batch sizes up to `max_bs` (0.5.18+ generator):
/// 4..32 step 4, 48..256 step 16, 288..512 step 32, 576..1024 step 64, 1280..4096 step 256,
/// 4608..max_bs step 512. 58 sizes for 8192, 50 for 4096.
pub fn prefill_graph_batch_sizes(max_bs: i64) -> Vec<i64> {
    let mut out: Vec<i64> = Vec::new();
    for (start, end, step) in [
        (4, 32, 4),
        (48, 256, 16),
        (288, 512, 32),
        (576, 1024, 64),
        (1280, 4096, 256),
        (4608, max_bs.max(0), 512),
    ] {
        out.extend((start..=end).step_by(step as usize));
    }
    out.retain(|x| *x <= max_bs);
    out
}

/// `pre_capture_activation_reserve_mb(gpu_mem)` (0.5.18+): `512 + activation_tokens * 1.5 +
/// tp * pp / 8 * 1024`, at least 10 GiB above 60 GiB. Used by post-capture and Mamba slack.
pub fn pre_capture_activation_reserve_mb(
    gpu_mem_mib: Option<f64>,
    activation_tokens: i64,
    tp_size: u64,
    pp_size: u64,
) -> f64 {
    let mut r = 512.0;
    r += activation_tokens as f64 * 1.5;
    r += (tp_size * pp_size) as f64 / 8.0 * 1024.0;
    if gpu_mem_mib.is_some_and(|g| g > 60.0 * 1024.0) {
        r = f64::max(r, 10.0 * 1024.0);
    }
    r
}

/// 0.5.12 `_generate_piecewise_cuda_graph_tokens()` count: the same generator up to
/// `piecewise_cuda_graph_max_tokens` (the chunk size; MLA 2048; capped by max_total_tokens;
/// llama-2 at 4096).
pub(super) fn piecewise_len(input: &DefaultsInput, chunked: i64) -> usize {
    let mut max_tokens = if input.mla { 2048 } else { chunked };
    if let Some(t) = input.max_total_tokens {
        max_tokens = max_tokens.min(t);
    }
    if input.llama2 {
        max_tokens = max_tokens.min(4096);
    }
    prefill_graph_batch_sizes(max_tokens).len()
}

/// The prefill graph batch-size count (0.5.18+): explicit, or the generator up to the default
/// max_bs (chunked size; MLA: 2048 in 0.5.18, `min(8192, ..)` in 0.5.23; 0.5.23 breakable PP at
/// most 8192; capped by max_total_tokens; llama-2 at 4096).
pub(super) fn prefill_len(input: &DefaultsInput, prefill: PrefillGraph, chunked: i64) -> usize {
    if let Some(n) = input.prefill_graph_bs_len {
        return n;
    }
    let l4 = input.layout == Layout::V0_5_23;
    let mut max_bs = match (input.mla, l4) {
        (true, true) => chunked.min(8192),
        (true, false) => 2048,
        (false, _) => chunked,
    };
    if l4 && input.pp_size > 1 && prefill == PrefillGraph::Breakable {
        max_bs = max_bs.min(8192);
    }
    if let Some(t) = input.max_total_tokens {
        max_bs = max_bs.min(t);
    }
    if input.llama2 {
        max_bs = max_bs.min(4096);
    }
    prefill_graph_batch_sizes(max_bs).len()
}

/// `reserve_for_graph_mb()` (0.5.18+).
pub(super) fn graph_reserve_mb(
    input: &DefaultsInput,
    prefill: PrefillGraph,
    max_bs: f64,
    prefill_bs_len: usize,
) -> f64 {
    let mut r = 0.0;
    if input.disaggregation != Disaggregation::Prefill && input.decode_graph {
        r += max_bs * 2.0;
    }
    if input.enable_dp_attention && input.disaggregation != Disaggregation::Prefill {
        let dp = input.dp_size as f64;
        r += max_bs * dp * 3.0;
        if max_bs > 300.0 {
            r += max_bs * dp * 1.5;
        }
    }
    if input.disaggregation != Disaggregation::Decode && prefill != PrefillGraph::Disabled {
        r += if input.mla {
            1.5 * 1024.0
        } else {
            prefill_bs_len as f64 * 8.0
        };
        if prefill == PrefillGraph::Breakable && input.deepep {
            r += 1024.0;
        }
    }
    r
}
