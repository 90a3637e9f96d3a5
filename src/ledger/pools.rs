//! PyTorch's memory pools in one process: bytes per pool id, and the cross-check against
//! torch's own allocator snapshot.
//!
//! The shim tags each segment PyTorch's allocator makes inside a pool window with the pool id
//! the Python hook reported (`torch_graph_pool`); everything else PyTorch makes is its default
//! pool (`torch`, id 0,0). A capture whose pool was not known when it began names it at its
//! end, so the journal is read twice: first the names, then the bytes. Graph-pool memory tagged
//! only by the stream-capture rule (no hook) has no id: [`PoolKey::Unknown`].
//!
//! When the hook wrote torch's snapshot (`torch_segment` records, at exit), every segment torch
//! lists is looked up in the books by address range, and so is every live block the books
//! give PyTorch: a segment the books own differently, with another pool or size, or a block
//! torch does not list, is a [`Mismatch`].

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;

use vramledger_format::addr_hash::AddrMap;
use vramledger_format::record::flags;
use vramledger_format::{Event, Kind, LiveBooks, MemKind, Owner};

use super::index::Index;
use super::replay::{Now, Observer, Rec};
use crate::journal::Journal;

mod rows;

pub use rows::{Mismatch, PoolKey, PoolRow, SnapshotCheck, TorchPools};

