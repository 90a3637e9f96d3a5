//! `vramledger size RUN` for vLLM: every worker's 0.26 budget from its labelled inputs, the
//! run's block count (the minimum over workers, as `get_kv_cache_configs` takes it), vLLM's own
//! `--kv-cache-memory` suggestion, vramledger's recommendation from the measured run-time need
//! after the KV cache, and what-ifs for `gpu_memory_utilization` and `max_model_len`.

use vramledger_engines::sizing::model::ModelGeometry;
use vramledger_engines::sizing::pyfloat::GIB;
use vramledger_engines::sizing::vllm::{v1_page_size_bytes, KvSpec, VllmError, VllmResult};
use vramledger_engines::sizing::vllm_budget::{self as vb, Budget, Bytes, Inputs, Layout};

use super::labels::{
    activation, cudagraph, estimate, need, non_torch, unknown, weights, worker_inputs,
};
use super::log::{dtype_size, VllmAsk};
use super::report::{RankSizing, Recommendation, RunSizing, VllmReport, WhatIfRow};
use super::run::RunLines;
use super::worker::{Basis, Input, Worker};
use crate::sizing::inputs::{Origin, Sourced};

/// What the command asks besides the run.
pub struct RunAsk<'a> {
    pub ask: VllmAsk<'a>,
    pub margin_gib: f64,
    pub what_if_utilization: &'a [f64],
    pub what_if_max_model_len: &'a [u64],
}

fn rank_sizing(
    w: &Worker,
    util: Option<f64>,
    kv_memory: Option<u64>,
    l: &Layout,
    margin: i64,
) -> Result<RankSizing, String> {
    let i = worker_inputs(w, util, kv_memory)?;
    let p = w.lines.printed();
    let mut budget = vb::budget(&i, &p, l);
    // A suggestion wider than a GiB says nothing (the activation peak was not read).
    let wide = |b: &Option<Bytes>| b.is_some_and(|b| b.hi - b.lo > 1 << 30);
    if wide(&budget.suggestion) || wide(&budget.suggestion_full) {
        budget.suggestion = None;
        budget.suggestion_full = None;
    }
    let label = |i: &Option<Input>, bytes: Bytes, what: &str| {
        i.clone()
            .unwrap_or_else(|| Input::new(bytes, Basis::Logged, what.to_string()))
    };
    let mut activation_in = activation(w);
    if activation_in.basis == Basis::Derived {
        activation_in.bytes = budget.activation;
        activation_in.detail =
            "not printed in what was read: what the printed budget leaves (requested − available − weights − non-torch)"
                .into();
    }
    let inputs = vec![
        ("total_bytes", label(&w.total, i.total, "the after-capture summary")),
        ("init_free_bytes", label(&w.init_free, i.init_free, "the after-capture summary")),
        (
            "requested_bytes",
            Input::new(
                budget.requested,
                Basis::Derived,
                match util {
                    Some(u) => format!("ceil(total × {u})"),
                    None => "gpu_memory_utilization unknown: the non-KV terms plus the printed available memory"
                        .to_string(),
                },
            ),
        ),
        ("weights_bytes", weights(w)),
        ("activation_peak_bytes", activation_in),
        ("non_torch_bytes", non_torch(w)),
        ("cuda_graph_estimate_bytes", estimate(w)),
        (
            "cuda_graph_bytes",
            cudagraph(w).unwrap_or_else(|| unknown("CUDA graphs")),
        ),
    ];
    let printed_suggestion = p.suggestion_bytes.zip(p.suggestion_full_bytes);
    let suggestion_reproduced = printed_suggestion.and_then(|(s, f)| {
        let (a, b) = (budget.suggestion?, budget.suggestion_full?);
        Some(a.lo <= s && s <= a.hi && b.lo <= f && f <= b.hi)
    });
    let recommended = w
        .low_free
        .as_ref()
        .map(|(low, _)| budget.available.lo + (*low as i64 - margin));
    Ok(RankSizing {
        label: w.label.clone(),
        pid: w.pid,
        rank: w.rank,
        inputs,
        printed_available_gib: p.available_gib,
        printed_suggestion,
        suggestion_reproduced,
        low_free: w.low_free.clone(),
        need: need(w),
        recommended_kv_cache_memory: recommended,
        budget,
    })
}

