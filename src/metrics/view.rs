//! What the live outputs show of one process: its books (the same replay `report` makes,
//! [`crate::ledger::process::replay`]) cut down to a fixed, low-cardinality shape, plus what
//! only the raw events tell (failed allocations, device totals, the newest record's time).
//!
//! Pure: journal and books in, view out. Liveness comes from the caller.

use std::collections::BTreeMap;

use vramledger_format::{Kind, MemKind, Owner};

use super::labels;
use crate::journal::Journal;
use crate::ledger::process::ProcessBooks;
use crate::ledger::{OwnerBytes, REPORT_OWNERS};
use crate::snapshot::CUDA_ERROR_OUT_OF_MEMORY;

/// Distinct stage names per process shown as labels; later names are summed as `other`
/// (an engine has a dozen; a program marking a stage per request must not explode a TSDB).
pub const MAX_STAGE_NAMES: usize = 32;
/// The stage name that collects the names past [`MAX_STAGE_NAMES`].
pub const OTHER_STAGE: &str = "other";

/// The owners whose memory the hooks see (every report owner but `unattributed`).
pub fn hooked_owners() -> impl Iterator<Item = Owner> {
    REPORT_OWNERS
        .iter()
        .copied()
        .filter(|&o| o != Owner::Unattributed)
}

/// Who a process is, as labels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessLabels {
    pub host: String,
    pub pid: u32,
    pub run_id: String,
    /// The report's rank (the TP rank the engine printed, else `RANK`).
    pub rank: Option<u32>,
    /// The TP rank the engine printed, else `rank`.
    pub tp_rank: Option<u32>,
    pub pp_rank: Option<u32>,
    pub dp_rank: Option<u32>,
    /// A short program name ([`labels::command`]).
    pub command: String,
    /// The engine's model name ([`labels::model_name`]), filled across a run by the caller.
    pub model_name: Option<String>,
}

/// One stage name's figures, summed over its occurrences.
#[derive(Debug, Clone, PartialEq)]
pub struct StageDelta {
    pub name: String,
    /// Free memory at its starts minus at its ends.
    pub device_delta: i64,
    /// Hooked net bytes per owner, and `unattributed`.
    pub by_owner: OwnerBytes,
}

/// One device of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceView {
    pub device: i32,
    /// NVML index (dcgm-exporter's `gpu`), when known.
    pub gpu: Option<String>,
    /// `GPU-…` UUID (dcgm-exporter's `UUID`), when known.
    pub uuid: Option<String>,
    /// Held now per hooked owner.
    pub live: OwnerBytes,
    /// Highest held per hooked owner.
    pub peak: OwnerBytes,
    /// Highest hooked total.
    pub hooked_peak: i64,
    pub stages: Vec<StageDelta>,
    /// Σ unattributed over the stages.
    pub unattributed: i64,
    /// Free device memory at the newest point (a reading, or derived from one).
    pub free: Option<u64>,
    /// Device capacity from the newest reading that gave one.
    pub total: Option<u64>,
    /// Allocations of device memory that failed with out-of-memory.
    pub oom: u64,
    /// Every failed allocation (any error, any kind of memory).
    pub alloc_failures: u64,
}

/// One process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessView {
    pub labels: ProcessLabels,
    pub journal: String,
    /// When the journal was opened (unix ns), for ordering.
    pub start_unix_ns: u64,
    pub devices: Vec<DeviceView>,
    pub current_stage: String,
    /// Unix seconds when the current stage began (needs the header's clocks).
    pub stage_started_unix_s: Option<f64>,
    /// Unix seconds of the newest record (needs the header's clocks).
    pub last_record_unix_s: Option<f64>,
    /// Records read.
    pub records: u64,
    /// Still running (`None`: cannot tell, e.g. a journal from another host).
    pub running: Option<bool>,
    pub corrupt: bool,
}

/// Failed allocations and device totals per device, from the raw events.
#[derive(Debug, Default)]
struct Tally {
    oom: BTreeMap<i32, u64>,
    failures: BTreeMap<i32, u64>,
    total: BTreeMap<i32, u64>,
}

