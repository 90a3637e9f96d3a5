//! Tests of `live.rs`.
use super::*;

/// `book` completes and applies exactly as filling from `block_at`/`handle_info` and then
/// `apply` did.
#[test]
fn booking_fills_and_applies_as_fill_then_apply() {
    let mut x = 0x1357_9bdf_2468_ace0u64;
    let mut a = LiveBooks::new();
    let mut b = LiveBooks::new();
    let kinds = [
        Kind::Alloc,
        Kind::Free,
        Kind::HostAlloc,
        Kind::HostFree,
        Kind::VmmCreate,
        Kind::VmmMap,
        Kind::VmmUnmap,
        Kind::VmmRelease,
        Kind::VmmRetain,
    ];
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut e = ev(
            kinds[(x % 9) as usize],
            0x1000 * (x >> 8 & 15),
            (x >> 12) & 0xffff,
            x >> 16 & 7,
            Owner::from_repr((x >> 20 & 7) as u8).unwrap_or(Owner::None),
        );
        if x.is_multiple_of(7) {
            e.api = Api::cuMemAllocAsync as u16;
        }
        if x.is_multiple_of(31) {
            e.result = 2;
        }
        if (x >> 24).is_multiple_of(3) {
            e.owner = 0;
        }
        // The reference: fill from the books as the shim did before, then apply.
        let mut want = e.clone();
        match want.kind() {
            Some(Kind::Free | Kind::HostFree) => {
                if let Some(l) = a.block_at(want.addr) {
                    want.owner = l.owner as u8;
                    want.size = l.size;
                    want.device = l.device;
                    want.module = l.module;
                    want.mem = l.mem as u8;
                }
            }
            Some(Kind::VmmRelease | Kind::VmmRetain | Kind::VmmMap) if want.owner == 0 => {
                if let Some((o, s, d)) = a.handle_info(want.handle) {
                    want.owner = o as u8;
                    want.device = d;
                    if want.size == 0 {
                        want.size = s;
                    }
                }
            }
            Some(Kind::VmmUnmap) => {
                if let Some(h) = a.mapping_at(want.addr) {
                    want.handle = h;
                    if let Some((o, _, d)) = a.handle_info(h) {
                        want.owner = o as u8;
                        want.device = d;
                    }
                }
            }
            _ => {}
        }
        let da = a.apply(&want);
        let db = b.book(&mut e);
        assert_eq!(e, want);
        assert_eq!(da, db);
        assert_eq!(a.unknown_frees, b.unknown_frees);
    }
    assert_eq!(
        a.totals().collect::<Vec<_>>(),
        b.totals().collect::<Vec<_>>()
    );
}

fn ev(kind: Kind, addr: u64, size: u64, handle: u64, owner: Owner) -> Event {
    Event {
        kind: kind as u16,
        device: 0,
        addr,
        size,
        handle,
        owner: owner as u8,
        api: Api::cuMemAlloc_v2 as u16,
        ..Event::default()
    }
}

#[test]
fn alloc_free_pairs() {
    let mut b = LiveBooks::new();
    let d = b.apply(&ev(Kind::Alloc, 0x1000, 4 << 20, 0, Owner::Torch));
    assert_eq!(d.map(|d| d.bytes), Some(4 << 20));
    assert_eq!(b.held(0, Owner::Torch, MemKind::Device), 4 << 20);
    let d = b.apply(&ev(Kind::Free, 0x1000, 0, 0, Owner::None));
    assert_eq!(
        d.map(|d| (d.owner, d.bytes)),
        Some((Owner::Torch, -(4 << 20)))
    );
    assert_eq!(b.held(0, Owner::Torch, MemKind::Device), 0);
    assert_eq!(b.apply(&ev(Kind::Free, 0x1000, 0, 0, Owner::None)), None);
    assert_eq!(b.unknown_frees, 1);
}

