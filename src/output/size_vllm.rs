//! A vLLM size report as text (from a log's startup or from a run), and a run's JSON fields
//! appended to the vLLM document of `vramledger.size/1` (docs/size-schema.md, "vLLM from a run").

use std::fmt::Write;

use serde_json::{json, Value};
use vramledger_engines::sizing::pyfloat::GIB;
use vramledger_engines::sizing::vllm_budget::Bytes;

use crate::sizing::inputs::Sourced;
use crate::sizing::vllm::report::{RankSizing, RunSizing, VllmReport, WhatIfRow};
use crate::sizing::vllm::worker::Input;

fn g(b: i64) -> String {
    format!("{:.3}", b as f64 / GIB)
}

fn gib(b: i64) -> String {
    format!("{} GiB", g(b))
}

/// "52.953 GiB (56857337344 B)" or "[52.945, 52.955] GiB".
fn bytes(b: Bytes) -> String {
    if b.is_exact() {
        format!("{} GiB ({} B)", g(b.lo), b.lo)
    } else if b.hi >= 1 << 49 {
        format!("≥ {} GiB", g(b.lo))
    } else {
        format!("[{}, {}] GiB", g(b.lo), g(b.hi))
    }
}

fn pair<T: PartialEq + std::fmt::Display>(p: &(T, T)) -> String {
    if p.0 == p.1 {
        p.0.to_string()
    } else {
        format!("[{}, {}]", p.0, p.1)
    }
}

fn src<T: std::fmt::Display>(s: &Sourced<T>) -> String {
    format!("{} ({}: {})", s.value, s.origin.name(), s.detail)
}

fn input_line(out: &mut String, name: &str, i: &Input) {
    let _ = writeln!(
        out,
        "    {:<26} {:<38} {}: {}",
        name.trim_end_matches("_bytes").replace('_', " "),
        bytes(i.bytes),
        i.basis.name(),
        i.detail
    );
}

