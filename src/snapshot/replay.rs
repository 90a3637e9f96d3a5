//! The replay behind a snapshot: [`LiveBooks`] for what is physically live, plus what the
//! books do not keep (the stage and time of each allocating record, VMM mapping ranges,
//! pinned host and reserved ranges, pool samples), history, timelines and readings per device.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use vramledger_format::{Api, Event, Kind, LiveBooks, MemKind, Owner};

use super::model::{
    Action, ContextHeld, DeviceSnapshot, Failure, HistoryEntry, Item, ItemKind, Mapping, Point,
    Reservation, Span, StageTotal, TimelineSample, CUDA_ERROR_OUT_OF_MEMORY,
};
use crate::journal::Journal;
use crate::ledger::OwnerBytes;

/// What is known about one allocation besides what the live books keep.
#[derive(Debug, Clone, Copy)]
struct Meta {
    device: i32,
    size: u64,
    owner: Owner,
    mem: MemKind,
    module: u32,
    span: usize,
    t_ns: u64,
    /// PyTorch's pool id, when the journal says it (see [`crate::ledger::pools::pool_of`]).
    pool: Option<(u64, u64)>,
}

#[derive(Debug, Clone, Copy)]
struct MapInfo {
    handle: u64,
    size: u64,
    offset: u64,
    /// A device VMM handle of a known device: in the history and memory_viz.
    shown: bool,
}

#[derive(Debug, Default)]
pub(super) struct DevState {
    held: OwnerBytes,
    pub(super) history: Vec<HistoryEntry>,
    pub(super) timeline: Vec<TimelineSample>,
    /// (clock, free, hooked total when read)
    pub(super) readings: Vec<(u64, u64, i64)>,
    pub(super) failures: Vec<Failure>,
    context: Option<ContextHeld>,
    context_span: usize,
}

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Cut {
    pub(super) history: usize,
    pub(super) timeline: usize,
    pub(super) readings: usize,
    pub(super) failures: usize,
}

pub(super) type ProcessBooks = (Vec<Item>, Vec<Item>, Vec<Item>, Vec<Reservation>);

pub(super) struct Replay<'a> {
    j: &'a Journal,
    spans: &'a [Span],
    span: usize,
    books: LiveBooks,
    blocks: HashMap<u64, Meta>,
    async_addrs: HashSet<u64>,
    handles: HashMap<u64, Meta>,
    mappings: BTreeMap<u64, MapInfo>,
    unmapped: Vec<u64>,
    host: HashMap<u64, Meta>,
    reservations: BTreeMap<u64, Meta>,
    pools: HashMap<u64, Meta>,
    /// Pools named by captures at their end (window serial → pool id).
    named_pools: HashMap<u64, (u64, u64)>,
    pub(super) devs: BTreeMap<i32, DevState>,
    pub(super) seen: BTreeSet<i32>,
    pub(super) cuts: BTreeMap<i32, Cut>,
    clock: u64,
    /// The record being replayed.
    index: usize,
    /// The non-decreasing clock at every record replayed.
    pub(super) clock_at: Vec<u64>,
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

pub(super) fn reading(e: &Event) -> Option<(i32, u64)> {
    match e.kind()? {
        Kind::MemInfo | Kind::NvmlSample if e.device >= 0 => Some((e.device, e.arg0)),
        _ => None,
    }
}

impl<'a> Replay<'a> {
    pub(super) fn new(j: &'a Journal, spans: &'a [Span]) -> Self {
        Replay {
            j,
            spans,
            span: 0,
            books: LiveBooks::new(),
            blocks: HashMap::new(),
            async_addrs: HashSet::new(),
            handles: HashMap::new(),
            mappings: BTreeMap::new(),
            unmapped: Vec::new(),
            host: HashMap::new(),
            reservations: BTreeMap::new(),
            pools: HashMap::new(),
            named_pools: crate::ledger::pools::capture_pools(j),
            devs: BTreeMap::new(),
            seen: BTreeSet::new(),
            cuts: BTreeMap::new(),
            clock: 0,
            index: 0,
            clock_at: Vec::with_capacity(j.events.len()),
        }
    }

