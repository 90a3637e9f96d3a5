//! What a snapshot takes at a point of the replay ([`super::replay`]): the live allocations
//! of a device (from the live books, with the metadata the replay mirrors), bytes per owner
//! and per allocating stage; the process's own books (pinned host, managed, peer, virtual).

use std::collections::{BTreeMap, HashMap};

use vramledger_format::{LiveBooks, MemKind, Owner};

use super::replay::{Cut, MapInfo, Meta, ProcessBooks, Replay};
use super::{DeviceSnapshot, Item, ItemKind, Mapping, Point, Reservation, StageTotal};
use crate::ledger::replay::Now;
use crate::ledger::OwnerBytes;

impl Replay<'_> {
    /// Captures what is due before record `now.index`.
    pub(super) fn capture_at(&mut self, now: &Now<'_>) {
        let i = now.index;
        if i == self.plan.process.events {
            self.process_books = Some(self.process_books(now.books));
            self.point_clock = now.clock;
            if self.plan.devices.is_none() {
                let point = self.plan.process.clone();
                let seen: Vec<i32> = self.seen.iter().copied().collect();
                for d in seen {
                    let snap = self.capture(d, point.clone(), None, now);
                    self.devices.push(snap);
                }
            }
        }
        let due: Vec<(i32, Point, i64)> = self
            .plan
            .devices
            .iter()
            .flatten()
            .filter(|(_, (p, _))| p.events == i)
            .map(|(&d, (p, bytes))| (d, p.clone(), *bytes))
            .collect();
        for (d, p, bytes) in due {
            let snap = self.capture(d, p, Some(bytes), now);
            self.devices.push(snap);
        }
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
    fn live(&self, books: &LiveBooks) -> Vec<(Item, usize)> {
        let mut out = Vec::new();
        let maps = self.mappings_by_handle();
        for (key, is_vmm, device, owner, mem, size, module) in books.live_items() {
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
    fn capture(
        &mut self,
        dev: i32,
        point: Point,
        peak: Option<i64>,
        now: &Now<'_>,
    ) -> DeviceSnapshot {
        let mut allocations: Vec<(Item, usize)> = self
            .live(now.books)
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
        let free_bytes = self.free_now(dev, now);
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
        let by_owner = now.devices.get(dev).map(|h| h.by_owner).unwrap_or_default();
        let context = st.context.clone();
        let cut = Cut {
            history: st.history.len(),
            timeline: st.timeline.len(),
            readings: st.readings.len(),
            failures: st.failures.len(),
        };
        self.cuts.insert(dev, cut);
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
    fn process_books(&self, books: &LiveBooks) -> ProcessBooks {
        let mut host_pinned = Vec::new();
        let mut managed = Vec::new();
        let mut peer = Vec::new();
        for (it, _) in self.live(books) {
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
