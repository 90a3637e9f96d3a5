//! What `vramledger size` is asked, as plain data: the command line fills it (`crate::cli`
//! maps each flag to the field of the same name, where its help says what it means), and
//! `vramledger export` asks for a run's sizing with one.

use std::path::PathBuf;

/// The margin kept above the measured run-time need by the recommended fraction, in GiB, when
/// none is asked for.
pub const DEFAULT_MARGIN_GIB: f64 = 1.0;

/// One sizing question. Settings given here override what the log or the run says.
#[derive(Debug, Clone, Default)]
pub struct SizeRequest {
    // The inputs: a run (exact bytes), an engine log (printed GiB), the model's config.json.
    pub run: Option<PathBuf>,
    pub log: Option<PathBuf>,
    pub model_config: Option<PathBuf>,
    // SGLang's settings (vLLM reads `page_size` as its block size, `context_length` as
    // max_model_len).
    pub mem_fraction_static: Option<f64>,
    pub page_size: Option<u64>,
    pub kv_cache_dtype: Option<String>,
    pub tp: Option<u64>,
    pub pp: Option<u64>,
    pub gpu_mem_mib: Option<f64>,
    /// `driver` or `nvml`: which capacity a run supplies when `gpu_mem_mib` is absent.
    pub gpu_mem_source: Option<String>,
    pub max_total_tokens: Option<u64>,
    pub max_running_requests: Option<u64>,
    pub context_length: Option<u64>,
    /// The nearest read layout at or below this SGLang version sizes (default the newest).
    pub sglang_version: Option<String>,
    /// `cuda`, `hip` or `npu`.
    pub platform: Option<String>,
    pub dp: Option<u64>,
    pub enable_dp_attention: bool,
    pub chunked_prefill_size: Option<i64>,
    pub cuda_graph_max_bs: Option<u64>,
    pub speculative_algorithm: Option<String>,
    pub speculative_num_steps: Option<u64>,
    pub speculative_eagle_topk: Option<u64>,
    pub speculative_num_draft_tokens: Option<u64>,
    pub speculative_num_draft_layers: Option<u64>,
    pub pp_min_tokens_from_other_stages: Option<i64>,
    // Post-capture KV sizing (SGLang 0.5.18+).
    pub post_capture_kv_sizing: bool,
    pub free_after_capture_gib: Option<f64>,
    pub post_capture_backed_bytes: Option<u64>,
    pub post_capture_sampling_headroom_bytes: Option<u64>,
    // Free memory given by hand (exact inputs, GiB as SGLang holds them).
    pub pre_gib: Option<f64>,
    pub available_gib: Option<f64>,
    // vLLM.
    pub gpu_memory_utilization: Option<f64>,
    /// Which startup of a vLLM log (1-based; default the last with a budget).
    pub attempt: Option<usize>,
    /// Kept above the measured run-time need by the recommended fraction (see
    /// [`DEFAULT_MARGIN_GIB`]).
    pub margin_gib: f64,
    // What if: each list is sized again, one value at a time.
    pub what_if_mem_fraction: Vec<f64>,
    pub what_if_page_size: Vec<u64>,
    pub what_if_kv_cache_dtype: Vec<String>,
    pub what_if_gpu_memory_utilization: Vec<f64>,
    pub what_if_context_length: Vec<u64>,
    pub what_if_gpu_mem_mib: Vec<f64>,
    pub what_if_tp: Vec<u64>,
}
