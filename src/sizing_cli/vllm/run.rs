//! A vLLM run's journals (and optionally its log), read into the inputs of 0.26's KV budget for
//! every worker, each labelled measured (to the byte, from the journal) or read from a printed
//! line (two decimals of GiB).
//!
//! Measured: the driver readings vLLM itself took — `init_snapshot` (the program's last
//! `cuMemGetInfo` before the weights), `after_profile` (its last before "Available KV cache
//! memory"), and `capture_model`'s two readings around the captures — and torch's reserved bytes
//! at those points (the caching allocator's segments, which the hooks see). So the total, the
//! initial free memory, the non-torch growth and the graphs' size are exact. torch's *allocated*
//! bytes (weights, activation peak) live inside the caching allocator: no driver call shows
//! them, so they come from vLLM's printed lines, or from what the printed budget leaves.

use std::path::Path;

use vramledger_engines::log::{self, event as ev, settings, stage as st, Boundary, Engine};
use vramledger_engines::sizing::vllm_budget::{Bytes, Printed};
use vramledger_format::{Api, Kind, Owner};

use super::EngineConfig;
use crate::journal::{self, Journal};
use crate::ledger::boundaries::{self, StageBoundary};
use crate::ledger::points;
use crate::ledger::process::{self, StageRow};

/// Where an input came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The journal, to the byte.
    Measured,
    /// A line vLLM printed (two decimals of GiB, or an exact integer).
    Logged,
    /// What the other inputs and the printed budget leave.
    Derived,
    /// vLLM's default (no line said otherwise).
    Default,
    /// A flag of this command.
    Given,
}

impl Basis {
    pub fn name(self) -> &'static str {
        match self {
            Basis::Measured => "measured",
            Basis::Logged => "logged",
            Basis::Derived => "derived",
            Basis::Default => "default",
            Basis::Given => "given",
        }
    }
}

/// One input: its bytes, where they came from, in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub bytes: Bytes,
    pub basis: Basis,
    pub detail: String,
}

impl Input {
    pub fn new(bytes: Bytes, basis: Basis, detail: impl Into<String>) -> Input {
        Input {
            bytes,
            basis,
            detail: detail.into(),
        }
    }
}

/// What the recognised vLLM lines of one worker say.
#[derive(Debug, Clone, Default)]
pub struct WorkerLines {
    pub weights_gib: Option<f64>,
    pub available_gib: Option<f64>,
    pub activation_gib: Option<f64>,
    /// The after-capture summary ("Free memory on device … --kv-cache-memory=…").
    pub summary: Option<log::LineNumbers>,
    pub estimate_gib: Option<f64>,
    pub profiled_graphs: bool,
    pub capture_took_gib: Option<f64>,
    /// "GPU KV cache size: N tokens" and its "Maximum concurrency for L tokens" (EngineCore).
    pub kv_tokens: Option<u64>,
    pub max_len: Option<u64>,
    pub lines: usize,
}