/// Bytes as a signed amount (sizes past i64::MAX exist only in damaged journals).
fn signed(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

fn torchs(owner: Owner) -> bool {
    matches!(owner, Owner::Torch | Owner::TorchGraphPool)
}

/// The pool of an allocation record by PyTorch (`torch` or `torch_graph_pool`), given the
/// pools captures named at their end ([`Index::capture_pools`]).
pub fn pool_of(e: &Event, named: &HashMap<u64, (u64, u64)>) -> PoolKey {
    if e.owner() == Owner::Torch {
        return PoolKey::Default;
    }
    if let Some((a, b)) = e.torch_pool() {
        return PoolKey::of_torch(a, b);
    }
    if e.flags & flags::TORCH_POOL_PENDING != 0 {
        if let Some(&(a, b)) = named.get(&e.arg1) {
            return PoolKey::of_torch(a, b);
        }
    }
    PoolKey::Unknown
}

#[derive(Clone)]
struct Piece {
    device: i32,
    size: u64,
    owner: Owner,
    key: PoolKey,
    module: u32,
}

/// Bytes in one pool of one device: (device, pool) → (live, peak, blocks).
type PoolHeld = ((i32, PoolKey), (i64, i64, u64));

/// What the pools need beyond the live books: the pool of each graph-pool block (a torch
/// block is in the default pool), its VMM handles (their mappings are the books'), and bytes
/// per pool.
#[derive(Default)]
struct Pass {
    graph_keys: AddrMap<PoolKey>,
    handles: AddrMap<Piece>,
    /// Few keys: a short list.
    held: Vec<PoolHeld>,
    /// The entry of `held` the last move went to (most moves repeat it).
    last: usize,
}

impl Pass {
    #[inline(always)]
    fn moved(&mut self, device: i32, key: PoolKey, bytes: i64, blocks: i64) {
        if self
            .held
            .get(self.last)
            .is_none_or(|(k, _)| *k != (device, key))
        {
            self.last = self.find_held(device, key);
        }
        let slot = &mut self.held[self.last].1;
        slot.0 = slot.0.saturating_add(bytes);
        slot.1 = slot.1.max(slot.0);
        slot.2 = slot.2.saturating_add_signed(blocks);
    }

    /// VMM handle `h`'s memory is gone: out of its pool.
    fn let_go(&mut self, h: u64) {
        if let Some(p) = self.handles.remove(&h) {
            if torchs(p.owner) {
                self.moved(p.device, p.key, -(signed(p.size)), -1);
            }
        }
    }

    /// The entry of `(device, key)` in `held`, made when it has none.
    #[inline(never)]
    fn find_held(&mut self, device: i32, key: PoolKey) -> usize {
        match self.held.iter().position(|(k, _)| *k == (device, key)) {
            Some(i) => i,
            None => {
                self.held.push(((device, key), (0, 0, 0)));
                self.held.len() - 1
            }
        }
    }

    /// Takes one record, after the live books took it: bytes per pool move with the books'
    /// device deltas of PyTorch's owners.
    #[inline(always)]
    fn apply(&mut self, r: &Rec<'_>, named: &HashMap<u64, (u64, u64)>) {
        let (e, kind) = (r.e, r.kind);
        if e.result != 0 {
            return;
        }
        let device_delta = r.delta.filter(|d| d.mem == MemKind::Device);
        match kind {
            Some(k @ (Kind::Alloc | Kind::Free)) => {
                let Some(d) = device_delta.filter(|d| torchs(d.owner)) else {
                    return;
                };
                // The default pool's blocks (most) take no branch on which of the two this
                // is: allocations and frees alternate at random.
                let alloc = k == Kind::Alloc;
                let key = if d.owner == Owner::Torch {
                    PoolKey::Default
                } else if alloc {
                    let key = pool_of(e, named);
                    self.graph_keys.insert(e.addr, key);
                    key
                } else {
                    self.graph_keys.remove(&e.addr).unwrap_or(PoolKey::Unknown)
                };
                self.moved(d.device, key, d.bytes, if alloc { 1 } else { -1 });
            }
            Some(k @ (Kind::VmmCreate | Kind::VmmImport)) if e.handle != 0 => {
                // A handle made again without its release: the books drop the old memory
                // first (whatever the new one is), and so does its pool.
                self.let_go(e.handle);
                if k != Kind::VmmCreate || e.mem() != MemKind::Device {
                    return;
                }
                let p = Piece {
                    device: e.device,
                    size: e.size,
                    owner: e.owner(),
                    key: pool_of(e, named),
                    module: e.module,
                };
                if torchs(p.owner) {
                    self.moved(p.device, p.key, signed(p.size), 1);
                }
                self.handles.insert(e.handle, p);
            }
            // A handle's memory is gone when the books say so (its last release or unmap).
            Some(Kind::VmmRelease | Kind::VmmUnmap | Kind::IpcClose) => {
                for &h in r.books.dropped() {
                    self.let_go(h);
                }
            }
            _ => {}
        }
    }

    /// Device memory with an address, now: (address, bytes, piece).
    fn pieces(&self, books: &LiveBooks) -> BTreeMap<u64, (u64, Piece)> {
        let mut out: BTreeMap<u64, (u64, Piece)> = BTreeMap::new();
        for (a, is_vmm, device, owner, mem, size, module) in books.live_items() {
            if is_vmm || mem != MemKind::Device {
                continue;
            }
            let key = match owner {
                Owner::Torch => PoolKey::Default,
                _ => self.graph_keys.get(&a).copied().unwrap_or(PoolKey::Unknown),
            };
            let p = Piece {
                device,
                size,
                owner,
                key,
                module,
            };
            out.insert(a, (size, p));
        }
        for (a, h, size) in books.mappings() {
            if let Some(p) = self.handles.get(&h) {
                out.insert(a, (size, p.clone()));
            }
        }
        out
    }
}

/// One torch snapshot: (device, address, bytes, pool).
type Segments = Vec<(i32, u64, u64, PoolKey)>;

/// Pieces of device memory by address, and torch's segments, compared.
type Pieces = BTreeMap<u64, (u64, Piece)>;

fn check(pieces: &Pieces, ix: &Index, snap: u64, t_ns: u64, segs: &Segments) -> SnapshotCheck {
    let mut plugged = 0u64;
    let mut covered: Vec<u64> = Vec::new();
    let mut mismatches = Vec::new();
    for &(device, addr, size, pool) in segs {
        let inside: Vec<(&u64, &(u64, Piece))> =
            pieces.range(addr..addr.saturating_add(size)).collect();
        let held = inside
            .iter()
            .fold(0u64, |a, (_, (s, _))| a.saturating_add(*s));
        covered.extend(inside.iter().map(|(a, _)| **a));
        let first = inside.first().map(|(_, (_, p))| p);
        let here = |p: &Piece| p.device == device || device < 0;
        let agree = held == size
            && inside
                .iter()
                .all(|(_, (_, p))| torchs(p.owner) && p.key == pool && here(p));
        // A MemPool with a pluggable allocator (NCCL's, vLLM's cumem): torch lists the
        // segment in its pool, the allocator's own module made it.
        let pluggable = held == size
            && pool != PoolKey::Default
            && !inside.is_empty()
            && inside.iter().all(|(_, (_, p))| !torchs(p.owner) && here(p));
        if pluggable {
            plugged += 1;
        } else if !agree {
            mismatches.push(Mismatch {
                device,
                address: addr,
                bytes: size,
                torch_pool: Some(pool),
                books_owner: first.map(|p| p.owner),
                books_pool: first.filter(|p| torchs(p.owner)).map(|p| p.key),
                books_bytes: held,
                module: first.map_or_else(String::new, |p| ix.module_name(p.module).to_string()),
            });
        }
    }
    covered.sort_unstable();
    for (&a, (size, p)) in pieces {
        if torchs(p.owner) && covered.binary_search(&a).is_err() {
            mismatches.push(Mismatch {
                device: p.device,
                address: a,
                bytes: *size,
                torch_pool: None,
                books_owner: Some(p.owner),
                books_pool: Some(p.key),
                books_bytes: *size,
                module: ix.module_name(p.module).to_string(),
            });
        }
    }
    SnapshotCheck {
        snapshot: snap,
        t_ns,
        segments: segs.len() as u64,
        bytes: segs.iter().fold(0u64, |a, s| a.saturating_add(s.2)),
        pluggable: plugged,
        mismatches,
    }
}

/// torch's snapshot being read: its number, time, segments so far, and the books' pieces
/// as they stood at its first record.
struct Reading {
    snap: u64,
    t_ns: u64,
    segs: Segments,
    pieces: Pieces,
}

/// The pools observer: bytes per pool, and the books at torch's last snapshot.
pub struct Pools<'a> {
    ix: &'a Index,
    /// The first record of torch's last snapshot (`usize::MAX`: none).
    snapshot_first: usize,
    pass: Pass,
    reading: Option<Reading>,
    torch_side: BTreeMap<(i32, PoolKey), (u64, u64)>,
    check: Option<SnapshotCheck>,
}