#[test]
fn nccl_free_sequence_returns_memory_only_at_the_end() {
    // create, reserve, map; then retain, release, unmap, release (NCCL's order).
    let mut b = LiveBooks::new();
    let h = 77;
    assert!(b
        .apply(&ev(Kind::VmmCreate, 0, 2 << 20, h, Owner::Nccl))
        .is_some());
    b.apply(&ev(Kind::VmmMap, 0x5000, 2 << 20, h, Owner::None));
    assert_eq!(
        b.apply(&ev(Kind::VmmRetain, 0x5000, 0, h, Owner::None)),
        None
    );
    assert_eq!(b.apply(&ev(Kind::VmmRelease, 0, 0, h, Owner::None)), None);
    assert_eq!(b.held(0, Owner::Nccl, MemKind::Device), 2 << 20);
    assert_eq!(
        b.apply(&ev(Kind::VmmUnmap, 0x5000, 2 << 20, 0, Owner::None)),
        None
    );
    assert_eq!(b.held(0, Owner::Nccl, MemKind::Device), 2 << 20);
    let d = b
        .apply(&ev(Kind::VmmRelease, 0, 0, h, Owner::None))
        .unwrap();
    assert_eq!((d.owner, d.bytes), (Owner::Nccl, -(2 << 20)));
    assert_eq!(b.held(0, Owner::Nccl, MemKind::Device), 0);
}

#[test]
fn release_before_unmap_keeps_memory_until_unmap() {
    // PyTorch-style unmap+release, and the reverse order.
    let mut b = LiveBooks::new();
    b.apply(&ev(Kind::VmmCreate, 0, 20 << 20, 1, Owner::Torch));
    b.apply(&ev(Kind::VmmMap, 0x10_0000, 20 << 20, 1, Owner::None));
    assert_eq!(b.apply(&ev(Kind::VmmRelease, 0, 0, 1, Owner::None)), None);
    let d = b
        .apply(&ev(Kind::VmmUnmap, 0x10_0000, 20 << 20, 0, Owner::None))
        .unwrap();
    assert_eq!(d.bytes, -(20 << 20));
}

#[test]
fn host_numa_and_async_are_not_vram() {
    let mut b = LiveBooks::new();
    let mut host = ev(Kind::VmmCreate, 0, 2 << 20, 5, Owner::Nccl);
    host.mem = MemKind::HostPinned as u8;
    b.apply(&host);
    assert_eq!(b.held(0, Owner::Nccl, MemKind::Device), 0);
    assert_eq!(b.held(0, Owner::Nccl, MemKind::HostPinned), 2 << 20);

    let mut a = ev(Kind::Alloc, 0x9000, 1 << 20, 0, Owner::Torch);
    a.api = Api::cuMemAllocAsync as u16;
    assert_eq!(b.apply(&a), None);
    let mut s = ev(Kind::PoolSample, 0, 0, 0xABC, Owner::Torch);
    s.arg0 = 32 << 20;
    assert_eq!(b.apply(&s).map(|d| d.bytes), Some(32 << 20));
    s.arg0 = 32 << 20;
    assert_eq!(b.apply(&s), None);
    assert_eq!(b.held(0, Owner::Torch, MemKind::Device), 32 << 20);
    assert_eq!(b.apply(&ev(Kind::Free, 0x9000, 0, 0, Owner::None)), None);
    assert_eq!(b.unknown_frees, 0);
}

#[test]
fn reservations_are_virtual_only() {
    let mut b = LiveBooks::new();
    b.apply(&ev(
        Kind::VaReserve,
        0x1_0000_0000,
        1 << 40,
        0,
        Owner::Torch,
    ));
    assert_eq!(b.totals().count(), 0);
    assert_eq!(b.reserved_va().get(&0), Some(&(1u64 << 40)));
    b.apply(&ev(Kind::VaFree, 0x1_0000_0000, 1 << 40, 0, Owner::None));
    assert!(b.reserved_va().is_empty());
}