fn rank_text(out: &mut String, r: &RankSizing) {
    let b = &r.budget;
    let _ = writeln!(out, "  {}", r.label);
    for (name, i) in &r.inputs {
        input_line(out, name, i);
    }
    let _ = writeln!(
        out,
        "    non-KV (weights + activation + non-torch): {}",
        bytes(b.non_kv)
    );
    let printed = r
        .printed_available_gib
        .map(|p| format!("; vLLM printed {p} GiB"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "    available KV = requested − non-KV − estimate: {}{printed}",
        bytes(b.available)
    );
    let _ = writeln!(
        out,
        "    blocks {} → {} tokens, concurrency {:.2}x",
        pair(&b.blocks),
        pair(&b.tokens),
        b.concurrency.0
    );
    if let (Some(s), Some(f)) = (b.suggestion, b.suggestion_full) {
        let printed = r
            .printed_suggestion
            .map(|(a, c)| {
                let ok = if r.suggestion_reproduced == Some(true) {
                    "reproduced"
                } else {
                    "NOT reproduced"
                };
                format!(" (vLLM printed {a} and {c}: {ok})")
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "    vLLM's suggestion: --kv-cache-memory={} to fit the requested memory, {} for the whole GPU{printed}",
            pair(&(s.lo, s.hi)),
            pair(&(f.lo, f.hi))
        );
    }
    if let Some((low, stage)) = &r.low_free {
        let _ = writeln!(
            out,
            "    lowest free after the KV cache: {} GiB (in {stage})",
            g(*low as i64)
        );
    }
    if !r.need.is_empty() {
        let parts: Vec<String> = r
            .need
            .iter()
            .map(|s| {
                let owners: Vec<String> = s
                    .owners
                    .iter()
                    .map(|(o, b)| format!("{o} {}", g(*b)))
                    .collect();
                format!("{} {} ({})", s.name, g(s.delta_bytes), owners.join(", "))
            })
            .collect();
        let _ = writeln!(
            out,
            "    run-time need after the KV cache (GiB): {}",
            parts.join("; ")
        );
    }
}

fn what_if_text(out: &mut String, w: &WhatIfRow) {
    let _ = writeln!(
        out,
        "  {} {}: {} blocks, {} tokens, concurrency {:.2}x{}",
        w.setting,
        w.value,
        pair(&w.blocks),
        pair(&w.tokens),
        w.concurrency.0,
        w.error
            .as_ref()
            .map(|e| format!("; DOES NOT FIT: {e}"))
            .unwrap_or_default()
    );
    let _ = writeln!(out, "    assumes: {}", w.assumption);
}

/// The block, `max_model_len` and utilization lines of a vLLM answer (a log's or a run's).
pub fn settings_text(out: &mut String, r: &VllmReport) {
    let _ = writeln!(
        out,
        "  block: {} tokens × {} B/token ({} layers, {}-byte KV), tp {}",
        r.block_size,
        r.bytes_per_token,
        r.layers,
        r.dtype_size,
        src(&r.tp)
    );
    let _ = writeln!(out, "  max_model_len {}", src(&r.max_model_len));
    if let Some(u) = &r.utilization {
        let _ = writeln!(out, "  gpu_memory_utilization {}", src(u));
    }
}

/// The whole vLLM report of a run, as text.
pub fn run_text(out: &mut String, r: &VllmReport, run: &RunSizing) {
    let _ = writeln!(
        out,
        "vLLM KV budget, {} worker{} ({})",
        r.generation,
        r.version
            .as_ref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default(),
        r.generation_reason
    );
    settings_text(out, r);
    for rank in &run.ranks {
        rank_text(out, rank);
    }
    let _ = writeln!(
        out,
        "  num_gpu_blocks {} (the minimum over {} worker{}) = {} tokens, max concurrency {:.2}x",
        pair(&run.blocks),
        run.ranks.len(),
        if run.ranks.len() == 1 { "" } else { "s" },
        pair(&run.tokens),
        run.concurrency.0
    );
    if let (Some(b), Some(src)) = (r.observed_blocks, &r.observed_source) {
        let ok = if r.reproduced == Some(true) {
            "reproduced"
        } else {
            "NOT reproduced"
        };
        let _ = writeln!(out, "  observed {b} blocks ({src}): {ok}");
    }
    if let Some(rec) = &run.recommendation {
        let _ = writeln!(
            out,
            "  recommended: --kv-cache-memory={} ({} GiB){}, keeping {} GiB free at the measured low point ({})",
            rec.kv_cache_memory_bytes,
            g(rec.kv_cache_memory_bytes),
            rec.gpu_memory_utilization
                .map(|u| format!(" or gpu_memory_utilization {u}"))
                .unwrap_or_default(),
            g(rec.margin_bytes),
            rec.limited_by
        );
    }
    if let Some(e) = &r.result.error {
        let _ = writeln!(out);
        let _ = writeln!(out, "  DOES NOT FIT: {}", e.message);
        if let Some(u) = e.smallest_working_utilization {
            let _ = writeln!(out, "    smallest gpu_memory_utilization that fits: {u}");
        }
    }
    if !run.what_ifs.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "what if:");
        for w in &run.what_ifs {
            what_if_text(out, w);
        }
    }
    if !r.notes.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "notes:");
        for n in &r.notes {
            let _ = writeln!(out, "  - {n}");
        }
    }
}

fn bytes_json(b: Bytes) -> Value {
    json!({"lo": b.lo, "hi": b.hi, "exact": b.is_exact()})
}

fn input_json(i: &Input) -> Value {
    let mut v = bytes_json(i.bytes);
    v["source"] = json!(i.basis.name());
    v["detail"] = json!(i.detail);
    v
}

fn rank_json(r: &RankSizing) -> Value {
    let b = &r.budget;
    let mut inputs = serde_json::Map::new();
    for (name, i) in &r.inputs {
        inputs.insert(name.to_string(), input_json(i));
    }
    json!({
        "label": r.label,
        "pid": r.pid,
        "rank": r.rank,
        "inputs": inputs,
        "non_kv_bytes": bytes_json(b.non_kv),
        "available_bytes": bytes_json(b.available),
        "printed_available_gib": r.printed_available_gib,
        "blocks": [b.blocks.0, b.blocks.1],
        "tokens": [b.tokens.0, b.tokens.1],
        "kv_cache_memory_suggestion": {
            "to_requested_bytes": b.suggestion.map(bytes_json),
            "to_gpu_bytes": b.suggestion_full.map(bytes_json),
            "printed": r.printed_suggestion.map(|(a, c)| json!([a, c])),
            "reproduced": r.suggestion_reproduced,
        },
        "low_free_bytes": r.low_free.as_ref().map(|l| l.0),
        "low_free_stage": r.low_free.as_ref().map(|l| l.1.clone()),
        "need": r.need.iter().map(|s| json!({
            "stage": s.name,
            "delta_bytes": s.delta_bytes,
            "by_owner": s.owners.iter().map(|(o, b)| (o.clone(), json!(b))).collect::<serde_json::Map<_, _>>(),
        })).collect::<Vec<_>>(),
        "recommended_kv_cache_memory_bytes": r.recommended_kv_cache_memory,
        "conflicts": b.conflicts,
        "error": b.error,
    })
}

