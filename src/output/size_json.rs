//! `vramledger size --json`: schema `vramledger.size/1` (documented in docs/size-schema.md).
//! Fields may be added; none is removed or renamed without a new schema version. Bytes are
//! integers, GiB values floats, `null` means unknown or not applicable.

use serde_json::{json, Value};
use vramledger_engines::sizing::pyfloat::GIB;
use vramledger_engines::sizing::tokens::SizingResult;
use vramledger_engines::sizing::FailedCheck;

use crate::sizing::inputs::{AfterPool, Sourced};
use crate::sizing::vllm::VllmReport;
use crate::sizing::{
    DefaultsReport, ModelSource, PostCaptureEmulation, PostCaptureResize, Recommendation,
    SglangReport, SizeReport, WhatIf,
};

/// The schema name and version.
pub const SCHEMA: &str = "vramledger.size/1";

fn sourced<T: Clone + Into<Value>>(s: &Sourced<T>) -> Value {
    json!({ "value": s.value.clone().into(), "source": s.origin.name(), "detail": s.detail })
}

fn opt_sourced<T: Clone + Into<Value>>(s: &Option<Sourced<T>>) -> Value {
    s.as_ref().map_or(Value::Null, sourced)
}

fn layout(l: &Sourced<vramledger_engines::sizing::Layout>) -> Value {
    json!({
        "label": l.value.label(),
        "release": l.value.release(),
        "source": l.origin.name(),
        "reason": l.detail,
    })
}

/// The SGLang answer's layout, with the layouts the line formats allowed when there were more.
fn sglang_layout(r: &SglangReport) -> Value {
    let mut v = layout(&r.layout);
    v["ambiguous"] = json!(r.layout_ambiguous);
    v["candidates"] = if r.layout_candidates.is_empty() {
        Value::Null
    } else {
        r.layout_candidates
            .iter()
            .map(|c| {
                json!({
                    "label": c.layout.label(),
                    "release": c.layout.release(),
                    "tokens": c.tokens,
                    "error": c.error,
                    "reproduced": c.reproduced,
                    "chosen": c.chosen,
                })
            })
            .collect()
    };
    v
}

fn check_name(c: FailedCheck) -> &'static str {
    match c {
        FailedCheck::RestNotPositive => "rest_not_positive",
        FailedCheck::TokensNotPositive => "tokens_not_positive",
        FailedCheck::MambaCacheEmpty => "mamba_cache_empty",
        FailedCheck::SwaPoolTooSmall => "swa_pool_too_small",
    }
}

fn defaults(d: &DefaultsReport, logged: Option<f64>) -> Value {
    json!({
        "gpu_mem_mib": sourced(&d.gpu_mem_mib),
        "layout": d.layout.label(),
        "tp": d.tp,
        "mem_fraction_static": d.defaults.mem_fraction_static,
        "base_fraction": d.defaults.base_fraction,
        "reserved_mb": d.defaults.reserved_mb,
        "chunked_prefill_size": d.defaults.chunked_prefill_size,
        "cuda_graph_max_bs": d.defaults.cuda_graph_max_bs,
        "matches_logged": logged.map(|f| f == d.defaults.mem_fraction_static),
        "alternative": d.alternative.as_ref().map(|(cap, f)| json!({
            "gpu_mem_mib": sourced(cap),
            "mem_fraction_static": f,
        })),
    })
}

fn model(m: &ModelSource) -> Value {
    let g = &m.geometry;
    json!({
        "config": m.path,
        "source": m.origin.name(),
        "detail": m.detail,
        "architectures": g.architectures,
        "num_hidden_layers": g.num_hidden_layers,
        "num_key_value_heads": g.num_key_value_heads,
        "head_dim": g.head_dim,
        "v_head_dim": g.v_head_dim,
        "mla": g.mla.map(|d| json!({"kv_lora_rank": d.kv_lora_rank, "qk_rope_head_dim": d.qk_rope_head_dim})),
        "torch_dtype": g.torch_dtype,
        "multimodal": g.is_multimodal,
    })
}

