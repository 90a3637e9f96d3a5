//! Snapshots: every live allocation of a run at one point in time, and the history up to it.
//!
//! A point is a position in a journal: the records before it have been replayed. It is chosen
//! per process (and, for [`At::Peak`], per device):
//! - [`At::End`]: the end of each journal;
//! - [`At::Stage`]: the end of the first span of that stage (where the next stage begins);
//! - [`At::Peak`]: per device, just after the record that took the hooked total (hooked bytes
//!   plus the measured context, as the ledger's `peak.total`) to its highest value; a
//!   process's own books (pinned host, virtual, peer, managed) at the highest sum over its
//!   devices;
//! - [`At::Oom`]: the first failed allocation with `CUDA_ERROR_OUT_OF_MEMORY` (2).
//!
//! The replay uses the same physical rules as the ledger ([`LiveBooks`], shared with the shim)
//! and the same stage spans, so totals agree with `vramledger report` by construction. What
//! `LiveBooks` does not keep (the stage and time of each allocating record, VMM mapping
//! ranges, pinned host and reserved address ranges) is mirrored here, keyed by address or
//! handle. Pure: journals in, data out; no file is touched.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use vramledger_format::{Kind, LiveBooks, MemKind, Owner};

use crate::journal::Journal;
use crate::ledger::{self, OwnerBytes};

mod replay;

use replay::Replay;

/// `CUDA_ERROR_OUT_OF_MEMORY`.
pub const CUDA_ERROR_OUT_OF_MEMORY: i32 = 2;

/// The owners a snapshot shows, in order: every hooked owner and the measured context.
pub const SNAPSHOT_OWNERS: [Owner; 6] = [
    Owner::Torch,
    Owner::TorchGraphPool,
    Owner::Nccl,
    Owner::Direct,
    Owner::Vmm,
    Owner::Context,
];

/// Which point in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    End,
    Stage(String),
    Peak,
    Oom,
}

impl At {
    /// `end`, `stage`, `peak` or `oom`.
    pub fn mode(&self) -> &'static str {
        match self {
            At::End => "end",
            At::Stage(_) => "stage",
            At::Peak => "peak",
            At::Oom => "oom",
        }
    }

    /// For humans: `at the end`, `at the end of stage kv_pool`, ...
    pub fn describe(&self) -> String {
        match self {
            At::End => "at the end".into(),
            At::Stage(s) => format!("at the end of stage {s}"),
            At::Peak => "at the peak".into(),
            At::Oom => "at the first out-of-memory failure".into(),
        }
    }
}

/// Why no snapshot can be taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotError {
    /// No process has a stage of that name.
    UnknownStage { stage: String, known: Vec<String> },
    /// No allocation failed with out-of-memory in the run.
    NoOom,
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::UnknownStage { stage, known } => write!(
                f,
                "no process has a stage named {stage:?}; the stages of this run are: {}",
                known.join(", ")
            ),
            SnapshotError::NoOom => write!(
                f,
                "no allocation failed with out-of-memory (CUDA_ERROR_OUT_OF_MEMORY) in this run; nothing to snapshot --at-oom"
            ),
        }
    }
}

impl std::error::Error for SnapshotError {}

/// Where a snapshot was taken in one journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    /// Records replayed (the point is just before record `events`).
    pub events: usize,
    /// CLOCK_MONOTONIC ns of the point.
    pub t_ns: u64,
    /// The stage running at the point.
    pub stage: String,
}

/// What kind of allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    /// `cuMemAlloc` family (also managed memory): an address.
    Alloc,
    /// A VMM physical handle (`cuMemCreate`, or a peer's imported).
    Vmm,
    /// A stream-ordered pool: its last sampled reserved bytes.
    Pool,
    /// Pinned host memory (`cuMemHostAlloc`, `cuMemHostRegister`, ...).
    Host,
}

impl ItemKind {
    pub fn name(self) -> &'static str {
        match self {
            ItemKind::Alloc => "alloc",
            ItemKind::Vmm => "vmm",
            ItemKind::Pool => "pool",
            ItemKind::Host => "host",
        }
    }
}

/// One VMM mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub address: u64,
    pub bytes: u64,
    /// Offset into the handle.
    pub offset: u64,
}

