//! "What if": the same measurements sized under another setting, and the recommended
//! `mem_fraction_static` (post-capture KV sizing: `capture`).
//!
//! Assumptions are stated with each answer: another GPU capacity shifts every free-memory figure
//! by the capacity difference (the same bytes are used before the pool); another TP size
//! divides the weights by the new size (the baseline before the weights is kept). A fraction
//! SGLang derived is re-derived under the new GPU or TP size; a given or logged one is kept.

use vramledger_engines::sizing::defaults::sglang_defaults;
use vramledger_engines::sizing::model::ModelGeometry;
use vramledger_engines::sizing::pyfloat::GIB;

use super::evaluate::{defaults_input, evaluate, smallest_server_fraction, Evaluation, Scenario};
use super::inputs::{AfterPool, Settings};
use super::report::{Recommendation, WhatIf};
use super::request::SizeRequest;

/// Re-derives a fraction SGLang derived, for a scenario with another GPU or TP size.
fn rederive(model: &ModelGeometry, s: &Settings, sc: &mut Scenario) {
    if sc.fraction_derived && sc.gpu_mem_mib.is_some() {
        let d = sglang_defaults(&defaults_input(
            Some(model),
            s,
            sc.layout,
            sc.gpu_mem_mib,
            sc.tp,
        ));
        sc.fraction = d.mem_fraction_static;
    }
}

fn answer(
    model: &ModelGeometry,
    s: &Settings,
    base: &Evaluation,
    change: String,
    assumption: Option<String>,
    sc: Result<Scenario, String>,
) -> WhatIf {
    let empty = |error: String, f: f64| WhatIf {
        change: change.clone(),
        assumption: assumption.clone(),
        mem_fraction_static: f,
        cell_bytes: 0,
        tokens: None,
        profiled_tokens: None,
        token_change: None,
        max_running_requests: None,
        error: None,
        smallest_mem_fraction_static: None,
        unavailable: Some(error),
    };
    let sc = match sc {
        Ok(sc) => sc,
        Err(e) => return empty(e, base.input.mem_fraction_static),
    };
    match evaluate(model, s, &sc) {
        Err(e) => empty(e, sc.fraction),
        Ok(ev) => {
            let r = &ev.result;
            WhatIf {
                change,
                assumption,
                mem_fraction_static: sc.fraction,
                cell_bytes: ev.cell_bytes,
                tokens: Some(r.tokens),
                profiled_tokens: Some(r.profiled_tokens),
                token_change: Some(r.tokens - base.result.tokens),
                max_running_requests: Some(r.max_running_requests),
                error: r
                    .error
                    .as_ref()
                    .map(|e| format!("{} — {}", e.message, e.inequality)),
                smallest_mem_fraction_static: smallest_server_fraction(model, s, &sc, &ev),
                unavailable: None,
            }
        }
    }
}

