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

use std::collections::BTreeSet;
use std::fmt;

use vramledger_format::{MemKind, Owner};

use crate::journal::Journal;
use crate::ledger::index::Index;
use crate::ledger::records::Records;
use crate::ledger::OwnerBytes;

mod capture;
mod point;
mod replay;

pub use crate::ledger::index::CUDA_ERROR_OUT_OF_MEMORY;
pub use replay::Detail;

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

/// Takes a snapshot of every journal at `at`, with its history and timelines.
pub fn take(journals: &[Journal], at: &At) -> Result<Snapshot, SnapshotError> {
    take_with(journals, at, Detail::ALL)
}

/// Takes a snapshot of every journal at `at`, keeping `detail` besides the live allocations.
pub fn take_with(journals: &[Journal], at: &At, detail: Detail) -> Result<Snapshot, SnapshotError> {
    let taken = journals
        .iter()
        .map(|j| Taken {
            warnings: j.warnings.clone(),
            ..take_one(j, &Index::scan(j), at, detail)
        })
        .collect();
    collect(taken, at)
}

/// One journal's part of a snapshot: its process at the point, or why it is left out.
#[derive(Debug, Clone)]
pub struct Taken {
    pub journal: String,
    pub pid: u32,
    pub process: Result<ProcessSnapshot, String>,
    /// Its stage names, in order.
    pub stages: Vec<String>,
    /// The journal's own warnings.
    pub warnings: Vec<String>,
}

/// The snapshot of one journal (indexed as `ix`) at `at`.
pub fn take_one<R: Records>(r: &R, ix: &Index, at: &At, detail: Detail) -> Taken {
    Taken {
        journal: r.path().display().to_string(),
        pid: r
            .header()
            .get("pid")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        process: point::take_process(r, ix, at, detail),
        stages: ix.boundaries.iter().map(|b| b.name.clone()).collect(),
        // The caller's: the source's reader knows them.
        warnings: Vec::new(),
    }
}

/// The run's snapshot from each journal's part, in journal order.
pub fn collect(taken: Vec<Taken>, at: &At) -> Result<Snapshot, SnapshotError> {
    let mut processes = Vec::new();
    let mut skipped = Vec::new();
    let mut warnings = Vec::new();
    let mut known = Vec::new();
    let mut seen = BTreeSet::new();
    let any = !taken.is_empty();
    for t in taken {
        for name in t.stages {
            if seen.insert(name.clone()) {
                known.push(name);
            }
        }
        warnings.extend(t.warnings);
        match t.process {
            Ok(p) => processes.push(p),
            Err(reason) => skipped.push(Skipped {
                journal: t.journal,
                pid: t.pid,
                reason,
            }),
        }
    }
    if processes.is_empty() && any {
        match at {
            At::Stage(stage) => {
                return Err(SnapshotError::UnknownStage {
                    stage: stage.clone(),
                    known,
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

/// The stage spans of a journal, by the ledger's rules (`ledger::boundaries`): a span runs from
/// its boundary (a stage record, or the API event that set it) to the next one.
fn spans(j: &Journal) -> Vec<crate::ledger::boundaries::StageBoundary> {
    crate::ledger::boundaries::derive(j)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger;
    use vramledger_format::{Event, Kind};

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
