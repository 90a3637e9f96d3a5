//! One worker of a vLLM run (a process and its device) read from its journal: the driver
//! readings vLLM itself took, found by the stage boundaries (`init_snapshot` before the weights,
//! `after_profile` before "Available KV cache memory", `capture_model`'s two around the
//! captures), torch's reserved bytes at those points, and the inputs measured from them.

use vramledger_engines::log::vllm_startups::WorkerLines;
use vramledger_engines::log::{self, stage as st, Engine};
use vramledger_engines::sizing::vllm_budget::Bytes;
use vramledger_format::{Api, Kind, Owner};

use crate::journal::Journal;
use crate::ledger::boundaries::{self, StageBoundary};
use crate::ledger::process::{self, StageRow};
use crate::ledger::{points, OwnerBytes};

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

/// A program `cuMemGetInfo` reading: event index, free, total.
#[derive(Debug, Clone, Copy)]
struct Reading {
    index: usize,
    free: u64,
    total: u64,
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

fn reserved(o: &OwnerBytes) -> i64 {
    o.get(Owner::Torch) + o.get(Owner::TorchGraphPool)
}

/// Where in the journal the worker's inputs are read.
struct Marks<'b> {
    profiling: Option<&'b StageBoundary>,
    kv: Option<&'b StageBoundary>,
    init: Option<Reading>,
    after_profile: Option<Reading>,
    /// `capture_model`: the last reading before the first capture of the capture stage, the
    /// first after its last capture end.
    capture: Option<(Reading, Reading)>,
    /// The weight load stage's start, when the stage is `weight_load` itself.
    weight_span: Option<usize>,
}

impl<'b> Marks<'b> {
    /// `None` for a process that loads no weights (the EngineCore of TP > 1 has only a context).
    fn find(j: &Journal, device: i32, bounds: &'b [StageBoundary]) -> Option<Marks<'b>> {
        let readings = program_readings(j, device);
        let before = |at: usize| readings.iter().rev().find(|r| r.index < at).copied();
        let after = |at: usize| readings.iter().find(|r| r.index > at).copied();
        let load =
            first(bounds, st::WEIGHT_LOAD).or_else(|| first(bounds, st::MEMORY_PROFILING))?;
        let profiling = first(bounds, st::MEMORY_PROFILING);
        let kv = first(bounds, st::KV_CACHE);
        let init = before(load.index);
        let after_profile = kv.and_then(|k| before(k.index)).filter(|r| {
            profiling.is_some_and(|p| r.index > p.index) && init.is_some_and(|i| r.index > i.index)
        });
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
        Some(Marks {
            profiling,
            kv,
            init,
            after_profile,
            capture,
            weight_span: (load.name == st::WEIGHT_LOAD).then_some(load.index),
        })
    }
}

/// The inputs measured to the byte.
struct MeasuredInputs {
    total: Option<Input>,
    init_free: Option<Input>,
    non_torch: Option<Input>,
    cudagraph: Option<Input>,
    weights_reserved: Option<i64>,
}

impl MeasuredInputs {
    /// `None` when torch's books lack a point a reading needs.
    fn read(j: &Journal, device: i32, m: &Marks<'_>) -> Option<MeasuredInputs> {
        let mut at: Vec<usize> = Vec::new();
        for r in [m.init, m.after_profile].into_iter().flatten() {
            at.push(r.index);
        }
        if let (Some(w), Some(p)) = (m.weight_span, m.profiling) {
            at.push(w);
            at.push(p.index);
        }
        let held = points::owners_before(j, device, &at);
        let held_at = |i: usize| at.iter().position(|&a| a == i).map(|k| held[k]);
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let total = m.init.map(|r| {
            Input::new(
                Bytes::exact(r.total as i64),
                Basis::Measured,
                format!(
                    "the init snapshot's cuMemGetInfo total ({:.3} GiB)",
                    gib(r.total)
                ),
            )
        });
        let init_free = m.init.map(|r| {
            Input::new(
                Bytes::exact(r.free as i64),
                Basis::Measured,
                format!(
                    "the init snapshot: the process's last cuMemGetInfo before the weights ({:.3} GiB)",
                    gib(r.free)
                ),
            )
        });
        let non_torch = match (m.init, m.after_profile) {
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
        let cudagraph = m.capture.map(|(a, b)| {
            Input::new(
                Bytes::exact(a.free as i64 - b.free as i64),
                Basis::Measured,
                "capture_model's readings before the first capture and after the last",
            )
        });
        let weights_reserved = match (m.weight_span, m.profiling) {
            (Some(w), Some(p)) => Some(reserved(&held_at(p.index)?) - reserved(&held_at(w)?)),
            _ => None,
        };
        Some(MeasuredInputs {
            total,
            init_free,
            non_torch,
            cudagraph,
            weights_reserved,
        })
    }
}

/// The vLLM lines the journal recorded: stage lines and the sizing lines the tap keeps beside
/// them (engine lines).
fn recorded_lines(j: &Journal) -> WorkerLines {
    let mut lines = WorkerLines::default();
    for b in j.engine_lines().filter_map(log::classify) {
        if b.engine == Engine::Vllm {
            lines.observe(&b);
        }
    }
    lines
}

/// Reads one worker from its journal (`None` for a process without device memory).
pub(super) fn worker(j: &Journal) -> Option<Worker> {
    let books = process::replay(j);
    let dev = books
        .devices
        .iter()
        .max_by_key(|d| d.live_at_end.hooked().max(d.peak_total.bytes))?;
    let device = dev.device;
    let bounds = boundaries::derive(j);
    let marks = Marks::find(j, device, &bounds)?;
    let lines = recorded_lines(j);
    let captured_while_profiling = match (marks.profiling, marks.kv) {
        (Some(p), Some(k)) => {
            (p.index..k.index).any(|i| j.events[i].kind() == Some(Kind::CaptureBegin))
        }
        _ => false,
    };
    let measured = MeasuredInputs::read(j, device, &marks)?;
    let low_free = marks.kv.and_then(|k| {
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
        total: measured.total,
        init_free: measured.init_free,
        non_torch: measured.non_torch,
        cudagraph: measured.cudagraph,
        weights_reserved: measured.weights_reserved,
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
