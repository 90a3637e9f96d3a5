//! Replay speed: a seeded synthetic journal of N events (allocations and frees across owners
//! and devices, VMM handles, stage boundaries with samples) decoded and replayed into the
//! books, written in format 1 (88-byte frames, a CRC each) and in format 2 (24-byte compact
//! records, a CRC per 64 KiB block), as the shim writes it today. Target: ≥ 5 million events
//! per second on one core.
//!
//!     cargo bench --bench replay [-- EVENTS]

use std::path::Path;
use std::time::Instant;

use vramledger::{journal, ledger};
use vramledger_format::frame::{encode_frame, frame_len};
use vramledger_format::memwriter::MemJournal;
use vramledger_format::{preamble, Api, Event, Header, Kind, MemKind, Owner};

fn push(out: &mut Vec<u8>, e: &Event) {
    let p = e.encode();
    let start = out.len();
    out.resize(start + frame_len(p.len()), 0);
    encode_frame(e.kind, &p, &mut out[start..]);
}

fn events(n: usize, seed: u64) -> Vec<Event> {
    let mut out = Vec::with_capacity(n);
    let mut x = seed;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let owners = [
        Owner::Torch,
        Owner::TorchGraphPool,
        Owner::Nccl,
        Owner::Direct,
    ];
    let mut live: Vec<u64> = Vec::new();
    let mut next_addr = 0x7000_0000_0000u64;
    let mut stage = 0u32;
    for i in 0..n {
        let mut e = Event {
            t_ns: i as u64 * 1000,
            tid: 1,
            device: (rnd() % 2) as i32,
            stage,
            ..Event::default()
        };
        let r = rnd() % 100;
        if i % 10_000 == 0 {
            stage += 1;
            e.kind = Kind::Stage as u16;
            e.stage = stage;
            e.text = format!("stage{stage}");
        } else if i % 10_000 == 1 {
            e.kind = Kind::MemInfo as u16;
            e.api = Api::VramledgerSample as u16;
            e.arg0 = 80 << 30;
        } else if r < 50 || live.is_empty() {
            e.kind = Kind::Alloc as u16;
            e.api = Api::cuMemAlloc_v2 as u16;
            e.addr = next_addr;
            next_addr += 2 << 20;
            e.size = (rnd() % 64 + 1) << 20;
            e.owner = owners[(rnd() % 4) as usize] as u8;
            e.mem = MemKind::Device as u8;
            e.module = (rnd() % 5) as u32;
            live.push(e.addr);
        } else {
            let k = (rnd() as usize) % live.len();
            e.kind = Kind::Free as u16;
            e.api = Api::cuMemFree_v2 as u16;
            e.addr = live.swap_remove(k);
        }
        out.push(e);
    }
    out
}

fn header() -> Header {
    let mut h = Header::default();
    h.push("pid", "1");
    h.push("start_mono_ns", "0");
    h
}

fn format1(events: &[Event]) -> Vec<u8> {
    let mut out = preamble().to_vec();
    let hp = header().encode();
    let start = out.len();
    out.resize(start + frame_len(hp.len()), 0);
    encode_frame(Kind::Header as u16, &hp, &mut out[start..]);
    for e in events {
        push(&mut out, e);
    }
    out
}

fn format2(events: &[Event]) -> Vec<u8> {
    let mut w = MemJournal::new(&header());
    for e in events {
        w.event(e);
    }
    w.finish(true)
}

fn bench(label: &str, bytes: &[u8], n: usize) {
    let mut best = f64::INFINITY;
    let (mut best_parse, mut best_books) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..5 {
        let t = Instant::now();
        let j = journal::parse(Path::new("bench.vlj"), bytes).expect("synthetic journal");
        let parsed = t.elapsed().as_secs_f64();
        let books = ledger::build(std::slice::from_ref(&j));
        let secs = t.elapsed().as_secs_f64();
        best_parse = best_parse.min(parsed);
        best_books = best_books.min(secs - parsed);
        assert_eq!(j.events.len(), n);
        assert!(!books.processes.is_empty());
        best = best.min(secs);
    }
    println!(
        "replay {label}: {n} events ({:.1} MiB, {:.1} bytes an event) in {:.3} s = {:.2} M events/s (best of 5, decode + books)",
        bytes.len() as f64 / (1 << 20) as f64,
        bytes.len() as f64 / n as f64,
        best,
        n as f64 / best / 1e6
    );
    println!("replay {label}: of which decode {best_parse:.3} s, books {best_books:.3} s");
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let events = events(n, 0x5EED);
    bench("format 1", &format1(&events), n);
    bench("format 2", &format2(&events), n);
}
