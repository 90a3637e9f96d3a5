//! The report's books of one process, kept from the replay ([`super::replay`]): per device,
//! the hooked bytes each owner moved in each stage span, the free memory at each span's
//! start, peaks and modules; the books kept apart from VRAM.
//!
//! A span's start free is the first boundary sample after its stage record (a vramledger
//! sample or an NVML reading in the block of samples the shim writes right after it), else
//! the nearest reading corrected by the hooked bytes moved since ([`super::samples`]). The
//! opening span starts before the context existed when NVML measured it around the
//! context's creation.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use vramledger_format::{Api, Event, Kind, MemKind, Owner};

use super::device::{self, DeviceBooks, LivePeak, ModuleRow, Peak};
use super::index::Index;
use super::owners::OwnerBytes;
use super::peaks::PeakAt;
use super::replay::{Now, Observer, Rec};
use super::samples::{self, Reading, SpanReadings};

/// A peak, its stage named.
fn named(p: PeakAt, ix: &Index) -> Peak {
    Peak {
        bytes: p.bytes,
        stage: ix
            .boundaries
            .get(p.span)
            .map_or_else(String::new, |s| s.name.clone()),
        t_ns: p.t_ns,
    }
}

/// One module's bytes on a device while replaying.
#[derive(Debug, Clone, Copy)]
struct ModuleAcc {
    id: u32,
    /// Moved bytes here (an accumulator of [`DevState::by_id`] that never did is none).
    seen: bool,
    owner: Owner,
    live: i64,
    peak: i64,
    allocated: u64,
}

/// One device while replaying.
struct DevState {
    device: i32,
    /// Hooked net bytes per owner, per span.
    by_owner: Vec<OwnerBytes>,
    /// The boundary sample of each span, when one was taken.
    boundary: Vec<Option<u64>>,
    readings: SpanReadings,
    peak_total: PeakAt,
    /// Per owner (each counts once its bit in `moved_owners` is set).
    peak_by_owner: [PeakAt; 8],
    /// Bit `o`: owner `o` moved bytes here (a bit set each move, no branch on it).
    moved_owners: u8,
    /// Module ids below [`SLOTTED_MODULES`] (the small ids a shim gives: most records), by
    /// id: one index a record, where a scan mispredicted its exit whenever the module changed.
    by_id: Vec<ModuleAcc>,
    /// Every other module, in first-move order.
    modules: Vec<ModuleAcc>,
}

/// Module ids below this are kept by id ([`DevState::by_id`]); others in a list.
const SLOTTED_MODULES: usize = 1 << 12;

impl DevState {
    fn new(device: i32, spans: usize) -> DevState {
        DevState {
            device,
            by_owner: vec![OwnerBytes::default(); spans],
            boundary: vec![None; spans],
            readings: SpanReadings::new(spans),
            peak_total: PeakAt::default(),
            peak_by_owner: [PeakAt::default(); 8],
            moved_owners: 0,
            by_id: Vec::new(),
            modules: Vec::new(),
        }
    }

    /// The accumulator of module `id` (made for `owner`, its first mover, when it has none).
    #[inline]
    fn module(&mut self, id: u32, owner: Owner) -> &mut ModuleAcc {
        let i = id as usize;
        if self.by_id.get(i).is_some_and(|m| m.seen) {
            return &mut self.by_id[i];
        }
        self.first_move(id, owner)
    }

    #[inline(never)]
    fn first_move(&mut self, id: u32, owner: Owner) -> &mut ModuleAcc {
        let fresh = ModuleAcc {
            id,
            seen: true,
            owner,
            live: 0,
            peak: 0,
            allocated: 0,
        };
        let i = id as usize;
        if i < SLOTTED_MODULES {
            if self.by_id.len() <= i {
                self.by_id.resize(
                    i + 1,
                    ModuleAcc {
                        seen: false,
                        ..fresh
                    },
                );
            }
            self.by_id[i] = fresh;
            return &mut self.by_id[i];
        }
        let k = match self.modules.iter().position(|m| m.id == id) {
            Some(k) => k,
            None => {
                self.modules.push(fresh);
                self.modules.len() - 1
            }
        };
        &mut self.modules[k]
    }
}

