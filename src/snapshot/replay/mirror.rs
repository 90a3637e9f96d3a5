//! What the snapshot's book keeps beside the live books, record by record: capture windows,
//! the metadata of blocks, VMM handles and their mappings, pinned host and reserved ranges,
//! and pool samples (the history of shown allocations with them).

use vramledger_format::{Event, Kind, MemKind};

use super::{is_async, MapInfo, Meta, Replay};
use crate::ledger::replay::Rec;
use crate::snapshot::Action;

impl Replay<'_> {
    pub(super) fn capture_window(&mut self, kind: Kind, e: &Event, i: usize) {
        match kind {
            Kind::CaptureBegin if e.result == 0 => {
                self.captures.push(crate::snapshot::CaptureWindow {
                    device: e.device,
                    stream: e.handle,
                    begin: i,
                    end: None,
                })
            }
            Kind::CaptureEnd => {
                if let Some(c) = self
                    .captures
                    .iter_mut()
                    .rev()
                    .find(|c| c.end.is_none() && c.stream == e.handle && c.device == e.device)
                {
                    c.end = Some(i);
                }
            }
            _ => {}
        }
    }

    /// Forgets a handle the books dropped.
    pub(super) fn forget_if_dropped(&mut self, handle: u64, r: &Rec<'_>) {
        if r.books.handle_info(handle).is_none() {
            self.handles.remove(&handle);
        }
    }

    /// Removes the mappings that start in `[addr, addr + len)`, with history for shown ones;
    /// their handles are kept in `unmapped` for [`Self::forget_if_dropped`].
    pub(super) fn unmap_range(&mut self, addr: u64, len: u64, t_ns: u64) {
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

    /// Keeps the metadata the live books do not, for a successful record: first what it ends
    /// (a block at the address it reuses, the mappings it replaces or removes), then what it
    /// makes (the books have taken it: a handle's life is theirs to tell).
    pub(super) fn mirror(&mut self, kind: Kind, e: &Event, r: &Rec<'_>) {
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
                    let info = MapInfo {
                        handle: e.handle,
                        size: e.size,
                        offset: 0,
                        shown: false,
                    };
                    self.mappings.insert(e.addr, info);
                }
            }
            Kind::VmmMap => {
                // A mapping replaced at the same address keeps its handle's count.
                self.unmapped.clear();
                let h = self.handles.get(&e.handle).copied();
                let live = r.books.handle_info(e.handle).is_some();
                let shown = live && h.is_some_and(|h| h.mem == MemKind::Device && h.device >= 0);
                let info = MapInfo {
                    handle: e.handle,
                    size: e.size,
                    offset: e.arg0,
                    shown,
                };
                self.mappings.insert(e.addr, info);
                if let (true, Some(h)) = (shown, h) {
                    self.history(Action::Map, e.addr, e.size, &h, e.t_ns);
                }
            }
            Kind::VmmRelease => self.forget_if_dropped(e.handle, r),
            Kind::VmmUnmap | Kind::IpcClose => {
                for h in std::mem::take(&mut self.unmapped) {
                    self.forget_if_dropped(h, r);
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
}