impl WorkerLines {
    fn observe(&mut self, b: &Boundary<'_>) {
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

    fn fill_from(&mut self, o: &WorkerLines) {
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

/// A program `cuMemGetInfo` reading: event index, free, total.
#[derive(Debug, Clone, Copy)]
struct Reading {
    index: usize,
    free: u64,
    total: u64,
}

/// One worker (a process and its device) of the run.
#[derive(Debug, Clone)]
pub struct Worker {
    pub pid: u32,
    pub rank: Option<u32>,
    pub device: i32,
    pub label: String,
    pub total: Option<Input>,
    pub init_free: Option<Input>,
    pub non_torch: Option<Input>,
    pub cudagraph: Option<Input>,
    /// torch's reserved growth over the weight load (an upper bound on the allocated weights).
    pub weights_reserved: Option<i64>,
    /// Graphs were captured inside `memory_profiling` (the V1 runner's estimate).
    pub captured_while_profiling: bool,
    pub lines: WorkerLines,
    pub stages: Vec<StageRow>,
    /// The lowest free memory from the KV-cache stage on: (bytes, stage name).
    pub low_free: Option<(u64, String)>,
    /// `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` from the recorded environment.
    pub estimate_env: Option<String>,
}

/// What the run says.
#[derive(Debug, Clone, Default)]
pub struct RunLines {
    pub workers: Vec<Worker>,
    pub config: EngineConfig,
    /// A settings line (engine config or non-default args) was seen.
    pub settings_seen: bool,
    /// Lines not tied to a worker (no pid prefix, or the EngineCore's): KV size, concurrency.
    pub global: WorkerLines,
    pub warnings: Vec<String>,
}

/// Does this run folder or journal hold a vLLM run (its recorded lines are vLLM's)?
pub fn is_vllm_run(path: &Path) -> bool {
    let Ok(files) = journal::find(path) else {
        return false;
    };
    let (mut vllm, mut sglang) = (0usize, 0usize);
    for f in files {
        let Ok(j) = journal::read(&f) else { continue };
        for e in j.events.iter().filter(|e| e.kind() == Some(Kind::Stage)) {
            let line = e.text.split_once('\n').map(|(_, l)| l);
            match line.and_then(log::classify).map(|b| b.engine) {
                Some(Engine::Vllm) => vllm += 1,
                Some(Engine::Sglang) => sglang += 1,
                None => {}
            }
        }
    }
    vllm > sglang
}

fn program_readings(j: &Journal, device: i32) -> Vec<Reading> {
    j.events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            e.kind() == Some(Kind::MemInfo)
                && e.api() == Some(Api::cuMemGetInfo_v2)
                && e.device == device
                && e.arg1 > 0
        })
        .map(|(i, e)| Reading {
            index: i,
            free: e.arg0,
            total: e.arg1,
        })
        .collect()
}

fn first<'a>(b: &'a [StageBoundary], name: &str) -> Option<&'a StageBoundary> {
    b.iter().find(|b| b.name == name)
}

fn reserved(o: &crate::ledger::OwnerBytes) -> i64 {
    o.get(Owner::Torch) + o.get(Owner::TorchGraphPool)
}

