//! vLLM's KV budget: V0 `Worker.determine_num_available_blocks` (0.8.5; 0.7.x is the same shape)
//! and V1 `Worker.determine_available_memory` (0.8.5 and the newest read, 0.33), then blocks and
//! tokens for a model whose attention layers share one KV spec (full attention, MHA or MLA).
//!
//! vLLM budgets against the GPU's *total* memory: `total × gpu_memory_utilization − non-KV
//! memory` (weights + profiled activation peak + non-torch growth), unlike SGLang's free-memory
//! baseline. Sliding-window / hybrid KV groups and `num_gpu_blocks_override` are not modelled.

use super::model::ModelGeometry;
use super::pyfloat::{py_fixed, py_floordiv, py_floordiv_int, py_int, GIB};

/// The KV spec vLLM builds for a model's attention layers on one rank: MLA keeps one joint
/// latent (`kv_lora_rank + qk_rope_head_dim`, one "head"), else the KV heads are split over TP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvSpec {
    pub num_kv_heads: u64,
    pub head_size: u64,
    pub mla: bool,
}

impl KvSpec {
    /// The spec of `model` at tensor-parallel size `tp`.
    pub fn of(model: &ModelGeometry, tp: u64) -> KvSpec {
        match model.mla {
            Some(d) => KvSpec {
                num_kv_heads: 1,
                head_size: d.kv_lora_rank + d.qk_rope_head_dim,
                mla: true,
            },
            None => KvSpec {
                num_kv_heads: (model.num_key_value_heads / tp.max(1)).max(1),
                head_size: model.head_dim,
                mla: false,
            },
        }
    }
}

/// Bytes per KV element: 1 for an `fp8*` cache; for `auto` (or none given) the model dtype's
/// (4 for a 32-bit dtype, else 2; `bfloat16` when unknown). `None`: a cache dtype this sizing
/// does not know.
pub fn kv_dtype_size(kv_cache_dtype: Option<&str>, model_dtype: Option<&str>) -> Option<u64> {
    match kv_cache_dtype {
        Some(d) if d.starts_with("fp8") => Some(1),
        Some("auto") | None => Some(if model_dtype.unwrap_or("bfloat16").contains("32") {
            4
        } else {
            2
        }),
        Some(_) => None,
    }
}

/// V0 `CacheEngine.get_cache_block_size`: `dtype_size × layers × block_size × (heads × head_size)
/// × (2, or 1 for MLA)`. For MLA pass `num_kv_heads = 1`, `head_size = kv_lora_rank + rope`.
pub fn cache_block_size(
    dtype_size: u64,
    num_attention_layers: u64,
    block_size: u64,
    num_kv_heads: u64,
    head_size: u64,
    mla: bool,
) -> u64 {
    let key = num_kv_heads * head_size;
    let value = if mla { 0 } else { key };
    dtype_size * (num_attention_layers * block_size * (key + value))
}

/// V1 per-layer page: `2 × block_size × kv_heads × head_size × dtype_size` (1× for MLA).
pub fn v1_page_size_bytes(
    block_size: u64,
    num_kv_heads: u64,
    head_size: u64,
    dtype_size: u64,
    mla: bool,
) -> u64 {
    let kv = if mla { 1 } else { 2 };
    kv * block_size * num_kv_heads * head_size * dtype_size
}

/// V0 inputs (bytes, as `memory_profiling` measures them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct V0Input {
    pub total_gpu_memory_bytes: u64,
    pub gpu_memory_utilization: f64,
    pub weights_bytes: i64,
    /// `non_torch_increase` (can be negative).
    pub non_torch_increase_bytes: i64,
    /// `torch_peak_increase` during the profile run.
    pub torch_peak_increase_bytes: i64,
    pub cache_block_size_bytes: u64,
    pub block_size: u64,
    pub max_model_len: u64,
    /// `swap_space` (default 4 GiB) for `# CPU blocks`.
    pub swap_space_bytes: u64,
}

