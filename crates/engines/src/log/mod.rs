//! Log-line grammar (SGLang, vLLM): a line in, a stage boundary and its numbers out.
//!
//! # Overview
//! - [`classify`] takes one output line (with or without its logging prefix, ANSI colours,
//!   trailing `\r`/`\n`, tqdm debris) and returns a [`Boundary`]: the engine, the [`stage`] in
//!   effect from that line on, the [`event`] the line reports, the [`RankTag`] from its prefix,
//!   every number it carries ([`LineNumbers`]) and a few words ([`LineWords`]).
//! - [`may_match`] is the prefilter the stdout/stderr tap runs first; `classify` returns `None`
//!   for every line `may_match` rejects.
//! - [`StageTracker`] follows the boundaries of each rank and resolves what a single line cannot
//!   say (a draft model's weight load prints the same lines as the target's).
//! - [`Rules`] is the tiny rule-file grammar for other engines: `stage  literal substring`.
//! - [`settings`]: the engines' settings lines (SGLang `server_args`, vLLM non-default args and
//!   engine config): recognised, secrets redacted, bounded and split into journal records.
//!
//! Files: `prefix.rs` (prefixes and ranks), `sglang.rs`, `sglang_capture.rs` and `vllm.rs`
//! (message grammars), `numbers.rs` (number fields), `filter.rs` (prefilter), `vocab.rs`
//! (names), `tracker.rs`, `rules.rs`. This module owns the public types and the dispatch.
//!
//! Never: allocate per line on the classify path, panic on any input, depend on a crate, or
//! keep state in `classify` (the shim calls it from any thread).
//!
//! # Example
//! ```
//! use vramledger_engines::log::{classify, stage, event, LineKind};
//! let b = classify("[2025-03-08 12:29:21 TP1] Load weight end. type=Qwen2ForCausalLM, \
//!                   dtype=torch.bfloat16, avail mem=6.09 GB, mem usage=15.54 GB.\n").unwrap();
//! assert_eq!((b.stage, b.event, b.kind), (stage::KV_POOL, event::LOAD_WEIGHT_END, LineKind::Boundary));
//! assert_eq!((b.rank.tp, b.numbers.avail_mem_gib, b.numbers.mem_usage_gib), (Some(1), Some(6.09), Some(15.54)));
//! assert_eq!(b.words.model_type, Some("Qwen2ForCausalLM"));
//! ```

mod filter;
mod numbers;
mod prefix;
pub mod rules;
pub mod server_args;
pub mod settings;
mod sglang;
mod sglang_capture;
pub mod sglang_layout;
mod tracker;
mod vllm;
pub mod vllm_startups;
mod vocab;

pub use filter::{anchors, may_match};
pub use numbers::LineNumbers;
pub use prefix::RankTag;
pub use rules::{Rule, RuleError, Rules};
pub use tracker::{StageTracker, Transition};
pub use vocab::{event, stage};

/// Which engine printed the line (decided by the message, not the prefix).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Engine {
    /// SGLang (any layout, 0.2.x to 0.5.23).
    Sglang,
    /// vLLM (V0 and V1).
    Vllm,
}

/// What kind of line it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LineKind {
    /// The stage in [`Boundary::stage`] is in effect from this line on (a repeat of the current
    /// stage is not a change).
    Boundary,
    /// Information inside a stage (progress bars, dtype, pool splits, warnings): `stage` is only
    /// the stage the line normally occurs in; it never moves the stage.
    Progress,
    /// A fatal sizing error (startup is about to fail); `stage` as for `Progress`.
    Failure,
}

/// Words a line carries besides numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineWords<'a> {
    /// `type=` of "Load weight end" (the model class).
    pub model_type: Option<&'a str>,
    /// `dtype=` / `dtype:` / "Using KV cache dtype:".
    pub dtype: Option<&'a str>,
    /// `quant=` of "Load weight end" (0.5.12+).
    pub quant: Option<&'a str>,
    /// KV pool label (`Full`, `SWA`, …), VMM arena name, vLLM pool word (`GPU`, `GPU + host`).
    pub pool_label: Option<&'a str>,
    /// The graph a capture line names, e.g. `target decode CUDA graph`, `cuda graph`.
    pub graph: Option<&'a str>,
    /// `backend=` of a capture line.
    pub backend: Option<&'a str>,
}

