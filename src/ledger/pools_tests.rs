//! Unit tests of [`super`]: synthetic journals, pools and torch's snapshot.

use super::*;
use vramledger_format::{Api, PoolScope};

const MIB: u64 = 1 << 20;

fn ev(kind: Kind, addr: u64, size: u64, owner: Owner) -> Event {
    Event {
        kind: kind as u16,
        api: Api::cuMemAlloc_v2 as u16,
        device: 0,
        addr,
        size,
        owner: owner as u8,
        module: 1,
        ..Event::default()
    }
}

fn pooled(addr: u64, size: u64, pool: (u64, u64)) -> Event {
    let mut e = ev(Kind::Alloc, addr, size, Owner::TorchGraphPool);
    e.flags = flags::TORCH_POOL;
    (e.arg1, e.arg2) = pool;
    e
}

fn segment(snap: u64, addr: u64, size: u64, pool: (u64, u64)) -> Event {
    let mut e = ev(Kind::TorchSegment, addr, size, Owner::None);
    e.handle = snap;
    (e.arg0, e.arg1) = pool;
    e
}

fn journal(events: Vec<Event>) -> Journal {
    let mut j = Journal {
        events,
        ..Journal::default()
    };
    j.modules.insert(1, "/x/libc10_cuda.so".into());
    j.modules.insert(2, "/x/libcublas.so.13".into());
    j
}

fn row(p: &TorchPools, key: PoolKey) -> &PoolRow {
    p.rows.iter().find(|r| r.pool() == key).unwrap()
}

#[test]
fn bytes_per_pool_with_peaks_and_capture_pools_named_at_their_end() {
    let mut pending = ev(Kind::Alloc, 0x3000, 16 * MIB, Owner::TorchGraphPool);
    pending.flags = flags::TORCH_POOL_PENDING;
    pending.arg1 = 7; // window 7
    let mut end = ev(Kind::PoolEnd, 0, 0, Owner::None);
    end.handle = 7;
    (end.arg0, end.arg1, end.arg2) = (3, 0, PoolScope::Capture as u64);
    let heuristic = ev(Kind::Alloc, 0x5000, 2 * MIB, Owner::TorchGraphPool);
    let j = journal(vec![
        ev(Kind::Alloc, 0x1000, 64 * MIB, Owner::Torch),
        pooled(0x2000, 20 * MIB, (0, 1)),
        pooled(0x4000, 2 * MIB, (0, 1)),
        ev(Kind::Free, 0x2000, 0, Owner::TorchGraphPool),
        pending,
        end,
        heuristic,
        ev(Kind::Alloc, 0x6000, 8 * MIB, Owner::Direct),
    ]);
    let p = replay(&j);
    assert!(p.has_news());
    assert_eq!(p.rows.len(), 4);
    let d = row(&p, PoolKey::Default);
    assert_eq!(
        (d.live, d.peak, d.blocks),
        ((64 * MIB) as i64, (64 * MIB) as i64, 1)
    );
    let g = row(&p, PoolKey::Id(0, 1));
    assert_eq!(
        (g.live, g.peak, g.blocks),
        ((2 * MIB) as i64, (22 * MIB) as i64, 1)
    );
    assert_eq!(row(&p, PoolKey::Id(3, 0)).live, (16 * MIB) as i64);
    assert_eq!(row(&p, PoolKey::Unknown).live, (2 * MIB) as i64);
    assert!(p.check.is_none() && p.rows.iter().all(|r| r.torch_bytes.is_none()));
}

#[test]
fn torchs_snapshot_agrees_segment_by_segment_expandable_segments_included() {
    let mut create = ev(Kind::VmmCreate, 0, 20 * MIB, Owner::TorchGraphPool);
    create.flags = flags::TORCH_POOL;
    (create.arg1, create.arg2) = (0, 2);
    let mut second = create.clone();
    let mut maps = Vec::new();
    for (i, h) in [(0u64, 11u64), (1, 12)] {
        let mut m = ev(
            Kind::VmmMap,
            0x10_0000_0000 + i * 20 * MIB,
            20 * MIB,
            Owner::None,
        );
        m.handle = h;
        maps.push(m);
    }
    create.handle = 11;
    second.handle = 12;
    let mut events = vec![
        ev(Kind::Alloc, 0x1000_0000, 64 * MIB, Owner::Torch),
        create,
        second,
    ];
    events.extend(maps);
    events.push(segment(1, 0x1000_0000, 64 * MIB, (0, 0)));
    events.push(segment(1, 0x10_0000_0000, 40 * MIB, (0, 2)));
    let p = replay(&journal(events));
    let c = p.check.as_ref().unwrap();
    assert!(c.agree(), "{:?}", c.mismatches);
    assert_eq!((c.segments, c.bytes), (2, 104 * MIB));
    assert_eq!(row(&p, PoolKey::Id(0, 2)).torch_bytes, Some(40 * MIB));
    assert_eq!(row(&p, PoolKey::Id(0, 2)).live, (40 * MIB) as i64);
}

