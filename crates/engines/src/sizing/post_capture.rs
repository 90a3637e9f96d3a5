//! Post-capture KV sizing (SGLang 0.5.18+, `SGLANG_ENABLE_POST_CAPTURE_KV_SIZING`).
//!
//! The pool reserves virtual addresses for the pre-capture token count, backs one page, the CUDA
//! graphs are captured, and then free memory is measured again and the pool is backed to
//! `budget = max(0, free − headroom − mm) + already_backed (+ draft backed − canary, 0.5.23)`.
//! Tokens may only shrink (`cap_tokens` = the pre-capture count), and `max_running_requests` is
//! lowered if the smaller pool cannot hold it. The Mamba state stays as sized before capture.

use super::layout::Layout;
use super::pool::{config_from_budget, resolve_max_running_requests};
use super::pyfloat::{py_int, GIB};
use super::tokens::{SizingInput, SizingInputError};

/// Inputs of the resize; `sizing` holds the pre-capture inputs (layout 0.5.18 or 0.5.23, cell,
/// page, caps, context length, requests, SWA, Mamba).
#[derive(Debug, Clone, PartialEq)]
pub struct PostCaptureInput {
    pub sizing: SizingInput,
    /// `max_total_num_tokens` before capture (the VA reservation).
    pub pre_capture_tokens: i64,
    /// `max_running_requests` before capture.
    pub pre_capture_max_running_requests: i64,
    /// Mamba slots sized before capture (unchanged by the resize).
    pub mamba_cache_size: Option<i64>,
    /// Free GiB after capture (`get_available_gpu_memory(distributed=True)` after synchronize).
    pub free_gib: f64,
    /// The decode graph's max batch is below the running-request limit (eager decode needs
    /// activation room): `disagg != prefill && decode graph on && max_bs < running_requests`.
    pub eager_decode_gap: bool,
    pub mambaish: bool,
    /// 0.5.23: a capped full-prefill role is exempt from the activation floor.
    pub capped_full_prefill_role: bool,
    /// `pre_capture_activation_reserve_mb(gpu_mem)` (see `defaults`).
    pub activation_reserve_mb: f64,
    /// 0.5.23: `graph_pool_borrow_enabled()`; when off, sampling headroom is a floor.
    pub graph_pool_borrow_enabled: bool,
    pub sampling_headroom_bytes: u64,
    /// `pool.post_capture_backed_bytes` (the prefix backed before capture).
    pub backed_bytes: u64,
    /// 0.5.23: the draft pools' backed bytes.
    pub draft_backed_bytes: u64,
    /// 0.5.23: the KV-canary per-forward workspace.
    pub canary_workspace_bytes: u64,
}

/// The resized pool.
#[derive(Debug, Clone, PartialEq)]
pub struct PostCaptureResult {
    /// Run-time headroom kept, GiB.
    pub headroom_gib: f64,
    pub budget_bytes: i64,
    pub tokens: i64,
    pub swa_tokens: Option<i64>,
    pub max_running_requests: i64,
    /// `Some((from, to))` when SGLang logs "Post-capture KV sizing: max_running_requests a -> b".
    pub max_running_requests_reduced: Option<(i64, i64)>,
}