/// One live allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub kind: ItemKind,
    /// For `alloc` and `host`.
    pub address: Option<u64>,
    /// For `vmm` (the physical handle) and `pool`.
    pub handle: Option<u64>,
    pub device: i32,
    pub bytes: u64,
    pub owner: Owner,
    pub mem: MemKind,
    /// Module file name (empty when unknown).
    pub module: String,
    /// Stage in which the allocating record was written.
    pub stage: String,
    /// CLOCK_MONOTONIC ns of the allocating record.
    pub t_ns: u64,
    /// For `vmm`: where the handle is mapped now.
    pub mappings: Vec<Mapping>,
    /// PyTorch's pool id of `torch` and `torch_graph_pool` memory when the journal records it
    /// (the Python hooks; `(0, 0)` for the default pool); `None` when it does not say.
    pub pool: Option<(u64, u64)>,
}

/// One virtual address reservation (never VRAM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub address: u64,
    pub bytes: u64,
    pub device: i32,
    pub owner: Owner,
    pub module: String,
    pub stage: String,
    pub t_ns: u64,
}

/// The measured context of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextHeld {
    pub bytes: u64,
    /// Stage and time of the first context record that measured bytes.
    pub stage: String,
    pub t_ns: u64,
}

/// Bytes live at the point that were allocated in one stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageTotal {
    pub stage: String,
    pub by_owner: OwnerBytes,
}

/// What happened to device memory, in journal order (for timelines and memory_viz traces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `cuMemAlloc` family.
    Alloc,
    /// Its free.
    Free,
    /// A device VMM handle mapped.
    Map,
    /// That mapping removed.
    Unmap,
}

/// One history entry of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    pub action: Action,
    pub addr: u64,
    pub bytes: u64,
    /// Owner and module of the allocation (also on frees and unmaps).
    pub owner: Owner,
    pub module: String,
    /// The stage running when this record was written.
    pub stage: String,
    /// CLOCK_MONOTONIC ns of the record.
    pub t_ns: u64,
    /// The record's index in its journal.
    pub index: usize,
}

/// Bytes held per owner (context included) after a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineSample {
    /// The journal's clock made non-decreasing in journal order (a record's time is read
    /// before its slot is taken, so neighbours can be a few µs out of order).
    pub t_ns: u64,
    pub by_owner: OwnerBytes,
}

/// A free-memory reading (`cuMemGetInfo` or NVML) of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreeReading {
    /// Non-decreasing clock, as [`TimelineSample::t_ns`].
    pub t_ns: u64,
    pub free_bytes: u64,
}

/// A failed allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub device: i32,
    pub requested_bytes: u64,
    pub owner: Owner,
    pub module: String,
    pub api: String,
    pub result: i32,
    pub stage: String,
    /// CLOCK_MONOTONIC ns of the record.
    pub t_ns: u64,
    /// Non-decreasing clock, as [`TimelineSample::t_ns`].
    pub clock_ns: u64,
    /// The record's index in its journal.
    pub index: usize,
    /// Free memory of the device then: the reading taken right after the failure, else the
    /// last reading before it corrected by the hooked bytes moved since.
    pub free_bytes: Option<u64>,
}

/// One device of one process at its point.
#[derive(Debug, Clone)]
pub struct DeviceSnapshot {
    pub device: i32,
    pub point: Point,
    /// For [`At::Peak`]: the hooked total at the point.
    pub peak_bytes: Option<i64>,
    /// Bytes held per owner (hooked, and the measured context).
    pub by_owner: OwnerBytes,
    /// Bytes live at the point by the stage that allocated them, in stage order (stages
    /// with nothing live left out).
    pub by_stage: Vec<StageTotal>,
    pub context: Option<ContextHeld>,
    /// Free memory at the point, from the last reading and the hooked bytes moved since.
    pub free_bytes: Option<u64>,
    /// Live device memory: allocations, VMM handles, pools.
    pub allocations: Vec<Item>,
    /// Device memory history up to the point.
    pub history: Vec<HistoryEntry>,
    /// Bytes held per owner after every change up to the point.
    pub timeline: Vec<TimelineSample>,
    /// Free-memory readings up to the point.
    pub free_readings: Vec<FreeReading>,
    /// Out-of-memory failures on this device up to the point (the one at the point included).
    pub failures: Vec<Failure>,
}

impl DeviceSnapshot {
    /// Σ over owners.
    pub fn total_bytes(&self) -> i64 {
        self.by_owner.hooked()
    }
}

