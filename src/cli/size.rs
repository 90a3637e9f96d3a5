//! `vramledger size [RUN] [--log FILE] [--model-config FILE] [settings] [--what-if-...]`:
//! re-run the engine's KV-cache sizing on measured memory ([`crate::sizing`]), explain the
//! token count, answer "what if". Exit 0 the KV pool fits, 1 the configuration cannot fit (the
//! report is still printed), 2 bad input.

use std::path::PathBuf;

use clap::Args;

use super::say;
use crate::exit;
use crate::output::{size_json, size_text};
use crate::sizing::{self, SizeRequest, DEFAULT_MARGIN_GIB};

/// The flags of `vramledger size`. Settings given here override what the log or run says.
#[derive(Args, Debug, Clone)]
pub struct SizeArgs {
    /// A run folder (every *.vlj under it) or one journal: exact free bytes per rank.
    #[arg(value_name = "RUN")]
    pub run: Option<PathBuf>,
    /// An engine log (SGLang or vLLM): numbers printed to 0.01 GiB, the server_args line.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// The model's config.json (Hugging Face form; text_config nesting allowed).
    #[arg(long, value_name = "FILE")]
    pub model_config: Option<PathBuf>,
    /// SGLang --mem-fraction-static, in (0, 1].
    #[arg(long, value_name = "F")]
    pub mem_fraction_static: Option<f64>,
    /// SGLang --page-size (vLLM: the block size).
    #[arg(long, value_name = "N")]
    pub page_size: Option<u64>,
    /// SGLang --kv-cache-dtype (auto, fp8_e4m3, fp8_e5m2, bf16, …).
    #[arg(long, value_name = "D")]
    pub kv_cache_dtype: Option<String>,
    /// Tensor-parallel size.
    #[arg(long, value_name = "N")]
    pub tp: Option<u64>,
    /// Pipeline-parallel size.
    #[arg(long, value_name = "N")]
    pub pp: Option<u64>,
    /// GPU capacity in MiB as SGLang reads it (nvidia-smi memory.total).
    #[arg(long, value_name = "MIB")]
    pub gpu_mem_mib: Option<f64>,
    /// Which capacity a run supplies when --gpu-mem-mib is absent: NVML's total (default, as
    /// SGLang reads it through nvidia-smi) or the driver's.
    #[arg(long, value_name = "SOURCE", value_parser = ["driver", "nvml"])]
    pub gpu_mem_source: Option<String>,
    /// SGLang --max-total-tokens.
    #[arg(long, value_name = "N")]
    pub max_total_tokens: Option<u64>,
    /// SGLang --max-running-requests.
    #[arg(long, value_name = "N")]
    pub max_running_requests: Option<u64>,
    /// Context length (vLLM: max_model_len).
    #[arg(long, value_name = "N")]
    pub context_length: Option<u64>,
    /// SGLang version: the nearest read layout at or below it is used (0.4.6, 0.5.5, 0.5.12,
    /// 0.5.18, 0.5.23; default the newest).
    #[arg(long, value_name = "V")]
    pub sglang_version: Option<String>,
    /// SGLang's platform: cuda (default), hip (ROCm) or npu (Ascend): their capacity tiers and
    /// prefill-graph rules differ.
    #[arg(long, value_name = "P", value_parser = ["cuda", "hip", "npu"])]
    pub platform: Option<String>,
    /// SGLang --dp-size (data-parallel replicas).
    #[arg(long, value_name = "N")]
    pub dp: Option<u64>,
    /// SGLang --enable-dp-attention.
    #[arg(long)]
    pub enable_dp_attention: bool,
    /// SGLang --chunked-prefill-size (-1 disables chunking).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub chunked_prefill_size: Option<i64>,
    /// SGLang --cuda-graph-max-bs (the decode graph's largest batch).
    #[arg(long, value_name = "N")]
    pub cuda_graph_max_bs: Option<u64>,
    /// SGLang --speculative-algorithm (EAGLE, EAGLE3, STANDALONE, NGRAM, …).
    #[arg(long, value_name = "NAME")]
    pub speculative_algorithm: Option<String>,
    /// SGLang --speculative-num-steps (0.4.x/0.5.5 EAGLE headroom).
    #[arg(long, value_name = "N")]
    pub speculative_num_steps: Option<u64>,
    /// SGLang --speculative-eagle-topk (0.4.x/0.5.5 EAGLE headroom).
    #[arg(long, value_name = "N")]
    pub speculative_eagle_topk: Option<u64>,
    /// SGLang --speculative-num-draft-tokens (0.4.x/0.5.5 EAGLE headroom; 0.5.18+ defaults).
    #[arg(long, value_name = "N")]
    pub speculative_num_draft_tokens: Option<u64>,
    /// 0.5.18+ EAGLE/STANDALONE: the draft model's KV layers priced into the target cell
    /// (its num_nextn_predict_layers, else max(num_hidden_layers, attention layers)); default
    /// the target config's num_nextn_predict_layers.
    #[arg(long, value_name = "N")]
    pub speculative_num_draft_layers: Option<u64>,
    /// PP > 1 (0.5.5+): the smallest token count of the other pipeline stages, which SGLang's
    /// MIN all-reduce applies to this (the largest) stage's count.
    #[arg(long, value_name = "N")]
    pub pp_min_tokens_from_other_stages: Option<i64>,
    /// SGLang 0.5.18+: post-capture KV sizing planned (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING=1
    /// on an eligible configuration).
    #[arg(long)]
    pub post_capture_kv_sizing: bool,
    /// Post-capture KV sizing: the free GiB after the CUDA graph captures (SGLang's distributed
    /// reading, exact input); with --post-capture-kv-sizing the pool is resized to it.
    #[arg(
        long,
        value_name = "F",
        requires = "pre_gib",
        requires = "post_capture_backed_bytes",
        allow_hyphen_values = true
    )]
    pub free_after_capture_gib: Option<f64>,
    /// Post-capture KV sizing: `pool.post_capture_backed_bytes`, the prefix the pool backed
    /// before capture (a CUDA VMM allocation-granularity quantity, hence an input).
    #[arg(long, value_name = "N")]
    pub post_capture_backed_bytes: Option<u64>,
    /// Post-capture KV sizing, 0.5.23: the sampling prewarm's headroom (a floor on the kept
    /// headroom while graph-pool borrowing is off, SGLang's default); default 0.
    #[arg(long, value_name = "N")]
    pub post_capture_sampling_headroom_bytes: Option<u64>,
    /// pre_model_load_memory: free GiB before the weights, as SGLang holds it (exact input).
    #[arg(
        long,
        value_name = "F",
        requires = "available_gib",
        allow_hyphen_values = true
    )]
    pub pre_gib: Option<f64>,
    /// Free GiB after the weights when SGLang sizes the KV cache (exact input).
    #[arg(
        long,
        value_name = "F",
        requires = "pre_gib",
        allow_hyphen_values = true
    )]
    pub available_gib: Option<f64>,
    /// vLLM gpu_memory_utilization, in (0, 1].
    #[arg(long, value_name = "U")]
    pub gpu_memory_utilization: Option<f64>,
    /// vLLM: which startup of the log to size (1-based; default the last with a budget).
    #[arg(long, value_name = "N")]
    pub attempt: Option<usize>,
    /// Safety margin kept above the measured run-time need by the recommended fraction.
    #[arg(long, value_name = "GIB", default_value_t = DEFAULT_MARGIN_GIB)]
    pub margin_gib: f64,
    /// What if mem_fraction_static were F (repeatable).
    #[arg(long = "what-if-mem-fraction", value_name = "F")]
    pub what_if_mem_fraction: Vec<f64>,
    /// What if the page size were N (repeatable).
    #[arg(long = "what-if-page-size", value_name = "N")]
    pub what_if_page_size: Vec<u64>,
    /// What if the KV cache dtype were D (repeatable).
    #[arg(long = "what-if-kv-cache-dtype", value_name = "D")]
    pub what_if_kv_cache_dtype: Vec<String>,
    /// vLLM: what if gpu_memory_utilization were U (repeatable; a run).
    #[arg(long = "what-if-gpu-memory-utilization", value_name = "U")]
    pub what_if_gpu_memory_utilization: Vec<f64>,
    /// What if the context length were N (repeatable).
    #[arg(long = "what-if-context-length", value_name = "N")]
    pub what_if_context_length: Vec<u64>,
    /// What if the GPU had N MiB (repeatable).
    #[arg(long = "what-if-gpu-mem-mib", value_name = "MIB")]
    pub what_if_gpu_mem_mib: Vec<f64>,
    /// What if the TP size were N (repeatable).
    #[arg(long = "what-if-tp", value_name = "N")]
    pub what_if_tp: Vec<u64>,
    /// JSON (schema vramledger.size/1) instead of text.
    #[arg(long)]
    pub json: bool,
}

