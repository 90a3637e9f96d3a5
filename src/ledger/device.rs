//! What the books hold per device: its stages (each stage's free-memory delta, explained by
//! owner), peaks and modules, and how the stage rows are drawn from the spans of one replay.

use std::collections::BTreeMap;

use vramledger_engines::log;
use vramledger_format::Owner;

use super::boundaries::SetBy;
use super::index::Index;
use super::owners::OwnerBytes;
use super::samples::Source;

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
