//! SGLang's sizing on the gathered inputs: the cell, the fraction (given, logged or derived by
//! SGLang's default rule), the token count with its tolerance, the check against what the engine
//! reported, and the breakdown (baseline, weights, static budget, headroom, KV bytes) with the
//! measured run-time need after the pool. Each pass is [`super::evaluate`]'s.

use vramledger_engines::sizing::defaults::Speculative;
use vramledger_engines::sizing::model_cell::kv_dtype;
use vramledger_engines::sizing::pyfloat::GIB;
use vramledger_engines::sizing::tokens::{implied_fraction_range, sizing_bounds, SizingResult};
use vramledger_engines::sizing::Layout;

use super::evaluate::{
    defaults_report, evaluate, kv_bytes, smallest_server_fraction, Evaluation, Scenario,
};
use super::inputs::{Measured, Observed, Origin, Settings, Sourced};
use super::report::{DefaultsReport, ModelSource, Runtime, SglangReport};
use super::request::SizeRequest;
use super::{capture, whatif};

/// Everything `compute` needs.
pub struct Plan<'a> {
    pub layout: Sourced<Layout>,
    pub model: ModelSource,
    pub settings: Settings,
    pub measured: Measured,
    pub observed: Observed,
    pub args: &'a SizeRequest,
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
    let fraction = server_fraction(&settings, layout.value, defaults.as_ref(), &mut notes)?;
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
    pass_notes(&settings, &sc, &ev, m.num_hidden_layers, &mut notes);
    let r = ev.result.clone();
    let check = Reproduction::check(&sc, &ev, &measured, &observed)?;
    check_notes(&check, &r, &settings, &observed, &fraction, &mut notes);
    let smallest_fraction = smallest_server_fraction(m, &settings, &sc, &ev);
    let headroom_bytes = gib_bytes(sc.pre_gib * (1.0 - ev.runner_fraction));
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
        result: r.clone(),
        bounds: check.bounds,
        tolerance_tokens: check.tolerance_tokens,
        observed_tokens: observed.tokens,
        observed_profiled: observed.profiled,
        observed_failure: observed.failure,
        observed_post_capture_tokens: observed.post_capture_tokens,
        observed_stopped_after_weights: observed.stopped_after_weights,
        reproduced: check.reproduced,
        implied_fraction: check.implied_fraction,
        smallest_fraction,
        pre_bytes: gib_bytes(sc.pre_gib),
        available_bytes: gib_bytes(sc.available_gib),
        static_bytes: gib_bytes(sc.pre_gib * ev.runner_fraction),
        headroom_bytes,
        kv_bytes: kv_bytes(&ev, &r),
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

/// The server's `mem_fraction_static`: given or logged, else SGLang's default for the GPU (a
/// logged one that differs from that default is noted).
fn server_fraction(
    settings: &Settings,
    layout: Layout,
    defaults: Option<&DefaultsReport>,
    notes: &mut Vec<String>,
) -> Result<Sourced<f64>, String> {
    let fraction = match (&settings.mem_fraction_static, defaults) {
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
    if let (Some(d), Some(f)) = (defaults, &settings.mem_fraction_static) {
        if f.origin == Origin::Logged && d.defaults.mem_fraction_static != f.value {
            notes.push(format!(
                "the default SGLang {} would derive for {} MiB is {}, not the logged {} \
                 (another capacity, a multimodal adjustment without vision_config in config.json, \
                 or a flag set at launch)",
                layout.release(),
                d.gpu_mem_mib.value,
                d.defaults.mem_fraction_static,
                f.value
            ));
        }
    }
    Ok(fraction)
}

/// What the pass itself leaves to say: the 0.4.x runner's fraction, the PP stage, the draft.
fn pass_notes(s: &Settings, sc: &Scenario, ev: &Evaluation, layers: u64, notes: &mut Vec<String>) {
    if ev.runner_fraction != sc.fraction {
        notes.push(format!(
            "SGLang 0.4.x's model runner lowers the fraction of a multimodal model: {} × 0.9 = {}",
            sc.fraction, ev.runner_fraction
        ));
    }
    if s.pp.value > 1 {
        notes.push(format!(
            "pp {}: the cell counts ceil({} / {}) layers (the largest stage), whose count the PP \
             MIN keeps",
            s.pp.value, layers, s.pp.value
        ));
    }
    if s.speculative != Speculative::None && ev.input.spec_headroom.is_none() {
        notes.push(
            "speculative decoding: the draft's own pool and headroom terms are not fully modelled"
                .into(),
        );
    }
}

/// The pass held against what the engine reported.
struct Reproduction {
    /// The results at the ends of the printed values' rounding (`None`: exact inputs).
    bounds: Option<(SizingResult, SizingResult)>,
    tolerance_tokens: i64,
    /// Whether the reported count (or the capped profile, or the failure) is reproduced.
    reproduced: Option<bool>,
    implied_fraction: Option<(f64, f64)>,
}

impl Reproduction {
    fn check(
        sc: &Scenario,
        ev: &Evaluation,
        measured: &Measured,
        observed: &Observed,
    ) -> Result<Reproduction, String> {
        let r = &ev.result;
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
            None => obs == pick(r),
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
        Ok(Reproduction {
            bounds,
            tolerance_tokens,
            reproduced,
            implied_fraction,
        })
    }
}

/// What the check leaves to say: a cap that would explain fewer tokens, a failure that only
/// some rounding of the printed values gives.
fn check_notes(
    check: &Reproduction,
    r: &SizingResult,
    settings: &Settings,
    observed: &Observed,
    fraction: &Sourced<f64>,
    notes: &mut Vec<String>,
) {
    if let (Some(false), Some((obs, _)), None) = (
        check.reproduced,
        &observed.tokens,
        &settings.max_total_tokens,
    ) {
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
    if let (Some(e), Some((lo, hi))) = (&r.error, &check.bounds) {
        if lo.error.is_none() || hi.error.is_none() {
            notes.push(format!(
                "{} fails at the printed values but not at every rounding of them",
                e.inequality
            ));
        }
    }
}