fn after_pool(a: &AfterPool, headroom: i64) -> Value {
    json!({
        "rank": a.rank,
        "exact": a.exact,
        "pool_end_free_bytes": a.pool_end_free_bytes,
        "low_free_bytes": a.low_free_bytes,
        "need_bytes": a.need_bytes,
        "headroom_bytes": headroom,
        "stages": a.stages.iter().map(|s| json!({
            "name": s.name,
            "device_delta_bytes": s.delta_bytes,
            "by_owner": s.owners.iter().map(|(o, b)| (o.clone(), json!(b))).collect::<serde_json::Map<_, _>>(),
        })).collect::<Vec<_>>(),
    })
}

fn what_if(w: &WhatIf) -> Value {
    json!({
        "change": w.change,
        "assumption": w.assumption,
        "mem_fraction_static": w.mem_fraction_static,
        "cell_bytes": w.cell_bytes,
        "tokens": w.tokens,
        "profiled_tokens": w.profiled_tokens,
        "token_change": w.token_change,
        "max_running_requests": w.max_running_requests,
        "error": w.error,
        "smallest_mem_fraction_static": w.smallest_mem_fraction_static,
        "unavailable": w.unavailable,
    })
}

fn recommendation(r: &Recommendation) -> Value {
    json!({
        "value": r.value,
        "margin_bytes": r.margin_bytes,
        "runtime_need_bytes": r.need_bytes,
        "low_free_bytes": r.low_free_bytes,
        "tokens": r.tokens,
        "token_change": r.token_change,
        "uncapped_tokens": r.uncapped_tokens,
        "uncapped_token_change": r.uncapped_token_change,
        "note": r.note,
    })
}

fn post_capture(p: &PostCaptureEmulation) -> Value {
    json!({
        "layout": p.layout.label(),
        "release": p.layout.release(),
        "mem_fraction_static": sourced(&p.mem_fraction_static),
        "free_after_capture_bytes": p.free_after_capture_bytes,
        "headroom_bytes": p.headroom_bytes,
        "backed_bytes": p.backed_bytes,
        "budget_bytes": p.budget_bytes,
        "budget_tokens": p.budget_tokens,
        "exact": p.exact,
        "pre_capture_tokens": p.pre_capture_tokens,
        "tokens": p.tokens,
        "token_change": p.token_change,
        "max_running_requests": p.max_running_requests,
        "no_room": p.no_room,
    })
}

fn post_capture_resize(p: &PostCaptureResize) -> Value {
    json!({
        "layout": p.layout.label(),
        "release": p.layout.release(),
        "free_after_capture_gib": p.free_after_capture_gib,
        "backed_bytes": p.backed_bytes,
        "decode_max_bs": p.decode_max_bs,
        "eager_decode_gap": p.eager_decode_gap,
        "activation_reserve_mb": p.activation_reserve_mb,
        "headroom_gib": p.headroom_gib,
        "budget_bytes": p.budget_bytes,
        "pre_capture_tokens": p.pre_capture_tokens,
        "tokens": p.tokens,
        "max_running_requests": p.max_running_requests,
        "max_running_requests_reduced": p.max_running_requests_reduced.map(|(a, b)| json!([a, b])),
    })
}

fn bound(b: &Option<(SizingResult, SizingResult)>, pick: fn(&SizingResult) -> i64) -> Value {
    match b {
        Some((lo, hi)) => json!([pick(lo), pick(hi)]),
        None => Value::Null,
    }
}

