//! What SGLang's GPU-dependent defaults depend on: the settings [`DefaultsInput`] gathers and
//! their enums. Its own room so that `defaults`, `graphs` and `reserve` all read it from below.

use super::layout::Layout;
use super::model::VisionDims;

/// `--speculative-algorithm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speculative {
    None,
    /// EAGLE, EAGLE3 and other draft-model algorithms except the two below.
    Eagle,
    Standalone,
    Ngram,
}

/// `--disaggregation-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disaggregation {
    Null,
    Prefill,
    Decode,
}

/// The device platform SGLang runs on (`is_cuda()`, `is_hip()`, `is_npu()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Cuda,
    /// ROCm (AMD Instinct).
    Hip,
    /// Ascend NPU (`--device npu`).
    Npu,
}

/// Prefill CUDA-graph backend (0.5.18+ `cuda_graph_config.prefill.backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefillGraph {
    Disabled,
    Full,
    /// Breakable CUDA graph ("BCG"), the 0.5.18+ default on CUDA.
    Breakable,
    /// torch.compile piecewise graphs, the 0.5.18+ default on other platforms (HIP).
    TcPiecewise,
}

/// What the defaults depend on. [`DefaultsInput::new`] fills SGLang's own defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct DefaultsInput {
    pub layout: Layout,
    /// GPU capacity in MiB (`None`: unknown, SGLang's fallback applies).
    pub gpu_mem_mib: Option<f64>,
    pub tp_size: u64,
    pub pp_size: u64,
    pub dp_size: u64,
    pub enable_dp_attention: bool,
    /// `--chunked-prefill-size` if given (`<= 0` disables chunking).
    pub chunked_prefill_size: Option<i64>,
    /// `--max-prefill-tokens` (SGLang default 16384).
    pub max_prefill_tokens: i64,
    /// `--cuda-graph-max-bs` (decode graph max batch size) if given.
    pub cuda_graph_max_bs: Option<u64>,
    pub max_running_requests: Option<u64>,
    pub max_total_tokens: Option<i64>,
    pub speculative: Speculative,
    pub speculative_num_draft_tokens: Option<u64>,
    pub disaggregation: Disaggregation,
    /// Decode CUDA graph on (`--disable-cuda-graph` off).
    pub decode_graph: bool,
    /// The platform: its tiers (NPU) and its prefill-graph rules (`graphs`).
    pub platform: Platform,
    /// 0.5.18+: the prefill graph backend when set (a flag, or logged); `None`: SGLang's
    /// default for the platform and its compatibility rules decide (`graphs`).
    pub prefill_graph: Option<PrefillGraph>,
    /// 0.5.18+: an explicit prefill graph batch-size list length (else SGLang's generator).
    pub prefill_graph_bs_len: Option<usize>,
    /// 0.5.12: piecewise CUDA graphs on or off when known (a flag, or logged); `None`: SGLang's
    /// `_handle_piecewise_cuda_graph` rules decide. When on, their token sizes are priced.
    pub piecewise_graph: Option<bool>,
    /// 0.5.12: an explicit `len(piecewise_cuda_graph_tokens)` (else SGLang's generator up to
    /// `piecewise_cuda_graph_max_tokens`).
    pub piecewise_tokens_len: Option<usize>,
    /// MLA attention backend (DeepSeek, Kimi).
    pub mla: bool,
    /// `--moe-a2a-backend deepep`.
    pub deepep: bool,
    /// 0.5.18+: post-capture KV sizing planned (`SGLANG_ENABLE_POST_CAPTURE_KV_SIZING` and its
    /// eligibility conditions).
    pub post_capture_kv_sizing: bool,
    /// The model is multimodal and not run language-only (SGLang's `is_vlm` gate).
    pub multimodal: bool,
    /// `vision_config` sizes; `None` leaves the fraction unchanged (no `vision_config`).
    pub vision: Option<VisionDims>,
    /// 0.5.23: XPU device (+2 GiB; its position among the terms is not confirmed: added last).
    pub xpu: bool,
    /// Model path contains "llama-2" (0.5.23 caps the prefill graph max_bs at 4096).
    pub llama2: bool,
}

impl DefaultsInput {
    /// SGLang's defaults for everything but the GPU, TP size and layout.
    pub fn new(layout: Layout, gpu_mem_mib: Option<f64>, tp_size: u64) -> DefaultsInput {
        DefaultsInput {
            layout,
            gpu_mem_mib,
            tp_size,
            pp_size: 1,
            dp_size: 1,
            enable_dp_attention: false,
            chunked_prefill_size: None,
            max_prefill_tokens: 16384,
            cuda_graph_max_bs: None,
            max_running_requests: None,
            max_total_tokens: None,
            speculative: Speculative::None,
            speculative_num_draft_tokens: None,
            disaggregation: Disaggregation::Null,
            decode_graph: true,
            platform: Platform::Cuda,
            prefill_graph: None,
            prefill_graph_bs_len: None,
            piecewise_graph: None,
            piecewise_tokens_len: None,
            mla: false,
            deepep: false,
            post_capture_kv_sizing: false,
            multimodal: false,
            vision: None,
            xpu: false,
            llama2: false,
        }
    }
}
