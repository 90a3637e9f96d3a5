//! Replay speed: the synthetic run of `benches/support/run.rs` (N records, 2,000,000 unless
//! given) in format 1 (a CRC-sealed frame per record) and format 2 (compact records, a CRC
//! per 64 KiB block, as the shim writes it today), each replayed on one thread two ways:
//!
//! - **stream**: as `report` reads a journal (`run_replay`): its index walk, then the books'
//!   walk, each decoding the records as it goes; no event is held.
//! - **held**: the journal decoded into memory once (`journal::parse`), then `ledger::build`
//!   (what `report` did before it streamed; what sizing and the exporters still do).
//!
//! Target: ≥ 20 million records per second, decode and books together.
//!
//!     cargo bench --bench replay [-- EVENTS] [--once] [--stream | --split]
//!
//! `--once` runs a single pass (for `valgrind --tool=callgrind`, whose instruction counts are
//! stable where wall-clock time on a shared machine is not); `--stream` only the streamed
//! replay of format 2 (for a profiler): its bytes in memory, then as the CLI reads it, from
//! its file a part at a time; `--split` where a streamed replay's time goes, in ns a record:
//! the index walk alone, then the books walk with no book, with each book and with both.
//! With `--split`, `BENCH_ONLY_INDEX=1` (40 index walks), `BENCH_ONLY_WALK=1` (20 books
//! walks with no book; `BENCH_BOOK=books` or `pools` with that one, `BENCH_ALL=1` with both
//! and what `report` keeps beside them) or `BENCH_ONLY_FILE_WALK=1` (20 books
//! walks from the file) only loop, for `perf record` or
//! `valgrind --tool=cachegrind --branch-sim=yes` (mispredictions: VMs often have no counters).

mod support;

use std::path::Path;
use std::time::Instant;

use vramledger::{journal, ledger, run_replay};