fn tally(j: &Journal) -> Tally {
    let mut t = Tally::default();
    for e in &j.events {
        match e.kind() {
            Some(Kind::AllocFailed) => {
                *t.failures.entry(e.device).or_default() += 1;
                if e.result == CUDA_ERROR_OUT_OF_MEMORY && e.mem() == MemKind::Device {
                    *t.oom.entry(e.device).or_default() += 1;
                }
            }
            Some(Kind::MemInfo | Kind::NvmlSample) if e.device >= 0 && e.arg1 > 0 => {
                t.total.insert(e.device, e.arg1);
            }
            _ => {}
        }
    }
    t
}

/// Monotonic ns → unix seconds through the header's pair of start clocks.
fn unix_s(j: &Journal, mono_ns: u64) -> Option<f64> {
    let unix0: u64 = j.header.get("start_unix_ns")?.parse().ok()?;
    let mono0: u64 = j.header.get("start_mono_ns")?.parse().ok()?;
    let ns = unix0 as i128 + mono_ns as i128 - mono0 as i128;
    (ns > 0).then_some(ns as f64 / 1e9)
}

fn stage_deltas(b: &crate::ledger::DeviceBooks) -> Vec<StageDelta> {
    let mut out: Vec<StageDelta> = Vec::new();
    for s in &b.stages {
        let known = out.iter().position(|d| d.name == s.name);
        let i = match known {
            Some(i) => i,
            None if out.len() + 1 < MAX_STAGE_NAMES => {
                out.push(StageDelta {
                    name: s.name.clone(),
                    device_delta: 0,
                    by_owner: OwnerBytes::default(),
                });
                out.len() - 1
            }
            None => match out.iter().position(|d| d.name == OTHER_STAGE) {
                Some(i) => i,
                None => {
                    out.push(StageDelta {
                        name: OTHER_STAGE.into(),
                        device_delta: 0,
                        by_owner: OwnerBytes::default(),
                    });
                    out.len() - 1
                }
            },
        };
        let d = &mut out[i];
        d.device_delta = d.device_delta.saturating_add(s.device_delta);
        for (o, v) in s.by_owner.iter() {
            d.by_owner.add(o, v);
        }
    }
    out
}

/// The view of one process from its journal and its books.
pub fn build(j: &Journal, books: &ProcessBooks, running: Option<bool>) -> ProcessView {
    let t = tally(j);
    let visible = j.header.get("cuda_visible_devices");
    let mut devices: Vec<DeviceView> = books
        .devices
        .iter()
        .map(|d| {
            let (gpu, uuid) = labels::gpu_of(visible, d.device);
            let mut live = d.live_at_end;
            live.set(Owner::Unattributed, 0);
            let mut peak = OwnerBytes::default();
            for (o, p) in &d.peak_by_owner {
                if *o != Owner::Unattributed {
                    peak.set(*o, p.bytes);
                }
            }
            DeviceView {
                device: d.device,
                gpu,
                uuid,
                live,
                peak,
                hooked_peak: d.peak_total.bytes,
                stages: stage_deltas(d),
                unattributed: d.unattributed(),
                free: d.end_free,
                total: t.total.get(&d.device).copied(),
                oom: t.oom.get(&d.device).copied().unwrap_or(0),
                alloc_failures: t.failures.get(&d.device).copied().unwrap_or(0),
            }
        })
        .collect();
    // Failures on a device that holds nothing yet (or an unknown one) still count.
    for (&dev, &n) in &t.failures {
        if devices.iter().any(|d| d.device == dev) {
            continue;
        }
        let (gpu, uuid) = labels::gpu_of(visible, dev);
        devices.push(DeviceView {
            device: dev,
            gpu,
            uuid,
            live: OwnerBytes::default(),
            peak: OwnerBytes::default(),
            hooked_peak: 0,
            stages: Vec::new(),
            unattributed: 0,
            free: None,
            total: t.total.get(&dev).copied(),
            oom: t.oom.get(&dev).copied().unwrap_or(0),
            alloc_failures: n,
        });
    }
    devices.sort_by_key(|d| d.device);
    // The stages as the report has them: stage records and the boundaries API events place
    // (vLLM's graph capture opens at its first stream capture, with no line of its own).
    let last_stage = books.stages.last();
    let current_stage = last_stage
        .map(|(name, _)| name.clone())
        .unwrap_or_else(|| "startup".into());
    // The same cap as the stage rows: a name past it is `other` here too.
    let mut first_names: Vec<&str> = vec!["startup"];
    for (name, _) in &books.stages {
        if first_names.len() + 1 >= MAX_STAGE_NAMES {
            break;
        }
        if !first_names.contains(&name.as_str()) {
            first_names.push(name);
        }
    }
    let current_stage = if first_names.contains(&current_stage.as_str()) {
        current_stage
    } else {
        OTHER_STAGE.to_string()
    };
    let last = j.events.iter().map(|e| e.t_ns).max();
    let cmdline = j.header.get("cmdline").unwrap_or("");
    ProcessView {
        labels: ProcessLabels {
            host: books.host.clone(),
            pid: books.pid,
            run_id: books.run_id.clone(),
            rank: books.rank,
            tp_rank: books.rank_tag.and_then(|r| r.tp).or(books.rank),
            pp_rank: books.rank_tag.and_then(|r| r.pp),
            dp_rank: books.rank_tag.and_then(|r| r.dp),
            command: labels::command(cmdline),
            model_name: labels::model_name(cmdline),
        },
        journal: books.path.clone(),
        start_unix_ns: books.start_unix_ns,
        devices,
        current_stage,
        stage_started_unix_s: last_stage.and_then(|&(_, t)| unix_s(j, t)),
        last_record_unix_s: last.and_then(|t| unix_s(j, t)),
        records: j.events.len() as u64,
        running,
        corrupt: j.corrupt,
    }
}

