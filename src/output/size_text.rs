//! `vramledger size` as readable text: where each number came from, the breakdown from the
//! baseline to the token count, the reproduction check, the run-time need after the pool, and
//! the what-ifs.

use std::borrow::Cow;
use std::fmt::Write;

use vramledger_engines::sizing::pyfloat::GIB;

use crate::output::terminal_text::escaped;
use crate::sizing::inputs::Sourced;
use crate::sizing::layouts::verdict;
use crate::sizing::{DefaultsReport, Recommendation, Runtime, SglangReport, SizeReport, WhatIf};

fn gib(bytes: i64) -> String {
    format!("{:.3} GiB", bytes as f64 / GIB)
}

fn src<T: std::fmt::Display>(s: &Sourced<T>) -> String {
    format!("{} ({}: {})", s.value, s.origin.name(), s.detail)
}

/// `[lo, hi)` with enough decimals to show its width (at least 6), the low end rounded down
/// and the high end up, so the printed interval always holds the exact one.
fn half_open(lo: f64, hi: f64) -> String {
    let width = (hi - lo).abs();
    let digits = if width > 0.0 && width.is_finite() {
        ((-width.log10()).ceil() as i64 + 1).clamp(6, 15) as usize
    } else {
        15
    };
    let scale = 10f64.powi(digits as i32);
    let down = (lo * scale).floor() / scale;
    let up = (hi * scale).ceil() / scale;
    format!("[{down:.digits$}, {up:.digits$})")
}

fn signed(n: i64) -> String {
    if n >= 0 {
        format!("+{n}")
    } else {
        n.to_string()
    }
}

fn defaults_line(out: &mut String, d: &DefaultsReport) {
    let x = &d.defaults;
    let _ = writeln!(
        out,
        "  SGLang {} defaults for {} MiB, tp {}: mem_fraction_static {}{}, chunked_prefill_size {}, cuda_graph_max_bs {}",
        d.layout.release(),
        d.gpu_mem_mib.value,
        d.tp,
        x.mem_fraction_static,
        x.reserved_mb
            .map(|r| format!(" (reserved {r} MB)"))
            .unwrap_or_default(),
        x.chunked_prefill_size,
        x.cuda_graph_max_bs
            .map_or("unset".to_string(), |b| b.to_string()),
    );
    let _ = writeln!(out, "    capacity: {}", d.gpu_mem_mib.detail);
    if let Some((cap, f)) = &d.alternative {
        let _ = writeln!(
            out,
            "    other recorded capacity {} MiB ({}) would give {f}",
            cap.value, cap.detail
        );
    }
}

fn sglang(out: &mut String, r: &SglangReport) {
    sglang_inputs(out, r);
    sglang_breakdown(out, r);
    sglang_check(out, r);
    if let Some(rt) = &r.runtime {
        runtime(out, rt);
    }
    if let Some(p) = &r.post_capture_resize {
        let _ = writeln!(
            out,
            "post-capture resize ({} rules): free after capture {} GiB − headroom {} GiB{} + backed {} B = budget {} B → {} tokens (pre-capture {}), max_running_requests {}",
            p.layout.release(),
            p.free_after_capture_gib,
            p.headroom_gib,
            if p.eager_decode_gap {
                format!(" (activation floor: decode graph max_bs {} below the running requests)", p.decode_max_bs)
            } else {
                String::new()
            },
            p.backed_bytes,
            p.budget_bytes,
            p.tokens,
            p.pre_capture_tokens,
            p.max_running_requests
        );
    }
    let any_what_if =
        r.recommendation.is_some() || !r.post_capture.is_empty() || !r.what_ifs.is_empty();
    if any_what_if {
        let _ = writeln!(out);
        let _ = writeln!(out, "what if:");
    }
    if let Some(rec) = &r.recommendation {
        recommendation(out, rec, r.result.profiled_tokens);
    }
    for p in &r.post_capture {
        let head = format!(
            "  post-capture sizing ({} rules{}), f {} ({}): free after capture {}",
            p.layout.release(),
            if p.exact { "" } else { ", printed values" },
            p.mem_fraction_static.value,
            p.mem_fraction_static.detail,
            gib(p.free_after_capture_bytes),
        );
        let _ = if p.no_room {
            writeln!(out, "{head} is not above the headroom {} it keeps: no room, only the {} B already backed would remain ({} tokens), no pool to serve with", gib(p.headroom_bytes), p.backed_bytes, p.tokens)
        } else {
            writeln!(out, "{head} − headroom {} + backed {} B = budget {} ({} tokens) → {} tokens ({} vs now; capped at the pre-capture {}), max_running_requests {}", gib(p.headroom_bytes), p.backed_bytes, gib(p.budget_bytes), p.budget_tokens, p.tokens, signed(p.token_change), p.pre_capture_tokens, p.max_running_requests)
        };
    }
    for w in &r.what_ifs {
        what_if(out, w);
    }
    if !r.notes.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "notes:");
        for n in &r.notes {
            let _ = writeln!(out, "  - {n}");
        }
    }
}

