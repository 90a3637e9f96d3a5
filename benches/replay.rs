//! Replay speed: the synthetic run of `benches/support/run.rs` (N records, 2,000,000 unless
//! given) decoded and replayed into the books, on one thread. Target: ≥ 20 million records
//! per second, decode and books together.
//!
//!     cargo bench --bench replay [-- EVENTS] [--once]
//!
//! `--once` runs a single pass (for `valgrind --tool=callgrind`, whose instruction counts are
//! stable where wall-clock time on a shared machine is not).

mod support;

use std::path::Path;
use std::time::Instant;

use vramledger::{journal, ledger};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args
        .iter()
        .find_map(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let rounds = if args.iter().any(|a| a == "--once") {
        1
    } else {
        5
    };
    let bytes = support::format1_bytes(n, 0x5EED);
    let mut best = f64::INFINITY;
    let (mut best_parse, mut best_books) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..rounds {
        let t = Instant::now();
        let j = journal::parse(Path::new("bench.vlj"), &bytes).expect("synthetic journal");
        let parsed = t.elapsed().as_secs_f64();
        let books = ledger::build(std::slice::from_ref(&j));
        let secs = t.elapsed().as_secs_f64();
        best_parse = best_parse.min(parsed);
        best_books = best_books.min(secs - parsed);
        assert_eq!(j.events.len(), n);
        assert!(books.processes[0].devices[0].balanced());
        best = best.min(secs);
    }
    println!(
        "replay: {n} events ({:.1} MiB, format 1) in {best:.3} s = {:.2} M events/s (best of {rounds}, decode + books)",
        bytes.len() as f64 / (1 << 20) as f64,
        n as f64 / best / 1e6
    );
    println!(
        "replay: of which decode {best_parse:.3} s ({:.2} M/s), books {best_books:.3} s ({:.2} M/s)",
        n as f64 / best_parse / 1e6,
        n as f64 / best_books / 1e6
    );
}
