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
use vramledger_format::{Api, Event, Kind, LiveBooks, MemKind, Owner};

use super::boundaries::{self, SetBy};
use super::owners::OwnerBytes;
use super::samples::{Reading, Readings, Source};
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

/// A peak during the replay (stage by index, named at the end: no allocation per event).
#[derive(Debug, Clone, Copy, Default)]
struct RawPeak {
    bytes: i64,
    span: usize,
    t_ns: u64,
}

impl RawPeak {
    fn named(self, spans: &[Span]) -> Peak {
        Peak {
            bytes: self.bytes,
            stage: spans
                .get(self.span)
                .map_or_else(String::new, |s| s.name.clone()),
            t_ns: self.t_ns,
        }
    }
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

/// A stage span: from its boundary to the next.
type Span = boundaries::StageBoundary;

/// Per-device running state during the replay.
#[derive(Default)]
struct DevState {
    hooked: i64,
    readings: Readings,
    by_owner: Vec<OwnerBytes>,
    held: OwnerBytes,
    peak_total: RawPeak,
    peak_by_owner: BTreeMap<Owner, RawPeak>,
    modules: BTreeMap<u32, ModuleRow>,
    boundary: Vec<Option<u64>>,
}

fn is_sample(e: &Event) -> bool {
    matches!(e.kind(), Some(Kind::NvmlSample) | Some(Kind::Live))
        || (e.kind() == Some(Kind::MemInfo) && e.api() == Some(Api::VramledgerSample))
}

fn reading(e: &Event) -> Option<(i32, u64)> {
    match e.kind()? {
        Kind::MemInfo if e.device >= 0 => Some((e.device, e.arg0)),
        Kind::NvmlSample if e.device >= 0 => Some((e.device, e.arg0)),
        _ => None,
    }
}

/// Replays one journal.
pub fn replay(j: &Journal) -> ProcessBooks {
    let mut books = LiveBooks::new();
    let mut spans: Vec<Span> = Vec::new();
    let mut devs: BTreeMap<i32, DevState> = BTreeMap::new();
    let mut host = LivePeak::default();
    let mut managed = LivePeak::default();
    let mut va = LivePeak::default();
    let mut peer = LivePeak::default();
    let mut in_block = false;
    let mut first_context_before: BTreeMap<i32, u64> = BTreeMap::new();

    let bounds = boundaries::derive(j);
    let mut next_bound = 0;

    // The opening boundary may be a record that is not the first event (another thread's
    // record landed first): the events before it belong to the opening stage too, and its
    // readings still start at the record.
    let mut opening_block_at = None;
    for (i, e) in j.events.iter().enumerate() {
        let kind = e.kind();
        if spans.is_empty() {
            if let Some(b) = bounds.first().filter(|b| b.index > i) {
                spans.push(b.clone());
                next_bound = 1;
                opening_block_at = Some(b.index);
            }
        }
        if opening_block_at == Some(i) {
            in_block = bounds[0].sampled;
            opening_block_at = None;
        }
        while let Some(b) = bounds.get(next_bound).filter(|b| b.index == i) {
            spans.push(b.clone());
            for d in devs.values_mut() {
                d.by_owner.resize(spans.len(), OwnerBytes::default());
                d.boundary.resize(spans.len(), None);
            }
            in_block = b.sampled;
            next_bound += 1;
        }
        if kind == Some(Kind::Stage) {
            if boundaries::is_repeat(&bounds, i, e) {
                in_block = false;
            }
            continue;
        }
        let span = spans.len() - 1;
        if in_block && !is_sample(e) {
            in_block = false;
        }
        // Free-memory readings.
        if let Some((dev, free)) = reading(e) {
            let d = dev_state(&mut devs, dev, spans.len());
            d.readings.list.push(Reading {
                index: i,
                free,
                hooked: d.hooked,
            });
            if in_block && d.boundary[span].is_none() {
                d.boundary[span] = Some(free);
            }
        }
        if kind == Some(Kind::Context) && e.device >= 0 {
            if e.arg0 != u64::MAX && !first_context_before.contains_key(&e.device) && e.result == 0
            {
                first_context_before.insert(e.device, e.arg0);
            }
            if e.size > 0 && e.result == 0 {
                let d = dev_state(&mut devs, e.device, spans.len());
                d.move_bytes(span, Owner::Context, e.size as i64, e.t_ns);
            }
        }
        let Some(delta) = books.apply(e) else {
            continue;
        };
        match delta.mem {
            MemKind::Device if delta.device >= 0 => {
                let d = dev_state(&mut devs, delta.device, spans.len());
                d.move_bytes(span, delta.owner, delta.bytes, e.t_ns);
                let m = d.modules.entry(delta.module).or_insert_with(|| ModuleRow {
                    module: j.module_name(delta.module).to_string(),
                    owner: Some(delta.owner),
                    ..ModuleRow::default()
                });
                m.live = m.live.saturating_add(delta.bytes);
                m.peak = m.peak.max(m.live);
                if delta.bytes > 0 {
                    m.allocated = m.allocated.saturating_add(delta.bytes as u64);
                }
            }
            MemKind::HostPinned => bump(&mut host, delta.bytes),
            MemKind::Managed => bump(&mut managed, delta.bytes),
            MemKind::Peer => bump(&mut peer, delta.bytes),
            _ => {}
        }
        if matches!(kind, Some(Kind::VaReserve | Kind::VaFree)) {
            va.live = books.reserved_va().values().sum::<u64>() as i64;
            va.peak = va.peak.max(va.live);
        }
    }
    if spans.is_empty() {
        spans.push(bounds[0].clone());
    }

    let devices = devs
        .into_iter()
        .map(|(device, d)| {
            device_books(
                device,
                d,
                &spans,
                j,
                first_context_before.get(&device).copied(),
            )
        })
        .collect();
    let h = |k: &str| j.header.get(k).unwrap_or("").to_string();
    let (rank_tag, dist_rank) = super::rank::rank_of(j);
    let rank = rank_tag
        .and_then(|r: log::RankTag| r.tp)
        .or(dist_rank)
        .or_else(|| j.header.get("env.RANK").and_then(|v| v.parse().ok()));
    ProcessBooks {
        path: j.path.display().to_string(),
        host: h("host"),
        pid: h("pid").parse().unwrap_or(0),
        ppid: h("ppid").parse().unwrap_or(0),
        run_id: h("run_id"),
        cmdline: h("cmdline").replace('\0', " "),
        start_unix_ns: h("start_unix_ns").parse().unwrap_or(0),
        rank,
        rank_tag,
        devices,
        host_pinned: host,
        managed,
        virtual_reserved: va,
        peer_imported: peer,
        events: j.events.len(),
        torch_pools: super::pools::replay(j),
    }
}

fn bump(lp: &mut LivePeak, bytes: i64) {
    lp.live = lp.live.saturating_add(bytes);
    lp.peak = lp.peak.max(lp.live);
}

fn dev_state(devs: &mut BTreeMap<i32, DevState>, dev: i32, spans: usize) -> &mut DevState {
    let d = devs.entry(dev).or_default();
    if d.by_owner.len() < spans {
        d.by_owner.resize(spans, OwnerBytes::default());
        d.boundary.resize(spans, None);
    }
    d
}

impl DevState {
    fn move_bytes(&mut self, span: usize, owner: Owner, bytes: i64, t_ns: u64) {
        self.by_owner[span].add(owner, bytes);
        self.held.add(owner, bytes);
        self.hooked = self.hooked.saturating_add(bytes);
        let held = self.held.get(owner);
        let p = self.peak_by_owner.entry(owner).or_default();
        if held > p.bytes {
            *p = RawPeak {
                bytes: held,
                span,
                t_ns,
            };
        }
        if self.hooked > self.peak_total.bytes {
            self.peak_total = RawPeak {
                bytes: self.hooked,
                span,
                t_ns,
            };
        }
    }
}

fn device_books(
    device: i32,
    d: DevState,
    spans: &[Span],
    j: &Journal,
    context_before: Option<u64>,
) -> DeviceBooks {
    // Hooked bytes held at each span start, to derive free memory where no sample was taken.
    let mut hooked_at_start = Vec::with_capacity(spans.len());
    let mut acc = 0i64;
    for s in 0..spans.len() {
        hooked_at_start.push(acc);
        acc = acc.saturating_add(d.by_owner.get(s).map_or(0, OwnerBytes::hooked));
    }
    let hooked_end = acc;
    let mut bounds: Vec<(Option<u64>, Source)> = spans
        .iter()
        .enumerate()
        .map(|(s, span)| match d.boundary.get(s).copied().flatten() {
            Some(free) => (Some(free), Source::Sample),
            None => d.readings.free_at(span.index, hooked_at_start[s]),
        })
        .collect();
    // The books open before the context existed when NVML measured it.
    if let Some(before) = context_before {
        bounds[0] = (Some(before), Source::Sample);
    }
    let end = d.readings.free_at(usize::MAX, hooked_end);
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
        let mut by_owner = d.by_owner.get(s).copied().unwrap_or_default();
        by_owner.set(
            Owner::Unattributed,
            device_delta.saturating_sub(by_owner.hooked()),
        );
        let next = spans.get(s + 1);
        stages.push(StageRow {
            name: span.name.clone(),
            start_t_ns: span.t_ns,
            end_t_ns: next
                .map_or_else(|| j.events.last().map_or(span.t_ns, |e| e.t_ns), |n| n.t_ns),
            start_free,
            start_source,
            end_free,
            end_source,
            device_delta,
            by_owner,
            engine: engine_numbers(span.line.as_deref(), next.and_then(|n| n.line.as_deref())),
            start_set_by: span.set_by,
            start_detail: span.detail.clone(),
            end_set_by: next.map_or(SetBy::EndOfJournal, |n| n.set_by),
            end_detail: next.map_or_else(String::new, |n| n.detail.clone()),
            start_recorded: span.sampled,
        });
    }
    let mut modules: Vec<ModuleRow> = d.modules.into_values().collect();
    modules.sort_by(|a, b| b.peak.cmp(&a.peak).then(a.module.cmp(&b.module)));
    DeviceBooks {
        device,
        start_free: bounds[0].0,
        end_free: end.0,
        stages,
        live_at_end: d.held,
        peak_total: d.peak_total.named(spans),
        peak_by_owner: d
            .peak_by_owner
            .into_iter()
            .map(|(o, p)| (o, p.named(spans)))
            .collect(),
        modules,
    }
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