fn span_min(ranks: &[RankSizing], f: impl Fn(&Budget) -> (i64, i64)) -> (i64, i64) {
    ranks
        .iter()
        .map(|r| f(&r.budget))
        .fold((i64::MAX, i64::MAX), |a, b| (a.0.min(b.0), a.1.min(b.1)))
}

/// The largest `k / 100` whose budget stays at or below `kv` bytes, on every worker.
fn utilization_for(ranks: &[(Inputs, Bytes)], kv: i64) -> Option<f64> {
    (1..=100).rev().map(|k| k as f64 / 100.0).find(|u| {
        ranks.iter().all(|(i, non_kv)| {
            vb::requested(i.total.hi, *u) - non_kv.lo - i.cudagraph_estimate.lo <= kv
        })
    })
}

/// Sizes the run: `Err` for input it cannot size (exit 2).
pub fn size_run(
    lines: &RunLines,
    model: &ModelGeometry,
    a: &RunAsk<'_>,
) -> Result<VllmReport, String> {
    let cfg = &lines.config;
    let mut notes = Vec::new();
    let RunSettings {
        tp,
        utilization,
        block_size,
        max_model_len,
        dtype_size,
        layout,
    } = RunSettings::resolve(lines, model, &a.ask, &mut notes)?;
    let util = utilization.as_ref().map(|u| u.value);
    let margin = (a.margin_gib * GIB) as i64;
    let kv_memory = cfg.kv_cache_memory_bytes;
    let mut ranks = Vec::new();
    let mut inputs = Vec::new();
    for w in &lines.workers {
        let r = rank_sizing(w, util, kv_memory, &layout, margin)?;
        for c in &r.budget.conflicts {
            notes.push(format!("{}: {c}; the printed value is used", r.label));
        }
        inputs.push((worker_inputs(w, util, kv_memory)?, r.budget.non_kv));
        ranks.push(r);
    }
    let blocks = span_min(&ranks, |b| b.blocks);
    // The non-KV memory known to a GiB: enough for another utilization's budget.
    let known = inputs.iter().all(|(_, n)| n.hi - n.lo <= 1 << 30);
    if !known && !a.what_if_utilization.is_empty() {
        notes.push(
            "what-ifs for gpu_memory_utilization need the non-KV memory, which the lines read \
             leave open (the activation peak is printed only in the after-capture summary): \
             pass --log"
                .into(),
        );
    }
    let tokens = (
        vb::capacity(blocks.0, &layout).0,
        vb::capacity(blocks.1, &layout).0,
    );
    let concurrency = (
        vb::capacity(blocks.0, &layout).1,
        vb::capacity(blocks.1, &layout).1,
    );
    let recommendation = ranks
        .iter()
        .filter_map(|r| r.recommended_kv_cache_memory.map(|k| (k, &r.label)))
        .min_by_key(|(k, _)| *k)
        .map(|(kv, who)| Recommendation {
            margin_bytes: margin,
            kv_cache_memory_bytes: kv,
            gpu_memory_utilization: (kv_memory.is_none() && known)
                .then(|| utilization_for(&inputs, kv))
                .flatten(),
            limited_by: who.clone(),
        });
    let what_ifs = what_ifs(a, &inputs, &ranks, &layout, known);
    let observed = lines.observed_blocks(max_model_len.value, block_size);
    let reproduced = observed.map(|b| blocks.0 <= b && b <= blocks.1);
    let first = &ranks[0];
    let error = run_error(lines, &ranks, &inputs, &layout);
    if lines.workers.iter().all(|w| w.lines.summary.is_none()) {
        notes.push(
            "the after-capture summary line (exact --kv-cache-memory integers, the activation \
             peak) was not read: give the engine's output with --log for an exact budget"
                .into(),
        );
    }
    let result = VllmResult {
        requested_bytes: first.budget.requested.lo as f64,
        non_kv_cache_bytes: first.budget.non_kv.lo,
        available_kv_cache_bytes: first.budget.available.lo as f64,
        num_gpu_blocks: blocks.0,
        num_cpu_blocks: 0,
        kv_tokens: tokens.0,
        max_concurrency: concurrency.0,
        error,
    };
    Ok(VllmReport {
        generation: "V1",
        generation_reason: "a run's journals: vLLM 0.26 determine_available_memory per worker"
            .into(),
        version: cfg.version.clone(),
        attempt: 1,
        attempts: 1,
        block_size,
        dtype_size,
        layers: model.num_hidden_layers,
        tp,
        bytes_per_token: layout.page_size_bytes * layout.num_layers / block_size.max(1),
        max_model_len,
        utilization,
        total_bytes: Some(first.inputs[0].1.bytes.lo as f64),
        blocks_low: blocks.0,
        blocks_high: blocks.1,
        tokens: tokens.0,
        tolerance_tokens: tokens.1 - tokens.0,
        cpu_blocks_observed: None,
        observed_blocks: observed,
        observed_source: observed.map(|_| "logged 'GPU KV cache size' tokens".to_string()),
        reproduced,
        result,
        notes,
        run: Some(Box::new(RunSizing {
            ranks,
            blocks,
            tokens,
            concurrency,
            recommendation,
            what_ifs,
            settings_line: lines.settings_seen,
        })),
    })
}

