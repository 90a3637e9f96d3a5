//! SGLang graph-capture lines: every "Capture … graph begin/end" variant (0.4.6 to 0.5.23:
//! generic, prefill, decode, verify, piecewise, draft, draft extend, multi-step, Frozen-KV MTP),
//! the "Capture cuda graph bs [...]" list and the tqdm bars printed while capturing.
//!
//! Owns naming the graph from the text between "Capture " and " begin"/" end." and picking the
//! stage from it (draft wins, then piecewise, prefill, verify, decode; otherwise the generic
//! `graph_capture`). Must never treat a bar as a boundary: bars do not say which graph they belong to.

use super::numbers::{f64_field, list_at, list_or_u64_field, u64_field, word_field};
use super::vocab::{event as ev, stage as st};
use super::{Hit, LineKind};

use LineKind::{Boundary, Progress};

/// `(stage, begin event, end event)` for the graph a capture line names.
fn graph_kind(what: &str) -> (&'static str, &'static str, &'static str) {
    let has = |needle: &str| contains_ci(what, needle);
    if has("draft") {
        let (b, e) = if has("extend") {
            (ev::CAPTURE_DRAFT_EXTEND_BEGIN, ev::CAPTURE_DRAFT_EXTEND_END)
        } else if has("prefill") {
            (
                ev::CAPTURE_DRAFT_PREFILL_BEGIN,
                ev::CAPTURE_DRAFT_PREFILL_END,
            )
        } else if has("verify") {
            (ev::CAPTURE_DRAFT_VERIFY_BEGIN, ev::CAPTURE_DRAFT_VERIFY_END)
        } else {
            (ev::CAPTURE_DRAFT_BEGIN, ev::CAPTURE_DRAFT_END)
        };
        return (st::GRAPH_CAPTURE_DRAFT, b, e);
    }
    if has("piecewise") {
        (
            st::GRAPH_CAPTURE_PIECEWISE,
            ev::CAPTURE_PIECEWISE_BEGIN,
            ev::CAPTURE_PIECEWISE_END,
        )
    } else if has("prefill") {
        (
            st::GRAPH_CAPTURE_PREFILL,
            ev::CAPTURE_PREFILL_BEGIN,
            ev::CAPTURE_PREFILL_END,
        )
    } else if has("verify") {
        (
            st::GRAPH_CAPTURE_VERIFY,
            ev::CAPTURE_VERIFY_BEGIN,
            ev::CAPTURE_VERIFY_END,
        )
    } else if has("decode") {
        (
            st::GRAPH_CAPTURE_DECODE,
            ev::CAPTURE_DECODE_BEGIN,
            ev::CAPTURE_DECODE_END,
        )
    } else {
        (st::GRAPH_CAPTURE, ev::CAPTURE_BEGIN, ev::CAPTURE_END)
    }
}

/// ASCII case-insensitive substring test (no allocation).
fn contains_ci(hay: &str, needle: &str) -> bool {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    !n.is_empty() && h.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

/// Where `what` of "Capture {what} begin…" ends: the first " begin" followed by `.`, ` (` or
/// the end of the message.
fn begin_marker(rest: &str) -> Option<usize> {
    rest.match_indices(" begin").map(|(p, _)| p).find(|&p| {
        let tail = rest.get(p + 6..).unwrap_or("");
        tail.is_empty() || tail.starts_with('.') || tail.starts_with(" (")
    })
}

/// A plausible graph name: short, ends with "graph".
fn graph_name(what: &str) -> bool {
    let b = what.as_bytes();
    !b.is_empty()
        && b.len() <= 80
        && b.len() >= 5
        && b.get(b.len() - 5..)
            .is_some_and(|t| t.eq_ignore_ascii_case(b"graph"))
}

pub(crate) fn capture(msg: &str) -> Option<Hit<'_>> {
    let rest = msg.strip_prefix("Capture ")?;
    let begin = begin_marker(rest);
    let end = rest.find(" end.");
    let (pos, is_begin) = match (begin, end) {
        (Some(b), Some(e)) if e < b => (e, false),
        (Some(b), _) => (b, true),
        (None, Some(e)) => (e, false),
        (None, None) => return batch_sizes(rest),
    };
    let what = rest.get(..pos)?;
    if !graph_name(what) {
        return None;
    }
    let tail = rest.get(pos..)?;
    let (stage, begin_ev, end_ev) = graph_kind(what);
    let mut h = if is_begin {
        Hit::new(Boundary, stage, begin_ev)
    } else {
        Hit::new(Boundary, st::POST_CAPTURE, end_ev)
    };
    let n = &mut h.numbers;
    n.avail_mem_gib = f64_field(tail, "avail mem=");
    n.mem_usage_gib = f64_field(tail, "mem usage=");
    n.time_s = f64_field(tail, "Time elapsed: ").or_else(|| f64_field(tail, "elapsed="));
    if let Some((max, count)) = list_or_u64_field(tail, "bs=") {
        (n.bs_max, n.bs_count) = (Some(max), Some(count));
    }
    n.num_tokens = list_or_u64_field(tail, "num_tokens=").map(|(max, _)| max);
    n.num_tokens_per_req = u64_field(tail, "num_tokens_per_req=");
    n.step = u64_field(tail, "step=").or_else(|| u64_field(tail, "(step "));
    h.words.graph = Some(what);
    h.words.backend = word_field(tail, "backend=");
    Some(h)
}

/// "Capture cuda graph bs [1, 2, 4, 8]" (0.4.x to 0.5.x, TP0).
fn batch_sizes(rest: &str) -> Option<Hit<'_>> {
    let (what, _) = rest.split_once(" bs [")?;
    if !graph_name(what) {
        return None;
    }
    let (max, count) = list_at(rest.get(what.len() + " bs ".len()..)?)?;
    let mut h = Hit::new(Progress, st::GRAPH_CAPTURE, ev::CAPTURE_BATCH_SIZES);
    (h.numbers.bs_max, h.numbers.bs_count) = (Some(max), Some(count));
    h.words.graph = Some(what);
    Some(h)
}

/// tqdm bars: "Capturing batches (bs=256 avail_mem=20.31 GB)", "Capturing num tokens (…)",
/// "[BCG] Capturing (…)", "Capturing prefill shape (…)", "Compiling num tokens (num_tokens=…)".
pub(crate) fn progress(msg: &str) -> Option<Hit<'_>> {
    let m = msg.strip_prefix("[BCG] ").unwrap_or(msg);
    if let Some(r) = m.strip_prefix("Compiling num tokens (") {
        let mut h = Hit::new(Progress, st::GRAPH_CAPTURE, ev::COMPILE_PROGRESS);
        h.numbers.num_tokens = Some(u64_field(r, "num_tokens=")?);
        return Some(h);
    }
    let r = m.strip_prefix("Capturing")?;
    let r = [" batches", " num tokens", " prefill shape"]
        .iter()
        .find_map(|v| r.strip_prefix(v))
        .unwrap_or(r);
    let inner = r.strip_prefix(" (")?;
    let inner = inner.get(..inner.find(')')?)?;
    let mut h = Hit::new(Progress, st::GRAPH_CAPTURE, ev::CAPTURE_PROGRESS);
    h.numbers.avail_mem_gib = Some(f64_field(inner, "avail_mem=")?);
    h.numbers.bs = u64_field(inner, "bs=");
    h.numbers.num_tokens = u64_field(inner, "num_tokens=");
    Some(h)
}
