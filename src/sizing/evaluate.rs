//! One SGLang sizing pass: a [`Scenario`] (the few settings a what-if changes) on the resolved
//! settings, turned by [`evaluate`] into the cell, the runner's fraction and the engine's
//! result; the main answer and every what-if go through it. Also SGLang's defaults for a GPU.

use vramledger_engines::sizing::defaults::{l1_runner_fraction, sglang_defaults, DefaultsInput};
use vramledger_engines::sizing::hybrid::SwaInput;
use vramledger_engines::sizing::model::ModelGeometry;
use vramledger_engines::sizing::model_cell::{attn_tp, kv_dtype, model_cell};
use vramledger_engines::sizing::tokens::{
    mm_reservation_gib, size_sglang, SizingInput, SizingResult, SpecHeadroom,
};
use vramledger_engines::sizing::Layout;

use super::cell::cell_settings;
use super::inputs::{Origin, Settings, Sourced};
use super::report::DefaultsReport;

/// The settings a what-if may change.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub layout: Layout,
    pub tp: u64,
    pub page_size: u64,
    pub kv_dtype_name: String,
    /// The server's `mem_fraction_static`.
    pub fraction: f64,
    /// SGLang derived it (a what-if on GPU or TP re-derives it).
    pub fraction_derived: bool,
    pub fraction_origin: Origin,
    pub gpu_mem_mib: Option<f64>,
    pub context_len: u64,
    pub max_total_tokens: Option<i64>,
    pub pre_gib: f64,
    pub available_gib: f64,
}

/// One sizing pass.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub cell_bytes: u64,
    pub cell_text: String,
    pub attn_tp: u64,
    pub runner_fraction: f64,
    pub swa: Option<SwaInput>,
    pub input: SizingInput,
    pub result: SizingResult,
}

/// `DefaultsInput` from the settings.
pub fn defaults_input(
    model: Option<&ModelGeometry>,
    s: &Settings,
    layout: Layout,
    gpu: Option<f64>,
    tp: u64,
) -> DefaultsInput {
    let mut d = DefaultsInput::new(layout, gpu, tp);
    d.pp_size = s.pp.value;
    d.dp_size = s.dp;
    d.enable_dp_attention = s.dp_attention;
    d.chunked_prefill_size = s.chunked_prefill_size;
    d.max_prefill_tokens = s.max_prefill_tokens;
    d.cuda_graph_max_bs = s.cuda_graph_max_bs;
    d.max_running_requests = s.max_running_requests;
    d.max_total_tokens = s.max_total_tokens.as_ref().map(|m| m.value);
    d.speculative = s.speculative;
    d.speculative_num_draft_tokens = s.speculative_num_draft_tokens;
    d.disaggregation = s.disaggregation;
    d.decode_graph = s.decode_graph;
    d.deepep = s.deepep;
    d.post_capture_kv_sizing = s.post_capture_kv_sizing && layout >= Layout::V0_5_18;
    d.platform = s.platform;
    d.prefill_graph = s.prefill_graph;
    d.piecewise_graph = s.piecewise_graph;
    if let Some(m) = model {
        d.mla = m.mla.is_some();
        d.multimodal = m.is_multimodal;
        d.vision = m.vision;
    }
    d
}

/// SGLang's defaults for this GPU, and those of the run's other recorded capacity.
pub fn defaults_report(
    model: Option<&ModelGeometry>,
    s: &Settings,
    layout: Layout,
    gpu: Sourced<f64>,
    tp: Option<u64>,
) -> DefaultsReport {
    let tp = tp.unwrap_or(s.tp.value);
    let input = defaults_input(model, s, layout, Some(gpu.value), tp);
    let defaults = sglang_defaults(&input);
    let alternative = s.gpu_mem_alternative.clone().map(|alt| {
        let input = defaults_input(model, s, layout, Some(alt.value), tp);
        let d = sglang_defaults(&input);
        (alt, d.mem_fraction_static)
    });
    DefaultsReport {
        gpu_mem_mib: gpu,
        layout,
        tp,
        defaults,
        alternative,
    }
}

/// One sizing pass for `sc`.
pub fn evaluate(model: &ModelGeometry, s: &Settings, sc: &Scenario) -> Result<Evaluation, String> {
    let kv = kv_dtype(sc.layout, &sc.kv_dtype_name, model)?;
    let cell_settings = cell_settings(s);
    let cell = model_cell(model, &cell_settings, sc.layout, sc.tp, kv)?;
    let (cell_bytes, swa, cell_text) = (cell.bytes, cell.swa, cell.words);
    let runner_fraction = if sc.layout == Layout::V0_4_6 {
        l1_runner_fraction(sc.fraction, model.is_multimodal, false)
    } else {
        sc.fraction
    };
    let mut input = SizingInput::new(
        sc.layout,
        cell_bytes,
        runner_fraction,
        sc.pre_gib,
        sc.available_gib,
        sc.context_len,
    );
    input.page_size = sc.page_size;
    input.max_total_tokens = sc.max_total_tokens;
    input.max_running_requests = s.max_running_requests;
    input.req_pool_extra_slot = s.req_pool_extra_slot;
    input.attn_dp_size = if s.dp_attention { s.dp.max(1) } else { 1 };
    if s.pp.value > 1 {
        input.pp_min_tokens = s.pp_min_tokens_from_other_stages;
    }
    input.mm_reservation_gib = mm_reservation_gib(sc.layout, model.is_multimodal);
    input.swa = swa;
    if SpecHeadroom::priced(sc.layout, s.speculative) {
        if let (Some(num_steps), Some(eagle_topk), Some(num_draft_tokens)) = (
            s.speculative_num_steps,
            s.speculative_eagle_topk,
            s.speculative_num_draft_tokens,
        ) {
            input.spec_headroom = Some(SpecHeadroom {
                num_steps,
                eagle_topk,
                num_draft_tokens,
            });
        }
    }
    let result = size_sglang(&input).map_err(|e| format!("cannot size: {e}"))?;
    Ok(Evaluation {
        cell_bytes,
        cell_text,
        attn_tp: attn_tp(&cell_settings, sc.tp),
        runner_fraction,
        swa,
        input,
        result,
    })
}

/// The smallest server `mem_fraction_static` that sizes without error (0.4.x multimodal: the
/// value whose runner reduction works).
pub fn smallest_server_fraction(
    model: &ModelGeometry,
    s: &Settings,
    sc: &Scenario,
    ev: &Evaluation,
) -> Option<f64> {
    let err = ev.result.error.as_ref()?;
    if ev.runner_fraction == sc.fraction {
        return err.smallest_working_fraction;
    }
    (1..=1000).map(|k| k as f64 / 1000.0).find(|f| {
        let mut alt = sc.clone();
        alt.fraction = *f;
        evaluate(model, s, &alt).is_ok_and(|e| e.result.error.is_none())
    })
}

/// KV bytes of a pool of `tokens` (hybrid SWA: both sub-pools).
pub fn kv_bytes(ev: &Evaluation, r: &SizingResult) -> i64 {
    match (&ev.swa, r.swa_tokens) {
        (Some(swa), Some(st)) => {
            r.tokens.max(0) * (swa.full_per_token * swa.full_layers) as i64
                + st.max(0) * (swa.swa_per_token * swa.swa_layers) as i64
        }
        _ => r.tokens.max(0) * ev.cell_bytes as i64,
    }
}