/// Every what-if the flags ask for.
pub fn what_ifs(
    args: &SizeRequest,
    model: &ModelGeometry,
    s: &Settings,
    sc: &Scenario,
    base: &Evaluation,
) -> Vec<WhatIf> {
    let mut out = Vec::new();
    for f in &args.what_if_mem_fraction {
        let mut t = sc.clone();
        t.fraction = *f;
        out.push(answer(
            model,
            s,
            base,
            format!("mem_fraction_static={f}"),
            None,
            Ok(t),
        ));
    }
    for p in &args.what_if_page_size {
        let mut t = sc.clone();
        t.page_size = *p;
        out.push(answer(
            model,
            s,
            base,
            format!("page_size={p}"),
            None,
            Ok(t),
        ));
    }
    for d in &args.what_if_kv_cache_dtype {
        let mut t = sc.clone();
        t.kv_dtype_name = d.clone();
        out.push(answer(
            model,
            s,
            base,
            format!("kv_cache_dtype={d}"),
            None,
            Ok(t),
        ));
    }
    for c in &args.what_if_context_length {
        let mut t = sc.clone();
        t.context_len = *c;
        let note = format!(
            "the token count does not depend on the context length (only max_running_requests \
             and speculative headroom do); full-length requests that fit: tokens / {c}"
        );
        out.push(answer(
            model,
            s,
            base,
            format!("context_length={c}"),
            Some(note),
            Ok(t),
        ));
    }
    for g in &args.what_if_gpu_mem_mib {
        let t = match sc.gpu_mem_mib {
            None => {
                Err("another GPU capacity needs the current one: pass --gpu-mem-mib".to_string())
            }
            Some(cur) => {
                let mut t = sc.clone();
                let shift = (g - cur) / 1024.0;
                t.gpu_mem_mib = Some(*g);
                t.pre_gib += shift;
                t.available_gib += shift;
                rederive(model, s, &mut t);
                if t.pre_gib <= 0.0 {
                    Err(format!(
                        "{g} MiB cannot hold what was used before the weights"
                    ))
                } else {
                    Ok(t)
                }
            }
        };
        let note =
            format!(
            "free memory shifts by the capacity difference; everything before the KV pool takes \
             the same bytes{}",
            if sc.fraction_derived { "; the default fraction is re-derived" } else { "" }
        );
        out.push(answer(
            model,
            s,
            base,
            format!("gpu_mem_mib={g}"),
            Some(note),
            t,
        ));
    }
    for n in &args.what_if_tp {
        let mut t = sc.clone();
        let weights = sc.pre_gib - sc.available_gib;
        t.tp = *n;
        t.available_gib = sc.pre_gib - weights * sc.tp as f64 / *n as f64;
        rederive(model, s, &mut t);
        let note = format!(
            "weights per rank scale by {}/{n}; the free memory before the weights is kept{}",
            sc.tp,
            if sc.fraction_derived {
                "; the default fraction is re-derived"
            } else {
                ""
            }
        );
        out.push(answer(model, s, base, format!("tp={n}"), Some(note), Ok(t)));
    }
    out
}

/// The largest fraction (three decimals) that leaves `margin` free at the measured low point.
///
/// The low point was measured with a pool of `base_tokens`; another fraction changes the pool by
/// `(tokens − base_tokens) × cell` bytes and nothing else. `--max-total-tokens` is lifted for
/// the search (it caps tokens, not memory) and reported beside.
pub fn recommend(
    model: &ModelGeometry,
    s: &Settings,
    sc: &Scenario,
    base: &Evaluation,
    after: &AfterPool,
    base_tokens: i64,
    margin_gib: f64,
) -> Option<Recommendation> {
    if base.swa.is_some() {
        return None;
    }
    let margin = (margin_gib * GIB).round() as i64;
    let cell = base.cell_bytes as i64;
    let low = after.low_free_bytes;
    let mut uncapped = sc.clone();
    uncapped.max_total_tokens = None;
    let found = (1..=1000).rev().map(|k| k as f64 / 1000.0).find_map(|f| {
        let mut t = uncapped.clone();
        t.fraction = f;
        let ev = evaluate(model, s, &t).ok()?;
        let safe = low - (ev.result.tokens - base_tokens) * cell >= margin;
        (ev.result.error.is_none() && safe).then_some((f, ev.result.tokens))
    });
    let mut rec = Recommendation {
        margin_bytes: margin,
        need_bytes: after.need_bytes,
        low_free_bytes: low,
        value: None,
        tokens: None,
        token_change: None,
        uncapped_tokens: None,
        uncapped_token_change: None,
        note: String::new(),
    };
    let Some((f, uncapped_tokens)) = found else {
        rec.note = "no fraction keeps the margin free at the measured low point".into();
        return Some(rec);
    };
    let mut t = sc.clone();
    t.fraction = f;
    let capped = evaluate(model, s, &t).ok()?;
    rec.value = Some(f);
    rec.tokens = Some(capped.result.tokens);
    rec.token_change = Some(capped.result.tokens - base.result.tokens);
    if capped.result.tokens != uncapped_tokens {
        rec.uncapped_tokens = Some(uncapped_tokens);
        rec.uncapped_token_change = Some(uncapped_tokens - base.result.profiled_tokens);
    }
    rec.note = format!(
        "the pool may grow until {} stays free at the low point after it ({}; measured {})",
        gib(margin),
        after.rank,
        if after.exact {
            "exactly"
        } else {
            "from printed values"
        }
    );
    Some(rec)
}

fn gib(b: i64) -> String {
    format!("{:.3} GiB", b as f64 / GIB)
}
