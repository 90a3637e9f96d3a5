//! A journal read a part at a time ([`Stream::open`], format 2) against the same bytes held
//! whole ([`Stream::from_bytes`]): the same records, warnings and damage, whatever the file's
//! state (torn, cut, damaged at a part's edge), and later walks that see what the first saw.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use vramledger_format::block::placeholder;
use vramledger_format::memwriter::MemJournal;
use vramledger_format::{Event, Header, Kind};

use super::*;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("run-replay-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn header() -> Header {
    let mut h = Header::default();
    h.push("pid", "7");
    h.push("start_mono_ns", "1000");
    h
}

/// `n` records (allocations and frees, now and then a stage record with text), about 24
/// bytes each: `n` of 100,000 spans a few parts.
fn journal(n: u64, close: bool) -> Vec<u8> {
    let mut w = MemJournal::new(&header());
    for i in 0..n {
        let mut e = Event {
            kind: if i % 2 == 0 { Kind::Alloc } else { Kind::Free } as u16,
            t_ns: 1000 + i * 10,
            addr: 0x1000 * (i / 2 + 1),
            size: 4096,
            ..Event::default()
        };
        if i % 20_000 == 7 {
            e.kind = Kind::Stage as u16;
            e.text = format!("stage{i}");
        }
        w.event(&e);
    }
    w.finish(close)
}

/// Every record of a walk (kind, time, address) and the journal it gave.
fn walked(s: &Stream) -> (Vec<(u16, u64, u64)>, Journal) {
    let mut out = Vec::new();
    s.walk(|e| {
        out.push((e.kind, e.t_ns, e.addr));
        ControlFlow::Continue(())
    });
    (out, s.meta().clone())
}

fn same_as_held(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
    let held = Stream::from_bytes(path, bytes.to_vec());
    let parts = Stream::open(path);
    let (held, parts) = match (held, parts) {
        (Ok(h), Ok(p)) => (h, p),
        (h, p) => {
            let (h, p) = (
                h.err().map(|e| e.to_string()),
                p.err().map(|e| e.to_string()),
            );
            assert_eq!(h, p);
            assert!(h.is_some());
            return;
        }
    };
    assert!(matches!(parts.body, Body::Parts(_)));
    let (want, wj) = walked(&held);
    for _ in 0..2 {
        let (got, gj) = walked(&parts);
        assert_eq!(got.len(), want.len(), "{}", bytes.len());
        assert!(got == want, "the records differ ({} bytes)", bytes.len());
        assert_eq!(gj.warnings, wj.warnings);
        assert_eq!(gj.corrupt, wj.corrupt);
        assert_eq!(gj.header, wj.header);
        assert_eq!(gj.modules, wj.modules);
        assert_eq!(gj.stage_names, wj.stage_names);
    }
    assert!(!parts.reread());
}