/// A stage span, clipped to the process's point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageSpan {
    pub name: String,
    /// Non-decreasing clock, as [`TimelineSample::t_ns`].
    pub start_ns: u64,
    pub end_ns: u64,
}

/// One process at its point.
#[derive(Debug, Clone)]
pub struct ProcessSnapshot {
    pub journal: String,
    pub host: String,
    pub pid: u32,
    pub run_id: String,
    pub rank: Option<u32>,
    /// Wall clock at the journal start (header `start_unix_ns`).
    pub start_unix_ns: u64,
    /// The CLOCK_MONOTONIC reading of that same moment (header `start_mono_ns`, else the
    /// first record's time).
    pub start_mono_ns: u64,
    /// The first record's time (CLOCK_MONOTONIC ns).
    pub first_t_ns: u64,
    /// Where the process's own books (host, virtual, peer, managed) were taken.
    pub point: Point,
    /// Stages up to the point.
    pub stages: Vec<StageSpan>,
    pub devices: Vec<DeviceSnapshot>,
    pub host_pinned: Vec<Item>,
    pub managed: Vec<Item>,
    /// Peers' memory imported or opened here (not local VRAM).
    pub peer: Vec<Item>,
    pub reservations: Vec<Reservation>,
    /// For [`At::Oom`]: the failure the snapshot was taken at.
    pub oom: Option<Failure>,
    /// Stream-capture windows begun before the point, in journal order.
    pub captures: Vec<CaptureWindow>,
}

/// One stream capture (`capture_begin` to `capture_end` on the same stream and device).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureWindow {
    pub device: i32,
    /// The captured stream.
    pub stream: u64,
    /// Record indices of its begin and end (`None`: still open at the point).
    pub begin: usize,
    pub end: Option<usize>,
}

impl ProcessSnapshot {
    /// The ordinal (1-based, in journal order) of the innermost capture window open on
    /// `device` at record `index`: what PyTorch's private pool id is made from.
    pub fn capture_at(&self, device: i32, index: usize) -> Option<usize> {
        self.captures
            .iter()
            .enumerate()
            .filter(|(_, c)| c.device == device || c.device < 0)
            .filter(|(_, c)| c.begin < index && c.end.is_none_or(|e| e > index))
            .map(|(k, _)| k + 1)
            .next_back()
    }
}

/// The capture windows of the first `upto` records.
fn capture_windows(j: &Journal, upto: usize) -> Vec<CaptureWindow> {
    let mut out: Vec<CaptureWindow> = Vec::new();
    for (i, e) in j.events.iter().enumerate().take(upto) {
        match e.kind() {
            Some(Kind::CaptureBegin) if e.result == 0 => out.push(CaptureWindow {
                device: e.device,
                stream: e.handle,
                begin: i,
                end: None,
            }),
            Some(Kind::CaptureEnd) => {
                if let Some(c) = out
                    .iter_mut()
                    .rev()
                    .find(|c| c.end.is_none() && c.stream == e.handle && c.device == e.device)
                {
                    c.end = Some(i);
                }
            }
            _ => {}
        }
    }
    out
}

impl ProcessSnapshot {
    /// Nanoseconds on a clock shared by every process of the run (wall clock at the journal
    /// start plus monotonic time since), for a monotonic time `t_ns` of this process.
    pub fn wall_ns(&self, t_ns: u64) -> i128 {
        self.start_unix_ns as i128 + t_ns as i128 - self.start_mono_ns as i128
    }
}

/// A process left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub journal: String,
    pub pid: u32,
    pub reason: String,
}

/// A run at one point.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub at: At,
    /// Ordered by host, rank, start time, pid (as the report).
    pub processes: Vec<ProcessSnapshot>,
    pub skipped: Vec<Skipped>,
    /// The journals' own warnings.
    pub warnings: Vec<String>,
}

