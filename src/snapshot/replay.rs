//! The snapshot's book of the one replay ([`crate::ledger::replay`]): what the live books do
//! not keep (the stage and time of each allocating record, VMM mapping ranges, pinned host
//! and reserved ranges, pool samples), history, timelines and readings per device, and the
//! captures at the snapshot's points ([`super::capture`]).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

pub(super) use vramledger_format::addr_hash::AddrMap;
use vramledger_format::addr_hash::AddrSet;
use vramledger_format::{Api, Event, Kind, MemKind, Owner};

use super::{
    Action, ContextHeld, DeviceSnapshot, Failure, HistoryEntry, Item, Point, Reservation,
    TimelineSample, CUDA_ERROR_OUT_OF_MEMORY,
};
use crate::ledger::index::Index;
use crate::ledger::pools::{pool_of, PoolKey};
use crate::ledger::replay::{Now, Observer, Rec};
use crate::ledger::samples;

mod mirror;

/// The process's own books: pinned host, managed, peer, and the reservations.
pub(super) type ProcessBooks = (Vec<Item>, Vec<Item>, Vec<Item>, Vec<Reservation>);
/// What a snapshot keeps besides the live allocations at its point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detail {
    /// Every device allocation, free, map and unmap up to the point (memory_viz's trace).
    pub history: bool,
    /// Bytes per owner after every change, and every free reading (perfetto's counters).
    pub timeline: bool,
}

impl Detail {
    /// Everything.
    pub const ALL: Detail = Detail {
        history: true,
        timeline: true,
    };
}

/// What is known about one allocation besides what the live books keep.
#[derive(Debug, Clone, Copy)]
pub(super) struct Meta {
    pub(super) device: i32,
    pub(super) size: u64,
    pub(super) owner: Owner,
    pub(super) mem: MemKind,
    pub(super) module: u32,
    pub(super) span: usize,
    pub(super) t_ns: u64,
    /// PyTorch's pool id, when the journal says it (see [`crate::ledger::pools::pool_of`]).
    pub(super) pool: Option<(u64, u64)>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct MapInfo {
    pub(super) handle: u64,
    pub(super) size: u64,
    pub(super) offset: u64,
    /// A device VMM handle of a known device: in the history and memory_viz.
    pub(super) shown: bool,
}

#[derive(Debug, Default)]
pub(super) struct DevState {
    pub(super) history: Vec<HistoryEntry>,
    pub(super) timeline: Vec<TimelineSample>,
    /// (clock, free, hooked total when read); only the last without [`Detail::timeline`].
    pub(super) readings: Vec<(u64, u64, i64)>,
    pub(super) failures: Vec<Failure>,
    pub(super) context: Option<ContextHeld>,
    pub(super) context_span: usize,
}

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Cut {
    pub(super) history: usize,
    pub(super) timeline: usize,
    pub(super) readings: usize,
    pub(super) failures: usize,
}

/// A failure whose free memory is the first reading of its device that follows it (the shim
/// samples right after a failure), unless something else comes first.
struct Pending {
    device: i32,
    /// Its place in the device's failures.
    slot: usize,
    /// Free memory at the failure, if no reading follows.
    fallback: Option<u64>,
}

/// Where the snapshot is taken: the process's point, and (at the peak) each device's.
pub(super) struct Plan {
    pub(super) process: Point,
    /// `None`: every device seen up to the process point, at that point.
    pub(super) devices: Option<BTreeMap<i32, (Point, i64)>>,
    pub(super) oom_index: Option<usize>,
}

pub(super) struct Replay<'a> {
    pub(super) ix: &'a Index,
    pub(super) detail: Detail,
    pub(super) plan: Plan,
    /// Record indexes where something is captured; the last one.
    checkpoints: BTreeSet<usize>,
    pub(super) last: usize,
    pub(super) span: usize,
    pub(super) blocks: AddrMap<Meta>,
    async_addrs: AddrSet,
    pub(super) handles: AddrMap<Meta>,
    pub(super) mappings: BTreeMap<u64, MapInfo>,
    unmapped: Vec<u64>,
    pub(super) host: AddrMap<Meta>,
    pub(super) reservations: BTreeMap<u64, Meta>,
    pub(super) pools: AddrMap<Meta>,
    pub(super) devs: BTreeMap<i32, DevState>,
    pub(super) seen: BTreeSet<i32>,
    pub(super) cuts: BTreeMap<i32, Cut>,
    pending: Vec<Pending>,
    /// The record being replayed.
    index: usize,
    /// The non-decreasing clock after the first record, after each span's first record, and
    /// when the process's point was reached.
    pub(super) clock0: Option<u64>,
    pub(super) span_clock: Vec<Option<u64>>,
    pub(super) point_clock: u64,
    /// What the captures took.
    pub(super) devices: Vec<DeviceSnapshot>,
    pub(super) process_books: Option<ProcessBooks>,
    pub(super) oom: Option<Failure>,
    /// Stream-capture windows begun before the last point, in record order.
    pub(super) captures: Vec<super::CaptureWindow>,
}

