//! The live books: which physical memory exists right now, and who owns it.
//!
//! A replay of events into physical state, shared by the shim (to write the live ledger
//! when an allocation fails) and the offline ledger (so the two agree by construction).
//! It knows the physical rules of each family:
//! - `cuMemAlloc` family: an address holds memory from alloc until free;
//! - VMM: a handle holds memory from `cuMemCreate` until its references (create +
//!   retains − releases) reach zero *and* no mapping of it is left;
//! - stream-ordered pools: per-call sizes are not physical; a pool holds what its last
//!   `reserved` sample said;
//! - host-pinned, peer (imported) and virtual reservations are books of their own, never
//!   VRAM.
//!
//! It never allocates per event beyond its maps, never panics on odd sequences (an
//! unknown free is ignored and counted), and knows nothing about stages.

use std::collections::BTreeMap;

use crate::addr_table::AddrTable;
use crate::record::{Event, Kind, MemKind, Owner};
use crate::Api;

/// One change of physical memory caused by one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delta {
    /// Device ordinal (-1 unknown; host memory uses -1).
    pub device: i32,
    /// Who holds (or held) the bytes.
    pub owner: Owner,
    /// Which books.
    pub mem: MemKind,
    /// Positive when memory was taken, negative when returned.
    pub bytes: i64,
    /// Module id of the allocation.
    pub module: u32,
}

/// What the books know about one live allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveBlock {
    /// Who holds it.
    pub owner: Owner,
    /// Bytes.
    pub size: u64,
    /// Device ordinal (-1 for host memory).
    pub device: i32,
    /// Module id of the allocation.
    pub module: u32,
    /// Which books.
    pub mem: MemKind,
}

#[derive(Debug, Clone, Copy)]
struct Block {
    device: i32,
    size: u64,
    owner: Owner,
    mem: MemKind,
    module: u32,
}

#[derive(Debug, Clone, Copy)]
struct Phys {
    block: Block,
    refs: u32,
    maps: u32,
}

/// Physical state replayed from events.
#[derive(Debug, Default, Clone)]
pub struct LiveBooks {
    blocks: AddrTable<Block>,
    async_blocks: AddrTable<Block>,
    handles: AddrTable<Phys>,
    mappings: BTreeMap<u64, (u64, u64)>,
    reservations: BTreeMap<u64, (u64, i32)>,
    host: AddrTable<Block>,
    pools: AddrTable<Block>,
    totals: Totals,
    /// Frees, releases and unmaps of things these books never saw allocated.
    pub unknown_frees: u64,
    /// The VMM handles whose memory the last release, unmap or IPC close returned.
    dropped: Vec<u64>,
}

/// Stream-ordered allocations: their sizes are requests served from a pool.
#[inline]
fn is_async(api: u16) -> bool {
    api == Api::cuMemAllocAsync as u16
        || api == Api::cuMemAllocAsync_ptsz as u16
        || api == Api::cuMemAllocFromPoolAsync as u16
        || api == Api::cuMemAllocFromPoolAsync_ptsz as u16
}

impl LiveBooks {
    /// A new, empty set of books.
    pub fn new() -> Self {
        Self::default()
    }

    #[inline(always)]
    fn add(&mut self, b: &Block, sign: i64) -> Delta {
        change(&mut self.totals, b, sign)
    }

    fn block_of(e: &Event, mem: MemKind) -> Block {
        Block {
            device: e.device,
            size: e.size,
            owner: e.owner(),
            mem,
            module: e.module,
        }
    }

    /// [`LiveBooks::apply`] that first completes a release from the books, as the shim
    /// records it: a free takes the size, owner, device, module and memory kind of its
    /// allocation (one lookup for both), a VMM release, retain or map the owner and device of
    /// its handle, an unmap the handle mapped at its address.
    pub fn book(&mut self, e: &mut Event) -> Option<Delta> {
        // An allocation completes nothing (told by its tag: no kind table for the shim's hook
        // to miss after its driver call).
        if e.kind == Kind::Alloc as u16 {
            return self.apply(e);
        }
        // A free in one lookup: no stream-ordered block to look past (by tag: no table).
        if e.kind == Kind::Free as u16 && e.result == 0 && self.async_blocks.is_empty() {
            return match self.blocks.remove(e.addr) {
                Some(b) => {
                    fill_from(e, &b);
                    Some(self.add(&b, -1))
                }
                None => {
                    if let Some(b) = self.host.get(e.addr) {
                        fill_from(e, b);
                    }
                    self.unknown_frees += 1;
                    None
                }
            };
        }
        match e.kind() {
            Some(Kind::Free | Kind::HostFree) => {
                if let Some(b) = self.block_at(e.addr) {
                    e.owner = b.owner as u8;
                    e.size = b.size;
                    e.device = b.device;
                    e.module = b.module;
                    e.mem = b.mem as u8;
                }
                self.apply(e)
            }
            Some(Kind::VmmRelease | Kind::VmmRetain | Kind::VmmMap) => {
                if e.owner == 0 {
                    if let Some((owner, size, device)) = self.handle_info(e.handle) {
                        e.owner = owner as u8;
                        e.device = device;
                        if e.size == 0 {
                            e.size = size;
                        }
                    }
                }
                self.apply(e)
            }
            Some(Kind::VmmUnmap) => {
                if let Some(h) = self.mapping_at(e.addr) {
                    e.handle = h;
                    if let Some((owner, _, device)) = self.handle_info(h) {
                        e.owner = owner as u8;
                        e.device = device;
                    }
                }
                self.apply(e)
            }
            _ => self.apply(e),
        }
    }

