//! What vLLM sizing answers, as plain data for the outputs (`crate::output::size_text`,
//! `crate::output::size_json`): one startup re-sized, and for a run every worker's budget, the
//! recommendation and the what-ifs.

use vramledger_engines::sizing::vllm::VllmResult;
use vramledger_engines::sizing::vllm_budget::Budget;

use super::worker::Input;
use crate::sizing::inputs::Sourced;

/// The reproduction of one vLLM startup.
#[derive(Debug, Clone)]
pub struct VllmReport {
    pub generation: &'static str,
    pub generation_reason: String,
    pub version: Option<String>,
    pub attempt: usize,
    pub attempts: usize,
    pub block_size: u64,
    pub dtype_size: u64,
    pub layers: u64,
    pub tp: Sourced<u64>,
    pub bytes_per_token: u64,
    pub max_model_len: Sourced<u64>,
    pub utilization: Option<Sourced<f64>>,
    pub total_bytes: Option<f64>,
    pub result: VllmResult,
    pub blocks_low: i64,
    pub blocks_high: i64,
    pub tokens: i64,
    pub tolerance_tokens: i64,
    pub cpu_blocks_observed: Option<u64>,
    pub observed_blocks: Option<i64>,
    pub observed_source: Option<String>,
    pub reproduced: Option<bool>,
    pub notes: Vec<String>,
    /// A run's per-worker breakdown, recommendation and what-ifs (`size RUN`).
    pub run: Option<Box<RunSizing>>,
}

/// One stage of the run-time need after the KV cache.
#[derive(Debug, Clone)]
pub struct NeedStage {
    pub name: String,
    pub delta_bytes: i64,
    pub owners: Vec<(String, i64)>,
}

/// One worker's sizing.
#[derive(Debug, Clone)]
pub struct RankSizing {
    pub label: String,
    pub pid: u32,
    pub rank: Option<u32>,
    /// In order: total, init free, requested, weights, activation peak, non-torch, CUDA-graph
    /// estimate, CUDA graphs (as captured).
    pub inputs: Vec<(&'static str, Input)>,
    pub budget: Budget,
    pub printed_available_gib: Option<f64>,
    /// vLLM's printed `--kv-cache-memory=` integers (fit requested, whole GPU).
    pub printed_suggestion: Option<(i64, i64)>,
    pub suggestion_reproduced: Option<bool>,
    /// The lowest free memory from the KV-cache stage on, and in which stage.
    pub low_free: Option<(u64, String)>,
    /// The stages after the KV cache up to that low point.
    pub need: Vec<NeedStage>,
    /// `--kv-cache-memory` that would leave the margin free at the measured low point.
    pub recommended_kv_cache_memory: Option<i64>,
}

/// One what-if row.
#[derive(Debug, Clone)]
pub struct WhatIfRow {
    pub setting: &'static str,
    pub value: f64,
    pub blocks: (i64, i64),
    pub tokens: (i64, i64),
    pub concurrency: (f64, f64),
    pub error: Option<String>,
    pub assumption: String,
}

/// vramledger's recommendation for the run.
#[derive(Debug, Clone)]
pub struct Recommendation {
    pub margin_bytes: i64,
    /// The smallest over workers.
    pub kv_cache_memory_bytes: i64,
    /// The largest two-decimal utilization whose budget stays at or below it.
    pub gpu_memory_utilization: Option<f64>,
    pub limited_by: String,
}

/// The run's part of a vLLM size report.
#[derive(Debug, Clone)]
pub struct RunSizing {
    pub ranks: Vec<RankSizing>,
    pub blocks: (i64, i64),
    pub tokens: (i64, i64),
    pub concurrency: (f64, f64),
    pub recommendation: Option<Recommendation>,
    pub what_ifs: Vec<WhatIfRow>,
    pub settings_line: bool,
}