    fn stage(&self, span: usize) -> String {
        self.spans
            .get(span)
            .map_or_else(|| "startup".into(), |s| s.name.clone())
    }

    fn module(&self, id: u32) -> String {
        self.j.module_name(id).to_string()
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
        use crate::ledger::pools::{pool_of, PoolKey};
        if !matches!(e.owner(), Owner::Torch | Owner::TorchGraphPool) {
            return None;
        }
        match pool_of(e, &self.named_pools) {
            PoolKey::Default => Some((0, 0)),
            PoolKey::Id(a, b) => Some((a, b)),
            PoolKey::Unknown => None,
        }
    }

    fn history(&mut self, action: Action, addr: u64, bytes: u64, m: &Meta, t_ns: u64) {
        if m.mem != MemKind::Device || m.device < 0 {
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

    /// Device bytes moved: the held books and the timeline.
    fn moved(&mut self, dev: i32, owner: Owner, bytes: i64) {
        self.seen.insert(dev);
        let clock = self.clock;
        let st = self.devs.entry(dev).or_default();
        st.held.add(owner, bytes);
        st.timeline.push(TimelineSample {
            t_ns: clock,
            by_owner: st.held,
        });
    }

    pub(super) fn step(&mut self, i: usize, e: &Event) {
        self.index = i;
        self.clock = self.clock.max(e.t_ns);
        self.clock_at.push(self.clock);
        while self
            .spans
            .get(self.span + 1)
            .is_some_and(|next| next.index <= i)
        {
            self.span += 1;
        }
        let Some(kind) = e.kind() else {
            return;
        };
        if let Some((dev, free)) = reading(e) {
            self.seen.insert(dev);
            let clock = self.clock;
            let st = self.devs.entry(dev).or_default();
            let hooked = st.held.hooked();
            st.readings.push((clock, free, hooked));
        }
        if kind == Kind::Context && e.device >= 0 && e.size > 0 && e.result == 0 {
            let span = self.span;
            let stage = self.stage(span);
            let st = self.devs.entry(e.device).or_default();
            match &mut st.context {
                Some(c) => c.bytes = c.bytes.saturating_add(e.size),
                None => {
                    st.context = Some(ContextHeld {
                        bytes: e.size,
                        stage,
                        t_ns: e.t_ns,
                    });
                    st.context_span = span;
                }
            }
            self.moved(e.device, Owner::Context, e.size as i64);
        }
        if kind == Kind::AllocFailed && e.result == CUDA_ERROR_OUT_OF_MEMORY {
            if let Some(f) = self.failure(e, i) {
                self.devs.entry(f.device).or_default().failures.push(f);
            }
        }
        let ok = e.result == 0;
        // Before the books change: what this record ends.
        if ok {
            match kind {
                Kind::Alloc if !is_async(e.api()) => {
                    if let Some(old) = self.blocks.remove(&e.addr) {
                        self.history(Action::Free, e.addr, old.size, &old, e.t_ns);
                    }
                }
                Kind::VmmMap => self.unmap_range(e.addr, 1, e.t_ns),
                Kind::VmmUnmap | Kind::IpcClose => self.unmap_range(e.addr, e.size.max(1), e.t_ns),
                _ => {}
            }
        }
        let delta = self.books.apply(e);
        if ok {
            self.mirror(kind, e);
        }
        if let Some(d) = delta {
            if d.mem == MemKind::Device && d.device >= 0 {
                self.moved(d.device, d.owner, d.bytes);
            }
        }
    }

    /// Forgets a handle the books dropped.
    fn forget_if_dropped(&mut self, handle: u64) {
        if self.books.handle_info(handle).is_none() {
            self.handles.remove(&handle);
        }
    }

    /// Removes the mappings that start in `[addr, addr + len)`, with history for shown ones;
    /// their handles are kept in `unmapped` for [`Self::forget_if_dropped`].
    fn unmap_range(&mut self, addr: u64, len: u64, t_ns: u64) {
        let end = addr.saturating_add(len);
        let gone: Vec<(u64, MapInfo)> = self
            .mappings
            .range(addr..end)
            .map(|(&a, &m)| (a, m))
            .collect();
        for (a, m) in gone {
            self.mappings.remove(&a);
            self.unmapped.push(m.handle);
            if m.shown {
                if let Some(h) = self.handles.get(&m.handle).copied() {
                    self.history(Action::Unmap, a, m.size, &h, t_ns);
                }
            }
        }
    }

    /// Keeps the metadata the live books do not: after a successful record.
    fn mirror(&mut self, kind: Kind, e: &Event) {
        match kind {
            Kind::Alloc => {
                if is_async(e.api()) {
                    self.async_addrs.insert(e.addr);
                } else {
                    let m = self.meta(e, e.mem());
                    self.blocks.insert(e.addr, m);
                    self.history(Action::Alloc, e.addr, e.size, &m, e.t_ns);
                }
            }
            // A stream-ordered free returns nothing physical.
            Kind::Free if self.async_addrs.remove(&e.addr) => {}
            Kind::Free => {
                if let Some(old) = self.blocks.remove(&e.addr) {
                    self.history(Action::Free, e.addr, old.size, &old, e.t_ns);
                }
            }
            Kind::VmmCreate | Kind::VmmImport if e.handle != 0 => {
                let mem = if kind == Kind::VmmImport {
                    MemKind::Peer
                } else {
                    e.mem()
                };
                let m = self.meta(e, mem);
                self.handles.insert(e.handle, m);
                if kind == Kind::VmmImport && e.addr != 0 {
                    self.mappings.insert(
                        e.addr,
                        MapInfo {
                            handle: e.handle,
                            size: e.size,
                            offset: 0,
                            shown: false,
                        },
                    );
                }
            }
            Kind::VmmMap => {
                // A mapping replaced at the same address keeps its handle's count.
                self.unmapped.clear();
                let h = self.handles.get(&e.handle).copied();
                let live = self.books.handle_info(e.handle).is_some();
                let shown = live && h.is_some_and(|h| h.mem == MemKind::Device && h.device >= 0);
                self.mappings.insert(
                    e.addr,
                    MapInfo {
                        handle: e.handle,
                        size: e.size,
                        offset: e.arg0,
                        shown,
                    },
                );
                if let (true, Some(h)) = (shown, h) {
                    self.history(Action::Map, e.addr, e.size, &h, e.t_ns);
                }
            }
            Kind::VmmRelease => self.forget_if_dropped(e.handle),
            Kind::VmmUnmap | Kind::IpcClose => {
                for h in std::mem::take(&mut self.unmapped) {
                    self.forget_if_dropped(h);
                }
            }
            Kind::VaReserve => {
                let m = self.meta(e, MemKind::Virtual);
                self.reservations.insert(e.addr, m);
            }
            Kind::VaFree => {
                self.reservations.remove(&e.addr);
            }
            Kind::HostAlloc => {
                let m = Meta {
                    device: -1,
                    ..self.meta(e, MemKind::HostPinned)
                };
                self.host.insert(e.addr, m);
            }
            Kind::HostFree => {
                self.host.remove(&e.addr);
            }
            Kind::PoolSample => {
                let new = Meta {
                    size: e.arg0,
                    ..self.meta(e, MemKind::Device)
                };
                match self.pools.get_mut(&e.handle) {
                    // A pool that grew was allocated (again) now; one that shrank was not.
                    Some(old) if new.size <= old.size => {
                        *old = Meta {
                            span: old.span,
                            t_ns: old.t_ns,
                            ..new
                        };
                    }
                    _ => {
                        self.pools.insert(e.handle, new);
                    }
                }
            }
            Kind::PoolDestroy => {
                self.pools.remove(&e.handle);
            }
            _ => {}
        }
    }

    /// The failed allocation `e` (record `i`), with the free memory of its device then.
    pub(super) fn failure(&self, e: &Event, i: usize) -> Option<Failure> {
        if e.kind() != Some(Kind::AllocFailed) {
            return None;
        }
        let device = e.device;
        // The shim samples free memory right after a failure: take that reading if one
        // comes before anything else moves.
        let mut free = None;
        for later in &self.j.events[i + 1..] {
            if let Some((d, f)) = reading(later) {
                if d == device {
                    free = Some(f);
                    break;
                }
                continue;
            }
            match later.kind() {
                Some(Kind::Live | Kind::Warning | Kind::Module | Kind::NvmlSample) => {}
                _ => break,
            }
        }
        if free.is_none() {
            free = self.free_now(device);
        }
        Some(Failure {
            device,
            requested_bytes: e.size,
            owner: e.owner(),
            module: self.module(e.module),
            api: e
                .api()
                .map_or_else(|| format!("api_{}", e.api), |a| a.name().to_string()),
            result: e.result,
            stage: self.stage(self.span_of(i)),
            t_ns: e.t_ns,
            clock_ns: self.clock.max(e.t_ns),
            index: i,
            free_bytes: free,
        })
    }

    fn span_of(&self, i: usize) -> usize {
        self.spans
            .partition_point(|s| s.index <= i)
            .saturating_sub(1)
    }

    /// Free memory now: the last reading corrected by the hooked bytes moved since.
    fn free_now(&self, device: i32) -> Option<u64> {
        let st = self.devs.get(&device)?;
        let &(_, free, hooked) = st.readings.last()?;
        let now = st.held.hooked();
        let free = free as i128 - (now as i128 - hooked as i128);
        Some(free.clamp(0, u64::MAX as i128) as u64)
    }

    /// The current mappings of each handle, in address order (one pass over the mappings).
    fn mappings_by_handle(&self) -> HashMap<u64, Vec<(u64, MapInfo)>> {
        let mut out: HashMap<u64, Vec<(u64, MapInfo)>> = HashMap::new();
        for (&a, &mi) in &self.mappings {
            out.entry(mi.handle).or_default().push((a, mi));
        }
        out
    }

    /// An item; for a VMM handle, `maps` are its mappings (device memory: those in the
    /// history only, so that memory_viz segments match its trace).
    fn item(&self, kind: ItemKind, key: u64, m: &Meta, size: u64, maps: &[(u64, MapInfo)]) -> Item {
        let (address, handle) = match kind {
            ItemKind::Alloc | ItemKind::Host => (Some(key), None),
            ItemKind::Vmm | ItemKind::Pool => (None, Some(key)),
        };
        let device_mem = m.mem == MemKind::Device;
        let mappings = maps
            .iter()
            .filter(|(_, mi)| mi.shown || !device_mem)
            .map(|&(a, mi)| Mapping {
                address: a,
                bytes: mi.size,
                offset: mi.offset,
            })
            .collect();
        Item {
            kind,
            address,
            handle,
            device: m.device,
            bytes: size,
            owner: m.owner,
            mem: m.mem,
            module: self.module(m.module),
            stage: self.stage(m.span),
            t_ns: m.t_ns,
            mappings,
            pool: m.pool,
        }
    }

    /// Live items of the cuMemAlloc family and VMM (from the books, with their metadata).
    fn live(&self) -> Vec<(Item, usize)> {
        let mut out = Vec::new();
        let maps = self.mappings_by_handle();
        for (key, is_vmm, device, owner, mem, size, module) in self.books.live_items() {
            let known = if is_vmm {
                self.handles.get(&key)
            } else {
                self.blocks.get(&key)
            };
            let fallback = Meta {
                device,
                size,
                owner,
                mem,
                module,
                span: 0,
                t_ns: 0,
                pool: None,
            };
            let m = Meta {
                device,
                owner,
                mem,
                module,
                ..known.copied().unwrap_or(fallback)
            };
            let kind = if is_vmm {
                ItemKind::Vmm
            } else {
                ItemKind::Alloc
            };
            let mine = if is_vmm {
                maps.get(&key).map_or(&[][..], Vec::as_slice)
            } else {
                &[]
            };
            out.push((self.item(kind, key, &m, size, mine), m.span));
        }
        out
    }

    /// Captures device `dev` now.
    pub(super) fn capture(&mut self, dev: i32, point: Point, peak: Option<i64>) -> DeviceSnapshot {
        let mut allocations: Vec<(Item, usize)> = self
            .live()
            .into_iter()
            .filter(|(it, _)| it.device == dev && it.mem == MemKind::Device)
            .collect();
        let mut pools: Vec<(u64, Meta)> = self
            .pools
            .iter()
            .filter(|(_, m)| m.device == dev && m.size > 0)
            .map(|(&h, &m)| (h, m))
            .collect();
        pools.sort_by_key(|(h, _)| *h);
        for (h, m) in pools {
            allocations.push((self.item(ItemKind::Pool, h, &m, m.size, &[]), m.span));
        }
        let st = self.devs.entry(dev).or_default();
        let mut per_span: BTreeMap<usize, OwnerBytes> = BTreeMap::new();
        for (it, span) in &allocations {
            per_span
                .entry(*span)
                .or_default()
                .add(it.owner, it.bytes as i64);
        }
        if let Some(c) = &st.context {
            per_span
                .entry(st.context_span)
                .or_default()
                .add(Owner::Context, c.bytes as i64);
        }
        let by_owner = st.held;
        let context = st.context.clone();
        self.cuts.insert(
            dev,
            Cut {
                history: st.history.len(),
                timeline: st.timeline.len(),
                readings: st.readings.len(),
                failures: st.failures.len(),
            },
        );
        let free_bytes = self.free_now(dev);
        DeviceSnapshot {
            device: dev,
            point,
            peak_bytes: peak,
            by_owner,
            by_stage: per_span
                .into_iter()
                .map(|(span, by_owner)| StageTotal {
                    stage: self.stage(span),
                    by_owner,
                })
                .collect(),
            context,
            free_bytes,
            allocations: allocations.into_iter().map(|(it, _)| it).collect(),
            history: Vec::new(),
            timeline: Vec::new(),
            free_readings: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// The process's own books now: pinned host, managed, peer, virtual.
    pub(super) fn process_books(&self) -> ProcessBooks {
        let mut host_pinned = Vec::new();
        let mut managed = Vec::new();
        let mut peer = Vec::new();
        for (it, _) in self.live() {
            match it.mem {
                MemKind::HostPinned => host_pinned.push(it),
                MemKind::Managed => managed.push(it),
                MemKind::Peer => peer.push(it),
                MemKind::Device | MemKind::Virtual => {}
            }
        }
        let mut host: Vec<(u64, Meta)> = self.host.iter().map(|(&a, &m)| (a, m)).collect();
        host.sort_by_key(|(a, _)| *a);
        for (a, m) in host {
            host_pinned.push(self.item(ItemKind::Host, a, &m, m.size, &[]));
        }
        let reservations = self
            .reservations
            .iter()
            .map(|(&a, m)| Reservation {
                address: a,
                bytes: m.size,
                device: m.device,
                owner: m.owner,
                module: self.module(m.module),
                stage: self.stage(m.span),
                t_ns: m.t_ns,
            })
            .collect();
        (host_pinned, managed, peer, reservations)
    }
}