fn sglang(r: &SglangReport) -> Value {
    let res = &r.result;
    let s = &r.settings;
    let logged = r
        .settings
        .mem_fraction_static
        .as_ref()
        .filter(|f| f.origin.name() == "logged")
        .map(|f| f.value);
    let error = res.error.as_ref().map(|e| {
        json!({
            "check": check_name(e.check),
            "reason": e.message,
            "inequality": e.inequality,
            "smallest_mem_fraction_static": r.smallest_fraction,
            "minimum_fraction": e.minimum_fraction,
        })
    });
    let m = &r.measured;
    json!({
        "schema": SCHEMA,
        "engine": "sglang",
        "layout": sglang_layout(r),
        "measured": {
            "exact": m.exact,
            "origin": m.origin,
            "ranks": m.ranks,
            "pre_detail": m.pre_detail,
            "available_detail": m.avail_detail,
            "pre_error_gib": m.pre_err_gib,
            "available_error_gib": m.avail_err_gib,
        },
        "model": model(&r.model),
        "settings": {
            "tp": sourced(&s.tp),
            "pp": sourced(&s.pp),
            "attn_tp": r.attn_tp,
            "page_size": sourced(&s.page_size),
            "kv_cache_dtype": sourced(&s.kv_cache_dtype),
            "kv_dtype": r.kv_dtype,
            "context_length": sourced(&r.context_len),
            "max_total_tokens": opt_sourced(&s.max_total_tokens),
            "max_running_requests": s.max_running_requests,
            "server_args": s.server_args_origin,
        },
        "cell_bytes": r.cell_bytes,
        "cell": r.cell_text,
        "mem_fraction_static": {
            "value": r.mem_fraction_static.value,
            "source": r.mem_fraction_static.origin.name(),
            "detail": r.mem_fraction_static.detail,
            "runner_value": r.runner_fraction,
        },
        "defaults": r.defaults.as_ref().map(|d| defaults(d, logged)),
        "pre_bytes": r.pre_bytes,
        "available_bytes": r.available_bytes,
        "rest_bytes": res.budget_bytes,
        "pre_gib": m.pre_gib,
        "available_gib": m.available_gib,
        "rest_gib": res.rest_gib,
        "profiled_tokens": res.profiled_tokens,
        "tokens": res.tokens,
        "tolerance_tokens": r.tolerance_tokens,
        "tokens_bounds": bound(&r.bounds, |x| x.tokens),
        "profiled_tokens_bounds": bound(&r.bounds, |x| x.profiled_tokens),
        "swa_tokens": res.swa_tokens,
        "max_running_requests": res.max_running_requests,
        "cap_warning": res.cap_warning,
        "observed_tokens": r.observed_tokens.as_ref().map(|o| o.0),
        "observed": {
            "tokens_source": r.observed_tokens.as_ref().map(|o| &o.1),
            "profiled_tokens": r.observed_profiled.as_ref().map(|o| o.0),
            "profiled_source": r.observed_profiled.as_ref().map(|o| &o.1),
            "failure": r.observed_failure.as_ref().map(|(e, l)| json!({"event": e, "line": l})),
            "post_capture_tokens": r.observed_post_capture_tokens,
        },
        "reproduced": r.reproduced,
        "implied_mem_fraction_static": r.implied_fraction.map(|(lo, hi)| json!([lo, hi])),
        "error": error,
        "explanation": {
            "baseline_bytes": r.pre_bytes,
            "weights_bytes": r.pre_bytes - r.available_bytes,
            "static_budget_bytes": r.static_bytes,
            "headroom_bytes": r.headroom_bytes,
            "rest_bytes": res.budget_bytes,
            "kv_bytes": r.kv_bytes,
            "tokens": res.tokens,
            "runtime": r.runtime.as_ref().map(|rt| after_pool(&rt.after, rt.headroom_bytes)),
        },
        "what_if": {
            "changes": r.what_ifs.iter().map(what_if).collect::<Vec<_>>(),
            "recommended_mem_fraction_static": r.recommendation.as_ref().map(recommendation),
            "post_capture": r.post_capture.iter().map(post_capture).collect::<Vec<_>>(),
        },
        "post_capture_resize": r.post_capture_resize.as_ref().map(post_capture_resize),
        "notes": r.notes,
    })
}

