//! Post-capture KV sizing (SGLang 0.5.18+, `SGLANG_ENABLE_POST_CAPTURE_KV_SIZING`): emulated
//! on a run's or log's measurements as a what-if, or computed directly from
//! `--free-after-capture-gib` on this pre-capture pool (SGLang's `compute_post_capture_kv_resize`).

use vramledger_engines::sizing::defaults::{
    pre_capture_activation_reserve_mb, sglang_defaults, Disaggregation, Platform,
};
use vramledger_engines::sizing::model::ModelGeometry;
use vramledger_engines::sizing::post_capture::{
    eager_decode_gap, post_capture_resize, PostCaptureInput,
};
use vramledger_engines::sizing::pyfloat::GIB;
use vramledger_engines::sizing::Layout;

use super::evaluate::{defaults_input, evaluate, Evaluation, Scenario};
use super::inputs::{Origin, Settings, Sourced};
use super::report::{PostCaptureEmulation, PostCaptureResize};
use super::request::SizeRequest;

/// What the post-capture emulation measures on.
#[derive(Debug, Clone, Copy)]
pub struct CaptureMeasure {
    /// Free memory after the graph captures (SGLang's distributed reading).
    pub free_after_capture_gib: f64,
    /// The tokens the pool held while the graphs were captured.
    pub base_tokens: i64,
    /// Exact bytes (a run) or printed values (a log).
    pub exact: bool,
}

/// Post-capture sizing (0.5.18+) on the run's measurements, at the current fraction and at the
/// post-capture default: the pool would have backed one page before capture, so the free memory
/// after capture is the measured one plus the pool's K/V rows less that page.
pub fn post_capture(
    model: &ModelGeometry,
    s: &Settings,
    sc: &Scenario,
    base: &Evaluation,
    m: CaptureMeasure,
    notes: &mut Vec<String>,
) -> Vec<PostCaptureEmulation> {
    let CaptureMeasure {
        free_after_capture_gib,
        base_tokens,
        exact,
    } = m;
    if model.mla.is_some() {
        notes.push("post-capture KV sizing does not apply to MLA models".into());
        return Vec::new();
    }
    if sc.layout == Layout::V0_4_6 {
        notes.push(
            "post-capture KV sizing (SGLang 0.5.18+) is not emulated for a 0.4.x layout: its \
             graph captures, activations and defaults do not carry over to 0.5.23's rules"
                .into(),
        );
        return Vec::new();
    }
    let layout = sc.layout.max(Layout::V0_5_18);
    let layout = if layout == sc.layout {
        layout
    } else {
        Layout::V0_5_23
    };
    let page = sc.page_size as i64;
    let pool_bytes = (base_tokens.max(0) + page) * base.cell_bytes as i64;
    let defaults = sglang_defaults(&defaults_input(
        Some(model),
        s,
        layout,
        sc.gpu_mem_mib,
        sc.tp,
    ));
    let mut fractions = vec![Sourced::new(
        sc.fraction,
        sc.fraction_origin,
        "the current fraction",
    )];
    if sc.gpu_mem_mib.is_some() {
        let mut d = defaults_input(Some(model), s, layout, sc.gpu_mem_mib, sc.tp);
        d.post_capture_kv_sizing = true;
        let f = sglang_defaults(&d).mem_fraction_static;
        fractions.push(Sourced::new(
            f,
            Origin::Derived,
            format!(
                "SGLang {} default with post-capture sizing",
                layout.release()
            ),
        ));
    }
    let decode_max_bs = s
        .cuda_graph_max_bs
        .or(defaults.cuda_graph_max_bs)
        .unwrap_or(0);
    let act_tokens = defaults.chunked_prefill_size.max(2048);
    let mut out = Vec::new();
    for f in fractions {
        let mut t = sc.clone();
        t.layout = layout;
        t.fraction = f.value;
        let Ok(ev) = evaluate(model, s, &t) else {
            continue;
        };
        if ev.result.error.is_some() {
            continue;
        }
        let backed = 2 * sc.page_size * ev.cell_bytes;
        let free_gib = free_after_capture_gib + (pool_bytes - backed as i64) as f64 / GIB;
        let activation_reserve_mb =
            pre_capture_activation_reserve_mb(sc.gpu_mem_mib, act_tokens, sc.tp, s.pp.value);
        let input = PostCaptureInput {
            graph_pool_borrow_enabled: true,
            sampling_headroom_bytes: 0,
            ..resize_input(
                &ev,
                s,
                free_gib,
                decode_max_bs,
                activation_reserve_mb,
                backed,
            )
        };
        let Ok(r) = post_capture_resize(&input) else {
            continue;
        };
        out.push(PostCaptureEmulation {
            layout,
            mem_fraction_static: f,
            free_after_capture_bytes: (free_gib * GIB).round() as i64,
            headroom_bytes: (r.headroom_gib * GIB).round() as i64,
            backed_bytes: backed,
            budget_bytes: r.budget_bytes,
            budget_tokens: r.budget_bytes / ev.cell_bytes.max(1) as i64,
            exact,
            pre_capture_tokens: ev.result.tokens,
            tokens: r.tokens,
            token_change: r.tokens - base.result.tokens,
            max_running_requests: r.max_running_requests,
            no_room: r.budget_bytes <= backed as i64,
        });
    }
    if !out.is_empty() && layout != sc.layout {
        notes.push(format!(
            "post-capture KV sizing exists from SGLang 0.5.18: emulated with {}'s rules",
            layout.release()
        ));
    }
    out
}