impl SizeArgs {
    /// The question these flags ask (`--json` is how the answer is printed, not part of it).
    pub fn request(&self) -> SizeRequest {
        let a = self.clone();
        SizeRequest {
            run: a.run,
            log: a.log,
            model_config: a.model_config,
            mem_fraction_static: a.mem_fraction_static,
            page_size: a.page_size,
            kv_cache_dtype: a.kv_cache_dtype,
            tp: a.tp,
            pp: a.pp,
            gpu_mem_mib: a.gpu_mem_mib,
            gpu_mem_source: a.gpu_mem_source,
            max_total_tokens: a.max_total_tokens,
            max_running_requests: a.max_running_requests,
            context_length: a.context_length,
            sglang_version: a.sglang_version,
            platform: a.platform,
            dp: a.dp,
            enable_dp_attention: a.enable_dp_attention,
            chunked_prefill_size: a.chunked_prefill_size,
            cuda_graph_max_bs: a.cuda_graph_max_bs,
            speculative_algorithm: a.speculative_algorithm,
            speculative_num_steps: a.speculative_num_steps,
            speculative_eagle_topk: a.speculative_eagle_topk,
            speculative_num_draft_tokens: a.speculative_num_draft_tokens,
            speculative_num_draft_layers: a.speculative_num_draft_layers,
            pp_min_tokens_from_other_stages: a.pp_min_tokens_from_other_stages,
            post_capture_kv_sizing: a.post_capture_kv_sizing,
            free_after_capture_gib: a.free_after_capture_gib,
            post_capture_backed_bytes: a.post_capture_backed_bytes,
            post_capture_sampling_headroom_bytes: a.post_capture_sampling_headroom_bytes,
            pre_gib: a.pre_gib,
            available_gib: a.available_gib,
            gpu_memory_utilization: a.gpu_memory_utilization,
            attempt: a.attempt,
            margin_gib: a.margin_gib,
            what_if_mem_fraction: a.what_if_mem_fraction,
            what_if_page_size: a.what_if_page_size,
            what_if_kv_cache_dtype: a.what_if_kv_cache_dtype,
            what_if_gpu_memory_utilization: a.what_if_gpu_memory_utilization,
            what_if_context_length: a.what_if_context_length,
            what_if_gpu_mem_mib: a.what_if_gpu_mem_mib,
            what_if_tp: a.what_if_tp,
        }
    }
}

/// Runs `vramledger size`; returns the exit code.
pub fn main(args: &SizeArgs) -> i32 {
    let report = match sizing::build(&args.request()) {
        Ok(r) => r,
        Err(msg) => {
            crate::stderr::line("vramledger size", msg);
            return exit::BAD_INPUT;
        }
    };
    let text = if args.json {
        say::json(&size_json::render(&report))
    } else {
        size_text::render(&report)
    };
    if let Err(e) = say::stdout(&text) {
        crate::stderr::line("vramledger size", format_args!("cannot write output: {e}"));
        return exit::BAD_INPUT;
    }
    report.exit_code()
}