/// A vLLM startup failure after profiling.
#[derive(Debug, Clone, PartialEq)]
pub struct VllmError {
    pub message: String,
    /// The smallest `gpu_memory_utilization` (two decimals) that passes with the same non-KV
    /// memory; `None` if even 1.0 does not.
    pub smallest_working_utilization: Option<f64>,
}

/// What vLLM would allocate.
#[derive(Debug, Clone, PartialEq)]
pub struct VllmResult {
    /// `total × utilization` (V1 newest: `ceil` of it).
    pub requested_bytes: f64,
    pub non_kv_cache_bytes: i64,
    /// "the rest of the memory reserved for KV Cache" / "Available KV cache memory".
    pub available_kv_cache_bytes: f64,
    pub num_gpu_blocks: i64,
    /// V0 `# CPU blocks` (0 for V1).
    pub num_cpu_blocks: i64,
    pub kv_tokens: i64,
    /// "Maximum concurrency for N tokens per request: X.XXx".
    pub max_concurrency: f64,
    pub error: Option<VllmError>,
}

const NO_MEMORY: &str = "No available memory for the cache blocks. Try increasing \
                         `gpu_memory_utilization` when initializing the engine.";

/// V0: `available = total × util − (weights + non_torch + torch_peak)`,
/// `num_gpu_blocks = max(int(available // cache_block_size), 0)`; then the engine's checks
/// (no block; `max_model_len` above `blocks × block_size`).
pub fn v0_blocks(input: &V0Input) -> VllmResult {
    let r = v0_run(input, input.gpu_memory_utilization);
    if r.error.is_none() {
        return r;
    }
    let mut r = r;
    if let Some(e) = r.error.as_mut() {
        e.smallest_working_utilization = smallest_utilization(|u| v0_run(input, u).error.is_none());
    }
    r
}

fn v0_run(input: &V0Input, util: f64) -> VllmResult {
    let requested = input.total_gpu_memory_bytes as f64 * util;
    let non_kv =
        input.non_torch_increase_bytes + input.torch_peak_increase_bytes + input.weights_bytes;
    let available = requested - non_kv as f64;
    let block = input.cache_block_size_bytes.max(1);
    let blocks = py_int(py_floordiv(available, block as f64)).max(0);
    let cpu_blocks = (input.swap_space_bytes / block) as i64;
    let tokens = blocks * input.block_size as i64;
    let error = if blocks <= 0 {
        Some(NO_MEMORY.to_string())
    } else if input.max_model_len as i64 > tokens {
        Some(format!(
            "The model's max seq len ({}) is larger than the maximum number of tokens that can \
             be stored in KV cache ({tokens}). Try increasing `gpu_memory_utilization` or \
             decreasing `max_model_len` when initializing the engine.",
            input.max_model_len
        ))
    } else {
        None
    };
    VllmResult {
        requested_bytes: requested,
        non_kv_cache_bytes: non_kv,
        available_kv_cache_bytes: available,
        num_gpu_blocks: blocks,
        num_cpu_blocks: cpu_blocks,
        kv_tokens: tokens,
        max_concurrency: tokens as f64 / input.max_model_len.max(1) as f64,
        error: error.map(|message| VllmError {
            message,
            smallest_working_utilization: None,
        }),
    }
}

/// Which V1 `determine_available_memory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V1Version {
    /// 0.8.5: `total × util − peak`, peak = torch peak + positive non-torch memory.
    V0_8_5,
    /// 0.33: `ceil(total × util) − non_kv − cudagraph_estimate`.
    Newest,
}