/// Why post-capture KV sizing is not active for this configuration (SGLang's
/// `post_capture_kv_sizing_planned`, the parts the calculator knows), or `None` when it is.
fn post_capture_inactive(model: &ModelGeometry, s: &Settings, layout: Layout) -> Option<String> {
    if layout < Layout::V0_5_18 {
        return Some(format!(
            "SGLang {} has no post-capture KV sizing",
            layout.release()
        ));
    }
    if !s.post_capture_kv_sizing {
        return Some("--post-capture-kv-sizing is not set (the env default is off)".into());
    }
    if model.mla.is_some() {
        return Some("SGLang's eligibility excludes the MLA backend".into());
    }
    if s.platform != Platform::Cuda {
        return Some("SGLang's eligibility needs device cuda".into());
    }
    None
}

/// `--free-after-capture-gib`: SGLang's `compute_post_capture_kv_resize` on this pre-capture
/// pool (`Scheduler.init_model_worker` runs it only when the pool is post-capture active;
/// otherwise the pool keeps its pre-capture size and a note says why).
pub fn post_capture_direct(
    model: &ModelGeometry,
    s: &Settings,
    sc: &Scenario,
    ev: &Evaluation,
    args: &SizeRequest,
    free_gib: f64,
    notes: &mut Vec<String>,
) -> Result<Option<PostCaptureResize>, String> {
    if let Some(why) = post_capture_inactive(model, s, sc.layout) {
        notes.push(format!(
            "--free-after-capture-gib is not used: post-capture KV sizing is not active ({why}), \
             so SGLang keeps the pre-capture pool"
        ));
        return Ok(None);
    }
    if ev.result.error.is_some() {
        return Ok(None);
    }
    let backed = args
        .post_capture_backed_bytes
        .ok_or("--free-after-capture-gib needs --post-capture-backed-bytes")?;
    let defaults = sglang_defaults(&defaults_input(
        Some(model),
        s,
        sc.layout,
        sc.gpu_mem_mib,
        sc.tp,
    ));
    let decode_max_bs = s
        .cuda_graph_max_bs
        .or(defaults.cuda_graph_max_bs)
        .unwrap_or(0);
    let chunked = s
        .chunked_prefill_size
        .unwrap_or(defaults.chunked_prefill_size);
    // runtime_context.pre_capture_activation_reserve_mb (not a decode-only worker).
    let act_tokens = if chunked > 0 {
        chunked.max(2048)
    } else {
        s.max_prefill_tokens.max(2048)
    };
    let activation_reserve_mb =
        pre_capture_activation_reserve_mb(sc.gpu_mem_mib, act_tokens, sc.tp, s.pp.value);
    let input = PostCaptureInput {
        // SGLANG_ENABLE_GRAPH_POOL_BORROW defaults to off.
        graph_pool_borrow_enabled: false,
        sampling_headroom_bytes: args.post_capture_sampling_headroom_bytes.unwrap_or(0),
        ..resize_input(
            ev,
            s,
            free_gib,
            decode_max_bs,
            activation_reserve_mb,
            backed,
        )
    };
    let gap = input.eager_decode_gap;
    let r = post_capture_resize(&input).map_err(|e| e.to_string())?;
    Ok(Some(PostCaptureResize {
        layout: sc.layout,
        free_after_capture_gib: free_gib,
        backed_bytes: backed,
        decode_max_bs,
        eager_decode_gap: gap,
        activation_reserve_mb,
        headroom_gib: r.headroom_gib,
        budget_bytes: r.budget_bytes,
        pre_capture_tokens: ev.result.tokens,
        tokens: r.tokens,
        max_running_requests: r.max_running_requests,
        max_running_requests_reduced: r.max_running_requests_reduced,
    }))
}

/// SGLang's post-capture resize inputs for the pass `ev` (its pool before capture) with
/// `free_gib` free after the captures and `backed` bytes of the pool already backed.
/// Graph-pool borrowing and the sampling headroom are the caller's.
fn resize_input(
    ev: &Evaluation,
    s: &Settings,
    free_gib: f64,
    decode_max_bs: u64,
    activation_reserve_mb: f64,
    backed: u64,
) -> PostCaptureInput {
    PostCaptureInput {
        sizing: ev.input.clone(),
        pre_capture_tokens: ev.result.tokens,
        pre_capture_max_running_requests: ev.result.max_running_requests,
        mamba_cache_size: None,
        free_gib,
        eager_decode_gap: eager_decode_gap(
            s.disaggregation == Disaggregation::Prefill,
            s.decode_graph,
            decode_max_bs,
            Some(ev.result.max_running_requests.max(0) as u64),
        ),
        mambaish: false,
        capped_full_prefill_role: false,
        activation_reserve_mb,
        graph_pool_borrow_enabled: false,
        sampling_headroom_bytes: 0,
        backed_bytes: backed,
        draft_backed_bytes: 0,
        canary_workspace_bytes: 0,
    }
}
