//! What a snapshot holds: the point it was taken at, and per process and device every live
//! allocation, its history up to the point, timelines, free-memory readings and failures.

use std::fmt;

use vramledger_format::{MemKind, Owner};

use crate::ledger::OwnerBytes;

pub use crate::ledger::index::CUDA_ERROR_OUT_OF_MEMORY;

/// The owners a snapshot shows, in order: every hooked owner and the measured context.
pub const SNAPSHOT_OWNERS: [Owner; 6] = crate::ledger::owners::MEASURED_OWNERS;

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
