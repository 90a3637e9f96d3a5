//! SGLang's sizing on the gathered inputs: the cell, the fraction (given, logged or derived by
//! SGLang's default rule), the token count with its tolerance, the check against what the engine
//! reported, and the breakdown (baseline, weights, static budget, headroom, KV bytes) with the
//! measured run-time need after the pool.
//!
//! A [`Scenario`] holds the few settings a what-if changes; [`evaluate`] turns one into a
//! sizing result, so the main answer and every what-if go through the same code.

use vramledger_engines::sizing::defaults::{
    l1_runner_fraction, sglang_defaults, DefaultsInput, Speculative,
};
use vramledger_engines::sizing::hybrid::SwaInput;
use vramledger_engines::sizing::model::ModelGeometry;
use vramledger_engines::sizing::pyfloat::GIB;
use vramledger_engines::sizing::tokens::{
    implied_fraction_range, size_sglang, sizing_bounds, SizingInput, SizingResult, SpecHeadroom,
};
use vramledger_engines::sizing::Layout;

use super::cell::cell_settings;
use super::inputs::{Measured, Observed, Origin, Settings, Sourced};
use super::{capture, whatif, DefaultsReport, ModelSource, Runtime, SglangReport, SizeRequest};
use vramledger_engines::sizing::model_cell::{attn_tp, kv_dtype, model_cell};

