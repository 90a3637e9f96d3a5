//! Following a journal while its process still writes it (`serve`, `top`).
//!
//! The writer reserves a slot with an atomic add and commits it by storing its head word
//! last, so a live journal can hold an uncommitted slot (a zero head) *before* committed
//! records: a record in flight, or a release-type record whose slot was taken before the
//! driver call it describes. The full reader ([`super::parse`]) skips such a hole at once;
//! a follower must not, or it would lose a record that is about to land. So the follower
//! stops at a hole and waits; a hole that stays empty for [`Follower::grace`] is skipped as
//! lost (the writer died mid-record), and if one of those later turns out committed after
//! all, the journal is read again from the start, so the events always end up in file order
//! exactly as [`super::read`] sees them.
//!
//! Each [`Follower::poll`] reads only the bytes after what it has consumed.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use vramledger_format::frame::{decode_frame, FrameError, PADDING_KIND};
use vramledger_format::{check_preamble, Event, Header, Kind, PreambleCheck, PREAMBLE_LEN};

use super::{resync, Journal, ReadError};

/// How long a hole before committed records may stay empty before it is read as lost.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3);

/// Holes skipped as lost that are re-checked on every poll (more are not tracked).
const MAX_TRACKED_HOLES: usize = 64;

/// One journal read as it grows.
#[derive(Debug)]
pub struct Follower {
    journal: Journal,
    /// Absolute offset of the next byte to decode.
    offset: usize,
    header_seen: bool,
    /// A hole in front of committed data: its offset and when it was first seen.
    hole: Option<(usize, Instant)>,
    /// Holes given up on: offsets to re-check.
    skipped: Vec<usize>,
    /// Offset of the last corrupt frame warned about (warn once per place).
    warned_at: Option<usize>,
    /// How many times the journal was read again from the start.
    pub restarts: u32,
    /// How long a hole may stay empty before it is skipped (zero once the writer is known
    /// to have ended: nothing can fill it any more).
    pub grace: Duration,
    buf: Vec<u8>,
}

impl Follower {
    /// A follower of `path` that has read nothing yet.
    pub fn new(path: &Path) -> Follower {
        Follower {
            journal: Journal {
                path: path.to_path_buf(),
                ..Journal::default()
            },
            offset: 0,
            header_seen: false,
            hole: None,
            skipped: Vec::new(),
            warned_at: None,
            restarts: 0,
            grace: DEFAULT_GRACE,
            buf: Vec::new(),
        }
    }

    /// What has been read so far.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The path followed.
    pub fn path(&self) -> &PathBuf {
        &self.journal.path
    }

    /// True once the header record was read.
    pub fn has_header(&self) -> bool {
        self.header_seen
    }

    /// Bytes consumed so far (the offset of the next record).
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Reads what was committed since the last poll. Returns how many events were added;
    /// after a restart (a skipped hole was filled late) the count is that of the whole
    /// journal and `restarts` grew. Errors are those of [`super::read`] for the head of the
    /// file (not a journal, a newer format) and I/O errors.
    pub fn poll(&mut self) -> Result<usize, ReadError> {
        self.poll_at(Instant::now())
    }

    /// [`Self::poll`] with the clock given (tests).
    pub fn poll_at(&mut self, now: Instant) -> Result<usize, ReadError> {
        let path = self.journal.path.clone();
        let io = |e| ReadError::Io(path.clone(), e);
        // Never blocks on a FIFO named *.vlj, never reads past the journal limit (infile).
        let (mut f, _) =
            crate::infile::open(&path, crate::infile::Kind::Journal).map_err(ReadError::Input)?;
        if self.late_hole_filled(&mut f).map_err(io)? {
            let (grace, restarts) = (self.grace, self.restarts + 1);
            *self = Follower::new(&path);
            self.grace = grace;
            self.restarts = restarts;
        }
        let len = f.metadata().map_err(io)?.len() as usize;
        if len < self.offset {
            // Shorter than what was read: not the same file any more. Start again.
            let (grace, restarts) = (self.grace, self.restarts + 1);
            *self = Follower::new(&path);
            self.grace = grace;
            self.restarts = restarts;
        }
        let start = self.offset;
        f.seek(SeekFrom::Start(start as u64)).map_err(io)?;
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        f.read_to_end(&mut buf).map_err(io)?;
        let added = self.decode(&buf, start, now);
        // Keep a small buffer for the next poll, not the whole journal of a first read.
        if buf.capacity() <= 8 << 20 {
            self.buf = buf;
        }
        added
    }