/// Takes a snapshot of every journal at `at`.
pub fn take(journals: &[Journal], at: &At) -> Result<Snapshot, SnapshotError> {
    let mut processes = Vec::new();
    let mut skipped = Vec::new();
    for j in journals {
        match take_process(j, at) {
            Ok(p) => processes.push(p),
            Err(reason) => skipped.push(Skipped {
                journal: j.path.display().to_string(),
                pid: j.pid().unwrap_or(0),
                reason,
            }),
        }
    }
    if processes.is_empty() && !journals.is_empty() {
        match at {
            At::Stage(stage) => {
                return Err(SnapshotError::UnknownStage {
                    stage: stage.clone(),
                    known: stage_names(journals),
                })
            }
            At::Oom => return Err(SnapshotError::NoOom),
            At::End | At::Peak => {}
        }
    }
    processes.sort_by(|a, b| {
        (
            a.host.as_str(),
            a.rank.unwrap_or(u32::MAX),
            a.start_unix_ns,
            a.pid,
        )
            .cmp(&(
                b.host.as_str(),
                b.rank.unwrap_or(u32::MAX),
                b.start_unix_ns,
                b.pid,
            ))
    });
    let warnings = journals
        .iter()
        .flat_map(|j| j.warnings.iter().cloned())
        .collect();
    Ok(Snapshot {
        at: at.clone(),
        processes,
        skipped,
        warnings,
    })
}

/// Every stage name of the run, in order of first appearance.
pub fn stage_names(journals: &[Journal]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for j in journals {
        for s in spans(j) {
            if seen.insert(s.name.clone()) {
                out.push(s.name);
            }
        }
    }
    out
}

/// A stage span: starts at record `index` (0 for the opening `startup`).
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub(crate) name: String,
    pub(crate) index: usize,
}

/// The stage spans of a journal, by the ledger's rules (`ledger::boundaries`): a span runs from
/// its boundary (a stage record, or the API event that set it) to the next one.
fn spans(j: &Journal) -> Vec<Span> {
    crate::ledger::boundaries::derive(j)
        .into_iter()
        .map(|b| Span {
            name: b.name,
            index: b.index,
        })
        .collect()
}

/// Where to look: the process's point and each device's.
struct Plan {
    process: Point,
    /// `None`: every device seen up to the process point, at that point.
    devices: Option<BTreeMap<i32, (Point, i64)>>,
    oom_index: Option<usize>,
}