fn is_async(api: Option<Api>) -> bool {
    matches!(
        api,
        Some(
            Api::cuMemAllocAsync
                | Api::cuMemAllocAsync_ptsz
                | Api::cuMemAllocFromPoolAsync
                | Api::cuMemAllocFromPoolAsync_ptsz
        )
    )
}

impl<'a> Replay<'a> {
    pub(super) fn new(ix: &'a Index, plan: Plan, detail: Detail) -> Self {
        let mut checkpoints: BTreeSet<usize> = BTreeSet::new();
        checkpoints.insert(plan.process.events);
        if let Some(devs) = &plan.devices {
            checkpoints.extend(devs.values().map(|(p, _)| p.events));
        }
        let last = checkpoints.last().copied().unwrap_or(0);
        Replay {
            ix,
            detail,
            plan,
            checkpoints,
            last,
            span: 0,
            blocks: AddrMap::default(),
            async_addrs: AddrSet::default(),
            handles: AddrMap::default(),
            mappings: BTreeMap::new(),
            unmapped: Vec::new(),
            host: AddrMap::default(),
            reservations: BTreeMap::new(),
            pools: AddrMap::default(),
            devs: BTreeMap::new(),
            seen: BTreeSet::new(),
            cuts: BTreeMap::new(),
            pending: Vec::new(),
            index: 0,
            clock0: None,
            span_clock: vec![None; ix.boundaries.len()],
            point_clock: 0,
            devices: Vec::new(),
            process_books: None,
            oom: None,
            captures: Vec::new(),
        }
    }

    pub(super) fn stage(&self, span: usize) -> String {
        self.ix.stage_name(span).to_string()
    }

    pub(super) fn module(&self, id: u32) -> String {
        self.ix.module_name(id).to_string()
    }

    fn meta(&self, e: &Event, mem: MemKind) -> Meta {
        Meta {
            device: e.device,
            size: e.size,
            owner: e.owner(),
            mem,
            module: e.module,
            span: self.span,
            t_ns: e.t_ns,
            pool: self.pool(e),
        }
    }

    fn pool(&self, e: &Event) -> Option<(u64, u64)> {
        if !matches!(e.owner(), Owner::Torch | Owner::TorchGraphPool) {
            return None;
        }
        match pool_of(e, &self.ix.capture_pools) {
            PoolKey::Default => Some((0, 0)),
            PoolKey::Id(a, b) => Some((a, b)),
            PoolKey::Unknown => None,
        }
    }

    fn history(&mut self, action: Action, addr: u64, bytes: u64, m: &Meta, t_ns: u64) {
        if !self.detail.history || m.mem != MemKind::Device || m.device < 0 {
            return;
        }
        let entry = HistoryEntry {
            action,
            addr,
            bytes,
            owner: m.owner,
            module: self.module(m.module),
            stage: self.stage(self.span),
            t_ns,
            index: self.index,
        };
        self.devs.entry(m.device).or_default().history.push(entry);
    }

    /// The pending failures' free memory, given the record that follows them.
    fn follow_failures(&mut self, e: &Event) {
        let next = samples::reading(e);
        let passes = matches!(
            e.kind(),
            Some(Kind::Live | Kind::Warning | Kind::Module | Kind::NvmlSample)
        );
        let mut k = 0;
        while k < self.pending.len() {
            let p = &self.pending[k];
            let free = match next {
                Some((d, f)) if d == p.device => Some(Some(f)),
                Some(_) => None,
                None if passes => None,
                None => Some(p.fallback),
            };
            match free {
                Some(free) => {
                    let p = self.pending.swap_remove(k);
                    self.settle(p, free);
                }
                None => k += 1,
            }
        }
    }

    fn settle(&mut self, p: Pending, free: Option<u64>) {
        if let Some(f) = self
            .devs
            .get_mut(&p.device)
            .and_then(|st| st.failures.get_mut(p.slot))
        {
            f.free_bytes = free;
            if self.oom.as_ref().is_some_and(|o| o.index == f.index) {
                self.oom = Some(f.clone());
            }
        }
    }