/// The layout, the model, the cell and the settings sized with.
fn sglang_inputs(out: &mut String, r: &SglangReport) {
    let s = &r.settings;
    let _ = writeln!(
        out,
        "SGLang KV sizing, layout {}: {}",
        r.layout.value, r.layout.detail
    );
    if r.layout_ambiguous {
        let _ = writeln!(
            out,
            "  LAYOUT AMBIGUOUS: the line formats cannot tell these apart, and they size differently:"
        );
        for c in &r.layout_candidates {
            let _ = writeln!(out, "    {}", verdict(c));
        }
        let _ = writeln!(out, "    (--sglang-version settles it)");
    }
    let _ = writeln!(out, "  measured: {}", r.measured.origin);
    let g = &r.model.geometry;
    let _ = writeln!(
        out,
        "  model: {} ({}; {}: {}), {} layers",
        g.architectures.first().map_or("?", String::as_str),
        r.model.path,
        r.model.origin.name(),
        r.model.detail,
        g.num_hidden_layers
    );
    let _ = writeln!(out, "  cell: {} B/token = {}", r.cell_bytes, r.cell_text);
    let _ = writeln!(
        out,
        "  tp {}; page_size {}; kv_cache_dtype {}",
        src(&s.tp),
        src(&s.page_size),
        r.kv_dtype
    );
    let _ = writeln!(out, "  context length {}", src(&r.context_len));
    if let Some(m) = &s.max_total_tokens {
        let _ = writeln!(out, "  max_total_tokens {}", src(m));
    }
    let _ = writeln!(out, "  mem_fraction_static {}", src(&r.mem_fraction_static));
    if r.runner_fraction != r.mem_fraction_static.value {
        let _ = writeln!(out, "    the 0.4.x model runner uses {}", r.runner_fraction);
    }
    if let Some(d) = &r.defaults {
        defaults_line(out, d);
    }
}

