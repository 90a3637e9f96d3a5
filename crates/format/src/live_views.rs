//! What the live books hold, read: the accessors of [`LiveBooks`] that change nothing.

use std::collections::BTreeMap;

use super::{LiveBlock, LiveBooks};
use crate::record::{MemKind, Owner};

impl LiveBooks {
    /// The VMM handles whose memory the last event returned, when it was a release, an unmap
    /// or an IPC close (its last reference or mapping gone): for a book that keeps more of a
    /// handle than these books do, so that it lets go of it at the same record.
    pub fn dropped(&self) -> &[u64] {
        &self.dropped
    }

    /// Mapped VMM memory now: `(address, handle, bytes)` by address (IPC opens included).
    pub fn mappings(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.mappings.iter().map(|(&a, &(h, size))| (a, h, size))
    }

    /// Bytes held now, per (device, owner, memory kind), in key order; zero entries are
    /// omitted.
    pub fn totals(&self) -> impl Iterator<Item = ((i32, Owner, MemKind), u64)> + '_ {
        self.totals.sorted().into_iter()
    }

    /// Bytes of `mem` held now by `owner` on `device`.
    pub fn held(&self, device: i32, owner: Owner, mem: MemKind) -> u64 {
        self.totals.get(device, owner, mem)
    }

    /// Virtual address space reserved now (never VRAM), per device (-1 unknown).
    pub fn reserved_va(&self) -> BTreeMap<i32, u64> {
        let mut out = BTreeMap::new();
        for &(size, dev) in self.reservations.values() {
            *out.entry(dev).or_insert(0) += size;
        }
        out
    }

    /// The live allocation at `addr` (cuMemAlloc family, stream-ordered, or pinned host).
    pub fn block_at(&self, addr: u64) -> Option<LiveBlock> {
        self.blocks
            .get(addr)
            .or_else(|| self.async_blocks.get(addr))
            .or_else(|| self.host.get(addr))
            .map(|b| LiveBlock {
                owner: b.owner,
                size: b.size,
                device: b.device,
                module: b.module,
                mem: b.mem,
            })
    }

    /// The owner, size and device of a live VMM handle.
    pub fn handle_info(&self, handle: u64) -> Option<(Owner, u64, i32)> {
        self.handles
            .get(handle)
            .map(|p| (p.block.owner, p.block.size, p.block.device))
    }

    /// The handle mapped at exactly `addr`.
    pub fn mapping_at(&self, addr: u64) -> Option<u64> {
        self.mappings.get(&addr).map(|&(h, _)| h)
    }

    /// Live allocations of the cuMemAlloc family and VMM handles, for snapshots:
    /// `(address or handle, is_vmm, device, owner, mem, size, module)`.
    pub fn live_items(&self) -> Vec<(u64, bool, i32, Owner, MemKind, u64, u32)> {
        let mut out = Vec::with_capacity(self.blocks.len() + self.handles.len());
        for (a, b) in self.blocks.iter() {
            out.push((a, false, b.device, b.owner, b.mem, b.size, b.module));
        }
        for (h, p) in self.handles.iter() {
            let b = p.block;
            out.push((h, true, b.device, b.owner, b.mem, b.size, b.module));
        }
        out.sort_by_key(|x| (x.1, x.0));
        out
    }
}