/// The best of `rounds` timings of `f`, in seconds.
fn best_of(rounds: usize, mut f: impl FnMut()) -> f64 {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn bench(label: &str, bytes: &[u8], n: usize, rounds: usize) {
    let path = Path::new("bench.vlj");
    let rate = |secs: f64| n as f64 / secs / 1e6;
    let stream = best_of(rounds, || {
        let s = run_replay::Stream::from_bytes(path, bytes.to_vec()).expect("synthetic journal");
        let (books, _) = run_replay::replay_stream(&s, None);
        assert!(books.devices[0].balanced());
    });
    let decode = best_of(rounds, || {
        let mut count = 0usize;
        journal::parse_each(path, bytes, &mut |_: &mut vramledger_format::Event| {
            count += 1;
            std::ops::ControlFlow::Continue(())
        })
        .expect("synthetic journal");
        assert_eq!(count, n);
    });
    let held = best_of(rounds, || {
        let j = journal::parse(path, bytes).expect("synthetic journal");
        let books = ledger::build(std::slice::from_ref(&j));
        assert!(books.processes[0].devices[0].balanced());
    });
    println!(
        "replay {label}: {n} records ({:.1} MiB, {:.1} bytes a record), best of {rounds}, one thread",
        bytes.len() as f64 / (1 << 20) as f64,
        bytes.len() as f64 / n as f64,
    );
    println!(
        "  stream (index walk + books walk): {stream:.3} s = {:.2} M records/s",
        rate(stream)
    );
    println!(
        "  decode alone (one walk):          {decode:.3} s = {:.2} M records/s",
        rate(decode)
    );
    println!(
        "  held (parse, then ledger::build): {held:.3} s = {:.2} M records/s",
        rate(held)
    );
}

/// A book that takes every record and keeps nothing: the walk's own cost.
struct Nothing;

impl ledger::replay::Observer for Nothing {
    fn record(&mut self, _r: &ledger::replay::Rec<'_>) -> std::ops::ControlFlow<()> {
        std::ops::ControlFlow::Continue(())
    }
}

/// Where a streamed replay's time goes: each walk alone, then the books walk with each book.
fn split(n: usize, rounds: usize) {
    use ledger::index::Index;
    let bytes = support::format2_bytes(n, 0x5EED, 1);
    let path = Path::new("bench.vlj");
    let s = run_replay::Stream::from_bytes(path, bytes.clone()).expect("synthetic journal");
    let ix = Index::scan(&s);
    let ns = |secs: f64| secs * 1e9 / n as f64;
    // The two walks as the CLI makes them: from the file, a part at a time, seals checked.
    let file = support::scratch_dir().join(format!("bench-split-{}.vlj", std::process::id()));
    std::fs::write(&file, &bytes).expect("bench journal");
    let f = run_replay::Stream::open(&file).expect("synthetic journal");
    // Read through the open file from now on: the name is not needed.
    let _ = std::fs::remove_file(&file);
    if std::env::var_os("BENCH_ONLY_FILE_WALK").is_some() {
        for _ in 0..20 {
            ledger::process::replay_indexed(&f, &ix, &mut ());
        }
        return;
    }
    let index = best_of(rounds, || {
        assert_eq!(Index::scan(&s).records, n);
    });
    if std::env::var_os("BENCH_ONLY_INDEX").is_some() {
        for _ in 0..40 {
            Index::scan(&s);
        }
        return;
    }
    if std::env::var_os("BENCH_ONLY_WALK").is_some() {
        let book = std::env::var("BENCH_BOOK").unwrap_or_default();
        for _ in 0..20 {
            if std::env::var_os("BENCH_ALL").is_some() {
                ledger::process::replay_indexed(&s, &ix, &mut ());
            } else if book == "books" {
                ledger::replay::run(&s, &ix, &mut ledger::books::Books::new(&ix));
            } else if book == "pools" {
                ledger::replay::run(&s, &ix, &mut ledger::pools::Pools::new(&ix));
            } else {
                ledger::replay::run(&s, &ix, &mut Nothing);
            }
        }
        return;
    }
    let walk = best_of(rounds, || {
        ledger::replay::run(&s, &ix, &mut Nothing);
    });
    let books = best_of(rounds, || {
        let mut b = ledger::books::Books::new(&ix);
        ledger::replay::run(&s, &ix, &mut b);
    });
    let pools = best_of(rounds, || {
        let mut p = ledger::pools::Pools::new(&ix);
        ledger::replay::run(&s, &ix, &mut p);
    });
    let all = best_of(rounds, || {
        ledger::process::replay_indexed(&s, &ix, &mut ());
    });
    let f_index = best_of(rounds, || {
        assert_eq!(Index::scan(&f).records, n);
    });
    let f_all = best_of(rounds, || {
        ledger::process::replay_indexed(&f, &ix, &mut ());
    });
    println!("split, {n} records, best of {rounds}, ns a record:");
    println!("  held bytes (seals checked once):");
    println!("    index walk:                 {:.1}", ns(index));
    println!("    books walk, no book:        {:.1}", ns(walk));
    println!("    books walk, report's books: {:.1}", ns(books));
    println!("    books walk, pools:          {:.1}", ns(pools));
    println!("    books walk, both:           {:.1}", ns(all));
    println!("  from the file (as the CLI reads it):");
    println!("    index walk:                 {:.1}", ns(f_index));
    println!("    books walk, both:           {:.1}", ns(f_all));
}

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
    if args.iter().any(|a| a == "--split") {
        split(n, rounds);
        return;
    }
    if args.iter().any(|a| a == "--stream") {
        let bytes = support::format2_bytes(n, 0x5EED, 1);
        let path = Path::new("bench.vlj");
        let secs = best_of(rounds, || {
            let s = run_replay::Stream::from_bytes(path, bytes.clone()).expect("synthetic journal");
            let (books, _) = run_replay::replay_stream(&s, None);
            assert!(books.devices[0].balanced());
        });
        println!(
            "stream format 2: {secs:.3} s = {:.2} M records/s",
            n as f64 / secs / 1e6
        );
        // As the CLI reads a journal: from its file, a part at a time.
        let file = support::scratch_dir().join(format!("bench-replay-{}.vlj", std::process::id()));
        std::fs::write(&file, &bytes).expect("bench journal");
        let secs = best_of(rounds, || {
            let s = run_replay::Stream::open(&file).expect("synthetic journal");
            let (books, _) = run_replay::replay_stream(&s, None);
            assert!(books.devices[0].balanced());
        });
        let _ = std::fs::remove_file(&file);
        println!(
            "stream format 2 from its file: {secs:.3} s = {:.2} M records/s",
            n as f64 / secs / 1e6
        );
        return;
    }
    bench("format 1", &support::format1_bytes(n, 0x5EED), n, rounds);
    bench("format 2", &support::format2_bytes(n, 0x5EED, 1), n, rounds);
}