    /// The failed allocation `e` (record `i`); its free memory is settled later.
    fn failure(&mut self, e: &Event, r: &Rec<'_>) {
        let device = e.device;
        let f = Failure {
            device,
            requested_bytes: e.size,
            owner: e.owner(),
            module: self.module(e.module),
            api: e
                .api()
                .map_or_else(|| format!("api_{}", e.api), |a| a.name().to_string()),
            result: e.result,
            stage: self.stage(r.span),
            t_ns: e.t_ns,
            clock_ns: r.clock.max(e.t_ns),
            index: r.index,
            free_bytes: None,
        };
        let fallback = self.free_now(device, r);
        if self.plan.oom_index == Some(r.index) {
            self.oom = Some(f.clone());
        }
        let st = self.devs.entry(device).or_default();
        st.failures.push(f);
        let slot = st.failures.len() - 1;
        self.pending.push(Pending {
            device,
            slot,
            fallback,
        });
    }

    /// Free memory now: the last reading corrected by the hooked bytes moved since.
    pub(super) fn free_now(&self, device: i32, now: &impl HeldNow) -> Option<u64> {
        let st = self.devs.get(&device)?;
        let &(_, free, hooked) = st.readings.last()?;
        Some(samples::derived_free(free, hooked, now.hooked(device)))
    }

    fn step(&mut self, r: &Rec<'_>) {
        let e = r.e;
        let i = r.index;
        self.index = i;
        self.span = r.span;
        if i == 0 {
            self.clock0 = Some(r.clock);
        }
        if let Some(s) = r.boundary {
            self.span_clock[s] = Some(r.clock);
        }
        let Some(kind) = r.kind else {
            return;
        };
        if i < self.last {
            self.capture_window(kind, e, i);
        }
        if let Some((dev, free)) = samples::reading(e) {
            self.seen.insert(dev);
            let hooked = r.hooked(dev);
            let keep_all = self.detail.timeline;
            let st = self.devs.entry(dev).or_default();
            if !keep_all {
                st.readings.clear();
            }
            st.readings.push((r.clock, free, hooked));
        }
        // The context's bytes as the books move them (a destroy or last release gives them
        // back): held since the first record that made them non-zero.
        if let Some(m) = r.moved.filter(|m| m.owner == Owner::Context) {
            let stage = self.stage(r.span);
            let st = self.devs.entry(m.device).or_default();
            let now = st
                .context
                .as_ref()
                .map_or(0, |c| c.bytes)
                .saturating_add_signed(m.bytes);
            match &mut st.context {
                Some(c) if now > 0 => c.bytes = now,
                Some(_) => st.context = None,
                None if now > 0 => {
                    st.context = Some(ContextHeld {
                        bytes: now,
                        stage,
                        t_ns: e.t_ns,
                    });
                    st.context_span = r.span;
                }
                None => {}
            }
        }
        if kind == Kind::AllocFailed && e.result == CUDA_ERROR_OUT_OF_MEMORY {
            self.failure(e, r);
        }
        if e.result == 0 {
            self.mirror(kind, e, r);
        }
        if let (Some(m), Some(held)) = (r.moved, r.held()) {
            self.seen.insert(m.device);
            let st = self.devs.entry(m.device).or_default();
            if self.detail.timeline {
                st.timeline.push(TimelineSample {
                    t_ns: r.clock,
                    by_owner: held.by_owner,
                });
            }
        }
    }

    /// Whether the walk can stop: every point captured, every failure's free memory settled.
    fn done(&self, taken: usize) -> bool {
        taken > self.last && self.pending.is_empty()
    }
}

/// Hooked totals per device at some moment of the replay.
pub(super) trait HeldNow {
    fn hooked(&self, device: i32) -> i64;
}

impl HeldNow for Rec<'_> {
    fn hooked(&self, device: i32) -> i64 {
        self.devices.get(device).map_or(0, |h| h.by_owner.hooked())
    }
}

impl HeldNow for Now<'_> {
    fn hooked(&self, device: i32) -> i64 {
        self.devices.get(device).map_or(0, |h| h.by_owner.hooked())
    }
}

impl Observer for Replay<'_> {
    const BEFORE: bool = true;
    fn before(&mut self, now: &Now<'_>) -> ControlFlow<()> {
        if self.checkpoints.contains(&now.index) {
            self.capture_at(now);
        }
        ControlFlow::Continue(())
    }

    fn record(&mut self, r: &Rec<'_>) -> ControlFlow<()> {
        self.follow_failures(r.e);
        if r.index <= self.last {
            self.step(r);
        }
        if self.done(r.index + 1) {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }

    fn end(&mut self, now: &Now<'_>) {
        if self.checkpoints.contains(&now.index) {
            self.capture_at(now);
        }
        for p in std::mem::take(&mut self.pending) {
            let free = p.fallback;
            self.settle(p, free);
        }
    }
}
