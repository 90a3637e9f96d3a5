//! Which SGLang layout sizes the input, never against what the log itself reports.
//!
//! `--sglang-version` names one. Otherwise the line formats bound the release (`detect`), and
//! every layout inside the bounds is sized: when they agree, the newest is kept; when they do
//! not, the newest one that reproduces what the engine reported (its token count, its capped
//! profile, or its startup failure) is kept, and the report says that the lines cannot tell the
//! layouts apart and shows each one's answer. With nothing reported to compare with, the newest
//! is kept and the ambiguity is said; `--sglang-version` settles it.

use vramledger_engines::sizing::Layout;

use super::inputs::{LogFacts, Origin, Sourced};
use super::report::{Candidate, SglangReport};
use super::request::SizeRequest;

/// The layouts to size: the one `--sglang-version` names, else those the line formats allow.
pub fn to_try(
    args: &SizeRequest,
    facts: Option<&LogFacts>,
) -> Result<Vec<Sourced<Layout>>, String> {
    if let Some(v) = &args.sglang_version {
        let l = Layout::for_version_or_oldest(v).ok_or_else(|| {
            format!("--sglang-version {v} is not a version number (e.g. 0.5.5, v0.4.6.post5)")
        })?;
        let detail = if Layout::for_version(v).is_some() {
            format!("--sglang-version {v}: nearest read release at or below it")
        } else {
            format!("--sglang-version {v} is older than every read release: the oldest layout")
        };
        return Ok(vec![Sourced::new(l, Origin::Given, detail)]);
    }
    let (layouts, why) = match facts {
        Some(f) => f.hints.candidates(),
        None => (
            Layout::ALL.to_vec(),
            "no version given and no line format decides".to_string(),
        ),
    };
    let evidence = facts.is_some_and(|f| f.hints.conclude().is_some());
    let origin = if evidence {
        Origin::Derived
    } else {
        Origin::Default
    };
    Ok(layouts
        .into_iter()
        .rev()
        .map(|l| Sourced::new(l, origin, why.clone()))
        .collect())
}

/// The layout the defaults-only answer uses: the given one, else the newest allowed.
pub fn first(args: &SizeRequest, facts: Option<&LogFacts>) -> Result<Sourced<Layout>, String> {
    let mut all = to_try(args, facts)?;
    let mut l = all.remove(0);
    if l.origin != Origin::Given && !all.is_empty() {
        l.detail = format!("{}: the newest read layout", l.detail);
    }
    Ok(l)
}

fn candidate(r: &SglangReport) -> Candidate {
    Candidate {
        layout: r.layout.value,
        tokens: r.result.error.is_none().then_some(r.result.tokens),
        error: r.result.error.as_ref().map(|e| e.message.clone()),
        reproduced: r.reproduced,
        chosen: false,
    }
}

fn outcome(c: &Candidate) -> String {
    match (&c.error, c.tokens) {
        (Some(e), _) => format!("does not fit ({e})"),
        (None, Some(t)) => format!("{t} tokens"),
        (None, None) => "no answer".to_string(),
    }
}

/// "L1 (0.4.6.post5): does not fit (…), as the log reports".
pub fn verdict(c: &Candidate) -> String {
    let against = match c.reproduced {
        Some(true) => ", as the log reports",
        Some(false) => ", not what the log reports",
        None => "",
    };
    let kept = if c.chosen { " [kept]" } else { "" };
    format!("{}: {}{against}{kept}", c.layout, outcome(c))
}

/// Keeps one of `reports` (one per layout, newest first) and says why.
pub fn choose(mut reports: Vec<SglangReport>) -> SglangReport {
    if reports.len() == 1 {
        return reports.remove(0);
    }
    let mut all: Vec<Candidate> = reports.iter().map(candidate).collect();
    let disagree = all
        .iter()
        .any(|c| (c.tokens, &c.error) != (all[0].tokens, &all[0].error));
    let reported = all.iter().any(|c| c.reproduced.is_some());
    // A log that stops after the weights, with no pool and no error after them, is read as a
    // startup that stopped in sizing: a layout whose sizing fails agrees with it better than
    // one that fits (the note shows both).
    let stopped = reports[0].observed_stopped_after_weights;
    let pick = all
        .iter()
        .position(|c| c.reproduced == Some(true))
        .or_else(|| {
            stopped
                .then(|| all.iter().position(|c| c.error.is_some()))
                .flatten()
        })
        .unwrap_or(0);
    all[pick].chosen = true;
    let names: Vec<String> = all.iter().rev().map(|c| c.layout.to_string()).collect();
    let mut chosen = reports.swap_remove(pick);
    let agreeing = all.iter().filter(|c| c.reproduced == Some(true)).count();
    let why = if !disagree {
        "they agree here: the newest kept".to_string()
    } else if agreeing > 0 {
        format!(
            "{} kept: the newest that reproduces what the log reports",
            chosen.layout.value
        )
    } else if stopped && chosen.result.error.is_some() {
        format!(
            "the log shows no KV pool after the weights (a startup that stopped in sizing, or a \
             log cut there): {} kept, the newest whose sizing fails there",
            chosen.layout.value
        )
    } else if reported {
        "none reproduces what the log reports: the newest kept".to_string()
    } else {
        "nothing reported to tell them apart: the newest kept".to_string()
    };
    chosen.layout.detail = format!(
        "{}; the formats allow {}: {why}",
        chosen.layout.detail,
        names.join(", ")
    );
    if disagree {
        let each: Vec<String> = all.iter().rev().map(verdict).collect();
        chosen.notes.insert(
            0,
            format!(
                "layout ambiguous: the log's line formats fit {} and they size differently ({}); \
                 --sglang-version settles it",
                names.join(" and "),
                each.join("; ")
            ),
        );
    }
    all.reverse();
    chosen.layout_candidates = all;
    chosen.layout_ambiguous = disagree;
    chosen
}
