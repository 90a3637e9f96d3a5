//! What a vLLM log says about each startup: the numbers its memory-profiling lines print
//! ([`Attempt`], one per startup; a model reloaded after a failure opens a new one at its
//! "Model loading took" line) and the engine-config and non-default-args lines
//! ([`EngineConfig`]); and, for a run, what each worker's lines say about its budget
//! ([`WorkerLines`]). Every GiB figure vLLM prints has two decimals.

use super::{event as ev, Boundary, LineNumbers};
use crate::sizing::vllm_budget::Printed;

/// One startup's numbers, as printed.
#[derive(Debug, Clone, Default)]
pub struct Attempt {
    pub loaded: bool,
    pub total_gib: Option<f64>,
    pub utilization: Option<f64>,
    pub weights_gib: Option<f64>,
    pub non_torch_gib: Option<f64>,
    pub activation_gib: Option<f64>,
    /// V0 "the rest of the memory reserved for KV Cache is".
    pub kv_rest_gib: Option<f64>,
    /// V1 "Available KV cache memory" (or the specified `kv_cache_memory_bytes`).
    pub available_kv_gib: Option<f64>,
    pub gpu_blocks: Option<u64>,
    pub cpu_blocks: Option<u64>,
    pub kv_tokens: Option<u64>,
    pub max_len: Option<u64>,
    pub failure: Option<String>,
}

impl Attempt {
    /// Whether the startup printed its KV budget (V0 breakdown or V1 available memory).
    pub fn has_budget(&self) -> bool {
        self.kv_rest_gib.is_some() || self.available_kv_gib.is_some()
    }
}

/// The engine line ("Initializing a V0 LLM engine (v0.7.2) with config: …") and the
/// non-default args line, read as text.
#[derive(Debug, Clone, Default)]
pub struct EngineConfig {
    pub generation: Option<&'static str>,
    pub version: Option<String>,
    pub max_seq_len: Option<u64>,
    pub tp: Option<u64>,
    pub dtype: Option<String>,
    pub kv_cache_dtype: Option<String>,
    pub utilization: Option<f64>,
    /// `model='…'` of the engine config line (the model folder).
    pub model: Option<String>,
    /// `'max_model_len': N` of the non-default args.
    pub max_model_len: Option<u64>,
    /// `'block_size': N` of the non-default args.
    pub block_size: Option<u64>,
    /// `'kv_cache_memory_bytes': N` of the non-default args (profiling skipped).
    pub kv_cache_memory_bytes: Option<u64>,
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(key)? + key.len();
    let rest = &line[at..];
    let end = rest.find([',', ' ', '}', ')']).unwrap_or(rest.len());
    Some(rest[..end].trim_matches(|c| c == '\'' || c == '"'))
}

impl EngineConfig {
    /// Reads the engine-config and non-default-args lines (not part of the stage grammar).
    pub fn observe_raw(&mut self, line: &str) {
        if let Some(at) = line.find(" LLM engine (v") {
            self.generation = Some(if line[..at].ends_with("V0") {
                "V0"
            } else {
                "V1"
            });
            self.version = field(line, " LLM engine (").map(str::to_string);
            self.max_seq_len = field(line, "max_seq_len=").and_then(|v| v.parse().ok());
            self.tp = field(line, "tensor_parallel_size=").and_then(|v| v.parse().ok());
            self.dtype = field(line, " dtype=").map(str::to_string);
            self.kv_cache_dtype = field(line, "kv_cache_dtype=").map(str::to_string);
            self.model = field(line, "model=").map(str::to_string);
        }
        if line.contains("non-default args:") {
            if let Some(u) = field(line, "'gpu_memory_utilization': ") {
                self.utilization = u.parse().ok();
            }
            let int = |key: &str| field(line, key).and_then(|v| v.parse().ok());
            self.max_model_len = int("'max_model_len': ").or(self.max_model_len);
            self.block_size = int("'block_size': ").or(self.block_size);
            self.kv_cache_memory_bytes =
                int("'kv_cache_memory_bytes': ").or(self.kv_cache_memory_bytes);
        }
    }
}

