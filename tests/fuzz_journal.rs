//! Fuzzing the journal reader and everything a journal flows into (`report` text, JSON and
//! HTML, `snapshot` in every format, `dump`, the timeline), seeded with windows of the real
//! H200 journals in tests/data. Two harnesses:
//! - `journal_bytes`: byte havoc on the file (frames break, checksums fail, the reader resyncs);
//! - `journal_records`: edits of whole records whose frames are re-encoded with valid
//!   checksums (absurd sizes, addresses, devices, kinds, stage ids, texts, duplicated and
//!   reordered records, lost-in-flight gaps, cut tails), so the ledger and the outputs see them.
//!
//! Both run once on format 1 (frames, as the recorded journals are) and once on format 2
//! (the same records written as the shim writes them now: 64 KiB sealed blocks, templates and
//! compact records, windows repeated so that records cross block seals).
//!
//! See tests/fuzz_support for the method, the counts and how to replay an input.

mod fuzz_support;

use std::collections::BTreeMap;
use std::path::Path;

use fuzz_support::{count, files, havoc, manifest_dir, run_sharded, Rng, INTERESTING};
use vramledger::journal::{self, Journal};
use vramledger::output::{self, report_text::Units};
use vramledger::snapshot::{self, At};
use vramledger::{ledger, report_input, timeline};
use vramledger_format::frame::{decode_frame, encode_frame, frame_len};
use vramledger_format::memwriter::MemJournal;
use vramledger_format::{preamble, Event, Header, Kind, PREAMBLE_LEN};

#[global_allocator]
static GUARD: fuzz_support::Guard = fuzz_support::Guard;

type Frames = Vec<(u16, Vec<u8>)>;

/// Windows of consecutive records of every real journal, each led by its header.
fn seed_windows() -> Vec<Frames> {
    let mut out = Vec::new();
    for (path, bytes) in files(&manifest_dir().join("tests/data")) {
        if path.extension().is_none_or(|x| x != "vlj") {
            continue;
        }
        let mut frames: Frames = Vec::new();
        let mut at = PREAMBLE_LEN;
        while at + 8 <= bytes.len() {
            match decode_frame(&bytes[at..]) {
                Ok((kind, payload, used)) => {
                    frames.push((kind, payload.to_vec()));
                    at += used;
                }
                Err(_) => break,
            }
        }
        assert!(frames.len() > 1, "{} reads as a journal", path.display());
        let header = frames[0].clone();
        let rest = &frames[1..];
        let step = (rest.len() / 12).max(1);
        for start in (0..rest.len()).step_by(step) {
            let mut w = vec![header.clone()];
            w.extend_from_slice(&rest[start..(start + 48).min(rest.len())]);
            out.push(w);
        }
    }
    assert!(out.len() >= 40, "seed windows: {}", out.len());
    out
}

fn encode(frames: &Frames, gaps: &[(usize, usize)]) -> Vec<u8> {
    let mut b = preamble().to_vec();
    for (i, (kind, payload)) in frames.iter().enumerate() {
        if let Some(&(_, n)) = gaps.iter().find(|(at, _)| *at == i) {
            b.extend(std::iter::repeat_n(0u8, n * 8)); // a slot reserved, never committed
        }
        let at = b.len();
        b.resize(at + frame_len(payload.len()), 0);
        encode_frame(*kind, payload, &mut b[at..]);
    }
    b
}

/// `frames` written in format 2 after `pad` bytes of padding (so that they cross a block's
/// seal), `reps` times over, with the same lost-in-flight gaps; `close`: ended by a final
/// seal as at a clean exit.
fn encode2(
    frames: &Frames,
    gaps: &[(usize, usize)],
    pad: usize,
    reps: usize,
    close: bool,
) -> Vec<u8> {
    let header = Header::decode(&frames[0].1).unwrap_or_default();
    let mut j = MemJournal::new(&header);
    if pad >= 8 {
        j.pad(pad & !7);
    }
    for _ in 0..reps {
        for (i, (kind, payload)) in frames.iter().enumerate().skip(1) {
            if let Some(&(_, n)) = gaps.iter().find(|(at, _)| *at == i) {
                j.hole((n * 8).max(16)); // the smallest slot a writer reserves
            }
            match Event::decode(*kind, payload) {
                Some(e) if e.kind == *kind => j.event(&e),
                _ => j.frame(*kind, payload),
            }
        }
    }
    j.finish(close)
}