/// The settings the run is sized with, each with its source.
struct RunSettings {
    tp: Sourced<u64>,
    utilization: Option<Sourced<f64>>,
    block_size: u64,
    max_model_len: Sourced<u64>,
    dtype_size: u64,
    layout: Layout,
}

impl RunSettings {
    fn resolve(
        lines: &RunLines,
        model: &ModelGeometry,
        ask: &VllmAsk<'_>,
        notes: &mut Vec<String>,
    ) -> Result<RunSettings, String> {
        let cfg = &lines.config;
        let tp = match (ask.tp, cfg.tp) {
            (Some(t), _) => Sourced::new(t, Origin::Given, "--tp"),
            (None, Some(t)) => Sourced::new(
                t,
                Origin::Logged,
                "tensor_parallel_size in the engine config line",
            ),
            (None, None) => Sourced::new(
                lines.workers.len().max(1) as u64,
                Origin::Derived,
                "the number of workers with device memory",
            ),
        };
        let summary_util = lines
            .workers
            .iter()
            .find_map(|w| w.lines.summary?.gpu_memory_utilization);
        let utilization = match (ask.utilization, summary_util, cfg.utilization) {
            (Some(u), ..) => Some(Sourced::new(u, Origin::Given, "--gpu-memory-utilization")),
            (None, Some(u), _) => Some(Sourced::new(
                u,
                Origin::Logged,
                "the after-capture summary line",
            )),
            (None, None, Some(u)) => {
                Some(Sourced::new(u, Origin::Logged, "the non-default args line"))
            }
            (None, None, None) if lines.settings_seen => Some(Sourced::new(
                0.92,
                Origin::Default,
                "not among the non-default args: vLLM 0.26's default",
            )),
            (None, None, None) => {
                notes.push(
                    "no settings line (vLLM's 'non-default args' or engine config) was recorded or \
                     logged: gpu_memory_utilization is unknown, so the budget is the printed \
                     'Available KV cache memory' and max_model_len falls back to config.json; pass \
                     --gpu-memory-utilization and --context-length, or --log with the engine's output"
                        .into(),
                );
                None
            }
        };
        let block_size = ask.block_size.or(cfg.block_size).unwrap_or(16);
        let max_model_len = match (
            ask.context_length,
            lines.workers.iter().find_map(|w| w.lines.max_len),
            cfg.max_model_len.or(cfg.max_seq_len),
            model.max_position_embeddings,
        ) {
            (Some(v), ..) => Sourced::new(v, Origin::Given, "--context-length"),
            (None, Some(v), ..) => {
                Sourced::new(v, Origin::Logged, "'Maximum concurrency for N tokens' line")
            }
            (None, None, Some(v), _) => {
                Sourced::new(v, Origin::Logged, "max_model_len in the settings lines")
            }
            (None, None, None, Some(v)) => {
                Sourced::new(v, Origin::Derived, "config.json max_position_embeddings")
            }
            _ => return Err("max_model_len unknown: pass --context-length".into()),
        };
        let dtype_size = dtype_size(ask, cfg, model)?;
        let KvSpec {
            num_kv_heads: heads,
            head_size,
            mla,
        } = KvSpec::of(model, tp.value);
        let layout = Layout {
            page_size_bytes: v1_page_size_bytes(block_size, heads, head_size, dtype_size, mla),
            num_layers: model.num_hidden_layers,
            block_size,
            max_model_len: max_model_len.value,
        };
        Ok(RunSettings {
            tp,
            utilization,
            block_size,
            max_model_len,
            dtype_size,
            layout,
        })
    }
}

