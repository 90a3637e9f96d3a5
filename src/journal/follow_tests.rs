//! Tests of the follower (both formats).
use super::*;
use crate::journal::test_frames::{alloc, frame};
use std::io::Write;
use vramledger_format::{preamble, Api, Owner};

#[test]
fn a_fifo_is_refused_without_waiting_for_a_writer() {
    let p = std::env::temp_dir().join(format!("follow-fifo-{}.vlj", std::process::id()));
    let _ = std::fs::remove_file(&p);
    assert!(std::process::Command::new("mkfifo")
        .arg(&p)
        .status()
        .unwrap()
        .success());
    let e = Follower::new(&p).poll().unwrap_err();
    let _ = std::fs::remove_file(&p);
    assert!(e.to_string().contains("is a FIFO"), "{e}");
}

fn header() -> Vec<u8> {
    let mut h = Header::default();
    h.push("pid", "7");
    frame(Kind::Header as u16, &h.encode())
}

struct Tmp(PathBuf);
impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn tmp(name: &str) -> Tmp {
    let p = std::env::temp_dir().join(format!("follow-{name}-{}.vlj", std::process::id()));
    let _ = std::fs::remove_file(&p);
    Tmp(p)
}

/// The writer's last state: the whole journal, cut to its used size, and one more poll after
/// the follower's grace for an unfinished tail is over.
fn write_final(path: &Path, bytes: &[u8], f: &mut Follower) {
    write_at(path, 0, bytes);
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(bytes.len() as u64)
        .unwrap();
    f.grace = Duration::ZERO;
    f.poll().unwrap();
}

fn write_at(path: &Path, at: usize, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap();
    f.seek(SeekFrom::Start(at as u64)).unwrap();
    f.write_all(bytes).unwrap();
}

fn addrs(f: &Follower) -> Vec<u64> {
    f.journal().events.iter().map(|e| e.addr).collect()
}

#[test]
fn reads_only_what_is_new_and_waits_for_the_preamble() {
    let t = tmp("grow");
    write_at(&t.0, 0, b"");
    let mut f = Follower::new(&t.0);
    assert_eq!(f.poll().unwrap(), 0);
    let mut bytes = preamble().to_vec();
    bytes.extend(header());
    bytes.extend(alloc(0x1000));
    write_at(&t.0, 0, &bytes);
    write_at(&t.0, bytes.len(), &[0u8; 4096]); // the zero tail of a grown chunk
    assert_eq!(f.poll().unwrap(), 1);
    assert!(f.has_header());
    assert_eq!(f.journal().pid(), Some(7));
    assert_eq!(f.poll().unwrap(), 0);
    write_at(&t.0, bytes.len(), &alloc(0x2000));
    assert_eq!(f.poll().unwrap(), 1);
    assert_eq!(addrs(&f), vec![0x1000, 0x2000]);
    assert!(
        f.journal().warnings.is_empty(),
        "{:?}",
        f.journal().warnings
    );
}

#[test]
fn a_hole_waits_then_is_skipped_and_a_late_fill_rereads_in_file_order() {
    let t = tmp("hole");
    let mut bytes = preamble().to_vec();
    bytes.extend(header());
    let hole_at = bytes.len();
    let late = alloc(0x1000);
    bytes.extend(vec![0u8; late.len()]); // reserved, not yet committed
    bytes.extend(alloc(0x2000));
    write_at(&t.0, 0, &bytes);
    let mut f = Follower::new(&t.0);
    let t0 = Instant::now();
    assert_eq!(f.poll_at(t0).unwrap(), 0, "waits at the hole");
    assert_eq!(f.poll_at(t0 + Duration::from_secs(1)).unwrap(), 0);
    // Filled within the grace: both, in file order.
    write_at(&t.0, hole_at, &late);
    assert_eq!(f.poll_at(t0 + Duration::from_secs(2)).unwrap(), 2);
    assert_eq!(addrs(&f), vec![0x1000, 0x2000]);

    // A hole that stays empty past the grace is skipped as lost...
    let t2 = tmp("hole2");
    let mut bytes = preamble().to_vec();
    bytes.extend(header());
    let hole_at = bytes.len();
    bytes.extend(vec![0u8; late.len()]);
    bytes.extend(alloc(0x2000));
    write_at(&t2.0, 0, &bytes);
    let mut f = Follower::new(&t2.0);
    assert_eq!(f.poll_at(t0).unwrap(), 0);
    assert_eq!(f.poll_at(t0 + DEFAULT_GRACE).unwrap(), 1);
    assert_eq!(addrs(&f), vec![0x2000]);
    assert_eq!(f.journal().warnings.len(), 1);
    // ...and when it is committed after all, everything is read again in file order.
    write_at(&t2.0, hole_at, &late);
    assert_eq!(f.poll_at(t0 + DEFAULT_GRACE).unwrap(), 2);
    assert_eq!(f.restarts, 1);
    assert_eq!(addrs(&f), vec![0x1000, 0x2000]);
    let full = super::super::read(&t2.0).unwrap();
    assert_eq!(full.events, f.journal().events);
}