/// The fixed fields of an event: (offset, width).
const FIELDS: &[(usize, usize)] = &[
    (0, 8),
    (8, 4),
    (12, 4),
    (16, 4),
    (20, 4),
    (24, 1),
    (25, 1),
    (26, 2),
    (28, 4),
    (32, 4),
    (40, 8),
    (48, 8),
    (56, 8),
    (64, 8),
    (72, 8),
    (80, 8),
];

const TEXTS: &[&str] = &[
    "startup",
    "weight_load",
    "kv_pool",
    "graph_capture",
    "serving",
    "\n",
    "kv_pool\n[2025-01-01 00:00:00 TP0] Load weight end. type=X, dtype=torch.bfloat16, avail mem=1e308 GB, mem usage=-5 GB.",
    "/usr/lib/libcuda.so.1",
    "\u{fffd}\u{0}\u{7f}",
    "",
];

fn edit_records(rng: &mut Rng, frames: &mut Frames) {
    let kinds: Vec<u16> = Kind::ALL.iter().map(|k| *k as u16).collect();
    for _ in 0..1 + rng.below(8) {
        if frames.len() < 2 {
            frames.push((Kind::Alloc as u16, vec![0; 88]));
        }
        let i = 1 + rng.below(frames.len() - 1);
        match rng.below(10) {
            0..=3 => {
                let p = &mut frames[i].1;
                if p.len() < 88 {
                    p.resize(88, 0);
                }
                let (off, w) = *rng.pick(FIELDS);
                let v = if rng.one_in(3) {
                    rng.next() % 64
                } else {
                    *rng.pick(INTERESTING)
                };
                p[off..off + w].copy_from_slice(&v.to_le_bytes()[..w]);
            }
            4 => frames[i].0 = *rng.pick(&kinds),
            5 => {
                let f = frames[i].clone();
                let copies = if rng.one_in(8) { 64 } else { 1 };
                for _ in 0..copies {
                    let at = 1 + rng.below(frames.len());
                    frames.insert(at.min(frames.len()), f.clone());
                }
            }
            6 if frames.len() > 2 => {
                frames.remove(i);
            }
            7 => {
                let j = 1 + rng.below(frames.len() - 1);
                frames.swap(i, j);
            }
            8 => {
                let p = &mut frames[i].1;
                p.truncate(88.min(p.len()));
                if p.len() == 88 {
                    p.extend_from_slice(rng.pick(TEXTS).as_bytes());
                }
            }
            _ => {
                let p = &mut frames[i].1;
                let keep = rng.below(p.len() + 1);
                p.truncate(keep);
            }
        }
    }
}

fn generate(rng: &mut Rng, seeds: &[Frames]) -> Vec<u8> {
    let mut frames = rng.pick(seeds).clone();
    if rng.one_in(4) {
        // Two processes' records interleaved in one file.
        let other = rng.pick(seeds);
        let at = 1 + rng.below(frames.len());
        frames.splice(at..at, other[1..].iter().cloned());
    }
    edit_records(rng, &mut frames);
    let gaps: Vec<(usize, usize)> = if rng.one_in(4) {
        vec![(1 + rng.below(frames.len()), 1 + rng.below(16))]
    } else {
        Vec::new()
    };
    let mut b = encode(&frames, &gaps);
    match rng.below(8) {
        0 => b.extend(std::iter::repeat_n(0u8, 8 * rng.below(64))),
        1 => {
            let cut = rng.below(b.len());
            b.truncate(cut);
        }
        2 => havoc(rng, &mut b, &[], &[], 1 << 20),
        _ => {}
    }
    b
}

fn generate2(rng: &mut Rng, seeds: &[Frames]) -> Vec<u8> {
    let mut frames = rng.pick(seeds).clone();
    edit_records(rng, &mut frames);
    let gaps: Vec<(usize, usize)> = if rng.one_in(4) {
        vec![(1 + rng.below(frames.len()), 1 + rng.below(16))]
    } else {
        Vec::new()
    };
    // Most cross block 0's seal; a few span several blocks.
    let pad = if rng.one_in(2) {
        62_000 + rng.below(3_000)
    } else {
        0
    };
    let reps = if rng.one_in(16) {
        10 + rng.below(30)
    } else {
        1
    };
    let mut b = encode2(&frames, &gaps, pad, reps, rng.one_in(2));
    match rng.below(8) {
        0 => b.extend(std::iter::repeat_n(0u8, 8 * rng.below(64))),
        1 => {
            let cut = rng.below(b.len());
            b.truncate(cut);
        }
        2 => havoc(rng, &mut b, &[], &[], 1 << 20),
        _ => {}
    }
    b
}