/// Baseline, weights, static budget, headroom, the rest for KV, tokens and their tolerance.
fn sglang_breakdown(out: &mut String, r: &SglangReport) {
    let res = &r.result;
    let s = &r.settings;
    let f = r.runner_fraction;
    let exact = r.measured.exact;
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  baseline (pre)            {:>14}  {}",
        gib(r.pre_bytes),
        r.measured.pre_detail
    );
    let _ = writeln!(
        out,
        "  weights (pre − available) {:>14}  available {} ({})",
        gib(r.pre_bytes - r.available_bytes),
        gib(r.available_bytes),
        r.measured.avail_detail
    );
    let _ = writeln!(
        out,
        "  static budget pre × f     {:>14}  f = {f}",
        gib(r.static_bytes)
    );
    let _ = writeln!(
        out,
        "  headroom pre × (1 − f)    {:>14}  kept for graphs, activations, NCCL, workspaces",
        gib(r.headroom_bytes)
    );
    let _ = writeln!(
        out,
        "  rest for KV               {:>14}  available − headroom",
        gib(res.budget_bytes)
    );
    let mut tokens = format!(
        "  tokens                    {:>14}  profiled {} = rest / {} B",
        res.tokens, res.profiled_tokens, r.cell_bytes
    );
    if let Some(m) = &s.max_total_tokens {
        if m.value < res.profiled_tokens {
            let _ = write!(tokens, ", capped by max_total_tokens {}", m.value);
        }
    }
    if let Some(st) = res.swa_tokens {
        let _ = write!(tokens, "; sliding-window pool {st}");
    }
    let _ = writeln!(out, "{tokens}");
    let _ = writeln!(
        out,
        "  KV bytes                  {:>14}  max_running_requests {}",
        gib(r.kv_bytes),
        res.max_running_requests
    );
    if exact {
        let _ = writeln!(out, "  exact bytes: tolerance 0 tokens");
    } else if let Some((lo, hi)) = &r.bounds {
        let _ = writeln!(
            out,
            "  printed to 0.01 GiB: tolerance ±{} tokens (tokens in [{}, {}]; pre ±{} GiB, available ±{} GiB)",
            r.tolerance_tokens, lo.tokens, hi.tokens, r.measured.pre_err_gib, r.measured.avail_err_gib
        );
    }
}

/// Held against what the engine reported, and the failure if it does not fit.
fn sglang_check(out: &mut String, r: &SglangReport) {
    let res = &r.result;
    let verdict = |ok: Option<bool>| match ok {
        Some(true) => "reproduced",
        Some(false) => "NOT reproduced",
        None => "",
    };
    if let Some((t, from)) = &r.observed_tokens {
        let _ = writeln!(out, "  observed {t} ({from}): {}", verdict(r.reproduced));
    } else if let Some((p, from)) = &r.observed_profiled {
        let _ = writeln!(
            out,
            "  observed profiled {p} ({from}): {}",
            verdict(r.reproduced)
        );
    } else if let Some((e, _)) = &r.observed_failure {
        let _ = writeln!(
            out,
            "  observed a startup failure ({e}): {}",
            verdict(r.reproduced)
        );
    }
    if let Some((lo, hi)) = r.implied_fraction {
        let _ = writeln!(
            out,
            "    with these free-memory figures the observed count implies an effective {}fraction in {}",
            if r.runner_fraction != r.mem_fraction_static.value { "runner " } else { "" },
            half_open(lo, hi)
        );
    }
    if let Some(e) = &res.error {
        let _ = writeln!(out);
        let _ = writeln!(out, "  DOES NOT FIT: {}", e.message);
        let _ = writeln!(out, "    {}", e.inequality);
        match r.smallest_fraction {
            Some(f) => {
                let _ = writeln!(out, "    smallest mem_fraction_static that fits: {f}");
            }
            None => {
                let _ = writeln!(out, "    no mem_fraction_static up to 1.0 fits: the weights leave no room for one page");
            }
        }
    }
}

/// The run-time memory after the KV pool against the headroom kept for it.
fn runtime(out: &mut String, rt: &Runtime) {
    let a = &rt.after;
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "run time after the KV pool ({}, {}):",
        a.rank,
        if a.exact {
            "measured"
        } else {
            "from printed avail mem"
        }
    );
    let _ = writeln!(
        out,
        "  free after the pool {}; lowest after it {}: {} taken beyond the pool",
        gib(a.pool_end_free_bytes),
        gib(a.low_free_bytes),
        gib(a.need_bytes)
    );
    for st in &a.stages {
        let owners: Vec<String> = st
            .owners
            .iter()
            .map(|(o, b)| format!("{o} {:.3}", *b as f64 / GIB))
            .collect();
        let _ = writeln!(
            out,
            "    {:<24} {:>12}  ({})",
            st.name,
            gib(st.delta_bytes),
            owners.join(", ")
        );
    }
    let share = if rt.headroom_bytes > 0 {
        format!(
            "{:.1}%",
            100.0 * a.need_bytes as f64 / rt.headroom_bytes as f64
        )
    } else {
        "all".into()
    };
    let _ = writeln!(
        out,
        "  headroom kept pre × (1 − f) {}: the run-time need used {share} of it",
        gib(rt.headroom_bytes)
    );
}