/// V1 inputs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct V1Input {
    pub version: V1Version,
    pub total_gpu_memory_bytes: u64,
    pub gpu_memory_utilization: f64,
    /// 0.8.5: `allocated_bytes.all.peak` after the profile run.
    pub torch_peak_bytes: i64,
    /// 0.8.5: `(total − free) − allocated_bytes.all.current` (added only when positive).
    pub non_torch_bytes: i64,
    /// Newest: `total_consumed + transient_peak_headroom`.
    pub non_kv_cache_bytes: i64,
    /// Newest: the applied CUDA-graph estimate (0 when `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0`).
    pub cudagraph_estimate_bytes: i64,
    /// `--kv-cache-memory-bytes`: skips profiling.
    pub kv_cache_memory_bytes: Option<u64>,
    /// One layer's page ([`v1_page_size_bytes`]).
    pub page_size_bytes: u64,
    pub num_layers: u64,
    pub block_size: u64,
    pub max_model_len: u64,
}

/// V1: available bytes, `num_blocks = int(available // page // layers)`, tokens, concurrency,
/// and the checks of `check_enough_kv_cache_memory`.
pub fn v1_blocks(input: &V1Input) -> VllmResult {
    let mut r = v1_run(input, input.gpu_memory_utilization);
    if let Some(e) = r.error.as_mut() {
        if input.kv_cache_memory_bytes.is_none() {
            e.smallest_working_utilization =
                smallest_utilization(|u| v1_run(input, u).error.is_none());
        }
    }
    r
}

fn v1_run(input: &V1Input, util: f64) -> VllmResult {
    let total = input.total_gpu_memory_bytes as f64;
    let (requested, non_kv, available) = match (input.kv_cache_memory_bytes, input.version) {
        (Some(b), _) => (b as f64, 0, b as i64),
        (None, V1Version::V0_8_5) => {
            let peak = input.torch_peak_bytes + input.non_torch_bytes.max(0);
            let requested = total * util;
            (requested, peak, py_int(requested - peak as f64))
        }
        (None, V1Version::Newest) => {
            let requested = (total * util).ceil();
            let non_kv = input.non_kv_cache_bytes + input.cudagraph_estimate_bytes;
            (requested, non_kv, requested as i64 - non_kv)
        }
    };
    let per_block = (input.page_size_bytes * input.num_layers).max(1) as i64;
    let blocks = py_floordiv_int(
        py_floordiv_int(available, input.page_size_bytes.max(1) as i64),
        input.num_layers.max(1) as i64,
    )
    .max(0);
    let tokens = blocks * input.block_size as i64;
    let blocks_per_request = input.max_model_len.div_ceil(input.block_size.max(1)) as i64;
    let error = if available <= 0 {
        Some(NO_MEMORY.to_string())
    } else if blocks_per_request * per_block > available {
        let needed = (blocks_per_request * per_block) as f64;
        let estimated = py_floordiv_int(available, per_block) * input.block_size as i64;
        Some(format!(
            "To serve at least one request with the model's max seq len ({}), ({} GiB KV cache \
             is needed, which is larger than the available KV cache memory ({} GiB). Based on \
             the available memory, the estimated maximum model length is {estimated}. Try \
             increasing `gpu_memory_utilization` or decreasing `max_model_len` when \
             initializing the engine.",
            input.max_model_len,
            py_fixed(needed / GIB, 2),
            py_fixed(available as f64 / GIB, 2)
        ))
    } else {
        None
    };
    VllmResult {
        requested_bytes: requested,
        non_kv_cache_bytes: non_kv,
        available_kv_cache_bytes: available as f64,
        num_gpu_blocks: blocks,
        num_cpu_blocks: 0,
        kv_tokens: tokens,
        max_concurrency: blocks as f64 / blocks_per_request.max(1) as f64,
        error: error.map(|message| VllmError {
            message,
            smallest_working_utilization: None,
        }),
    }
}

/// The smallest `k / 100` in (0, 1] for which `works` holds.
fn smallest_utilization(works: impl Fn(f64) -> bool) -> Option<f64> {
    (1..=100).map(|k| k as f64 / 100.0).find(|u| works(*u))
}

#[cfg(test)]
#[path = "vllm_tests.rs"]
mod tests;