/// Everything a journal flows into. Returns whether it was read as a journal.
fn pipeline(bytes: &[u8]) -> bool {
    let Ok(j) = journal::parse(Path::new("fuzz.vlj"), bytes) else {
        return false;
    };
    let js: [Journal; 1] = [j];
    let books = ledger::build(&js);
    let v = output::report_json::render(&books);
    let _ = report_input::from_report_json(&v);
    let _ = output::report_text::render(&books, Units::Gib);
    let _ = output::report_text::render(&books, Units::Bytes);
    let tl = timeline::replay(&js[0], 64);
    let mut timelines = BTreeMap::new();
    timelines.insert(js[0].path.display().to_string(), tl);
    let _ = output::html::render(&books, &timelines, Units::Gib);
    for at in [At::End, At::Peak, At::Oom, At::Stage("kv_pool".into())] {
        if let Ok(s) = snapshot::take(&js, &at) {
            let json = output::snapshot_json::render(&s).expect("snapshot JSON");
            let tree: serde_json::Value = serde_json::from_slice(&json).expect("snapshot JSON");
            let canonical = serde_json::to_string_pretty(&tree).expect("JSON") + "\n";
            assert!(json == canonical.as_bytes(), "snapshot JSON not canonical");
            let _ = output::memory_viz::render(&s);
            let _ = output::perfetto::render(&s);
        }
    }
    let _ = output::dump::render_text(&js[0]);
    let _ = output::dump::render(&js[0]);
    true
}

#[test]
fn journal_bytes() {
    let seeds = seed_windows();
    let encoded: Vec<Vec<u8>> = seeds.iter().map(|w| encode(w, &[])).collect();
    let dict: Vec<&[u8]> = vec![
        b"VRAMLJNL",
        &[0, 0, 0x4c, 0x56],
        &[10, 0, 0x4c, 0x56],
        &[11, 0, 0x4c, 0x56],
        &[0, 0, 0, 0, 0, 0, 0, 0],
    ];
    havoc_journals("journal_bytes", count(450_000), &encoded, &dict);
}

/// `n` inputs of `seeds` cut and spliced with `dict`'s words, each parsed as a journal.
fn havoc_journals(name: &'static str, n: u64, seeds: &[Vec<u8>], dict: &[&[u8]]) {
    let stats = run_sharded(
        name,
        n,
        |rng| {
            let mut b = rng.pick(seeds).clone();
            let other = rng.pick(seeds).clone();
            havoc(rng, &mut b, &other, dict, 1 << 20);
            b
        },
        |b| journal::parse(Path::new("fuzz.vlj"), b).is_ok_and(|j| !j.corrupt),
    );
    assert!(stats.inputs >= n);
}

#[test]
fn journal_records() {
    let seeds = seed_windows();
    let stats = run_sharded(
        "journal_records",
        count(20_000),
        |rng| generate(rng, &seeds),
        pipeline,
    );
    assert!(stats.inputs >= count(20_000));
    assert!(stats.accepted > stats.inputs / 2, "{stats:?}");
}

#[test]
fn journal_bytes_format2() {
    let seeds = seed_windows();
    let encoded: Vec<Vec<u8>> = seeds
        .iter()
        .enumerate()
        .map(|(i, w)| encode2(w, &[], (i % 3) * 31_500, 1, i % 2 == 0))
        .collect();
    let dict: Vec<&[u8]> = vec![
        b"VRAMLJNL",
        b"VLSL",
        &[2, 0, 0, 0],
        &[0xff, 0, 0, 0],
        &[4, 0, 0x4c, 0x56],
        &[0, 0, 0x4c, 0x56],
        &[10, 0, 0x4c, 0x56],
        &[0, 0, 0, 0, 0, 0, 0, 0],
    ];
    havoc_journals("journal_bytes_format2", count(150_000), &encoded, &dict);
}

#[test]
fn journal_records_format2() {
    let seeds = seed_windows();
    let stats = run_sharded(
        "journal_records_format2",
        count(10_000),
        |rng| generate2(rng, &seeds),
        pipeline,
    );
    assert!(stats.inputs >= count(10_000));
    assert!(stats.accepted > stats.inputs / 2, "{stats:?}");
}