#[test]
fn what_the_books_hold_and_torch_does_not_is_named() {
    // The books hold 64 MiB "torch" that torch's allocator does not list (e.g. a library
    // whose frames unwound to libtorch), torch lists a segment the books give cuBLAS, and a
    // private-pool segment the books put in the default pool (no hook saw the window).
    let mut cublas = ev(Kind::Alloc, 0x2000_0000, 32 * MIB, Owner::Direct);
    cublas.module = 2;
    let j = journal(vec![
        ev(Kind::Alloc, 0x1000_0000, 64 * MIB, Owner::Torch),
        cublas,
        ev(Kind::Alloc, 0x3000_0000, 20 * MIB, Owner::Torch),
        segment(1, 0x2000_0000, 32 * MIB, (0, 0)),
        segment(1, 0x3000_0000, 20 * MIB, (0, 1)),
    ]);
    let p = replay(&j);
    let c = p.check.as_ref().unwrap();
    assert!(!c.agree());
    type Seen<'a> = (
        u64,
        Option<PoolKey>,
        Option<Owner>,
        Option<PoolKey>,
        &'a str,
    );
    let m: Vec<Seen> = c
        .mismatches
        .iter()
        .map(|m| {
            (
                m.address,
                m.torch_pool,
                m.books_owner,
                m.books_pool,
                m.module.as_str(),
            )
        })
        .collect();
    assert_eq!(
        m,
        vec![
            (
                0x2000_0000,
                Some(PoolKey::Default),
                Some(Owner::Direct),
                None,
                "libcublas.so.13"
            ),
            (
                0x3000_0000,
                Some(PoolKey::Id(0, 1)),
                Some(Owner::Torch),
                Some(PoolKey::Default),
                "libc10_cuda.so"
            ),
            (
                0x1000_0000,
                None,
                Some(Owner::Torch),
                Some(PoolKey::Default),
                "libc10_cuda.so"
            ),
        ]
    );
    // Books and torch per pool: the default pool holds 84 MiB in the books, torch says 32.
    assert_eq!(row(&p, PoolKey::Default).live, (84 * MIB) as i64);
    assert_eq!(row(&p, PoolKey::Default).torch_bytes, Some(32 * MIB));
    assert_eq!(row(&p, PoolKey::Id(0, 1)).torch_bytes, Some(20 * MIB));
    assert_eq!(row(&p, PoolKey::Id(0, 1)).live, 0);
}

#[test]
fn segments_of_pluggable_allocators_are_their_modules_and_agree() {
    // vLLM's cumem / NCCL's allocator behind a MemPool: torch lists the segment in its
    // private pool, the books give it to the allocator's module. In the default pool the
    // same would be a misattribution.
    let mut nccl = ev(Kind::Alloc, 0x1000_0000, 32 * MIB, Owner::Nccl);
    nccl.module = 2;
    let j = journal(vec![
        nccl,
        ev(Kind::Alloc, 0x2000_0000, 32 * MIB, Owner::Direct),
        segment(1, 0x1000_0000, 32 * MIB, (1, 0)),
        segment(1, 0x2000_0000, 32 * MIB, (0, 0)),
    ]);
    let c = replay(&j).check.unwrap();
    assert_eq!(c.pluggable, 1);
    assert_eq!(c.mismatches.len(), 1);
    assert_eq!(c.mismatches[0].address, 0x2000_0000);
}

#[test]
fn the_last_snapshot_is_the_one_checked() {
    let j = journal(vec![
        ev(Kind::Alloc, 0x1000, 2 * MIB, Owner::Torch),
        segment(1, 0x1000, 2 * MIB, (0, 0)),
        ev(Kind::Free, 0x1000, 0, Owner::Torch),
        segment(2, 0x1000, 2 * MIB, (0, 0)),
    ]);
    let c = replay(&j).check.unwrap();
    assert_eq!(c.snapshot, 2);
    assert_eq!(c.mismatches.len(), 1);
    assert_eq!(c.mismatches[0].books_owner, None);
}