    /// Applies one event; returns the physical change it caused, if any.
    #[inline(always)]
    pub fn apply(&mut self, e: &Event) -> Option<Delta> {
        if e.result != 0 {
            return None; // a failed call changed nothing
        }
        // Nearly every record's two kinds, by tag (no table), inline into a replay's loop.
        match e.kind {
            k if k == Kind::Alloc as u16 => self.alloc(e),
            k if k == Kind::Free as u16 => self.free(e),
            _ => self.apply_other(e.kind()?, e),
        }
    }

    #[inline(always)]
    fn alloc(&mut self, e: &Event) -> Option<Delta> {
        let b = Self::block_of(e, e.mem());
        if is_async(e.api) {
            self.async_blocks.insert(e.addr, b);
            return None;
        }
        let old = self.blocks.insert(e.addr, b);
        Some(self.taken(old, &b))
    }

    /// The change of `new` taking an address that may still hold `old`: never freed in the
    /// journal, the old block is gone (one change when both are the same owner's, device and
    /// kind; else the new one's).
    #[inline(always)]
    fn taken(&mut self, old: Option<Block>, new: &Block) -> Delta {
        let old_delta = old.map(|o| {
            self.unknown_frees += 1;
            self.add(&o, -1)
        });
        let d = self.add(new, 1);
        match old_delta {
            Some(o) if o.owner == d.owner && o.device == d.device && o.mem == d.mem => Delta {
                bytes: d.bytes + o.bytes,
                ..d
            },
            _ => d,
        }
    }

    #[inline(always)]
    fn free(&mut self, e: &Event) -> Option<Delta> {
        // (No stream-ordered block: no lookup.)
        if !self.async_blocks.is_empty() && self.async_blocks.remove(e.addr).is_some() {
            return None;
        }
        match self.blocks.remove(e.addr) {
            Some(b) => Some(self.add(&b, -1)),
            None => {
                self.unknown_frees += 1;
                None
            }
        }
    }