/// Reads one worker from its journal (`None` for a process without device memory).
fn worker(j: &Journal) -> Option<Worker> {
    let books = process::replay(j);
    let dev = books
        .devices
        .iter()
        .max_by_key(|d| d.live_at_end.hooked().max(d.peak_total.bytes))?;
    let device = dev.device;
    let bounds = boundaries::derive(j);
    let readings = program_readings(j, device);
    let before = |at: usize| readings.iter().rev().find(|r| r.index < at).copied();
    let after = |at: usize| readings.iter().find(|r| r.index > at).copied();
    // A worker loads weights; a process with only a context (the EngineCore of TP > 1) is not.
    let load = first(&bounds, st::WEIGHT_LOAD).or_else(|| first(&bounds, st::MEMORY_PROFILING))?;
    let profiling = first(&bounds, st::MEMORY_PROFILING);
    let kv = first(&bounds, st::KV_CACHE);
    let init = before(load.index);
    let after_profile = kv.and_then(|k| before(k.index)).filter(|r| {
        profiling.is_some_and(|p| r.index > p.index) && init.is_some_and(|i| r.index > i.index)
    });
    let mut lines = WorkerLines::default();
    // Stage lines and the sizing lines the tap keeps beside them (engine lines).
    for b in j.engine_lines().filter_map(log::classify) {
        if b.engine == Engine::Vllm {
            lines.observe(&b);
        }
    }
    // capture_model: the last reading before the first capture of the capture stage, the
    // first after its last capture end.
    let capture = bounds
        .iter()
        .position(|b| b.name.starts_with(st::GRAPH_CAPTURE))
        .and_then(|k| {
            let start = bounds[k].index;
            let stop = bounds.get(k + 1).map_or(j.events.len(), |b| b.index);
            let kinds =
                |want: Kind| (start..stop).filter(move |&i| j.events[i].kind() == Some(want));
            let first_begin = kinds(Kind::CaptureBegin).next()?;
            let last_end = kinds(Kind::CaptureEnd).next_back()?;
            Some((before(first_begin)?, after(last_end)?))
        });
    let captured_while_profiling = match (profiling, kv) {
        (Some(p), Some(k)) => {
            (p.index..k.index).any(|i| j.events[i].kind() == Some(Kind::CaptureBegin))
        }
        _ => false,
    };
    let mut at: Vec<usize> = Vec::new();
    for r in [init, after_profile].into_iter().flatten() {
        at.push(r.index);
    }
    let weight_span = (load.name == st::WEIGHT_LOAD).then_some(load.index);
    if let (Some(w), Some(p)) = (weight_span, profiling) {
        at.push(w);
        at.push(p.index);
    }
    let held = points::owners_before(j, device, &at);
    let held_at = |i: usize| at.iter().position(|&a| a == i).map(|k| held[k]);
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let total = init.map(|r| {
        Input::new(
            Bytes::exact(r.total as i64),
            Basis::Measured,
            format!(
                "the init snapshot's cuMemGetInfo total ({:.3} GiB)",
                gib(r.total)
            ),
        )
    });
    let init_free = init.map(|r| {
        Input::new(
            Bytes::exact(r.free as i64),
            Basis::Measured,
            format!(
                "the init snapshot: the process's last cuMemGetInfo before the weights ({:.3} GiB)",
                gib(r.free)
            ),
        )
    });
    let non_torch = match (init, after_profile) {
        (Some(a), Some(b)) => {
            let (ra, rb) = (held_at(a.index)?, held_at(b.index)?);
            let v = (a.free as i64 - b.free as i64) - (reserved(&rb) - reserved(&ra));
            Some(Input::new(
                Bytes::exact(v),
                Basis::Measured,
                "free memory lost from the init snapshot to the after-profile reading, minus \
                 torch's reserved growth",
            ))
        }
        _ => None,
    };
    let cudagraph = capture.map(|(a, b)| {
        Input::new(
            Bytes::exact(a.free as i64 - b.free as i64),
            Basis::Measured,
            "capture_model's readings before the first capture and after the last",
        )
    });
    let weights_reserved = match (weight_span, profiling) {
        (Some(w), Some(p)) => Some(reserved(&held_at(p.index)?) - reserved(&held_at(w)?)),
        _ => None,
    };
    let low_free = kv.and_then(|k| {
        let (free, i) = points::lowest_free_from(j, device, k.index)?;
        let stage = bounds
            .iter()
            .rev()
            .find(|b| b.index <= i)
            .map_or("?", |b| b.name.as_str());
        Some((free, stage.to_string()))
    });
    let rank = books.rank;
    let label = match rank {
        Some(r) => format!("rank {r} (pid {}, device {device})", books.pid),
        None => format!("pid {}, device {device}", books.pid),
    };
    Some(Worker {
        pid: books.pid,
        rank,
        device,
        label,
        total,
        init_free,
        non_torch,
        cudagraph,
        weights_reserved,
        captured_while_profiling,
        lines,
        stages: dev.stages.clone(),
        low_free,
        estimate_env: j
            .header
            .get("env.VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS")
            .map(str::to_string),
    })
}

