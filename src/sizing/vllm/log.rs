//! A vLLM log's startup re-sized with `vramledger_engines::sizing::vllm` (V0
//! `determine_num_available_blocks`; V1 from the logged "Available KV cache memory"). Every GiB
//! figure vLLM prints has two decimals, so each is ±0.005 GiB and the block count is given as
//! an interval.

use vramledger_engines::log::vllm_startups::{Attempt, EngineConfig};
use vramledger_engines::sizing::model::ModelGeometry;
use vramledger_engines::sizing::pyfloat::GIB;
use vramledger_engines::sizing::vllm::{
    cache_block_size, kv_dtype_size, v0_blocks, v1_blocks, v1_page_size_bytes, KvSpec, V0Input,
    V1Input, V1Version, VllmResult,
};

use super::report::VllmReport;
use crate::sizing::inputs::{Origin, Sourced};
use crate::sizing::request::SizeRequest;

const HALF_CENTI_GIB: f64 = 0.005;

/// What the command was asked, for vLLM.
pub struct VllmAsk<'a> {
    pub model: &'a ModelGeometry,
    pub attempt: Option<usize>,
    pub utilization: Option<f64>,
    pub gpu_mem_mib: Option<f64>,
    pub block_size: Option<u64>,
    pub kv_cache_dtype: Option<&'a str>,
    pub tp: Option<u64>,
    pub context_length: Option<u64>,
}

impl<'a> VllmAsk<'a> {
    /// What `req` asks of vLLM's sizing of `model` (`attempt`: a log's startup).
    pub fn of(req: &'a SizeRequest, model: &'a ModelGeometry, attempt: Option<usize>) -> Self {
        VllmAsk {
            model,
            attempt,
            utilization: req.gpu_memory_utilization,
            gpu_mem_mib: req.gpu_mem_mib,
            block_size: req.page_size,
            kv_cache_dtype: req.kv_cache_dtype.as_deref(),
            tp: req.tp,
            context_length: req.context_length,
        }
    }
}

fn bytes(gib: f64) -> i64 {
    (gib * GIB).round() as i64
}

/// Re-runs the budget of the chosen attempt.
pub fn size(
    attempts: &[Attempt],
    cfg: &EngineConfig,
    ask: &VllmAsk<'_>,
) -> Result<VllmReport, String> {
    let index = chosen_attempt(attempts, ask)?;
    let a = &attempts[index];
    let mut notes = Vec::new();
    let m = ask.model;
    let tp = match (ask.tp, cfg.tp) {
        (Some(t), _) => Sourced::new(t, Origin::Given, "--tp"),
        (None, Some(t)) => Sourced::new(
            t,
            Origin::Logged,
            "tensor_parallel_size in the engine config line",
        ),
        (None, None) => Sourced::new(1, Origin::Default, "vLLM default"),
    };
    let dtype_size = dtype_size(ask, cfg, m)?;
    let block_size = ask.block_size.unwrap_or(16);
    let KvSpec {
        num_kv_heads: heads,
        head_size,
        mla,
    } = KvSpec::of(m, tp.value);
    let layers = m.num_hidden_layers;
    let max_model_len = match (
        ask.context_length,
        a.max_len,
        cfg.max_seq_len,
        m.max_position_embeddings,
    ) {
        (Some(v), ..) => Sourced::new(v, Origin::Given, "--context-length"),
        (None, Some(v), ..) => {
            Sourced::new(v, Origin::Logged, "'Maximum concurrency for N tokens' line")
        }
        (None, None, Some(v), _) => {
            Sourced::new(v, Origin::Logged, "max_seq_len in the engine config line")
        }
        (None, None, None, Some(v)) => {
            Sourced::new(v, Origin::Derived, "config.json max_position_embeddings")
        }
        _ => return Err("max_model_len unknown: pass --context-length".into()),
    };
    let utilization = match (ask.utilization, a.utilization, cfg.utilization) {
        (Some(u), ..) => Some(Sourced::new(u, Origin::Given, "--gpu-memory-utilization")),
        (None, Some(u), _) => Some(Sourced::new(u, Origin::Logged, "the memory budget line")),
        (None, None, Some(u)) => Some(Sourced::new(u, Origin::Logged, "non-default args line")),
        _ => None,
    };
    let v0 = a.kv_rest_gib.is_some();
    let (generation, generation_reason) = if v0 {
        (
            "V0",
            "the memory-profiling breakdown (V0 worker)".to_string(),
        )
    } else {
        ("V1", "'Available KV cache memory' (V1 worker)".to_string())
    };
    let block = cache_block_size(dtype_size, layers, block_size, heads, head_size, mla);
    let bytes_per_token = block / block_size.max(1);
    let shape = Shape {
        block,
        block_size,
        heads,
        head_size,
        dtype_size,
        mla,
        layers,
        max_model_len: max_model_len.value,
    };
    let (result, lo, hi, total_bytes) = if v0 {
        v0_budget(a, ask, utilization.as_ref(), &shape, &mut notes)
    } else {
        let (result, lo, hi) = v1_budget(a, utilization.as_ref(), &shape, &mut notes);
        (result, lo, hi, None)
    };
    let observed = match (a.gpu_blocks, a.kv_tokens) {
        (Some(b), _) => Some((b as i64, "logged block count")),
        (None, Some(t)) => Some(((t / block_size) as i64, "logged 'KV cache size' tokens")),
        _ => None,
    };
    let reproduced = observed.map(|(b, _)| lo <= b && b <= hi);
    if let Some(f) = &a.failure {
        notes.push(format!("the log shows the startup failing ({f})"));
    }
    let tokens = result.kv_tokens;
    let bs = block_size as i64;
    Ok(VllmReport {
        generation,
        generation_reason,
        version: cfg.version.clone(),
        attempt: index + 1,
        attempts: attempts.len(),
        block_size,
        dtype_size,
        layers,
        tp,
        bytes_per_token,
        max_model_len,
        utilization,
        total_bytes,
        tolerance_tokens: ((result.num_gpu_blocks - lo).max(hi - result.num_gpu_blocks)) * bs,
        blocks_low: lo,
        blocks_high: hi,
        tokens,
        cpu_blocks_observed: a.cpu_blocks,
        observed_blocks: observed.map(|o| o.0),
        observed_source: observed.map(|o| o.1.to_string()),
        reproduced,
        result,
        notes,
        run: None,
    })
}

