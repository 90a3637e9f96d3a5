//! Each input of a worker's budget with its label: measured from the journal, read from a
//! printed line, or left to the printed budget; and the run-time need after the KV cache.

use vramledger_engines::sizing::vllm_budget::{Bytes, Inputs};
use vramledger_format::Owner;

use super::report::NeedStage;
use super::worker::{Basis, Input, Worker};

/// Bytes of "never": an unknown input's upper end (1 PiB).
const UNKNOWN_HI: i64 = 1 << 50;

pub(super) fn printed(gib: Option<f64>, what: &str) -> Option<Input> {
    gib.map(|g| {
        Input::new(
            Bytes::printed_gib(g),
            Basis::Logged,
            format!("{what} ({g} GiB)"),
        )
    })
}

pub(super) fn unknown(what: &str) -> Input {
    Input::new(
        Bytes {
            lo: 0,
            hi: UNKNOWN_HI,
        },
        Basis::Derived,
        format!("{what}: not printed in what was read; left to the printed budget"),
    )
}

pub(super) fn worker_inputs(
    w: &Worker,
    util: Option<f64>,
    kv_memory: Option<u64>,
) -> Result<Inputs, String> {
    let missing = |what: &str| {
        format!(
            "{}: no {what} was recorded (the process's own cuMemGetInfo readings around the \
             weights and the profile run)",
            w.label
        )
    };
    let summary = w.lines.summary;
    let gib = |v: Option<f64>| v.map(Bytes::printed_gib);
    let total = w
        .total
        .as_ref()
        .map(|i| i.bytes)
        .or_else(|| gib(summary.and_then(|s| s.total_gpu_gib)))
        .ok_or_else(|| missing("total memory"))?;
    let init_free = w
        .init_free
        .as_ref()
        .map(|i| i.bytes)
        .or_else(|| gib(summary.and_then(|s| s.avail_mem_gib)))
        .ok_or_else(|| missing("initial free memory"))?;
    Ok(Inputs {
        total,
        init_free,
        gpu_memory_utilization: util,
        weights: weights(w).bytes,
        activation: activation(w).bytes,
        non_torch: non_torch(w).bytes,
        cudagraph_estimate: estimate(w).bytes,
        cudagraph: cudagraph(w).map(|i| i.bytes),
        kv_cache_memory: kv_memory.map(|b| b as i64),
    })
}

pub(super) fn weights(w: &Worker) -> Input {
    printed(w.lines.weights_gib, "'Model loading took'").unwrap_or_else(|| {
        match w.weights_reserved {
            Some(r) => Input::new(
                Bytes { lo: 0, hi: r },
                Basis::Derived,
                "no 'Model loading took' line: at most torch's reserved growth over the load",
            ),
            None => unknown("weights"),
        }
    })
}

pub(super) fn activation(w: &Worker) -> Input {
    printed(
        w.lines.activation_gib,
        "the after-capture summary's peak activation",
    )
    .unwrap_or_else(|| unknown("peak activation (torch's allocated peak: only vLLM sees it)"))
}

pub(super) fn non_torch(w: &Worker) -> Input {
    w.non_torch.clone().unwrap_or_else(|| {
        printed(
            w.lines.summary.and_then(|s| s.non_torch_gib),
            "the after-capture summary",
        )
        .unwrap_or_else(|| unknown("non-torch memory"))
    })
}

pub(super) fn estimate(w: &Worker) -> Input {
    if w.estimate_env.as_deref() == Some("0") {
        return Input::new(
            Bytes::ZERO,
            Basis::Measured,
            "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 in the recorded environment",
        );
    }
    if let Some(i) = printed(w.lines.estimate_gib, "'Estimated CUDA graph memory'") {
        return i;
    }
    if w.captured_while_profiling || w.lines.profiled_graphs {
        return unknown("CUDA-graph estimate (graphs were captured while profiling)");
    }
    Input::new(
        Bytes::ZERO,
        Basis::Measured,
        "no graph was captured while profiling (the V2 runner estimates 0)",
    )
}

pub(super) fn cudagraph(w: &Worker) -> Option<Input> {
    w.cudagraph.clone().or_else(|| {
        printed(
            w.lines.capture_took_gib,
            "'Graph capturing finished … took'",
        )
        .or_else(|| {
            printed(
                w.lines.summary.and_then(|s| s.cuda_graph_gib),
                "the summary",
            )
        })
    })
}

pub(super) fn need(w: &Worker) -> Vec<NeedStage> {
    let Some(kv) = w.stages.iter().position(|s| s.name == "kv_cache") else {
        return Vec::new();
    };
    let low_stage = w.low_free.as_ref().map(|(_, s)| s.as_str());
    let later = &w.stages[kv + 1..];
    let upto = low_stage
        .and_then(|n| later.iter().position(|s| s.name == n))
        .map_or(later.len(), |i| i + 1);
    later[..upto]
        .iter()
        .map(|s| NeedStage {
            name: s.name.clone(),
            delta_bytes: s.device_delta,
            owners: s
                .by_owner
                .iter()
                .filter(|(o, b)| *b != 0 && *o != Owner::None)
                .map(|(o, b)| (o.name().to_string(), b))
                .collect(),
        })
        .collect()
}