    /// [`LiveBooks::apply`] of every kind but allocations and frees.
    #[inline(never)]
    fn apply_other(&mut self, kind: Kind, e: &Event) -> Option<Delta> {
        match kind {
            Kind::VmmCreate | Kind::VmmImport if e.handle != 0 => {
                let mem = if e.kind() == Some(Kind::VmmImport) {
                    MemKind::Peer
                } else {
                    e.mem()
                };
                let b = Self::block_of(e, mem);
                if let Some(old) = self.handles.insert(
                    e.handle,
                    Phys {
                        block: b,
                        refs: 1,
                        maps: 0,
                    },
                ) {
                    self.unknown_frees += 1;
                    self.add(&old.block, -1);
                }
                if e.kind() == Some(Kind::VmmImport) && e.addr != 0 {
                    // IPC opens map the peer memory at once.
                    self.mappings.insert(e.addr, (e.handle, e.size));
                    if let Some(p) = self.handles.get_mut(e.handle) {
                        p.maps += 1;
                    }
                }
                Some(self.add(&b, 1))
            }
            Kind::VmmRetain => {
                match self.handles.get_mut(e.handle) {
                    Some(p) => p.refs = p.refs.saturating_add(1),
                    None => self.unknown_frees += 1,
                }
                None
            }
            Kind::VmmRelease => {
                self.dropped.clear();
                let drop = match self.handles.get_mut(e.handle) {
                    Some(p) => {
                        p.refs = p.refs.saturating_sub(1);
                        p.refs == 0 && p.maps == 0
                    }
                    None => {
                        self.unknown_frees += 1;
                        false
                    }
                };
                self.drop_handle_if(drop, e.handle)
            }
            Kind::VmmMap => {
                self.mappings.insert(e.addr, (e.handle, e.size));
                if let Some(p) = self.handles.get_mut(e.handle) {
                    p.maps = p.maps.saturating_add(1);
                }
                None
            }
            Kind::VmmUnmap | Kind::IpcClose => {
                self.dropped.clear();
                let end = e.addr.saturating_add(e.size.max(1));
                let close = kind == Kind::IpcClose;
                let mut out: Option<Delta> = None;
                let mut unmapped = false;
                let (handles, totals, dropped) =
                    (&mut self.handles, &mut self.totals, &mut self.dropped);
                // Every mapping that starts in the range, lowest first, taken out in the one
                // search that finds them.
                for (_, (handle, _)) in self.mappings.extract_if(e.addr..end, |_, _| true) {
                    unmapped = true;
                    let drop = match handles.get_mut(handle) {
                        Some(p) => {
                            p.maps = p.maps.saturating_sub(1);
                            if close {
                                p.refs = p.refs.saturating_sub(1);
                            }
                            p.refs == 0 && p.maps == 0
                        }
                        None => false,
                    };
                    let Some(d) = drop
                        .then(|| release(handles, totals, dropped, handle))
                        .flatten()
                    else {
                        continue;
                    };
                    out = Some(match out {
                        Some(o) if o.owner == d.owner && o.device == d.device && o.mem == d.mem => {
                            Delta {
                                bytes: o.bytes + d.bytes,
                                ..o
                            }
                        }
                        Some(o) => o,
                        None => d,
                    });
                }
                if !unmapped {
                    self.unknown_frees += 1;
                }
                out
            }
            Kind::VaReserve => {
                self.reservations.insert(e.addr, (e.size, e.device));
                None
            }
            Kind::VaFree => {
                if self.reservations.remove(&e.addr).is_none() {
                    self.unknown_frees += 1;
                }
                None
            }
            Kind::HostAlloc => {
                let b = Block {
                    device: -1,
                    mem: MemKind::HostPinned,
                    ..Self::block_of(e, MemKind::HostPinned)
                };
                let old = self.host.insert(e.addr, b);
                Some(self.taken(old, &b))
            }
            Kind::HostFree => match self.host.remove(e.addr) {
                Some(b) => Some(self.add(&b, -1)),
                None => {
                    self.unknown_frees += 1;
                    None
                }
            },
            Kind::PoolSample => {
                let new = Block {
                    size: e.arg0,
                    ..Self::block_of(e, MemKind::Device)
                };
                let old = self.pools.insert(e.handle, new);
                let old_size = old.map_or(0, |b| b.size);
                if let Some(o) = old {
                    self.add(&o, -1);
                }
                self.add(&new, 1);
                let diff = (new.size as i128 - old_size as i128)
                    .clamp(i64::MIN as i128, i64::MAX as i128) as i64;
                (diff != 0).then_some(Delta {
                    device: new.device,
                    owner: new.owner,
                    mem: MemKind::Device,
                    bytes: diff,
                    module: new.module,
                })
            }
            Kind::PoolDestroy => {
                let old = self.pools.remove(e.handle)?;
                Some(self.add(&old, -1))
            }
            _ => None,
        }
    }

    fn drop_handle_if(&mut self, drop: bool, handle: u64) -> Option<Delta> {
        if !drop {
            return None;
        }
        release(
            &mut self.handles,
            &mut self.totals,
            &mut self.dropped,
            handle,
        )
    }
}

/// VMM handle `handle`'s memory returned (its last reference and mapping gone): out of
/// `handles` and `totals`, noted in `dropped`; the change. Over the fields, not the books: an
/// unmap calls it while it walks `mappings`.
fn release(
    handles: &mut AddrTable<Phys>,
    totals: &mut Totals,
    dropped: &mut Vec<u64>,
    handle: u64,
) -> Option<Delta> {
    let p = handles.remove(handle)?;
    dropped.push(handle);
    Some(change(totals, &p.block, -1))
}

/// `b`'s bytes taken (`sign` > 0) or returned in `totals`: the change.
#[inline(always)]
fn change(totals: &mut Totals, b: &Block, sign: i64) -> Delta {
    let slot = totals.slot(b.device, b.owner, b.mem);
    // Both sides computed, one kept (a select, not a branch: takes and returns alternate
    // at random, and a mispredicted branch here cost more than the other side).
    let (up, down) = (slot.saturating_add(b.size), slot.saturating_sub(b.size));
    *slot = if sign > 0 { up } else { down };
    // Sizes past i64::MAX exist only in damaged journals: clamp, never overflow.
    let bytes = b.size.min(i64::MAX as u64) as i64;
    Delta {
        device: b.device,
        owner: b.owner,
        mem: b.mem,
        bytes: if sign > 0 { bytes } else { -bytes },
        module: b.module,
    }
}

/// The fields of a released allocation's record that its allocation gives.
#[inline]
fn fill_from(e: &mut Event, b: &Block) {
    e.owner = b.owner as u8;
    e.size = b.size;
    e.device = b.device;
    e.module = b.module;
    e.mem = b.mem as u8;
}

#[path = "live_totals.rs"]
mod totals;
#[path = "live_views.rs"]
mod views;
use totals::Totals;

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