#[test]
fn dropped_names_the_handles_whose_memory_a_record_returned() {
    let mut b = LiveBooks::new();
    for (h, addr) in [(1u64, 0x10_0000u64), (2, 0x10_0000 + (2 << 20))] {
        b.apply(&ev(Kind::VmmCreate, 0, 2 << 20, h, Owner::Torch));
        b.apply(&ev(Kind::VmmMap, addr, 2 << 20, h, Owner::None));
    }
    let listed: Vec<_> = b.mappings().collect();
    assert_eq!(
        listed,
        [(0x10_0000, 1, 2 << 20), (0x10_0000 + (2 << 20), 2, 2 << 20)]
    );
    // Released while mapped: nothing returned yet.
    for h in [2, 1] {
        b.apply(&ev(Kind::VmmRelease, 0, 0, h, Owner::None));
        assert!(b.dropped().is_empty());
    }
    // One unmap over both mappings returns both, lowest address first.
    let d = b.apply(&ev(Kind::VmmUnmap, 0x10_0000, 4 << 20, 0, Owner::None));
    assert_eq!(d.map(|d| d.bytes), Some(-(4 << 20)));
    assert_eq!(b.dropped(), [1, 2]);
    assert_eq!(b.mappings().count(), 0);
    // An unmap of nothing returns nothing (and says so afresh).
    b.apply(&ev(Kind::VmmUnmap, 0x10_0000, 4 << 20, 0, Owner::None));
    assert!(b.dropped().is_empty());
    // Unmapped first, released last: the release returns it.
    b.apply(&ev(Kind::VmmCreate, 0, 2 << 20, 3, Owner::Nccl));
    b.apply(&ev(Kind::VmmMap, 0x90_0000, 2 << 20, 3, Owner::None));
    b.apply(&ev(Kind::VmmUnmap, 0x90_0000, 2 << 20, 0, Owner::None));
    assert!(b.dropped().is_empty());
    b.apply(&ev(Kind::VmmRelease, 0, 0, 3, Owner::None));
    assert_eq!(b.dropped(), [3]);
}

/// Totals of devices in the dense slots (-1 to 6) and past them (7, 100) are kept and listed
/// alike, sorted by key, zeros left out.
#[test]
fn totals_of_every_device_are_kept_and_listed_in_key_order() {
    let mut b = LiveBooks::new();
    let mut addr = 0x1000u64;
    let mut want = Vec::new();
    for (device, owner, size) in [
        (100, Owner::Direct, 3u64 << 20),
        (7, Owner::Torch, 5 << 20),
        (0, Owner::Nccl, 7 << 20),
        (6, Owner::TorchGraphPool, 11 << 20),
        (0, Owner::Torch, 13 << 20),
    ] {
        let mut e = ev(Kind::Alloc, addr, size, 0, owner);
        e.device = device;
        b.apply(&e);
        want.push(((device, owner, MemKind::Device), size));
        addr += 0x1000;
    }
    let mut h = ev(Kind::HostAlloc, 0x9_0000, 1 << 20, 0, Owner::Torch);
    h.device = 3;
    b.apply(&h);
    want.push(((-1, Owner::Torch, MemKind::HostPinned), 1 << 20));
    want.sort();
    assert_eq!(b.totals().collect::<Vec<_>>(), want);
    for &((d, o, m), v) in &want {
        assert_eq!(b.held(d, o, m), v);
    }
    // Freed to zero: left out of the list, zero when asked.
    b.apply(&ev(Kind::Free, 0x1000, 0, 0, Owner::None));
    b.apply(&ev(Kind::Free, 0x1000 + 0x3000, 0, 0, Owner::None));
    assert_eq!(b.held(100, Owner::Direct, MemKind::Device), 0);
    assert_eq!(b.held(6, Owner::TorchGraphPool, MemKind::Device), 0);
    assert_eq!(b.totals().count(), want.len() - 2);
}