/// Reads every journal of the run, and the log's lines (matched to workers by the pid of their
/// prefix; lines without one belong to every worker when there is one, else to the run).
pub fn read(path: &Path, log_text: Option<&str>) -> Result<RunLines, String> {
    // The journal policy (docs/journal.md): sizing claims exact bytes, so a damaged run gives
    // no answer rather than one from part of the records.
    let loaded = journal::load(path)?;
    if loaded.damaged() {
        let why: Vec<&str> = loaded
            .unreadable
            .iter()
            .chain(
                loaded
                    .journals
                    .iter()
                    .filter(|j| j.corrupt)
                    .flat_map(|j| &j.warnings),
            )
            .map(String::as_str)
            .collect();
        return Err(format!(
            "{} is damaged, so no exact sizing can be taken from it: {}",
            path.display(),
            why.join("; ")
        ));
    }
    let mut out = RunLines::default();
    out.warnings.extend(loaded.messages().cloned());
    for j in loaded.journals {
        let mut parts = settings::Assembler::default();
        let mut recorded = Vec::new();
        for l in j.engine_lines() {
            out.observe_config(l);
        }
        for e in &j.events {
            if e.kind() == Some(Kind::Warning) && e.api() == Some(Api::VramledgerSettings) {
                recorded.extend(parts.push(&e.text))
            }
        }
        recorded.extend(parts.finish());
        for a in recorded {
            out.observe_settings(&a);
        }
        match worker(&j) {
            Some(w) => out.workers.push(w),
            // The EngineCore of TP > 1: its lines (KV size, concurrency) are the run's.
            None => {
                for b in j.engine_lines().filter_map(log::classify) {
                    if b.engine == Engine::Vllm {
                        out.global.observe(&b);
                    }
                }
            }
        }
    }
    out.workers
        .retain(|w| w.lines.lines > 0 || w.init_free.is_some());
    out.workers
        .sort_by_key(|w| (w.rank.unwrap_or(u32::MAX), w.pid));
    if let Some(text) = log_text {
        for line in text.lines() {
            out.observe_config(line);
            for b in log::classify_each(line).filter(|b| b.engine == Engine::Vllm) {
                let pid = b.rank.pid;
                match out.workers.iter_mut().find(|w| pid == Some(w.pid)) {
                    Some(w) => w.lines.observe(&b),
                    None => out.global.observe(&b),
                }
            }
        }
    }
    let global = out.global.clone();
    if out.workers.len() == 1 {
        out.workers[0].lines.fill_from(&global);
    }
    for w in &mut out.workers {
        w.lines.kv_tokens = w.lines.kv_tokens.or(global.kv_tokens);
        w.lines.max_len = w.lines.max_len.or(global.max_len);
    }
    if out.workers.is_empty() {
        return Err(format!(
            "the run {} has no process with device memory and vLLM lines to size",
            path.display()
        ));
    }
    Ok(out)
}

impl RunLines {
    /// A settings record of the journal (the engine config, the non-default args, the model
    /// folder), as the tap kept it.
    fn observe_settings(&mut self, a: &settings::Assembled) {
        match a.kind {
            settings::SettingsKind::VllmNonDefaultArgs
            | settings::SettingsKind::VllmEngineConfig => self.observe_config(&a.line),
            settings::SettingsKind::ModelPath if self.config.model.is_none() => {
                self.config.model = Some(a.line.trim().to_string())
            }
            _ => {}
        }
        if a.cut || a.incomplete {
            self.warnings.push(format!(
                "a recorded {} line is {}: the settings after its end are unknown",
                a.kind.name(),
                if a.cut {
                    "cut at 64 KiB"
                } else {
                    "missing parts"
                }
            ));
        }
    }

    /// The settings lines: the engine config and the non-default args (from the journal's
    /// settings records or a log).
    fn observe_config(&mut self, line: &str) {
        if line.contains(" LLM engine (v") || line.contains("non-default args:") {
            self.settings_seen = true;
        }
        self.config.observe_raw(line);
    }

    /// The observed block count: "GPU KV cache size: N tokens" read back through
    /// `get_kv_cache_capacity` for `max_model_len` and `block_size`.
    pub fn observed_blocks(&self, max_model_len: u64, block_size: u64) -> Option<i64> {
        let tokens = self.workers.iter().find_map(|w| w.lines.kv_tokens)? as i64;
        let l = vramledger_engines::sizing::vllm_budget::Layout {
            page_size_bytes: 1,
            num_layers: 1,
            block_size,
            max_model_len,
        };
        let per_request = max_model_len.div_ceil(block_size.max(1)) as f64;
        let guess = (tokens as f64 * per_request / max_model_len.max(1) as f64).round() as i64;
        (guess - 2..=guess + 2)
            .find(|&b| vramledger_engines::sizing::vllm_budget::capacity(b, &l).0 == tokens)
    }
}