fn take_process(j: &Journal, at: &At) -> Result<ProcessSnapshot, String> {
    let spans = spans(j);
    let span_at = |i: usize| {
        // The span running at record i: the last one starting at or before it.
        let k = spans.partition_point(|s| s.index <= i);
        k.saturating_sub(1)
    };
    let last_t = j.events.last().map_or(0, |e| e.t_ns);
    let plan = match at {
        At::End => Plan {
            process: Point {
                events: j.events.len(),
                t_ns: last_t,
                stage: spans.last().map_or("startup".into(), |s| s.name.clone()),
            },
            devices: None,
            oom_index: None,
        },
        At::Stage(name) => {
            let k = spans
                .iter()
                .position(|s| &s.name == name)
                .ok_or_else(|| format!("no stage named {name:?}"))?;
            let (events, t_ns) = match spans.get(k + 1) {
                Some(next) => (next.index, j.events[next.index].t_ns),
                None => (j.events.len(), last_t),
            };
            Plan {
                process: Point {
                    events,
                    t_ns,
                    stage: name.clone(),
                },
                devices: None,
                oom_index: None,
            }
        }
        At::Oom => {
            let i = j
                .events
                .iter()
                .position(|e| {
                    e.kind() == Some(Kind::AllocFailed) && e.result == CUDA_ERROR_OUT_OF_MEMORY
                })
                .ok_or("no out-of-memory failure")?;
            // Just after the failed record (it changed nothing, and is then in the history).
            Plan {
                process: Point {
                    events: i + 1,
                    t_ns: j.events[i].t_ns,
                    stage: spans[span_at(i)].name.clone(),
                },
                devices: None,
                oom_index: Some(i),
            }
        }
        At::Peak => {
            let (devices, process) = peaks(j);
            let Some((_, i)) = process else {
                return Err("no device memory".into());
            };
            let point = |i: usize| Point {
                events: i + 1,
                t_ns: j.events[i].t_ns,
                stage: spans[span_at(i)].name.clone(),
            };
            Plan {
                process: point(i),
                devices: Some(
                    devices
                        .into_iter()
                        .map(|(d, (b, i))| (d, (point(i), b)))
                        .collect(),
                ),
                oom_index: None,
            }
        }
    };
    let books = ledger::process::replay(j);
    let mut r = Replay::new(j, &spans);
    let mut checkpoints: BTreeSet<usize> = BTreeSet::new();
    checkpoints.insert(plan.process.events);
    if let Some(devs) = &plan.devices {
        checkpoints.extend(devs.values().map(|(p, _)| p.events));
    }
    let last = checkpoints.last().copied().unwrap_or(0);
    let mut devices: Vec<DeviceSnapshot> = Vec::new();
    let mut process_books = None;
    let mut oom = None;
    for i in 0..=last {
        if checkpoints.contains(&i) {
            if i == plan.process.events {
                process_books = Some(r.process_books());
                if let Some(k) = plan.oom_index {
                    oom = r.failure(&j.events[k], k);
                }
                if plan.devices.is_none() {
                    let seen: Vec<i32> = r.seen.iter().copied().collect();
                    for d in seen {
                        devices.push(r.capture(d, plan.process.clone(), None));
                    }
                }
            }
            if let Some(devs) = &plan.devices {
                for (&d, (p, bytes)) in devs {
                    if p.events == i {
                        devices.push(r.capture(d, p.clone(), Some(*bytes)));
                    }
                }
            }
        }
        if let Some(e) = j.events.get(i) {
            r.step(i, e);
        }
    }
    devices.sort_by_key(|d| d.device);
    // Each device was captured once: move its history (cut at its point) into it.
    for d in &mut devices {
        let st = r.devs.entry(d.device).or_default();
        let cut = r.cuts.get(&d.device).copied().unwrap_or_default();
        st.history.truncate(cut.history);
        st.timeline.truncate(cut.timeline);
        st.readings.truncate(cut.readings);
        st.failures.truncate(cut.failures);
        d.history = std::mem::take(&mut st.history);
        d.timeline = std::mem::take(&mut st.timeline);
        d.free_readings = std::mem::take(&mut st.readings)
            .into_iter()
            .map(|(t_ns, free_bytes, _)| FreeReading { t_ns, free_bytes })
            .collect();
        d.failures = std::mem::take(&mut st.failures);
    }
    let (host_pinned, managed, peer, reservations) = process_books.unwrap_or_default();
    let stages = stage_spans(&spans, &r.clock_at, &plan.process);
    let h = |k: &str| j.header.get(k).unwrap_or("").to_string();
    let first_t_ns = j.events.first().map_or(0, |e| e.t_ns);
    Ok(ProcessSnapshot {
        journal: j.path.display().to_string(),
        host: h("host"),
        pid: books.pid,
        run_id: h("run_id"),
        rank: books.rank,
        start_unix_ns: books.start_unix_ns,
        start_mono_ns: j
            .header
            .get("start_mono_ns")
            .and_then(|v| v.parse().ok())
            .unwrap_or(first_t_ns),
        first_t_ns,
        point: plan.process,
        stages,
        devices,
        host_pinned,
        managed,
        peer,
        reservations,
        oom,
        captures: capture_windows(j, last),
    })
}

/// Spans up to the point, on the non-decreasing clock.
fn stage_spans(spans: &[Span], clock_at: &[u64], point: &Point) -> Vec<StageSpan> {
    let end = point.events;
    let clock = |i: usize| {
        clock_at
            .get(i)
            .or_else(|| clock_at.last())
            .copied()
            .unwrap_or(0)
    };
    // A stage's end is where the next one begins, which may be later than the last record
    // replayed.
    let end_clock = if end == 0 { clock(0) } else { clock(end - 1) }.max(point.t_ns);
    let mut out = Vec::new();
    for (k, s) in spans.iter().enumerate() {
        // The opening span starts with the first record.
        let start = if k == 0 { 0 } else { s.index };
        if k > 0 && start >= end {
            break;
        }
        let stop = spans.get(k + 1).map_or(usize::MAX, |n| n.index);
        let end_ns = if stop >= end { end_clock } else { clock(stop) };
        let start_ns = clock(start).min(end_ns);
        out.push(StageSpan {
            name: s.name.clone(),
            start_ns,
            end_ns,
        });
    }
    out
}