/// One recognised line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Boundary<'a> {
    /// Who printed it.
    pub engine: Engine,
    /// Boundary, progress or failure.
    pub kind: LineKind,
    /// The stage that starts at this line (see [`LineKind`]); one of [`stage::ALL`].
    pub stage: &'static str,
    /// What the line says; one of [`event::ALL`].
    pub event: &'static str,
    /// Ranks named by the prefix.
    pub rank: RankTag,
    /// Every number on the line.
    pub numbers: LineNumbers,
    /// Model type, dtype, pool label, graph name, backend.
    pub words: LineWords<'a>,
    /// The message after the prefix.
    pub text: &'a str,
}

/// What a grammar found in a message (before the prefix is attached).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hit<'a> {
    pub kind: LineKind,
    pub stage: &'static str,
    pub event: &'static str,
    pub numbers: LineNumbers,
    pub words: LineWords<'a>,
}

impl Hit<'_> {
    pub(crate) fn new(kind: LineKind, stage: &'static str, event: &'static str) -> Self {
        Hit {
            kind,
            stage,
            event,
            numbers: LineNumbers::default(),
            words: LineWords::default(),
        }
    }
}

/// How many SGLang prefixes embedded after progress-bar debris are tried per segment.
const EMBEDDED_TRIES: usize = 4;

/// Recognises one output line. `None` for anything that is not one of the engines' memory or
/// stage lines, and always for lines [`may_match`] rejects.
///
/// A line holding several `\r`-separated segments (tqdm) is read from its last segment back:
/// the most recent boundary or failure wins, else the most recent progress line, so a stage
/// change is never hidden behind a progress bar printed after it. [`classify_each`] gives all.
pub fn classify(line: &str) -> Option<Boundary<'_>> {
    if !may_match(line.as_bytes()) {
        return None;
    }
    let mut progress = None;
    for segment in line.rsplit(['\r', '\n']) {
        if let Some(b) = classify_segment(segment) {
            if b.kind != LineKind::Progress {
                return Some(b);
            }
            progress.get_or_insert(b);
        }
    }
    progress
}

/// Every recognised `\r`/`\n`-separated segment of `line`, in order.
pub fn classify_each(line: &str) -> impl Iterator<Item = Boundary<'_>> {
    let candidate = may_match(line.as_bytes());
    line.split(['\r', '\n'])
        .filter(move |_| candidate)
        .filter_map(classify_segment)
}

/// [`classify`] for raw bytes: invalid UTF-8 splits the line into valid pieces, read as
/// `\r`-separated segments are (the last boundary or failure wins, else the last progress).
pub fn classify_bytes(bytes: &[u8]) -> Option<Boundary<'_>> {
    if !may_match(bytes) {
        return None;
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => classify(s),
        Err(_) => bytes
            .utf8_chunks()
            .filter_map(|chunk| classify(chunk.valid()))
            .reduce(|older, newer| match newer.kind {
                LineKind::Progress if older.kind != LineKind::Progress => older,
                _ => newer,
            }),
    }
}

fn classify_segment(segment: &str) -> Option<Boundary<'_>> {
    if !may_match(segment.as_bytes()) {
        return None;
    }
    recognise(segment).or_else(|| {
        prefix::embedded_sglang(segment, EMBEDDED_TRIES)
            .find_map(|p| segment.get(p..).and_then(recognise))
    })
}

fn recognise(segment: &str) -> Option<Boundary<'_>> {
    let stripped = prefix::strip(segment);
    let (engine, hit) = match sglang::parse(stripped.msg) {
        Some(hit) => (Engine::Sglang, hit),
        None => (Engine::Vllm, vllm::parse(stripped.msg)?),
    };
    Some(Boundary {
        engine,
        kind: hit.kind,
        stage: hit.stage,
        event: hit.event,
        rank: stripped.rank,
        numbers: hit.numbers,
        words: hit.words,
        text: stripped.msg,
    })
}
