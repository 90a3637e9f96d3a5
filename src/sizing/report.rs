//! What `size` found, as plain data for the outputs (`crate::output::size_text`,
//! `crate::output::size_json`): the SGLang reproduction with its breakdown and what-ifs, the
//! vLLM budget, or the defaults alone.

use vramledger_engines::sizing::defaults::Defaults;
use vramledger_engines::sizing::model::ModelGeometry;
use vramledger_engines::sizing::tokens::{SizingInput, SizingResult};
use vramledger_engines::sizing::Layout;

use super::inputs::{AfterPool, Measured, Origin, Settings, Sourced};
use super::vllm;

/// The model config and where it was found.
#[derive(Debug, Clone)]
pub struct ModelSource {
    pub geometry: ModelGeometry,
    pub path: String,
    pub origin: Origin,
    /// Which flag or file: "--model-config", "config.json of the logged model folder …".
    pub detail: String,
}

/// The default settings SGLang derives for a GPU.
#[derive(Debug, Clone)]
pub struct DefaultsReport {
    pub gpu_mem_mib: Sourced<f64>,
    pub layout: Layout,
    pub tp: u64,
    pub defaults: Defaults,
    /// The fraction the other recorded capacity gives, when it differs.
    pub alternative: Option<(Sourced<f64>, f64)>,
}

/// One "what if".
#[derive(Debug, Clone)]
pub struct WhatIf {
    pub change: String,
    pub assumption: Option<String>,
    pub mem_fraction_static: f64,
    pub cell_bytes: u64,
    pub tokens: Option<i64>,
    pub profiled_tokens: Option<i64>,
    pub token_change: Option<i64>,
    pub max_running_requests: Option<i64>,
    /// The startup failure SGLang would raise (message — inequality).
    pub error: Option<String>,
    pub smallest_mem_fraction_static: Option<f64>,
    /// Why this what-if could not be computed (missing input, a setting the layout lacks).
    pub unavailable: Option<String>,
}

/// The largest fraction that keeps the measured run-time need plus a margin.
#[derive(Debug, Clone)]
pub struct Recommendation {
    pub margin_bytes: i64,
    pub need_bytes: i64,
    pub low_free_bytes: i64,
    pub value: Option<f64>,
    pub tokens: Option<i64>,
    pub token_change: Option<i64>,
    /// Tokens with `--max-total-tokens` lifted (present when the cap binds).
    pub uncapped_tokens: Option<i64>,
    pub uncapped_token_change: Option<i64>,
    pub note: String,
}

/// Post-capture KV sizing emulated on the measurements.
#[derive(Debug, Clone)]
pub struct PostCaptureEmulation {
    pub layout: Layout,
    pub mem_fraction_static: Sourced<f64>,
    pub free_after_capture_bytes: i64,
    pub headroom_bytes: i64,
    pub backed_bytes: u64,
    pub budget_bytes: i64,
    /// What the budget alone buys (`budget // cell`), before the pre-capture cap.
    pub budget_tokens: i64,
    /// From exact bytes (a run) or printed values (a log).
    pub exact: bool,
    pub pre_capture_tokens: i64,
    pub tokens: i64,
    pub token_change: i64,
    pub max_running_requests: i64,
    /// The headroom is at least the free memory after capture: the budget is only the pages
    /// already backed, no pool to serve with.
    pub no_room: bool,
}

/// Post-capture KV sizing computed directly (`--free-after-capture-gib`): SGLang's
/// `compute_post_capture_kv_resize` on the pre-capture pool of this report.
#[derive(Debug, Clone)]
pub struct PostCaptureResize {
    pub layout: Layout,
    pub free_after_capture_gib: f64,
    /// `pool.post_capture_backed_bytes` (`--post-capture-backed-bytes`).
    pub backed_bytes: u64,
    pub decode_max_bs: u64,
    /// Decode graph max batch below the runner's max_running_requests: activation floor.
    pub eager_decode_gap: bool,
    pub activation_reserve_mb: f64,
    pub headroom_gib: f64,
    pub budget_bytes: i64,
    /// The VA reservation: the pre-capture count (`result.tokens`), the cap.
    pub pre_capture_tokens: i64,
    /// What SGLang runs with after the resize.
    pub tokens: i64,
    pub max_running_requests: i64,
    pub max_running_requests_reduced: Option<(i64, i64)>,
}