/// Expandable segments leave their pool when the books let go of them: at the unmap after
/// the release, at the release after the unmap, and both of one unmap's handles at once.
#[test]
fn expandable_segments_leave_the_pool_when_the_books_let_go() {
    let create = |h: u64| {
        let mut c = ev(Kind::VmmCreate, 0, 20 * MIB, Owner::TorchGraphPool);
        c.flags = flags::TORCH_POOL;
        (c.arg1, c.arg2) = (0, 2);
        c.handle = h;
        c
    };
    let handle_ev = |kind: Kind, addr: u64, size: u64, h: u64| {
        let mut e = ev(kind, addr, size, Owner::None);
        e.handle = h;
        e
    };
    let base = 0x10_0000_0000u64;
    let mut events = Vec::new();
    for (i, h) in [(0u64, 11u64), (1, 12), (2, 13)] {
        events.push(create(h));
        events.push(handle_ev(Kind::VmmMap, base + i * 20 * MIB, 20 * MIB, h));
    }
    events.push(handle_ev(Kind::VmmRelease, 0, 0, 11));
    events.push(handle_ev(Kind::VmmRelease, 0, 0, 12));
    let held = |events: &[Event]| {
        let p = replay(&journal(events.to_vec()));
        let r = row(&p, PoolKey::Id(0, 2)).clone();
        (r.live, r.peak, r.blocks)
    };
    let all = (60 * MIB) as i64;
    assert_eq!(
        held(&events),
        (all, all, 3),
        "released while mapped: still held"
    );
    // One unmap over the first two mappings: both leave.
    events.push(handle_ev(Kind::VmmUnmap, base, 40 * MIB, 0));
    assert_eq!(held(&events), ((20 * MIB) as i64, all, 1));
    // The third unmapped first, then released: it leaves at the release.
    events.push(handle_ev(Kind::VmmUnmap, base + 40 * MIB, 20 * MIB, 0));
    assert_eq!(held(&events), ((20 * MIB) as i64, all, 1));
    events.push(handle_ev(Kind::VmmRelease, 0, 0, 13));
    assert_eq!(held(&events), (0, all, 0));
}

/// Whatever the order of VMM calls (creates, maps, unmaps over one or two mappings, retains,
/// releases, IPC closes, calls on unknown handles), the pools hold what the live books give
/// PyTorch's owners: their bytes and their handles, at the end of every journal.
#[test]
fn vmm_pools_follow_the_live_books_in_any_order() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let base = 0x10_0000_0000u64;
    for _ in 0..400 {
        let mut events = Vec::new();
        for _ in 0..rnd(60) + 1 {
            let h = 1 + rnd(5);
            let slot = rnd(6);
            let e = match rnd(7) {
                0 | 1 => {
                    let owner = [Owner::Torch, Owner::TorchGraphPool, Owner::Nccl][rnd(3) as usize];
                    // Now and then pinned host memory, or a peer's memory imported (mapped at once).
                    let kind = [
                        Kind::VmmCreate,
                        Kind::VmmCreate,
                        Kind::VmmCreate,
                        Kind::VmmImport,
                    ][rnd(4) as usize];
                    let mut c = ev(kind, 0, (1 + rnd(4)) * 2 * MIB, owner);
                    if kind == Kind::VmmImport {
                        c.addr = base + slot * 8 * MIB;
                    } else if rnd(4) == 0 {
                        c.mem = MemKind::HostPinned as u8;
                    }
                    c.handle = h;
                    c
                }
                2 => {
                    let mut m = ev(Kind::VmmMap, base + slot * 8 * MIB, 8 * MIB, Owner::None);
                    m.handle = h;
                    m
                }
                3 => ev(
                    Kind::VmmUnmap,
                    base + slot * 8 * MIB,
                    (1 + rnd(2)) * 8 * MIB,
                    Owner::None,
                ),
                4 => ev(Kind::IpcClose, base + slot * 8 * MIB, 8 * MIB, Owner::None),
                5 => {
                    let mut r = ev(Kind::VmmRetain, 0, 0, Owner::None);
                    r.handle = h;
                    r
                }
                _ => {
                    let mut r = ev(Kind::VmmRelease, 0, 0, Owner::None);
                    r.handle = h;
                    r
                }
            };
            events.push(e);
        }
        let mut books = LiveBooks::new();
        for e in &events {
            books.apply(e);
        }
        let p = replay(&journal(events.clone()));
        let live: i64 = p.rows.iter().map(|r| r.live).sum();
        let blocks: u64 = p.rows.iter().map(|r| r.blocks).sum();
        let torch = |b: &LiveBooks| {
            b.held(0, Owner::Torch, MemKind::Device)
                + b.held(0, Owner::TorchGraphPool, MemKind::Device)
        };
        let handles = books
            .live_items()
            .iter()
            .filter(|i| i.1 && torchs(i.3) && i.4 == MemKind::Device)
            .count() as u64;
        assert_eq!(
            (live, blocks),
            (torch(&books) as i64, handles),
            "{events:#?}"
        );
    }
}