/// The recommended `mem_fraction_static` (`profiled_tokens`: the pass's own profiled count).
fn recommendation(out: &mut String, rec: &Recommendation, profiled_tokens: i64) {
    match rec.value {
        Some(v) => {
            let mut line = format!(
                "  recommended mem_fraction_static {v}: keeps the need {} + margin {} free; {} tokens ({})",
                gib(rec.need_bytes),
                gib(rec.margin_bytes),
                rec.tokens.unwrap_or(0),
                signed(rec.token_change.unwrap_or(0))
            );
            if let (Some(u), Some(c)) = (rec.uncapped_tokens, rec.uncapped_token_change) {
                let _ = write!(
                    line,
                    "; max_total_tokens caps it, without the cap {u} ({} vs the profiled {})",
                    signed(c),
                    profiled_tokens
                );
            }
            let _ = writeln!(out, "{line}");
            let _ = writeln!(out, "    {}", rec.note);
        }
        None => {
            let _ = writeln!(
                out,
                "  recommended mem_fraction_static: none ({})",
                rec.note
            );
        }
    }
}

/// One what-if row.
fn what_if(out: &mut String, w: &WhatIf) {
    let mut line = format!("  {} (f {}):", w.change, w.mem_fraction_static);
    if let (Some(t), Some(c)) = (w.tokens, w.token_change) {
        let _ = write!(line, " {t} tokens ({}), cell {} B", signed(c), w.cell_bytes);
    }
    if let (Some(t), Some(p)) = (w.tokens, w.profiled_tokens) {
        if p != t {
            let _ = write!(line, ", profiled {p}");
        }
    }
    if let Some(m) = w.max_running_requests {
        let _ = write!(line, ", max_running_requests {m}");
    }
    if let Some(u) = &w.unavailable {
        let _ = write!(line, " not computed: {u}");
    }
    if let Some(e) = &w.error {
        let _ = write!(line, "; DOES NOT FIT: {e}");
        if let Some(f) = w.smallest_mem_fraction_static {
            let _ = write!(line, " (smallest fraction that fits: {f})");
        }
    }
    let _ = writeln!(out, "{line}");
    if let Some(a) = &w.assumption {
        let _ = writeln!(out, "    assumes: {a}");
    }
}

/// The report as text.
pub fn render(report: &SizeReport) -> String {
    let mut out = String::new();
    match report {
        SizeReport::Sglang(r) => sglang(&mut out, r),
        SizeReport::Vllm(r) => super::size_vllm::text(&mut out, r),
        SizeReport::DefaultsOnly(o) => {
            let (layout, defaults, cell_bytes, model) =
                (&o.layout, &o.defaults, &o.cell_bytes, &o.model);
            let _ = writeln!(
                out,
                "SGLang defaults, layout {}: {}",
                layout.value, layout.detail
            );
            defaults_line(&mut out, defaults);
            if let (Some(c), Some(m)) = (cell_bytes, model) {
                let _ = writeln!(out, "  cell: {c} B/token ({})", m.path);
            }
            let _ = writeln!(
                out,
                "  tokens need measurements: give a RUN (journals) or --log (an engine log)"
            );
        }
    }
    terminal_lines(out)
}

/// `text` with each line escaped for a terminal: the report quotes log lines, command lines
/// and stage names in many places, and its own layout is nothing but newlines.
fn terminal_lines(text: String) -> String {
    match escaped(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(_) => text.split('\n').map(escaped).collect::<Vec<_>>().join("\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_line_is_escaped_and_the_layout_kept() {
        let text = "model: /m/\x1b]0;x\x07 (cmdline)\n  note\u{202e}\r\n".to_string();
        assert_eq!(
            terminal_lines(text),
            "model: /m/\\x1b]0;x\\x07 (cmdline)\n  note\\u{202e}\\r\n"
        );
        assert_eq!(terminal_lines("a\nb\n".into()), "a\nb\n");
    }
}