/// Adds one vLLM line to the attempts.
pub fn observe(attempts: &mut Vec<Attempt>, b: &Boundary<'_>) {
    if b.event == ev::LOAD_MODEL_END && attempts.last().is_some_and(|a| a.loaded) {
        attempts.push(Attempt::default());
    }
    if attempts.is_empty() {
        attempts.push(Attempt::default());
    }
    let a = attempts.last_mut().expect("pushed above");
    let n = &b.numbers;
    let set = |slot: &mut Option<f64>, v: Option<f64>| {
        if v.is_some() {
            *slot = v;
        }
    };
    match b.event {
        ev::LOAD_MODEL_END => a.loaded = true,
        ev::MEMORY_BUDGET => {
            set(&mut a.total_gib, n.total_gpu_gib);
            set(&mut a.utilization, n.gpu_memory_utilization);
        }
        ev::MEMORY_PROFILE_RESULT => {
            set(&mut a.weights_gib, n.weights_gib);
            set(&mut a.non_torch_gib, n.non_torch_gib);
            set(&mut a.activation_gib, n.activation_peak_gib);
            set(&mut a.kv_rest_gib, n.kv_cache_gib);
        }
        ev::AVAILABLE_KV_CACHE_MEMORY | ev::KV_CACHE_MEMORY_SPECIFIED => {
            set(&mut a.available_kv_gib, n.kv_cache_gib)
        }
        ev::KV_CACHE_BLOCKS => {
            a.gpu_blocks = n.gpu_blocks.or(a.gpu_blocks);
            a.cpu_blocks = n.cpu_blocks.or(a.cpu_blocks);
        }
        ev::KV_CACHE_SIZE => {
            a.kv_tokens = n.tokens.or(a.kv_tokens);
            a.max_len = n.context_len.or(a.max_len);
        }
        ev::MAX_CONCURRENCY => a.max_len = n.context_len.or(a.max_len),
        ev::NO_KV_MEMORY | ev::KV_CACHE_TOO_SMALL => a.failure = Some(b.event.to_string()),
        _ => {}
    }
}

/// What the recognised vLLM lines of one worker say.
#[derive(Debug, Clone, Default)]
pub struct WorkerLines {
    pub weights_gib: Option<f64>,
    pub available_gib: Option<f64>,
    pub activation_gib: Option<f64>,
    /// The after-capture summary ("Free memory on device … --kv-cache-memory=…").
    pub summary: Option<LineNumbers>,
    pub estimate_gib: Option<f64>,
    pub profiled_graphs: bool,
    pub capture_took_gib: Option<f64>,
    /// "GPU KV cache size: N tokens" and its "Maximum concurrency for L tokens" (EngineCore).
    pub kv_tokens: Option<u64>,
    pub max_len: Option<u64>,
    pub lines: usize,
}

impl WorkerLines {
    /// Adds one vLLM line of this worker.
    pub fn observe(&mut self, b: &Boundary<'_>) {
        let n = &b.numbers;
        self.lines += 1;
        match b.event {
            ev::LOAD_MODEL_END => self.weights_gib = n.mem_usage_gib.or(self.weights_gib),
            ev::AVAILABLE_KV_CACHE_MEMORY => self.available_gib = n.kv_cache_gib,
            ev::MEMORY_PROFILING_END => {
                self.activation_gib = n.activation_peak_gib.or(self.activation_gib)
            }
            ev::KV_CACHE_MEMORY_SUGGESTION => {
                self.summary = Some(*n);
                self.activation_gib = n.activation_peak_gib.or(self.activation_gib);
            }
            ev::CUDA_GRAPH_ESTIMATE => self.estimate_gib = n.reserve_gib,
            ev::CUDA_GRAPH_PROFILING => self.profiled_graphs = true,
            ev::CAPTURE_END => self.capture_took_gib = n.mem_usage_gib,
            ev::KV_CACHE_SIZE => {
                self.kv_tokens = n.tokens.or(self.kv_tokens);
                self.max_len = n.context_len.or(self.max_len);
            }
            ev::MAX_CONCURRENCY => self.max_len = n.context_len.or(self.max_len),
            _ => {}
        }
    }

    /// Fills what this worker's lines lack from `o` (the run's lines without a worker).
    pub fn fill_from(&mut self, o: &WorkerLines) {
        self.weights_gib = self.weights_gib.or(o.weights_gib);
        self.available_gib = self.available_gib.or(o.available_gib);
        self.activation_gib = self.activation_gib.or(o.activation_gib);
        self.summary = self.summary.or(o.summary);
        self.estimate_gib = self.estimate_gib.or(o.estimate_gib);
        self.profiled_graphs |= o.profiled_graphs;
        self.capture_took_gib = self.capture_took_gib.or(o.capture_took_gib);
        self.kv_tokens = self.kv_tokens.or(o.kv_tokens);
        self.max_len = self.max_len.or(o.max_len);
    }

    /// The printed values that constrain the budget.
    pub fn printed(&self) -> Printed {
        Printed {
            available_gib: self.available_gib,
            suggestion_bytes: self.summary.and_then(|s| s.kv_cache_memory_bytes),
            suggestion_full_bytes: self.summary.and_then(|s| s.kv_cache_memory_full_bytes),
        }
    }
}