/// SGLang's `compute_post_capture_kv_resize`.
pub fn post_capture_resize(
    input: &PostCaptureInput,
) -> Result<PostCaptureResult, SizingInputError> {
    let s = &input.sizing;
    let layout = s.layout;
    if layout < Layout::V0_5_18 {
        return Err(SizingInputError::Unsupported(format!(
            "post-capture KV sizing in {layout}"
        )));
    }
    if s.cell_bytes == 0 && s.swa.is_none() {
        return Err(SizingInputError::ZeroCell);
    }
    let newest = layout == Layout::V0_5_23;
    let mut headroom = s.pre_gib * (1.0 - s.mem_fraction_static);
    let exempt = newest && input.capped_full_prefill_role;
    if (input.eager_decode_gap || input.mambaish) && !exempt {
        headroom = f64::max(headroom, input.activation_reserve_mb / 1024.0);
    }
    if newest && !input.graph_pool_borrow_enabled {
        headroom = f64::max(headroom, input.sampling_headroom_bytes as f64 / GIB);
    }
    let rest = f64::max(0.0, input.free_gib - headroom - s.mm_reservation_gib);
    let mut budget = py_int(rest * GIB) + input.backed_bytes as i64;
    if newest {
        budget += input.draft_backed_bytes as i64;
        budget -= input.canary_workspace_bytes as i64;
        budget = (budget - s.fixed_overhead_bytes as i64).max(0);
    }
    let mut sizing = s.clone();
    sizing.cap_tokens = Some(input.pre_capture_tokens);
    let config = config_from_budget(&sizing, budget, input.mamba_cache_size);
    // `model_runner.max_running_requests` is the pre-capture resolved count (never None
    // after init_memory_pool), so the wheel always re-caps it against the smaller pool.
    let mut mrr = input.pre_capture_max_running_requests;
    let mut reduced = None;
    let capped = mrr.min(resolve_max_running_requests(&sizing, config.tokens));
    if capped < mrr {
        reduced = Some((mrr, capped));
        mrr = capped;
    }
    Ok(PostCaptureResult {
        headroom_gib: headroom,
        budget_bytes: budget,
        tokens: config.tokens,
        swa_tokens: config.swa_tokens,
        max_running_requests: mrr,
        max_running_requests_reduced: reduced,
    })
}

/// `eager_decode_gap`: the decode graph does not cover the running-request limit
/// (`running_requests = model_runner.max_running_requests or decode_max_bs or 1`). Pass the
/// runner's count, i.e. the pre-capture resolved `max_running_requests` (not only the user's
/// flag: without one it is the estimate, 2048–4096, above the default decode graph batch).
pub fn eager_decode_gap(
    prefill_only_worker: bool,
    decode_graph: bool,
    decode_max_bs: u64,
    max_running_requests: Option<u64>,
) -> bool {
    let running = max_running_requests
        .filter(|m| *m > 0)
        .unwrap_or(if decode_max_bs > 0 { decode_max_bs } else { 1 });
    !prefill_only_worker && decode_graph && decode_max_bs < running
}

#[cfg(test)]
mod tests {
    use super::*;

    const CELL: u64 = 131_072; // Llama-3.1-8B bf16 tp1

    fn input(layout: Layout) -> PostCaptureInput {
        // Pre-capture: f 0.98 (the post-capture default on H100), pre 78 GiB.
        let sizing = SizingInput::new(layout, CELL, 0.98, 78.0, 62.0, 8192);
        PostCaptureInput {
            sizing,
            pre_capture_tokens: 480_000,
            pre_capture_max_running_requests: 4096,
            mamba_cache_size: None,
            free_gib: 61.0,
            eager_decode_gap: false,
            mambaish: false,
            capped_full_prefill_role: false,
            activation_reserve_mb: 13_824.0,
            graph_pool_borrow_enabled: true,
            sampling_headroom_bytes: 0,
            backed_bytes: CELL * 2, // one page of 1 token, two rows (the padded slot and one)
            draft_backed_bytes: 0,
            canary_workspace_bytes: 0,
        }
    }

    #[test]
    fn budget_after_capture() {
        // headroom = 78 * (1 - 0.98) = 1.56 GiB (CPython: 1.5600000000000014);
        // rest = 61 - 1.56 = 59.44 GiB -> int(59.44 * 2^30) = 63823214018 B, + 262144 backed;
        // // 131072 = 486934 tokens, capped at the pre-capture 480000.
        // Requests: min(4096, 480000 // 2) = 4096.
        let r = post_capture_resize(&input(Layout::V0_5_23)).unwrap();
        assert!((r.headroom_gib - 1.56).abs() < 1e-12);
        assert_eq!(r.budget_bytes, 63_823_214_018 + 262_144);
        assert_eq!((r.tokens, r.max_running_requests), (480_000, 4096));
        assert_eq!(r.max_running_requests_reduced, None);
    }