#[test]
fn a_hole_in_the_journal_of_an_ended_process_is_skipped_at_once() {
    let t = tmp("ended");
    let mut bytes = preamble().to_vec();
    bytes.extend(header());
    bytes.extend(vec![0u8; alloc(0).len()]);
    bytes.extend(alloc(0x2000));
    write_at(&t.0, 0, &bytes);
    let mut f = Follower::new(&t.0);
    f.grace = Duration::ZERO;
    assert_eq!(f.poll().unwrap(), 1);
    assert_eq!(f.journal().events, super::super::read(&t.0).unwrap().events);
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Random journals (records, padding, empty slots, flipped bytes, a cut tail): read as it
/// grew and then to its end after the writer stopped, a follower has what the full reader
/// has, in the same order, with the same verdict on damage.
#[test]
fn followed_to_the_end_a_journal_reads_as_the_full_reader_reads_it() {
    let t = tmp("random");
    for seed in 1..=200u64 {
        let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut bytes = preamble().to_vec();
        bytes.extend(header());
        let mut bounds = vec![bytes.len()];
        for i in 0..(r.next() % 40) {
            match r.next() % 10 {
                0 => bytes.extend(vec![0u8; 104]), // a slot never committed
                1 => bytes.extend(frame(PADDING_KIND, &[0u8; 24])),
                _ => bytes.extend(alloc(0x1000 * (i + 1))),
            }
            bounds.push(bytes.len());
        }
        if r.next().is_multiple_of(4) && bytes.len() > 100 {
            let at = 16 + (r.next() as usize % (bytes.len() - 16));
            bytes[at] ^= 0x5a; // damage
        }
        if r.next().is_multiple_of(4) {
            let cut = (r.next() % 60) as usize;
            bytes.truncate(bytes.len().saturating_sub(cut).max(16)); // killed mid-record
        }
        let full = super::super::parse(&t.0, &bytes).unwrap();
        let _ = std::fs::remove_file(&t.0);
        let mut f = Follower::new(&t.0);
        // As it grew: record by record, the rest of the chunk still zero.
        for &b in bounds.iter().filter(|&&b| b <= bytes.len()) {
            let mut grown = bytes[..b].to_vec();
            grown.resize(bytes.len() + 64, 0);
            write_at(&t.0, 0, &grown);
            f.poll().unwrap();
        }
        write_final(&t.0, &bytes, &mut f);
        assert_eq!(f.journal().events, full.events, "seed {seed}");
        assert_eq!(
            f.journal().corrupt,
            full.corrupt,
            "seed {seed}: {:?} vs {:?}",
            f.journal().warnings,
            full.warnings
        );
    }
}

#[test]
fn wrong_files_are_the_readers_errors() {
    let t = tmp("bad");
    write_at(&t.0, 0, b"#!/bin/sh\necho not a journal\n");
    let e = Follower::new(&t.0).poll().unwrap_err();
    assert!(e.to_string().contains("is not a vramledger journal"), "{e}");
    let mut b = preamble().to_vec();
    b[8] = 9;
    write_at(&t.0, 0, &b);
    let e = Follower::new(&t.0).poll().unwrap_err();
    assert!(e.to_string().contains("newer vramledger"), "{e}");
}

#[test]
fn a_corrupt_record_is_warned_once_and_reading_goes_on() {
    let t = tmp("corrupt");
    let mut bytes = preamble().to_vec();
    bytes.extend(header());
    let mut bad = alloc(0x1000);
    let n = bad.len();
    bad[n - 12] ^= 0xff;
    bytes.extend(bad);
    write_at(&t.0, 0, &bytes);
    let mut f = Follower::new(&t.0);
    assert_eq!(f.poll().unwrap(), 0);
    assert_eq!(f.poll().unwrap(), 0);
    assert_eq!(f.journal().warnings.len(), 1, "{:?}", f.journal().warnings);
    assert!(f.journal().corrupt);
    write_at(&t.0, bytes.len(), &alloc(0x3000));
    assert_eq!(f.poll().unwrap(), 1);
    assert_eq!(addrs(&f), vec![0x3000]);
}

mod format2 {
    use super::*;
    use vramledger_format::memwriter::MemJournal;

    fn header2() -> Header {
        let mut h = Header::default();
        h.push("pid", "7");
        h.push("start_mono_ns", "100");
        h
    }

    fn ev(i: u64) -> Event {
        Event {
            kind: if i.is_multiple_of(2) {
                Kind::Alloc
            } else {
                Kind::Free
            } as u16,
            t_ns: 100 + i,
            tid: (i % 3) as u32,
            addr: 0x1000 * (i / 2 + 1),
            size: 2 << 20,
            api: Api::cuMemAlloc_v2 as u16,
            owner: Owner::Torch as u8,
            device: 0,
            ..Event::default()
        }
    }

    /// Random journals of format 2 (events, slots never committed, damage, a cut, closed or
    /// not), followed as they grow record by record and then to their end: the follower has
    /// what the full reader has, with the same verdict on damage.
    #[test]
    fn followed_to_the_end_a_journal_reads_as_the_full_reader_reads_it() {
        let t = tmp("random2");
        for seed in 1..=80u64 {
            let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let mut w = MemJournal::new(&header2());
            let mut bounds = vec![w.len()];
            let n = r.next() % 7000;
            for i in 0..n {
                match r.next() % 50 {
                    0 => w.hole(24),
                    1 => {
                        let mut e = ev(i);
                        e.kind = Kind::Module as u16;
                        e.module = i as u32;
                        e.text = format!("/lib/m{i}.so");
                        w.event(&e);
                    }
                    _ => w.event(&ev(i)),
                }
                bounds.push(w.len());
            }
            let mut bytes = w.finish(r.next().is_multiple_of(2));
            if r.next().is_multiple_of(4) && bytes.len() > 100 {
                let at = 16 + (r.next() as usize % (bytes.len() - 16));
                bytes[at] ^= 0x5a; // damage
            }
            if r.next().is_multiple_of(4) {
                let cut = (r.next() % 60) as usize;
                bytes.truncate(bytes.len().saturating_sub(cut).max(16)); // killed mid-record
            }
            let full = crate::journal::parse(&t.0, &bytes).unwrap();
            let _ = std::fs::remove_file(&t.0);
            let mut f = Follower::new(&t.0);
            for &b in bounds.iter().filter(|&&b| b <= bytes.len()).step_by(173) {
                let mut grown = bytes[..b].to_vec();
                grown.resize(b + 4096, 0); // the zero tail of a grown chunk
                write_at(&t.0, 0, &grown);
                f.poll().unwrap();
            }
            write_final(&t.0, &bytes, &mut f);
            assert_eq!(f.journal().events.len(), full.events.len(), "seed {seed}");
            assert_eq!(f.journal().events, full.events, "seed {seed}");
            assert_eq!(
                f.journal().corrupt,
                full.corrupt,
                "seed {seed}: {:?} vs {:?}",
                f.journal().warnings,
                full.warnings
            );
            assert_eq!(
                f.journal().header,
                full.header,
                "seed {seed}: {:?} / {:?} / {:?}",
                f.journal().warnings,
                full.warnings,
                (0..4)
                    .filter_map(|k| vramledger_format::walk::block(&bytes, k))
                    .collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn a_hole_in_the_tail_waits_then_is_stepped_over_and_a_late_commit_lands_in_order() {
        let t = tmp("hole2");
        let mut w = MemJournal::new(&header2());
        w.event(&ev(0));
        let hole_at = w.len();
        w.hole(24);
        w.event(&ev(2));
        let bytes = w.finish(false);
        write_at(&t.0, 0, &bytes);
        let mut f = Follower::new(&t.0);
        let t0 = Instant::now();
        assert_eq!(f.poll_at(t0).unwrap(), 1, "up to the hole");
        assert!(f.has_header());
        assert_eq!(f.poll_at(t0 + DEFAULT_GRACE).unwrap(), 1, "stepped over");
        assert_eq!(addrs(&f), vec![0x1000, 0x2000]);
        assert_eq!(f.journal().warnings.len(), 1, "{:?}", f.journal().warnings);
        // Committed after all: read again, in file order.
        let restarts = f.restarts;
        let late = vramledger_format::compact::encode(&ev(1), 1, 1);
        write_at(&t.0, hole_at, &late);
        f.poll_at(t0 + DEFAULT_GRACE).unwrap();
        assert_eq!(addrs(&f), vec![0x1000, 0x1000, 0x2000]);
        assert!(f.restarts > restarts);
        assert_eq!(
            f.journal().events,
            crate::journal::read(&t.0).unwrap().events
        );
        assert_eq!(f.journal().warnings.len(), 1, "no warning twice");
    }
}