/// The startup to size: `--attempt N`, else the last that printed its budget.
fn chosen_attempt(attempts: &[Attempt], ask: &VllmAsk<'_>) -> Result<usize, String> {
    let with_budget: Vec<usize> = (0..attempts.len())
        .filter(|i| attempts[*i].has_budget())
        .collect();
    let index = match ask.attempt {
        Some(n) if n == 0 || n > attempts.len() => {
            return Err(format!(
                "--attempt {n}: the log holds {} vLLM startup(s)",
                attempts.len()
            ))
        }
        Some(n) => n - 1,
        None => *with_budget.last().ok_or(
            "the vLLM log shows no KV budget (no memory-profiling breakdown and no \
             'Available KV cache memory' line)",
        )?,
    };
    let a = &attempts[index];
    if !a.has_budget() {
        return Err(format!(
            "vLLM startup {} in the log shows no KV budget (no memory-profiling breakdown and no \
             'Available KV cache memory' line)",
            index + 1
        ));
    }
    Ok(index)
}

/// Bytes per KV element: the asked or logged KV cache dtype, else the model's.
pub(super) fn dtype_size(
    ask: &VllmAsk<'_>,
    cfg: &EngineConfig,
    model: &ModelGeometry,
) -> Result<u64, String> {
    let kv_cache_dtype = ask.kv_cache_dtype.or(cfg.kv_cache_dtype.as_deref());
    let model_dtype = cfg.dtype.as_deref().or(model.torch_dtype.as_deref());
    kv_dtype_size(kv_cache_dtype, model_dtype).ok_or_else(|| {
        format!(
            "--kv-cache-dtype {}: vLLM sizing knows auto and fp8*",
            kv_cache_dtype.unwrap_or_default()
        )
    })
}

/// The cache's shape, as both generations' budgets need it.
struct Shape {
    /// V0's cache block, in bytes.
    block: u64,
    block_size: u64,
    heads: u64,
    head_size: u64,
    dtype_size: u64,
    mla: bool,
    layers: u64,
    max_model_len: u64,
}