/// The what-ifs asked: another `gpu_memory_utilization` (when the non-KV memory is `known`),
/// another `max_model_len`.
fn what_ifs(
    a: &RunAsk<'_>,
    inputs: &[(Inputs, Bytes)],
    ranks: &[RankSizing],
    layout: &Layout,
    known: bool,
) -> Vec<WhatIfRow> {
    let layout = *layout;
    let mut what_ifs = Vec::new();
    for &u in a.what_if_utilization.iter().filter(|_| known) {
        let per: Vec<Budget> = inputs
            .iter()
            .map(|(i, non_kv)| {
                let mut i = *i;
                i.gpu_memory_utilization = Some(u);
                i.kv_cache_memory = None;
                (i.weights, i.activation, i.non_torch) = (*non_kv, Bytes::ZERO, Bytes::ZERO);
                vb::budget(&i, &vb::Printed::default(), &layout)
            })
            .collect();
        what_ifs.push(row(
            "gpu_memory_utilization",
            u,
            &per,
            &layout,
            "the same weights, activation peak, non-torch memory and CUDA-graph estimate".into(),
        ));
    }
    for &len in a.what_if_max_model_len {
        let l = Layout {
            max_model_len: len,
            ..layout
        };
        let per: Vec<Budget> = ranks
            .iter()
            .map(|r| {
                let mut b = r.budget.clone();
                b.error = vb::check(b.available.lo, &l);
                b
            })
            .collect();
        what_ifs.push(row("max_model_len", len as f64, &per, &l, "the same budget: the profile run's peak depends on max_num_batched_tokens, assumed unchanged".into()));
    }
    what_ifs
}

/// The first worker's failure, with the smallest utilization that works on every worker.
fn run_error(
    lines: &RunLines,
    ranks: &[RankSizing],
    inputs: &[(Inputs, Bytes)],
    layout: &Layout,
) -> Option<VllmError> {
    ranks
        .iter()
        .find_map(|r| r.budget.error.clone())
        .map(|message| VllmError {
            message,
            smallest_working_utilization: lines
                .workers
                .iter()
                .zip(inputs)
                .filter_map(|(_, (i, _))| {
                    vb::smallest_utilization(i, &vb::Printed::default(), layout)
                })
                .reduce(f64::max),
        })
}

fn row(
    setting: &'static str,
    value: f64,
    per: &[Budget],
    l: &Layout,
    assumption: String,
) -> WhatIfRow {
    let blocks = per
        .iter()
        .map(|b| b.blocks)
        .fold((i64::MAX, i64::MAX), |a, b| (a.0.min(b.0), a.1.min(b.1)));
    let (t0, c0) = vb::capacity(blocks.0, l);
    let (t1, c1) = vb::capacity(blocks.1, l);
    WhatIfRow {
        setting,
        value,
        blocks,
        tokens: (t0, t1),
        concurrency: (c0, c1),
        error: per.iter().find_map(|b| b.error.clone()),
        assumption,
    }
}