/// Pinned host memory taken again at an address whose free was never seen: the old block is
/// gone, as for device memory (it was counted forever).
#[test]
fn host_memory_taken_again_at_a_live_address_replaces_it() {
    let mut b = LiveBooks::new();
    let host = |kind: Kind, size: u64| {
        let mut e = ev(kind, 0x7_0000, size, 0, Owner::Torch);
        e.device = -1;
        e.mem = MemKind::HostPinned as u8;
        e
    };
    assert_eq!(
        b.apply(&host(Kind::HostAlloc, 4 << 20)).map(|d| d.bytes),
        Some(4 << 20)
    );
    // One change: +8 MiB for the new block, −4 MiB for the one it replaced.
    assert_eq!(
        b.apply(&host(Kind::HostAlloc, 8 << 20)).map(|d| d.bytes),
        Some(4 << 20)
    );
    assert_eq!(b.unknown_frees, 1);
    assert_eq!(b.held(-1, Owner::Torch, MemKind::HostPinned), 8 << 20);
    assert_eq!(
        b.apply(&host(Kind::HostFree, 0)).map(|d| d.bytes),
        Some(-(8 << 20))
    );
    assert_eq!(b.held(-1, Owner::Torch, MemKind::HostPinned), 0);
}

/// An unmap takes every mapping from its address up to (not including) its end, however
/// many, and leaves those just before and at the end.
#[test]
fn an_unmap_takes_the_mappings_in_its_range_only() {
    let mut b = LiveBooks::new();
    let mb = 1u64 << 20;
    for h in 1..=5u64 {
        b.apply(&ev(Kind::VmmCreate, 0, mb, h, Owner::Torch));
        b.apply(&ev(Kind::VmmMap, h * mb, mb, h, Owner::None));
        b.apply(&ev(Kind::VmmRelease, 0, 0, h, Owner::None));
    }
    let d = b.apply(&ev(Kind::VmmUnmap, 2 * mb, 3 * mb, 0, Owner::None));
    assert_eq!(d.map(|d| d.bytes), Some(-3 * mb as i64));
    assert_eq!(b.dropped(), [2, 3, 4]);
    let left: Vec<_> = b.mappings().map(|(addr, h, _)| (addr, h)).collect();
    assert_eq!(left, [(mb, 1), (5 * mb, 5)]);
    assert_eq!(b.unknown_frees, 0);
}

/// An IPC close drops the reference its open took as well as the mapping: the peer memory is
/// gone at once; an unmap of the same kind of mapping leaves the handle to its release.
#[test]
fn an_ipc_close_returns_the_peer_memory_its_open_mapped() {
    let mut b = LiveBooks::new();
    let mb = 1u64 << 20;
    let open = b.apply(&ev(Kind::VmmImport, 8 * mb, 2 * mb, 7, Owner::Nccl));
    assert_eq!(
        open.map(|d| (d.mem, d.bytes)),
        Some((MemKind::Peer, 2 * mb as i64))
    );
    assert_eq!(b.held(0, Owner::Nccl, MemKind::Peer), 2 * mb);
    let close = b.apply(&ev(Kind::IpcClose, 8 * mb, 2 * mb, 0, Owner::None));
    assert_eq!(
        close.map(|d| (d.mem, d.bytes)),
        Some((MemKind::Peer, -2 * mb as i64))
    );
    assert_eq!(b.dropped(), [7]);
    assert_eq!(b.held(0, Owner::Nccl, MemKind::Peer), 0);
    assert_eq!(b.mappings().count(), 0);
    // The same open, unmapped instead: the handle keeps its reference (and its memory).
    b.apply(&ev(Kind::VmmImport, 8 * mb, 2 * mb, 9, Owner::Nccl));
    assert_eq!(
        b.apply(&ev(Kind::VmmUnmap, 8 * mb, 2 * mb, 0, Owner::None)),
        None
    );
    assert!(b.dropped().is_empty());
    assert_eq!(b.held(0, Owner::Nccl, MemKind::Peer), 2 * mb);
    assert_eq!(b.unknown_frees, 0);
}