    #[test]
    fn headroom_floors_and_shrinking() {
        // Eager decode gap: headroom = max(1.56, 13824 / 1024 = 13.5) = 13.5 GiB;
        // rest = 61 - 13.5 = 47.5 GiB = 51002736640 B, + 262144 -> // 131072 = 389122 tokens.
        let mut i = input(Layout::V0_5_18);
        i.eager_decode_gap = true;
        let r = post_capture_resize(&i).unwrap();
        assert_eq!(r.headroom_gib, 13.5);
        assert_eq!(r.tokens, 389_122);
        // 0.5.23 capped full-prefill role is exempt; 0.5.18 is not.
        i.capped_full_prefill_role = true;
        assert_eq!(post_capture_resize(&i).unwrap().headroom_gib, 13.5);
        i.sizing.layout = Layout::V0_5_23;
        assert!((post_capture_resize(&i).unwrap().headroom_gib - 1.56).abs() < 1e-12);
        // 0.5.23 without graph-pool borrowing: sampling headroom 3 GiB is a floor.
        i.graph_pool_borrow_enabled = false;
        i.sampling_headroom_bytes = 3 << 30;
        assert_eq!(post_capture_resize(&i).unwrap().headroom_gib, 3.0);
        // Free memory below the headroom: the budget is just the backed prefix, 2 tokens.
        i.free_gib = 1.0;
        assert_eq!(post_capture_resize(&i).unwrap().tokens, 2);
    }

    #[test]
    fn user_requests_are_reduced_when_the_pool_shrinks() {
        // User max_running_requests 4096; free 3 GiB - 1.56 = 1.44 GiB -> 1546188226 B + 262144
        // -> 11798 tokens; min(4096, min(max(1, 4096), 11798 // 2 = 5899)) = 4096: unchanged.
        // With free 2 GiB: 0.44 GiB -> 3606 tokens -> 1803 < 4096: reduced 4096 -> 1803.
        let mut i = input(Layout::V0_5_23);
        i.sizing.max_running_requests = Some(4096);
        i.free_gib = 3.0;
        let r = post_capture_resize(&i).unwrap();
        assert_eq!((r.tokens, r.max_running_requests_reduced), (11_798, None));
        i.free_gib = 2.0;
        let r = post_capture_resize(&i).unwrap();
        assert_eq!(r.tokens, 3606);
        assert_eq!(r.max_running_requests_reduced, Some((4096, 1803)));
    }

    #[test]
    fn canary_draft_and_layout_gate() {
        // 0.5.23: + draft backed 1 GiB - canary 0.5 GiB = +0.5 GiB = +4096 tokens -> still capped.
        let mut i = input(Layout::V0_5_23);
        i.free_gib = 40.0; // rest 38.44 GiB -> 314900 tokens (+2 backed) = 314902
        assert_eq!(post_capture_resize(&i).unwrap().tokens, 314_902);
        i.draft_backed_bytes = 1 << 30;
        i.canary_workspace_bytes = 1 << 29;
        assert_eq!(post_capture_resize(&i).unwrap().tokens, 318_998);
        // 0.5.18 has neither term.
        i.sizing.layout = Layout::V0_5_18;
        assert_eq!(post_capture_resize(&i).unwrap().tokens, 314_902);
        i.sizing.layout = Layout::V0_5_12;
        assert!(post_capture_resize(&i).is_err());
    }

    #[test]
    fn eager_gap_rule() {
        // running = mrr or max_bs or 1: 256 < 1024 -> gap; no mrr -> 256 < 256 false.
        assert!(eager_decode_gap(false, true, 256, Some(1024)));
        assert!(!eager_decode_gap(false, true, 256, None));
        assert!(!eager_decode_gap(true, true, 256, Some(1024)));
        assert!(!eager_decode_gap(false, false, 256, Some(1024)));
    }
}