/// Per device: the highest hooked total and the record that reached it; and the highest sum
/// over devices. Hooked total = device deltas of the live books + measured context bytes
/// (the ledger's `peak.total`). A device that never held anything has no peak.
#[allow(clippy::type_complexity)]
fn peaks(j: &Journal) -> (BTreeMap<i32, (i64, usize)>, Option<(i64, usize)>) {
    let mut books = LiveBooks::new();
    let mut hooked: BTreeMap<i32, i64> = BTreeMap::new();
    let mut peak: BTreeMap<i32, (i64, usize)> = BTreeMap::new();
    let mut total = 0i64;
    let mut total_peak: Option<(i64, usize)> = None;
    for (i, e) in j.events.iter().enumerate() {
        let mut moved = |dev: i32, bytes: i64| {
            let h = hooked.entry(dev).or_default();
            *h = h.saturating_add(bytes);
            total = total.saturating_add(bytes);
            let p = peak.entry(dev).or_insert((0, 0));
            if *h > p.0 {
                *p = (*h, i);
            }
            if total > total_peak.map_or(0, |p| p.0) {
                total_peak = Some((total, i));
            }
        };
        if e.kind() == Some(Kind::Context) && e.device >= 0 && e.size > 0 && e.result == 0 {
            moved(e.device, e.size as i64);
        }
        if let Some(d) = books.apply(e) {
            if d.mem == MemKind::Device && d.device >= 0 {
                moved(d.device, d.bytes);
            }
        }
    }
    peak.retain(|_, (b, _)| *b > 0);
    (peak, total_peak)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramledger_format::Event;

    fn ev(kind: Kind, text: &str) -> Event {
        Event {
            kind: kind as u16,
            text: text.into(),
            ..Event::default()
        }
    }

    fn alloc(addr: u64, size: u64) -> Event {
        Event {
            kind: Kind::Alloc as u16,
            addr,
            size,
            owner: Owner::Torch as u8,
            ..Event::default()
        }
    }

    fn journal(events: Vec<Event>) -> Journal {
        Journal {
            events,
            ..Journal::default()
        }
    }

    fn names(j: &Journal) -> Vec<(String, usize)> {
        spans(j).into_iter().map(|s| (s.name, s.index)).collect()
    }

    #[test]
    fn spans_follow_the_ledger() {
        // Records before any stage open `startup`; a first `startup` record continues it.
        let j = journal(vec![
            alloc(1, 1),
            ev(Kind::Stage, "startup"),
            ev(Kind::Stage, "load\n[TP0] line"),
        ]);
        assert_eq!(names(&j), [("startup".into(), 1), ("load".into(), 2)]);
        let j = journal(vec![alloc(1, 1), ev(Kind::Stage, "load")]);
        assert_eq!(names(&j), [("startup".into(), 0), ("load".into(), 1)]);
        assert_eq!(names(&journal(vec![])), [("startup".into(), 0)]);
        // The ledger names the same stages.
        let books = ledger::process::replay(&j);
        assert_eq!(books.devices.len(), 1);
        let ledger: Vec<&str> = books.devices[0]
            .stages
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(ledger, ["startup", "load"]);
    }

    #[test]
    fn peak_and_stage_points() {
        let free = |addr| Event {
            kind: Kind::Free as u16,
            addr,
            ..Event::default()
        };
        let j = journal(vec![
            ev(Kind::Stage, "a"),
            alloc(0x1000, 10),
            alloc(0x2000, 20),
            ev(Kind::Stage, "b"),
            free(0x2000),
            alloc(0x3000, 5),
        ]);
        let s = take(std::slice::from_ref(&j), &At::Peak).unwrap();
        let d = &s.processes[0].devices[0];
        assert_eq!((d.point.events, d.peak_bytes), (3, Some(30)));
        assert_eq!(d.point.stage, "a");
        let s = take(std::slice::from_ref(&j), &At::Stage("a".into())).unwrap();
        assert_eq!(s.processes[0].devices[0].total_bytes(), 30);
        let s = take(std::slice::from_ref(&j), &At::End).unwrap();
        let d = &s.processes[0].devices[0];
        assert_eq!(d.total_bytes(), 15);
        assert_eq!(
            d.by_stage
                .iter()
                .map(|s| (s.stage.as_str(), s.by_owner.hooked()))
                .collect::<Vec<_>>(),
            [("a", 10), ("b", 5)]
        );
        assert_eq!(
            take(std::slice::from_ref(&j), &At::Stage("c".into())).unwrap_err(),
            SnapshotError::UnknownStage {
                stage: "c".into(),
                known: vec!["a".into(), "b".into()]
            }
        );
        assert_eq!(
            take(std::slice::from_ref(&j), &At::Oom).unwrap_err(),
            SnapshotError::NoOom
        );
    }
}