/// The books observer.
pub struct Books<'a> {
    ix: &'a Index,
    devs: Vec<DevState>,
    /// The device of the last record (most records are on the same one).
    last: usize,
    /// Inside the block of samples right after a stage record.
    in_block: bool,
    pub host: LivePeak,
    pub managed: LivePeak,
    pub peer: LivePeak,
    pub virtual_reserved: LivePeak,
    /// NVML's device free before the first context on each device.
    context_before: BTreeMap<i32, u64>,
    /// Devices' books, once the replay ended.
    pub devices: Vec<DeviceBooks>,
}

/// Records that belong to a boundary's sample block.
fn is_sample(e: &Event, kind: Option<Kind>) -> bool {
    matches!(kind, Some(Kind::NvmlSample) | Some(Kind::Live))
        || (kind == Some(Kind::MemInfo) && e.api() == Some(Api::VramledgerSample))
}

impl<'a> Books<'a> {
    pub fn new(ix: &'a Index) -> Books<'a> {
        Books {
            ix,
            devs: Vec::new(),
            last: 0,
            in_block: false,
            host: LivePeak::default(),
            managed: LivePeak::default(),
            peer: LivePeak::default(),
            virtual_reserved: LivePeak::default(),
            context_before: BTreeMap::new(),
            devices: Vec::new(),
        }
    }

    #[inline(always)]
    fn dev(&mut self, device: i32) -> &mut DevState {
        if self.devs.get(self.last).is_none_or(|d| d.device != device) {
            self.last = self.find_dev(device);
        }
        &mut self.devs[self.last]
    }

    /// The index of `device`'s state, made when it has none yet.
    #[inline(never)]
    fn find_dev(&mut self, device: i32) -> usize {
        match self.devs.iter().position(|d| d.device == device) {
            Some(i) => i,
            None => {
                self.devs
                    .push(DevState::new(device, self.ix.boundaries.len()));
                self.devs.len() - 1
            }
        }
    }

    /// The device memory record `r` moved (its owner's, its module's and the device's bytes,
    /// their peaks), and the books kept apart from VRAM.
    #[inline(always)]
    fn take_moved(&mut self, r: &Rec<'_>) {
        let span = r.span;
        if let (Some(m), Some(held)) = (r.moved, r.held()) {
            let d = self.dev(m.device);
            d.by_owner[span].add(m.owner, m.bytes);
            let now = held.by_owner.get(m.owner);
            let o = m.owner as usize & 7;
            d.moved_owners |= 1 << o;
            d.peak_by_owner[o].offer(now, r);
            d.peak_total.offer(held.hooked, r);
            if let Some(id) = m.module {
                let acc = d.module(id, m.owner);
                acc.live = acc.live.saturating_add(m.bytes);
                acc.peak = acc.peak.max(acc.live);
                // Branch-free: frees and allocations alternate at random.
                acc.allocated = acc.allocated.saturating_add(m.bytes.max(0) as u64);
            }
        }
        if let Some(delta) = r.delta {
            match delta.mem {
                MemKind::HostPinned => bump(&mut self.host, delta.bytes),
                MemKind::Managed => bump(&mut self.managed, delta.bytes),
                MemKind::Peer => bump(&mut self.peer, delta.bytes),
                _ => {}
            }
        }
    }
}

fn bump(lp: &mut LivePeak, bytes: i64) {
    lp.live = lp.live.saturating_add(bytes);
    lp.peak = lp.peak.max(lp.live);
}

impl Observer for Books<'_> {
    #[inline(always)]
    fn record(&mut self, r: &Rec<'_>) -> ControlFlow<()> {
        // Nearly every record: an allocation or a free inside a span, past its sample block;
        // it sets no boundary, reading or context, so only what it moved is taken.
        if r.boundary.is_none()
            && !self.in_block
            && matches!(r.kind, Some(Kind::Alloc | Kind::Free))
        {
            self.take_moved(r);
            return ControlFlow::Continue(());
        }
        let e = r.e;
        let span = r.span;
        if let Some(s) = r.boundary {
            self.in_block = self.ix.boundaries[s].sampled;
            for d in &mut self.devs {
                d.readings.span_begins(s);
            }
        }
        if r.kind == Some(Kind::Stage) {
            if r.boundary.is_none() {
                // A stage record folded into the stage already open: no block follows it.
                self.in_block = false;
            }
            return ControlFlow::Continue(());
        }
        if self.in_block && !is_sample(e, r.kind) {
            self.in_block = false;
        }
        if let Some((device, free)) = samples::reading_of(e, r.kind) {
            let in_block = self.in_block;
            let hooked = r.devices.get(device).map_or(0, |h| h.hooked);
            let d = self.dev(device);
            let reading = Reading {
                index: r.index,
                free,
                hooked,
            };
            d.readings.read(reading, r.boundary.filter(|&s| s == span));
            if in_block && d.boundary[span].is_none() {
                d.boundary[span] = Some(free);
            }
        }
        if r.kind == Some(Kind::Context)
            && e.device >= 0
            && e.arg0 != u64::MAX
            && e.result == 0
            && !self.context_before.contains_key(&e.device)
        {
            self.context_before.insert(e.device, e.arg0);
        }
        self.take_moved(r);
        ControlFlow::Continue(())
    }

