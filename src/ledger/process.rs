//! One process's books: its journal replayed into stages × owners per device, balanced
//! against device free memory.
//!
//! A stage runs from its stage record to the next one. Its device delta is the free memory
//! at its start minus the free memory at its end (boundary samples, see [`super::samples`]);
//! the hooks explain that delta by owner (allocated minus freed within the stage, the
//! context as measured around its creation), and what they cannot explain is `unattributed`.
//! Because every boundary has one free value, the deltas telescope: start free = Σ deltas +
//! end free, to the byte.

use std::collections::BTreeMap;

use vramledger_engines::log;
use vramledger_format::{Header, Owner};

use super::books::Books;
use super::boundaries::SetBy;
use super::index::Index;
use super::owners::OwnerBytes;
use super::records::Records;
use super::replay::Observer;
use super::samples::Source;
use crate::journal::Journal;

/// What the engine printed about a stage.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineNumbers {
    /// The event of the line that ended the stage (e.g. `load_weight_end`).
    pub event: Option<String>,
    /// `avail mem` printed on the line that started the stage (GiB).
    pub avail_mem_gib_at_start: Option<f64>,
    /// `mem usage` printed on the line that ended the stage (GiB).
    pub mem_usage_gib: Option<f64>,
    /// The line that started the stage.
    pub start_line: Option<String>,
    /// The line that ended it.
    pub end_line: Option<String>,
}

/// One stage on one device.
#[derive(Debug, Clone)]
pub struct StageRow {
    pub name: String,
    pub start_t_ns: u64,
    pub end_t_ns: u64,
    pub start_free: Option<u64>,
    pub start_source: Source,
    pub end_free: Option<u64>,
    pub end_source: Source,
    /// Start free minus end free (0 when either is unknown).
    pub device_delta: i64,
    /// Hooked net bytes per owner, and `unattributed`.
    pub by_owner: OwnerBytes,
    pub engine: EngineNumbers,
    /// What set the stage's start, and how (the line, the event, the mark).
    pub start_set_by: SetBy,
    pub start_detail: String,
    /// What set its end: the next stage's start, or the end of the journal.
    pub end_set_by: SetBy,
    pub end_detail: String,
    /// A stage record opened it (with free memory sampled there); false for a boundary an API
    /// event or an engine line's duration placed.
    pub start_recorded: bool,
}

/// A peak: bytes, and when.
#[derive(Debug, Clone, Default)]
pub struct Peak {
    pub bytes: i64,
    pub stage: String,
    pub t_ns: u64,
}

/// One module's memory on a device.
#[derive(Debug, Clone, Default)]
pub struct ModuleRow {
    pub module: String,
    pub owner: Option<Owner>,
    pub live: i64,
    pub peak: i64,
    pub allocated: u64,
}

/// The books of one device of one process.
#[derive(Debug, Clone)]
pub struct DeviceBooks {
    pub device: i32,
    pub stages: Vec<StageRow>,
    pub live_at_end: OwnerBytes,
    pub peak_total: Peak,
    pub peak_by_owner: BTreeMap<Owner, Peak>,
    pub start_free: Option<u64>,
    pub end_free: Option<u64>,
    pub modules: Vec<ModuleRow>,
}

impl DeviceBooks {
    /// Σ stage deltas.
    pub fn sum_deltas(&self) -> i64 {
        self.stages
            .iter()
            .fold(0i64, |a, s| a.saturating_add(s.device_delta))
    }
    /// Σ unattributed bytes over the stages.
    pub fn unattributed(&self) -> i64 {
        self.stages.iter().fold(0i64, |a, s| {
            a.saturating_add(s.by_owner.get(Owner::Unattributed))
        })
    }
    /// start free == Σ deltas + end free, to the byte.
    pub fn balanced(&self) -> bool {
        match (self.start_free, self.end_free) {
            (Some(s), Some(e)) => s as i128 == self.sum_deltas() as i128 + e as i128,
            _ => false,
        }
    }
}

/// Live bytes and their peak (for the books kept apart from VRAM).
#[derive(Debug, Clone, Copy, Default)]
pub struct LivePeak {
    pub live: i64,
    pub peak: i64,
}

/// One process.
#[derive(Debug, Clone)]
pub struct ProcessBooks {
    pub path: String,
    pub host: String,
    pub pid: u32,
    pub ppid: u32,
    pub run_id: String,
    pub cmdline: String,
    pub start_unix_ns: u64,
    pub rank: Option<u32>,
    pub rank_tag: Option<log::RankTag>,
    pub devices: Vec<DeviceBooks>,
    pub host_pinned: LivePeak,
    pub managed: LivePeak,
    pub virtual_reserved: LivePeak,
    /// Peer memory mapped here (IPC opens, VMM imports: another process's or device's bytes).
    pub peer_imported: LivePeak,
    pub events: usize,
    /// PyTorch's pools by id, and torch's own snapshot against the books.
    pub torch_pools: super::pools::TorchPools,
}

impl ProcessBooks {
    /// No device memory, no context and nothing pinned, managed or reserved: a helper process
    /// (an inductor compile worker, a tokenizer) that loaded the preload but never used CUDA.
    pub fn never_touched_gpu(&self) -> bool {
        self.devices.is_empty()
            && self
                .apart()
                .iter()
                .all(|(_, lp)| lp.peak == 0 && lp.live == 0)
    }