/// V0: the memory-profiling breakdown re-run at the printed values and ±0.005 GiB; the total
/// GPU memory in bytes when known.
fn v0_budget(
    a: &Attempt,
    ask: &VllmAsk<'_>,
    utilization: Option<&Sourced<f64>>,
    shape: &Shape,
    notes: &mut Vec<String>,
) -> (VllmResult, i64, i64, Option<f64>) {
    let (block, block_size) = (shape.block, shape.block_size);
    let max_model_len = shape.max_model_len;
    let rest = a.kv_rest_gib.unwrap_or(0.0);
    let components = (a.weights_gib, a.non_torch_gib, a.activation_gib);
    let total_gib = match (ask.gpu_mem_mib, a.total_gib, components, &utilization) {
        (Some(mib), ..) => Some(mib / 1024.0),
        (None, Some(t), ..) => Some(t),
        (None, None, (Some(w), Some(nt), Some(act)), Some(u)) => {
            notes.push(format!(
                "total GPU memory not printed: ({rest} + {w} + {nt} + {act}) / {} GiB from the \
                 breakdown and the utilization",
                u.value
            ));
            Some((rest + w + nt + act) / u.value)
        }
        _ => None,
    };
    let input = |d: f64| -> V0Input {
        match (total_gib, &utilization, components) {
            (Some(t), Some(u), (Some(w), Some(nt), Some(act))) => V0Input {
                total_gpu_memory_bytes: bytes(t + d).max(0) as u64,
                gpu_memory_utilization: u.value,
                weights_bytes: bytes(w - d),
                non_torch_increase_bytes: bytes(nt - d),
                torch_peak_increase_bytes: bytes(act - d),
                cache_block_size_bytes: block,
                block_size,
                max_model_len,
                swap_space_bytes: 4 << 30,
            },
            _ => V0Input {
                total_gpu_memory_bytes: bytes(rest + d).max(0) as u64,
                gpu_memory_utilization: 1.0,
                weights_bytes: if rest + d < 0.0 {
                    bytes(-(rest + d))
                } else {
                    0
                },
                non_torch_increase_bytes: 0,
                torch_peak_increase_bytes: 0,
                cache_block_size_bytes: block,
                block_size,
                max_model_len,
                swap_space_bytes: 4 << 30,
            },
        }
    };
    if total_gib.is_none() || utilization.is_none() {
        notes.push(
            "sized from the printed KV remainder alone (total or utilization unknown): the \
             smallest working utilization cannot be computed"
                .into(),
        );
    }
    let mut center = v0_blocks(&input(0.0));
    if total_gib.is_none() || utilization.is_none() {
        if let Some(e) = center.error.as_mut() {
            e.smallest_working_utilization = None;
        }
    }
    let lo = v0_blocks(&input(-HALF_CENTI_GIB)).num_gpu_blocks;
    let hi = v0_blocks(&input(HALF_CENTI_GIB)).num_gpu_blocks;
    (center, lo, hi, total_gib.map(|t| t * GIB))
}

/// V1: the printed "Available KV cache memory" re-run at its value and ±0.005 GiB.
fn v1_budget(
    a: &Attempt,
    utilization: Option<&Sourced<f64>>,
    shape: &Shape,
    notes: &mut Vec<String>,
) -> (VllmResult, i64, i64) {
    let avail = a.available_kv_gib.unwrap_or(0.0);
    let page = v1_page_size_bytes(
        shape.block_size,
        shape.heads,
        shape.head_size,
        shape.dtype_size,
        shape.mla,
    );
    let input = |gib: f64| V1Input {
        version: V1Version::Newest,
        total_gpu_memory_bytes: 0,
        gpu_memory_utilization: utilization.map_or(1.0, |u| u.value),
        torch_peak_bytes: 0,
        non_torch_bytes: 0,
        non_kv_cache_bytes: 0,
        cudagraph_estimate_bytes: 0,
        kv_cache_memory_bytes: Some(bytes(gib).max(0) as u64),
        page_size_bytes: page,
        num_layers: shape.layers,
        block_size: shape.block_size,
        max_model_len: shape.max_model_len,
    };
    notes.push(
        "V1 budget taken from the printed 'Available KV cache memory' (the total, \
         utilization and non-KV terms are printed only at DEBUG level)"
            .into(),
    );
    let center = v1_blocks(&input(avail));
    let lo = v1_blocks(&input(avail - HALF_CENTI_GIB)).num_gpu_blocks;
    let hi = v1_blocks(&input(avail + HALF_CENTI_GIB)).num_gpu_blocks;
    (center, lo, hi)
}