    /// True when a hole skipped earlier now holds a committed head word.
    fn late_hole_filled(&self, f: &mut File) -> std::io::Result<bool> {
        for &at in &self.skipped {
            let mut head = [0u8; 4];
            f.seek(SeekFrom::Start(at as u64))?;
            if f.read_exact(&mut head).is_ok() && head != [0; 4] {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn decode(&mut self, bytes: &[u8], base: usize, now: Instant) -> Result<usize, ReadError> {
        let path = self.journal.path.clone();
        let mut at = 0usize;
        if base == 0 {
            match check_preamble(bytes) {
                PreambleCheck::Ok => at = PREAMBLE_LEN,
                PreambleCheck::Truncated => return Ok(0), // created, nothing written yet
                PreambleCheck::NotAJournal => return Err(ReadError::NotAJournal(path)),
                PreambleCheck::NewerVersion(v) => return Err(ReadError::NewerVersion(path, v)),
            }
        }
        let before = self.journal.events.len();
        while at + 8 <= bytes.len() {
            match decode_frame(&bytes[at..]) {
                Ok((PADDING_KIND, _, used)) => at += used,
                Ok((kind, payload, used)) => {
                    self.hole = None;
                    self.record(kind, payload, base + at);
                    at += used;
                }
                Err(FrameError::Empty) => {
                    let Some(next) = resync(bytes, at + 8) else {
                        break; // the end of what is committed
                    };
                    let abs = base + at;
                    let since = match self.hole {
                        Some((h, since)) if h == abs => since,
                        _ => now,
                    };
                    if now.duration_since(since) < self.grace {
                        self.hole = Some((abs, since));
                        break;
                    }
                    self.journal.warnings.push(format!(
                        "{}: a record in flight when the process stopped was lost at offset {abs}",
                        path.display()
                    ));
                    if self.skipped.len() < MAX_TRACKED_HOLES {
                        self.skipped.push(abs);
                    }
                    self.hole = None;
                    at = next;
                }
                // A committed frame is whole (its head is stored last) and the writer grows
                // the file before it maps the room: a frame running past the end is damage,
                // unless the writer may still be at it (then wait, as for a hole).
                Err(FrameError::Truncated)
                    if !self.grace.is_zero() && resync(bytes, at + 8).is_none() =>
                {
                    break
                }
                Err(_) => {
                    let abs = base + at;
                    let Some(next) = resync(bytes, at + 8) else {
                        if self.warned_at != Some(abs) {
                            self.warned_at = Some(abs);
                            self.journal.corrupt = true;
                            self.journal.warnings.push(format!(
                                "{}: a corrupt record at offset {abs} ends the readable part (for now)",
                                path.display()
                            ));
                        }
                        break;
                    };
                    self.journal.corrupt = true;
                    self.journal.warnings.push(format!(
                        "{}: a corrupt record at offset {abs} was skipped",
                        path.display()
                    ));
                    at = next;
                }
            }
        }
        self.offset = base + at;
        Ok(self.journal.events.len() - before)
    }

    fn record(&mut self, kind: u16, payload: &[u8], abs: usize) {
        let path = self.journal.path.display().to_string();
        if kind == Kind::Header as u16 {
            match Header::decode(payload) {
                Some(h) if !self.header_seen => {
                    self.journal.header = h;
                    self.header_seen = true;
                }
                Some(_) => self.journal.warnings.push(format!(
                    "{path}: a second header at offset {abs} was ignored"
                )),
                None => self
                    .journal
                    .warnings
                    .push(format!("{path}: the header record is malformed")),
            }
            return;
        }
        match Event::decode(kind, payload) {
            Some(e) => self.journal.take(e),
            None => self.journal.warnings.push(format!(
                "{path}: record at offset {abs} is too short for its kind"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
    use vramledger_format::frame::{encode_frame, frame_len};
    use vramledger_format::{preamble, Api, Owner};

    fn frame(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; frame_len(payload.len())];
        encode_frame(kind, payload, &mut b);
        b
    }

    fn alloc(addr: u64) -> Vec<u8> {
        let e = Event {
            kind: Kind::Alloc as u16,
            addr,
            size: 2 << 20,
            owner: Owner::Torch as u8,
            api: Api::cuMemAlloc_v2 as u16,
            device: 0,
            ..Event::default()
        };
        frame(e.kind, &e.encode())
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
            write_at(&t.0, 0, &bytes);
            std::fs::OpenOptions::new()
                .write(true)
                .open(&t.0)
                .unwrap()
                .set_len(bytes.len() as u64)
                .unwrap();
            f.grace = Duration::ZERO;
            f.poll().unwrap();
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
}