fn vllm(r: &VllmReport) -> Value {
    let res = &r.result;
    let error = res.error.as_ref().map(|e| {
        let inequality = if res.num_gpu_blocks <= 0 {
            format!(
                "num_gpu_blocks = {} <= 0 (available KV memory {:.2} GiB)",
                res.num_gpu_blocks,
                res.available_kv_cache_bytes / GIB
            )
        } else {
            format!(
                "max_model_len {} > {} KV tokens",
                r.max_model_len.value, res.kv_tokens
            )
        };
        json!({
            "reason": e.message,
            "inequality": inequality,
            "smallest_gpu_memory_utilization": e.smallest_working_utilization,
            "smallest_mem_fraction_static": Value::Null,
        })
    });
    json!({
        "schema": SCHEMA,
        "engine": "vllm",
        "layout": {
            "label": r.generation,
            "release": r.version,
            "source": "derived",
            "reason": r.generation_reason,
        },
        "attempt": r.attempt,
        "attempts": r.attempts,
        "cell_bytes": r.bytes_per_token,
        "block_size": r.block_size,
        "dtype_size": r.dtype_size,
        "layers": r.layers,
        "settings": { "tp": sourced(&r.tp), "max_model_len": sourced(&r.max_model_len) },
        "mem_fraction_static": Value::Null,
        "gpu_memory_utilization": opt_sourced(&r.utilization),
        "pre_bytes": Value::Null,
        "total_bytes": r.total_bytes,
        "requested_bytes": r.total_bytes.map(|_| res.requested_bytes),
        "non_kv_bytes": r.total_bytes.map(|_| res.non_kv_cache_bytes),
        "available_bytes": res.available_kv_cache_bytes.round() as i64,
        "rest_bytes": res.available_kv_cache_bytes.round() as i64,
        "blocks": res.num_gpu_blocks,
        "blocks_bounds": [r.blocks_low, r.blocks_high],
        "cpu_blocks": res.num_cpu_blocks,
        "observed_cpu_blocks": r.cpu_blocks_observed,
        "tokens": r.tokens,
        "tolerance_tokens": r.tolerance_tokens,
        "observed_blocks": r.observed_blocks,
        "observed_tokens": r.observed_blocks.map(|b| b * r.block_size as i64),
        "observed": { "tokens_source": r.observed_source },
        "reproduced": r.reproduced,
        "max_concurrency": res.max_concurrency,
        "error": error,
        "notes": r.notes,
    })
}

/// The report as JSON.
pub fn render(report: &SizeReport) -> Value {
    match report {
        SizeReport::Sglang(r) => {
            let mut v = sglang(r);
            let d = r.defaults.as_ref().map(|d| &d.defaults);
            let s = &r.settings;
            v["chunked_prefill_size"] =
                json!(s.chunked_prefill_size.or(d.map(|d| d.chunked_prefill_size)));
            v["cuda_graph_max_bs"] =
                json!(s.cuda_graph_max_bs.or(d.and_then(|d| d.cuda_graph_max_bs)));
            v["reserved_mb"] = json!(d.and_then(|d| d.reserved_mb));
            v["max_running_requests"] = json!(r.result.max_running_requests);
            v
        }
        SizeReport::Vllm(r) => {
            let mut v = vllm(r);
            if let Some(run) = &r.run {
                super::size_vllm::json_fields(&mut v, run);
            }
            v
        }
        SizeReport::DefaultsOnly(o) => {
            let (l, d, cell_bytes, m) = (&o.layout, &o.defaults, o.cell_bytes, &o.model);
            json!({
            "schema": SCHEMA,
            "engine": "sglang",
            "layout": layout(l),
            "model": m.as_ref().map(model),
            "cell_bytes": cell_bytes,
            "mem_fraction_static": {
                "value": d.defaults.mem_fraction_static,
                "source": "derived",
                "detail": format!("SGLang {} default for {} MiB, tp {}", d.layout.release(), d.gpu_mem_mib.value, d.tp),
            },
            "defaults": defaults(d, None),
            "chunked_prefill_size": d.defaults.chunked_prefill_size,
            "cuda_graph_max_bs": d.defaults.cuda_graph_max_bs,
            "reserved_mb": d.defaults.reserved_mb,
            "max_running_requests": Value::Null,
            "pre_bytes": Value::Null,
            "available_bytes": Value::Null,
            "rest_bytes": Value::Null,
            "tokens": Value::Null,
            "tolerance_tokens": Value::Null,
            "observed_tokens": Value::Null,
            "error": Value::Null,
            "notes": ["tokens need measurements: give a RUN (journals) or --log (an engine log)"],
            })
        }
    }
}