/// The run-time need after the KV pool against what was kept for it.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub after: AfterPool,
    /// `pre × (1 − f)`: what SGLang keeps out of the KV budget.
    pub headroom_bytes: i64,
}

/// One layout the line formats allow, and its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub layout: Layout,
    /// `max_total_num_tokens`, or `None` when SGLang would fail to start.
    pub tokens: Option<i64>,
    /// SGLang's failure message.
    pub error: Option<String>,
    /// Whether it reproduces what the engine reported (`None`: nothing reported).
    pub reproduced: Option<bool>,
    pub chosen: bool,
}

/// The reproduction of SGLang's sizing.
#[derive(Debug, Clone)]
pub struct SglangReport {
    pub layout: Sourced<Layout>,
    /// Every layout the line formats allowed and its answer, when there was more than one.
    pub layout_candidates: Vec<Candidate>,
    /// Those layouts size differently (the report says so, and which it kept).
    pub layout_ambiguous: bool,
    pub model: ModelSource,
    pub settings: Settings,
    pub measured: Measured,
    pub kv_dtype: String,
    pub context_len: Sourced<u64>,
    pub attn_tp: u64,
    pub cell_bytes: u64,
    pub cell_text: String,
    pub mem_fraction_static: Sourced<f64>,
    /// The fraction the 0.4.x model runner uses (multimodal × 0.9), when it differs.
    pub runner_fraction: f64,
    pub defaults: Option<DefaultsReport>,
    pub input: SizingInput,
    pub result: SizingResult,
    pub bounds: Option<(SizingResult, SizingResult)>,
    pub tolerance_tokens: i64,
    pub observed_tokens: Option<(i64, String)>,
    pub observed_profiled: Option<(i64, String)>,
    pub observed_failure: Option<(String, String)>,
    pub observed_post_capture_tokens: Option<i64>,
    /// Nothing after the weights says a pool was built or sizing failed.
    pub observed_stopped_after_weights: bool,
    pub reproduced: Option<bool>,
    pub implied_fraction: Option<(f64, f64)>,
    pub smallest_fraction: Option<f64>,
    pub pre_bytes: i64,
    pub available_bytes: i64,
    pub static_bytes: i64,
    pub headroom_bytes: i64,
    pub kv_bytes: i64,
    pub runtime: Option<Runtime>,
    pub what_ifs: Vec<WhatIf>,
    pub recommendation: Option<Recommendation>,
    pub post_capture: Vec<PostCaptureEmulation>,
    /// `--free-after-capture-gib` with post-capture sizing active: the final pool.
    pub post_capture_resize: Option<PostCaptureResize>,
    pub notes: Vec<String>,
}

/// What `size` found.
#[derive(Debug, Clone)]
pub enum SizeReport {
    Sglang(Box<SglangReport>),
    Vllm(Box<vllm::VllmReport>),
    /// No measurements: only the defaults SGLang would derive.
    DefaultsOnly(Box<DefaultsOnly>),
}

/// The defaults-only answer (no run, no log).
#[derive(Debug, Clone)]
pub struct DefaultsOnly {
    pub layout: Sourced<Layout>,
    pub defaults: DefaultsReport,
    pub cell_bytes: Option<u64>,
    pub model: Option<ModelSource>,
}

impl SizeReport {
    /// Exit code: 1 when the engine could not fit its KV pool, else 0.
    pub fn exit_code(&self) -> i32 {
        let fails = match self {
            SizeReport::Sglang(r) => r.result.error.is_some(),
            SizeReport::Vllm(r) => r.result.error.is_some(),
            SizeReport::DefaultsOnly(_) => false,
        };
        if fails {
            crate::exit::DOES_NOT_FIT
        } else {
            crate::exit::OK
        }
    }
}