#[test]
fn a_journal_read_in_parts_walks_as_the_whole_bytes() {
    let d = dir("parts");
    let p = d.join("a.vlj");
    let whole = journal(100_000, true);
    assert!(whole.len() > 2 * PART, "{}", whole.len());
    same_as_held(&p, &whole);
    // Open: killed before its close, with a zero tail.
    let mut open = journal(100_000, false);
    open.resize(open.len().next_multiple_of(PART) + 3 * BLOCK, 0);
    same_as_held(&p, &open);
    // Cut anywhere, at and around the parts' and blocks' edges among them.
    for cut in [
        PART,
        PART - 1,
        PART + 1,
        PART + 8,
        2 * PART - 16,
        2 * PART + BLOCK - 3,
        BLOCK,
        BLOCK - 17,
        17,
        9,
        0,
        whole.len() - 1,
    ] {
        same_as_held(&p, &whole[..cut.min(whole.len())]);
    }
    // Damage: a torn block at a part's end, a flipped byte at a part's start, zeros
    // before data.
    let mut torn = whole.clone();
    torn[PART - BLOCK + 100] ^= 0x40;
    same_as_held(&p, &torn);
    let mut flipped = whole.clone();
    flipped[PART + 3] ^= 0xff;
    same_as_held(&p, &flipped);
    let mut zeros = open.clone();
    zeros[2 * PART - 24..2 * PART].fill(0);
    same_as_held(&p, &zeros);
    // A record that runs past an open block's end, where a part ends inside the file
    // (damage) and where the file ends (cut off).
    let edge = open.len() - 3 * BLOCK;
    assert!(edge.is_multiple_of(PART));
    let mut past = open.clone();
    let block = edge - BLOCK;
    past[block..block + 8].copy_from_slice(&placeholder(BLOCK - 32).to_le_bytes());
    let compact = (5u64 << 8 | 0xff).to_le_bytes();
    past[edge - 32..edge - 24].copy_from_slice(&compact);
    past[edge - 24..edge - 20].copy_from_slice(&(1u32 | 0x7f << 24).to_le_bytes());
    same_as_held(&p, &past);
    same_as_held(&p, &past[..edge]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn later_walks_see_what_the_first_walk_saw() {
    let d = dir("later");
    let p = d.join("a.vlj");
    // A live journal: its open tail changes and grows after the first walk; the later walks
    // keep to what the first one saw.
    let open = journal(60_000, false);
    std::fs::write(&p, &open).unwrap();
    let s = Stream::open(&p).unwrap();
    let (first, fj) = walked(&s);
    let grown = journal(90_000, false);
    assert_eq!(grown[..open.len() - BLOCK], open[..open.len() - BLOCK]);
    std::fs::write(&p, &grown).unwrap();
    let (again, aj) = walked(&s);
    assert!(again == first);
    assert_eq!(aj.warnings, fj.warnings);
    assert!(!s.reread());
    // A sealed block rewritten: the walk stops there, and the file is read again whole.
    let mut rewritten = open.clone();
    rewritten[BLOCK + 200] ^= 1;
    std::fs::write(&p, &rewritten).unwrap();
    let mut n = 0;
    s.walk(|_| {
        n += 1;
        ControlFlow::Continue(())
    });
    assert!(n < first.len(), "{n}");
    assert!(s.reread());
    let held = Stream::from_bytes(&p, rewritten).unwrap();
    let (want, wj) = walked(&held);
    let (got, gj) = walked(&s);
    assert!(got == want);
    assert_eq!(gj.warnings, wj.warnings);
    assert!(gj.corrupt);
    // A record still in flight at the first walk, committed since: later walks still find
    // it lost, as the first did.
    let in_flight = |commit: bool| {
        let mut w = MemJournal::new(&header());
        let alloc = |i: u64| Event {
            kind: Kind::Alloc as u16,
            t_ns: 1000 + i,
            addr: 0x1000 * (i + 1),
            size: 4096,
            arg0: 4096,
            ..Event::default()
        };
        for i in 0..100 {
            w.event(&alloc(i));
        }
        if commit {
            w.event(&alloc(100));
        } else {
            w.hole(24);
        }
        for i in 101..110 {
            w.event(&alloc(i));
        }
        w.finish(false)
    };
    let (lost, committed) = (in_flight(false), in_flight(true));
    assert_eq!(lost.len(), committed.len());
    std::fs::write(&p, &lost).unwrap();
    let s = Stream::open(&p).unwrap();
    let (first, fj) = walked(&s);
    assert_eq!(first.len(), 109);
    assert!(
        fj.warnings.iter().any(|w| w.contains("lost")),
        "{:?}",
        fj.warnings
    );
    std::fs::write(&p, &committed).unwrap();
    let (again, aj) = walked(&s);
    assert!(again == first);
    assert_eq!(aj.warnings, fj.warnings);
    assert!(!s.reread());
    let _ = std::fs::remove_dir_all(&d);
}