    /// The books kept apart from VRAM, named as reports show them.
    pub fn apart(&self) -> [(&'static str, LivePeak); 4] {
        [
            ("host pinned", self.host_pinned),
            ("managed", self.managed),
            ("VA reserved (virtual only)", self.virtual_reserved),
            ("peer memory mapped (IPC/VMM imports)", self.peer_imported),
        ]
    }
}

/// Replays one journal.
pub fn replay(j: &Journal) -> ProcessBooks {
    replay_records(j)
}

/// Replays one journal read from any source: its index, then its books in one walk.
pub fn replay_records<R: Records>(r: &R) -> ProcessBooks {
    let ix = Index::scan(r);
    replay_indexed(r, &ix, &mut ())
}

/// The books of a journal indexed as `ix`, with `extra` kept in the same walk (a timeline).
pub fn replay_indexed<R: Records, O: Observer>(r: &R, ix: &Index, extra: &mut O) -> ProcessBooks {
    let mut obs = ((Books::new(ix), super::pools::Pools::new(ix)), extra);
    super::replay::run(r, ix, &mut obs);
    let ((books, pools), _) = obs;
    assemble(r, ix, books, pools.finish())
}

/// The process's books from its index and what the replay kept.
pub fn assemble<R: Records>(
    r: &R,
    ix: &Index,
    books: Books<'_>,
    torch_pools: super::pools::TorchPools,
) -> ProcessBooks {
    let header = r.header();
    let h = |k: &str| header.get(k).unwrap_or("").to_string();
    let (rank_tag, rank) = rank(ix, header);
    ProcessBooks {
        path: r.path().display().to_string(),
        host: h("host"),
        pid: h("pid").parse().unwrap_or(0),
        ppid: h("ppid").parse().unwrap_or(0),
        run_id: h("run_id"),
        cmdline: h("cmdline").replace('\0', " "),
        start_unix_ns: h("start_unix_ns").parse().unwrap_or(0),
        rank,
        rank_tag,
        devices: books.devices,
        host_pinned: books.host,
        managed: books.managed,
        virtual_reserved: books.virtual_reserved,
        peer_imported: books.peer,
        events: ix.records,
        torch_pools,
    }
}

/// The process's rank: the TP rank its engine printed, else the `rank=` of the distributed
/// init line, else the `RANK` it was started with; and the engine's rank tag.
pub fn rank(ix: &Index, header: &Header) -> (Option<log::RankTag>, Option<u32>) {
    let tag = ix.rank.tag;
    let rank = tag
        .and_then(|t| t.tp)
        .or(ix.rank.dist_rank)
        .or_else(|| header.get("env.RANK").and_then(|v| v.parse().ok()));
    (tag, rank)
}

/// The stage rows of one device: per span its hooked bytes by owner (`by_owner`), its start
/// free (`bounds`; the last span ends at `end`), and what the hooks cannot explain.
pub(super) fn stage_rows(
    by_owner: &[OwnerBytes],
    bounds: &[(Option<u64>, Source)],
    end: (Option<u64>, Source),
    ix: &Index,
) -> Vec<StageRow> {
    let spans = &ix.boundaries;
    let mut stages = Vec::with_capacity(spans.len());
    for (s, span) in spans.iter().enumerate() {
        let (start_free, start_source) = bounds[s];
        let (end_free, end_source) = if s + 1 < spans.len() {
            bounds[s + 1]
        } else {
            end
        };
        let device_delta = match (start_free, end_free) {
            (Some(a), Some(b)) => {
                (a as i128 - b as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
            }
            _ => 0,
        };
        let mut owners = by_owner.get(s).copied().unwrap_or_default();
        owners.set(
            Owner::Unattributed,
            device_delta.saturating_sub(owners.hooked()),
        );
        let next = spans.get(s + 1);
        stages.push(StageRow {
            name: span.name.clone(),
            start_t_ns: span.t_ns,
            end_t_ns: next.map_or_else(|| ix.last_t.unwrap_or(span.t_ns), |n| n.t_ns),
            start_free,
            start_source,
            end_free,
            end_source,
            device_delta,
            by_owner: owners,
            engine: engine_numbers(span.line.as_deref(), next.and_then(|n| n.line.as_deref())),
            start_set_by: span.set_by,
            start_detail: span.detail.clone(),
            end_set_by: next.map_or(SetBy::EndOfJournal, |n| n.set_by),
            end_detail: next.map_or_else(String::new, |n| n.detail.clone()),
            start_recorded: span.sampled,
        });
    }
    stages
}

fn engine_numbers(start: Option<&str>, end: Option<&str>) -> EngineNumbers {
    let start_b = start.and_then(log::classify);
    let end_b = end.and_then(log::classify);
    EngineNumbers {
        event: end_b.as_ref().map(|b| b.event.to_string()),
        avail_mem_gib_at_start: start_b.as_ref().and_then(|b| b.numbers.avail_mem_gib),
        mem_usage_gib: end_b.as_ref().and_then(|b| b.numbers.mem_usage_gib),
        start_line: start.map(str::to_string),
        end_line: end.map(str::to_string),
    }
}