/// Orders processes as reports do (host, rank, start, pid), drops the older of two that
/// would carry the same labels (a pid reused within one run; said in the notes returned), and
/// fills model names ([`fill_model_names`]).
pub fn arrange(views: &mut Vec<ProcessView>, model_name: Option<&str>) -> Vec<String> {
    let key = |v: &ProcessView| {
        (
            v.labels.host.clone(),
            v.labels.rank.unwrap_or(u32::MAX),
            v.start_unix_ns,
            v.labels.pid,
        )
    };
    views.sort_by_key(key);
    let mut notes = Vec::new();
    let mut newest: BTreeMap<(String, String, u32), usize> = BTreeMap::new();
    for (i, v) in views.iter().enumerate() {
        let id = (v.labels.run_id.clone(), v.labels.host.clone(), v.labels.pid);
        match newest.get(&id) {
            Some(&j) if views[j].start_unix_ns >= v.start_unix_ns => {}
            _ => {
                newest.insert(id, i);
            }
        }
    }
    let keep: std::collections::BTreeSet<usize> = newest.values().copied().collect();
    let mut i = 0;
    views.retain(|v| {
        let kept = keep.contains(&i);
        if !kept {
            notes.push(format!(
                "{}: pid {} of run {} on {} has a newer journal; only that one is shown",
                v.journal, v.labels.pid, v.labels.run_id, v.labels.host
            ));
        }
        i += 1;
        kept
    });
    fill_model_names(views, model_name);
    notes
}

/// Gives every process of a run the model name one of them was launched with (SGLang's and
/// vLLM's workers are spawned without the launch flags), unless `given` overrides it.
pub fn fill_model_names(views: &mut [ProcessView], given: Option<&str>) {
    if let Some(name) = given {
        for v in views.iter_mut() {
            v.labels.model_name = Some(name.to_string());
        }
        return;
    }
    let mut by_run: BTreeMap<String, String> = BTreeMap::new();
    for v in views.iter() {
        if let Some(m) = v
            .labels
            .model_name
            .as_ref()
            .filter(|_| !v.labels.run_id.is_empty())
        {
            by_run
                .entry(v.labels.run_id.clone())
                .or_insert_with(|| m.clone());
        }
    }
    for v in views.iter_mut() {
        if v.labels.model_name.is_none() && !v.labels.run_id.is_empty() {
            v.labels.model_name = by_run.get(&v.labels.run_id).cloned();
        }
    }
}