/// Everything `compute` needs.
pub struct Plan<'a> {
    pub layout: Sourced<Layout>,
    pub model: ModelSource,
    pub settings: Settings,
    pub measured: Measured,
    pub observed: Observed,
    pub args: &'a SizeRequest,
}

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
    let defaults = sglang_defaults(&defaults_input(model, s, layout, Some(gpu.value), tp));
    let alternative = s.gpu_mem_alternative.clone().map(|alt| {
        let d = sglang_defaults(&defaults_input(model, s, layout, Some(alt.value), tp));
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
    // 0.5.18+ `mm_runtime_reservation_gb`: a multimodal model reserves SGLANG_VLM_CACHE_SIZE_MB
    // (100 MB by default; the feature-transport pool only with cuda_ipc/cuda_vmm transport,
    // unset = cpu) out of the KV budget.
    if model.is_multimodal && sc.layout >= Layout::V0_5_18 {
        input.mm_reservation_gib = 100.0 / 1024.0;
    }
    input.swa = swa;
    let spec = match (sc.layout, s.speculative) {
        (_, Speculative::None) => false,
        (Layout::V0_4_6, _) => true,
        (Layout::V0_5_5, Speculative::Eagle | Speculative::Standalone) => true,
        _ => false,
    };
    if spec {
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

fn gib_bytes(gib: f64) -> i64 {
    (gib * GIB).round() as i64
}

/// The whole SGLang answer.
pub fn compute(plan: Plan<'_>) -> Result<SglangReport, String> {
    let Plan {
        layout,
        model,
        settings,
        measured,
        observed,
        args,
    } = plan;
    let m = &model.geometry;
    let mut notes = Vec::new();
    let context_len = match (&settings.context_length, m.max_position_embeddings) {
        (Some(c), _) => c.clone(),
        (None, Some(v)) => Sourced::new(v, Origin::Derived, "config.json max_position_embeddings"),
        _ => return Err("the context length is unknown: pass --context-length".into()),
    };
    let defaults = settings
        .gpu_mem_mib
        .clone()
        .map(|g| defaults_report(Some(m), &settings, layout.value, g, None));
    let fraction = match (&settings.mem_fraction_static, &defaults) {
        (Some(f), _) => f.clone(),
        (None, Some(d)) => Sourced::new(
            d.defaults.mem_fraction_static,
            Origin::Derived,
            format!(
                "SGLang {} default for {} MiB ({}), tp {}",
                d.layout.release(),
                d.gpu_mem_mib.value,
                d.gpu_mem_mib.detail,
                d.tp
            ),
        ),
        (None, None) => {
            return Err(
                "mem_fraction_static is unknown: the input has no server_args line; pass \
                 --mem-fraction-static, or --gpu-mem-mib to derive SGLang's default"
                    .into(),
            )
        }
    };
    if let (Some(d), Some(f)) = (&defaults, &settings.mem_fraction_static) {
        if f.origin == Origin::Logged && d.defaults.mem_fraction_static != f.value {
            notes.push(format!(
                "the default SGLang {} would derive for {} MiB is {}, not the logged {} \
                 (another capacity, a multimodal adjustment without vision_config in config.json, \
                 or a flag set at launch)",
                layout.value.release(),
                d.gpu_mem_mib.value,
                d.defaults.mem_fraction_static,
                f.value
            ));
        }
    }
    let sc = Scenario {
        layout: layout.value,
        tp: settings.tp.value,
        page_size: settings.page_size.value,
        kv_dtype_name: settings.kv_cache_dtype.value.clone(),
        fraction: fraction.value,
        fraction_derived: fraction.origin == Origin::Derived,
        fraction_origin: fraction.origin,
        gpu_mem_mib: settings.gpu_mem_mib.as_ref().map(|g| g.value),
        context_len: context_len.value,
        max_total_tokens: settings.max_total_tokens.as_ref().map(|t| t.value),
        pre_gib: measured.pre_gib,
        available_gib: measured.available_gib,
    };
    let ev = evaluate(m, &settings, &sc)?;
    if ev.runner_fraction != sc.fraction {
        notes.push(format!(
            "SGLang 0.4.x's model runner lowers the fraction of a multimodal model: {} × 0.9 = {}",
            sc.fraction, ev.runner_fraction
        ));
    }
    if settings.pp.value > 1 {
        notes.push(format!(
            "pp {}: the cell counts ceil({} / {}) layers (the largest stage), whose count the PP \
             MIN keeps",
            settings.pp.value, m.num_hidden_layers, settings.pp.value
        ));
    }
    if settings.speculative != Speculative::None && ev.input.spec_headroom.is_none() {
        notes.push(
            "speculative decoding: the draft's own pool and headroom terms are not fully modelled"
                .into(),
        );
    }
    let r = ev.result.clone();
    let bounds = if measured.exact {
        None
    } else {
        Some(
            sizing_bounds(&ev.input, measured.avail_err_gib, measured.pre_err_gib)
                .map_err(|e| format!("cannot size: {e}"))?,
        )
    };
    let tolerance_tokens = bounds.as_ref().map_or(0, |(lo, hi)| {
        (r.tokens - lo.tokens).max(hi.tokens - r.tokens)
    });
    let within = |obs: i64, pick: &dyn Fn(&SizingResult) -> i64| match &bounds {
        None => obs == pick(&r),
        Some((lo, hi)) => pick(lo) <= obs && obs <= pick(hi),
    };
    let mm = 0.0;
    let implied = |obs: i64| {
        implied_fraction_range(
            obs,
            ev.cell_bytes,
            sc.page_size,
            sc.pre_gib,
            sc.available_gib,
            mm,
        )
    };
    let (reproduced, implied_fraction) = if let Some((obs, _)) = &observed.tokens {
        let ok = within(*obs, &|x| x.tokens);
        (Some(ok), (!ok).then(|| implied(*obs)))
    } else if let Some((p, _)) = &observed.profiled {
        let ok = within(*p, &|x| x.profiled_tokens);
        (Some(ok), (!ok).then(|| implied(*p)))
    } else if observed.failure.is_some() {
        (Some(r.error.is_some()), None)
    } else {
        (None, None)
    };
    if let (Some(false), Some((obs, _)), None) =
        (reproduced, &observed.tokens, &settings.max_total_tokens)
    {
        if *obs < r.tokens && r.error.is_none() {
            let fraction = if fraction.origin == Origin::Derived {
                "a lower mem_fraction_static than the derived one (see the implied fraction) or "
            } else {
                ""
            };
            notes.push(format!(
                "the engine sized fewer tokens ({obs}) than these bytes give: {fraction}a \
                 --max-total-tokens cap would explain it (no server_args line was read: the input \
                 holds none, e.g. journals recorded before vramledger kept it or with the tap \
                 off; pass the settings as flags, or the engine log with its server_args line)"
            ));
        }
    }
    if let (Some(e), Some((lo, hi))) = (&r.error, &bounds) {
        if lo.error.is_none() || hi.error.is_none() {
            notes.push(format!(
                "{} fails at the printed values but not at every rounding of them",
                e.inequality
            ));
        }
    }
    let smallest_fraction = smallest_server_fraction(m, &settings, &sc, &ev);
    let pre_bytes = gib_bytes(sc.pre_gib);
    let available_bytes = gib_bytes(sc.available_gib);
    let static_bytes = gib_bytes(sc.pre_gib * ev.runner_fraction);
    let headroom_bytes = gib_bytes(sc.pre_gib * (1.0 - ev.runner_fraction));
    let kv_bytes = kv_bytes(&ev, &r);
    let runtime = measured.after_pool.clone().map(|after| Runtime {
        after,
        headroom_bytes,
    });
    let what_ifs = whatif::what_ifs(args, m, &settings, &sc, &ev);
    let base_tokens = observed.tokens.as_ref().map_or(r.tokens, |o| o.0);
    let recommendation = measured.after_pool.as_ref().and_then(|after| {
        whatif::recommend(m, &settings, &sc, &ev, after, base_tokens, args.margin_gib)
    });
    let post_capture = match measured.free_after_capture_gib {
        Some(free) if ev.swa.is_none() => capture::post_capture(
            m,
            &settings,
            &sc,
            &ev,
            capture::CaptureMeasure {
                free_after_capture_gib: free,
                base_tokens,
                exact: measured.exact,
            },
            &mut notes,
        ),
        _ => Vec::new(),
    };
    let post_capture_resize = match args.free_after_capture_gib {
        Some(free) => capture::post_capture_direct(m, &settings, &sc, &ev, args, free, &mut notes)?,
        None => None,
    };
    if let Some(alt) = defaults.as_ref().and_then(|d| d.alternative.clone()) {
        let (cap, f) = alt;
        notes.push(format!(
            "GPU capacity: the other recorded total, {} MiB ({}), gives mem_fraction_static {f} \
             (--gpu-mem-source / --gpu-mem-mib pick it)",
            cap.value, cap.detail
        ));
    }
    Ok(SglangReport {
        layout,
        layout_candidates: Vec::new(),
        layout_ambiguous: false,
        kv_dtype: format!(
            "{} ({:?})",
            settings.kv_cache_dtype.value,
            kv_dtype(sc.layout, &sc.kv_dtype_name, m)?
        ),
        context_len,
        attn_tp: ev.attn_tp,
        cell_bytes: ev.cell_bytes,
        cell_text: ev.cell_text.clone(),
        mem_fraction_static: fraction,
        runner_fraction: ev.runner_fraction,
        defaults,
        input: ev.input.clone(),
        result: r,
        bounds,
        tolerance_tokens,
        observed_tokens: observed.tokens,
        observed_profiled: observed.profiled,
        observed_failure: observed.failure,
        observed_post_capture_tokens: observed.post_capture_tokens,
        observed_stopped_after_weights: observed.stopped_after_weights,
        reproduced,
        implied_fraction,
        smallest_fraction,
        pre_bytes,
        available_bytes,
        static_bytes,
        headroom_bytes,
        kv_bytes,
        runtime,
        what_ifs,
        recommendation,
        post_capture,
        post_capture_resize,
        notes,
        model,
        settings,
        measured,
    })
}