/// The run's fields, appended to the vLLM document.
pub fn json_fields(v: &mut Value, run: &RunSizing) {
    v["run"] = json!({
        "ranks": run.ranks.iter().map(rank_json).collect::<Vec<_>>(),
        "blocks": [run.blocks.0, run.blocks.1],
        "tokens": [run.tokens.0, run.tokens.1],
        "max_concurrency": [run.concurrency.0, run.concurrency.1],
        "settings_line": run.settings_line,
        "recommendation": run.recommendation.as_ref().map(|r| json!({
            "kv_cache_memory_bytes": r.kv_cache_memory_bytes,
            "gpu_memory_utilization": r.gpu_memory_utilization,
            "margin_bytes": r.margin_bytes,
            "limited_by": r.limited_by,
        })),
        "what_if": run.what_ifs.iter().map(|w| json!({
            "setting": w.setting,
            "value": w.value,
            "blocks": [w.blocks.0, w.blocks.1],
            "tokens": [w.tokens.0, w.tokens.1],
            "max_concurrency": [w.concurrency.0, w.concurrency.1],
            "error": w.error,
            "assumption": w.assumption,
        })).collect::<Vec<_>>(),
    });
}

/// A vLLM answer as text: a run's ([`run_text`]) or a log's startup.
pub fn text(out: &mut String, r: &VllmReport) {
    if let Some(run) = &r.run {
        return run_text(out, r, run);
    }
    let res = &r.result;
    let _ = writeln!(
        out,
        "vLLM KV budget, {} worker{} (from {}); startup {} of {}",
        r.generation,
        r.version
            .as_ref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default(),
        r.generation_reason,
        r.attempt,
        r.attempts
    );
    settings_text(out, r);
    if let Some(t) = r.total_bytes {
        let _ = writeln!(
            out,
            "  total {} × utilization = {} requested; non-KV {}",
            gib(t as i64),
            gib(res.requested_bytes as i64),
            gib(res.non_kv_cache_bytes)
        );
    }
    let _ = writeln!(
        out,
        "  available for KV {}: {} blocks (in [{}, {}] for ±0.005 GiB) = {} tokens, tolerance ±{} tokens",
        gib(res.available_kv_cache_bytes as i64),
        res.num_gpu_blocks,
        r.blocks_low,
        r.blocks_high,
        r.tokens,
        r.tolerance_tokens
    );
    if r.total_bytes.is_some() {
        let _ = writeln!(out, "  CPU blocks (4 GiB swap): {}", res.num_cpu_blocks);
    }
    let _ = writeln!(out, "  max concurrency {:.2}x", res.max_concurrency);
    if let (Some(b), Some(src)) = (r.observed_blocks, &r.observed_source) {
        let _ = writeln!(
            out,
            "  observed {b} blocks ({src}): {}",
            if r.reproduced == Some(true) {
                "reproduced"
            } else {
                "NOT reproduced"
            }
        );
    }
    if let Some(e) = &res.error {
        let _ = writeln!(out);
        let _ = writeln!(out, "  DOES NOT FIT: {}", e.message);
        match e.smallest_working_utilization {
            Some(u) => {
                let _ = writeln!(out, "    smallest gpu_memory_utilization that fits: {u}");
            }
            None => {
                let _ = writeln!(
                    out,
                    "    smallest gpu_memory_utilization: unknown (or none up to 1.0)"
                );
            }
        }
    }
    if !r.notes.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "notes:");
        for n in &r.notes {
            let _ = writeln!(out, "  - {n}");
        }
    }
}
