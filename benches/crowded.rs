//! Replay of a journal crafted against the address hash: N allocations whose addresses all
//! hash, without a seed, to one bucket of any map up to 2^17 buckets, then their frees; next
//! to the same journal with ordinary addresses. The address hash is a bijection, so such
//! addresses are computed, not searched for; the maps' per-process seed
//! (`vramledger_format::addr_hash::AddrState`) is what keeps them apart. Without it the
//! crafted replay is quadratic (BENCHMARKS.md, issue 15's ninth round).
//!
//!     cargo bench --bench crowded [-- ALLOCATIONS]     (100,000 unless given)

use std::hash::BuildHasher;
use std::path::Path;
use std::time::Instant;

use vramledger::run_replay;
use vramledger_format::addr_hash::AddrState;
use vramledger_format::memwriter::MemJournal;
use vramledger_format::{Api, Event, Header, Kind, MemKind, Owner};

/// The bits of a hash that pick a bucket in a map of up to 2^17 buckets.
const BUCKET_BITS: u64 = (1 << 17) - 1;

/// The address hash with no seed.
fn unseeded(v: u64) -> u64 {
    AddrState::with_seed(0).hash_one(v)
}

/// The address whose unseeded hash is `h` (the hash's steps undone, last first).
fn unhash(h: u64) -> u64 {
    // The multiplier's inverse modulo 2^64, by Newton's iteration (each step doubles the bits).
    let c: u64 = 0xbf58_476d_1ce4_e5b9;
    let mut inv = c;
    for _ in 0..6 {
        inv = inv.wrapping_mul(2u64.wrapping_sub(c.wrapping_mul(inv)));
    }
    let y = (h ^ (h >> 32)).wrapping_mul(inv);
    y ^ (y >> 29) ^ (y >> 58)
}

/// A journal of `addrs` allocated, then freed, in order.
fn journal(addrs: &[u64]) -> Vec<u8> {
    let mut h = Header::default();
    h.push("pid", "7");
    h.push("start_unix_ns", "1700000000000000000");
    h.push("start_mono_ns", "1000000");
    let mut w = MemJournal::new(&h);
    let mut t = 2_000_000u64;
    for (kind, api) in [
        (Kind::Alloc, Api::cuMemAlloc_v2),
        (Kind::Free, Api::cuMemFree_v2),
    ] {
        for &addr in addrs {
            t += 10;
            w.event(&Event {
                kind: kind as u16,
                api: api as u16,
                t_ns: t,
                tid: 1,
                addr,
                size: 512,
                arg0: 512,
                owner: Owner::Torch as u8,
                mem: MemKind::Device as u8,
                ..Event::default()
            });
        }
    }
    w.finish(true)
}

/// Seconds to replay `bytes` (`n` allocations of 512 bytes, then their frees) as `report` does.
fn replay(bytes: &[u8], n: u64) -> f64 {
    let t = Instant::now();
    let s = run_replay::Stream::from_bytes(Path::new("crowded.vlj"), bytes.to_vec())
        .expect("crafted journal");
    let (books, _) = run_replay::replay_stream(&s, None);
    // Every allocation found again by its free: all live at the peak, nothing at the end.
    let d = &books.devices[0];
    assert_eq!(books.events as u64, 2 * n);
    assert_eq!(d.peak_total.bytes as u64, 512 * n);
    assert_eq!(d.live_at_end.get(Owner::Torch), 0);
    t.elapsed().as_secs_f64()
}

fn main() {
    let n: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    let home = unseeded(0x7000_0000_0000) & BUCKET_BITS;
    let crowded: Vec<u64> = (1..=n).map(|i| unhash(home | i << 17)).collect();
    assert!(crowded.iter().all(|&a| unseeded(a) & BUCKET_BITS == home));
    let plain: Vec<u64> = (1..=n).map(|i| 0x7000_0000_0000 + i * 512).collect();
    for (label, addrs) in [
        ("ordinary addresses", &plain),
        ("crowded addresses", &crowded),
    ] {
        let bytes = journal(addrs);
        let best = (0..3)
            .map(|_| replay(&bytes, n))
            .fold(f64::INFINITY, f64::min);
        println!("{label}: {n} allocations and frees replayed in {best:.3} s (best of 3)");
    }
}