    fn end(&mut self, now: &Now<'_>) {
        let mut devs = std::mem::take(&mut self.devs);
        devs.sort_by_key(|d| d.device);
        self.devices = devs
            .into_iter()
            .map(|d| {
                let held = now.devices.get(d.device).map(|h| h.by_owner);
                let before = self.context_before.get(&d.device).copied();
                device_books(d, held.unwrap_or_default(), before, self.ix)
            })
            .collect();
    }
}

fn device_books(d: DevState, held: OwnerBytes, before: Option<u64>, ix: &Index) -> DeviceBooks {
    let spans = &ix.boundaries;
    // Hooked bytes held at each span start, to derive free memory where no sample was taken.
    let mut hooked_at_start = Vec::with_capacity(spans.len());
    let mut acc = 0i64;
    for s in 0..spans.len() {
        hooked_at_start.push(acc);
        acc = acc.saturating_add(d.by_owner.get(s).map_or(0, OwnerBytes::hooked));
    }
    let hooked_end = acc;
    let mut bounds: Vec<(Option<u64>, samples::Source)> = spans
        .iter()
        .enumerate()
        .map(|(s, span)| match d.boundary.get(s).copied().flatten() {
            Some(free) => (Some(free), samples::Source::Sample),
            None => d.readings.at_span(s, span.index, hooked_at_start[s]),
        })
        .collect();
    // The books open before the context existed when NVML measured it.
    if let Some(before) = before {
        bounds[0] = (Some(before), samples::Source::Sample);
    }
    let end = d.readings.at_end(hooked_end);
    let stages = device::stage_rows(&d.by_owner, &bounds, end, ix);
    let mut by_id: Vec<ModuleAcc> = d.by_id.into_iter().filter(|m| m.seen).collect();
    by_id.extend(d.modules);
    by_id.sort_by_key(|m| m.id);
    let mut modules: Vec<ModuleRow> = by_id
        .iter()
        .map(|m| ModuleRow {
            module: ix.module_name(m.id).to_string(),
            owner: Some(m.owner),
            live: m.live,
            peak: m.peak,
            allocated: m.allocated,
        })
        .collect();
    modules.sort_by(|a, b| b.peak.cmp(&a.peak).then(a.module.cmp(&b.module)));
    DeviceBooks {
        device: d.device,
        start_free: bounds[0].0,
        end_free: end.0,
        stages,
        live_at_end: held,
        peak_total: named(d.peak_total, ix),
        peak_by_owner: Owner::ALL
            .iter()
            .filter(|&&o| d.moved_owners >> (o as usize & 7) & 1 != 0)
            .map(|&o| (o, named(d.peak_by_owner[o as usize & 7], ix)))
            .collect(),
        modules,
    }
}

#[cfg(test)]
#[path = "books_tests.rs"]
mod tests;