impl<'a> Pools<'a> {
    pub fn new(ix: &'a Index) -> Pools<'a> {
        let mut p = Pools {
            ix,
            snapshot_first: ix
                .last_torch_snapshot
                .map_or(usize::MAX, |(_, first)| first),
            pass: Pass::default(),
            reading: None,
            torch_side: BTreeMap::new(),
            check: None,
        };
        if p.snapshot_first == 0 {
            p.snapshot_begins(&LiveBooks::new());
        }
        p
    }

    /// torch's snapshot begins with the next record: the books' pieces as they stand now
    /// (taken after the record before it, so that no call is made before every record).
    #[cold]
    fn snapshot_begins(&mut self, books: &LiveBooks) {
        if let Some((snap, _)) = self.ix.last_torch_snapshot {
            self.reading = Some(Reading {
                snap,
                t_ns: 0,
                segs: Vec::new(),
                pieces: self.pass.pieces(books),
            });
        }
    }

    /// The snapshot's records are over: check it against the books as they stood at its
    /// first record (its own records change nothing).
    fn close_snapshot(&mut self) {
        let Some(r) = self.reading.take() else {
            return;
        };
        for &(d, _, size, pool) in &r.segs {
            let t = self.torch_side.entry((d, pool)).or_default();
            t.0 = t.0.saturating_add(size);
            t.1 = t.1.saturating_add(1);
        }
        self.check = Some(check(&r.pieces, self.ix, r.snap, r.t_ns, &r.segs));
    }

    /// The pools of the process.
    pub fn finish(mut self) -> TorchPools {
        self.close_snapshot();
        let mut rows: BTreeMap<(i32, PoolKey), PoolRow> = BTreeMap::new();
        for &((device, key), (live, peak, blocks)) in &self.pass.held {
            rows.insert(
                (device, key),
                PoolRow {
                    device,
                    key: Some(key),
                    live,
                    peak,
                    blocks,
                    ..PoolRow::default()
                },
            );
        }
        for (&(device, key), &(bytes, segments)) in &self.torch_side {
            let r = rows.entry((device, key)).or_insert_with(|| PoolRow {
                device,
                key: Some(key),
                ..PoolRow::default()
            });
            r.torch_bytes = Some(bytes);
            r.torch_segments = Some(segments);
        }
        if self.check.is_some() {
            for r in rows.values_mut() {
                r.torch_bytes.get_or_insert(0);
                r.torch_segments.get_or_insert(0);
            }
        }
        TorchPools {
            hooks: self.ix.pool_hooks.clone(),
            windows: self.ix.pool_windows,
            rows: rows.into_values().collect(),
            check: self.check,
        }
    }
}

impl Observer for Pools<'_> {
    #[inline(always)]
    fn record(&mut self, r: &Rec<'_>) -> ControlFlow<()> {
        if let Some((snap, first)) = self.ix.last_torch_snapshot {
            if let Some(s) = self.reading.as_mut().filter(|_| r.index == first) {
                s.t_ns = r.e.t_ns;
            }
            let part = r.kind == Some(Kind::TorchSegment) && r.e.handle == snap;
            match &mut self.reading {
                Some(s) if part => {
                    let e = r.e;
                    s.segs
                        .push((e.device, e.addr, e.size, PoolKey::of_torch(e.arg0, e.arg1)));
                }
                Some(_) => self.close_snapshot(),
                None => {}
            }
        }
        self.pass.apply(r, &self.ix.capture_pools);
        if r.index + 1 == self.snapshot_first {
            self.snapshot_begins(r.books);
        }
        ControlFlow::Continue(())
    }

    fn end(&mut self, _now: &Now<'_>) {
        self.close_snapshot();
    }
}

/// Replays one journal's pools.
pub fn replay(j: &Journal) -> TorchPools {
    let ix = Index::scan(j);
    let mut pools = Pools::new(&ix);
    super::replay::run(j, &ix, &mut pools);
    pools.finish()
}

#[cfg(test)]
#[path = "pools_tests.rs"]
mod tests;
