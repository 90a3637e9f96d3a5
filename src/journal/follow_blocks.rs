//! Following a journal of format 2 while its process writes it.
//!
//! Blocks before the first unsealed one are final: read once, checked by their seal. From the
//! first unsealed block to the end of the file is the *tail*: read again at every poll (a
//! block or two), its events replacing those of the last poll, so a record committed late
//! (a release-type record whose slot was taken before its driver call) lands in file order.
//! An uncommitted slot in the tail stops the reading there until it is committed or has
//! stayed empty for the grace (then it is stepped over as the full reader does). An unsealed
//! block followed by others whose holes have all been given up is made final; should one of
//! those holes be committed after all, the journal is read again from the start (`restart`),
//! so that, followed to its end, a journal reads exactly as [`super::read`] reads it.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::time::{Duration, Instant};

use vramledger_format::block::BLOCK;
use vramledger_format::walk::{block_in, BlockState, Item, Records};

use super::blocks::Decoder;
use super::Journal;

/// Offsets remembered (holes given up, warnings given): more are not tracked.
const MAX_TRACKED: usize = 256;

/// The follower's state for a journal of format 2.
#[derive(Debug, Default)]
pub(crate) struct Blocks {
    /// File offset before which every block is final.
    final_end: usize,
    /// The decoder as of `final_end`.
    decoder: Decoder,
    /// Index in the journal's events of the first event of the tail.
    tail_from: usize,
    /// Whether the tail's decoder has read the header.
    tail_header: bool,
    /// Module and stage ids that the tail named (forgotten when it is read again).
    tail_names: (Vec<u32>, Vec<u32>),
    /// The first uncommitted slot of the tail, and when it was first seen.
    hole: Option<(usize, Instant)>,
    /// Holes whose grace has passed (stepped over from then on).
    given_up: BTreeSet<usize>,
    /// Holes stepped over inside blocks made final: re-checked at every poll.
    final_holes: Vec<usize>,
    /// Warnings of the tail given already (the tail is read again at every poll).
    warned: BTreeSet<String>,
    /// Where the last poll stopped reading (for `Follower::offset`).
    pub consumed: usize,
    /// A final seal was read: nothing can follow.
    closed: bool,
    buf: Vec<u8>,
}

/// What one poll found.
pub(crate) struct Polled {
    /// Events now minus events before.
    pub added: usize,
    /// The events read earlier changed (a late commit, a block that turned out corrupt).
    pub changed: bool,
    /// A hole that was stepped over in a final block was committed after all: read the
    /// journal again from the start.
    pub reread: bool,
}

impl Blocks {
    /// True once the header was read.
    pub fn header_seen(&self) -> bool {
        self.decoder.header_seen || self.tail_header
    }

    /// Reads what the file holds now into `j`.
    pub fn poll(
        &mut self,
        f: &mut File,
        j: &mut Journal,
        grace: Duration,
        now: Instant,
    ) -> std::io::Result<Polled> {
        for &at in &self.final_holes {
            let mut head = [0u8; 4];
            f.seek(SeekFrom::Start(at as u64))?;
            if f.read_exact(&mut head).is_ok() && head != [0; 4] {
                return Ok(Polled {
                    added: 0,
                    changed: true,
                    reread: true,
                });
            }
        }
        let before = j.events.len();
        let base = self.final_end;
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        if !self.closed {
            f.seek(SeekFrom::Start(base as u64))?;
            f.read_to_end(&mut buf)?;
        }
        let old_tail_from = self.tail_from;
        let old_tail = j.events.split_off(self.tail_from);
        if std::mem::take(&mut self.tail_header) {
            j.header = Default::default();
        }
        let (modules, stages) = std::mem::take(&mut self.tail_names);
        for m in modules {
            j.modules.remove(&m);
        }
        for st in stages {
            j.stage_names.remove(&st);
        }
        // The last block that holds anything (a zero tail of grown chunks follows it).
        let mut with_data = 0;
        let mut k = 0;
        while let Some(b) = block_in(&buf, k, base == 0) {
            if b.state != BlockState::Open || Records::new(&buf, b.data.clone()).next().is_some() {
                with_data = k;
            }
            if b.last {
                break;
            }
            k += 1;
        }
        let mut k = 0;
        let mut tail: Option<(Decoder, Journal)> = None;
        while let Some(b) = block_in(&buf, k, base == 0) {
            let last_in_file = k >= with_data;
            if tail.is_none() && b.state != BlockState::Open {
                self.decoder.block(j, &b, base);
                if b.state == BlockState::Sealed {
                    for item in Records::new(&buf, b.data.clone()) {
                        self.decoder.item(j, item, base);
                    }
                }
                self.final_end = base + b.start + BLOCK;
                if b.last {
                    self.closed = true;
                    break;
                }
                k += 1;
                continue;
            }
            let (d, t) = tail.get_or_insert_with(|| {
                let scratch = Journal {
                    path: j.path.clone(),
                    ..Journal::default()
                };
                (self.decoder.clone(), scratch)
            });
            let mut stopped = false;
            let mut holes = Vec::new();
            for item in Records::new(&buf, b.data.clone()) {
                if let Item::Lost { at, .. } | Item::LostRest { at, .. } = item {
                    let abs = base + at;
                    if !self.grace_passed(abs, grace, now) {
                        stopped = true;
                        self.consumed = abs;
                        break;
                    }
                    holes.push(abs);
                }
                d.item(t, item, base);
            }
            if stopped {
                break;
            }
            self.consumed = base + b.data.end;
            // An unsealed block with blocks after it and no hole still awaited: final.
            // (The tail is this block alone: an earlier unsealed block either stopped the walk
            // or was made final in its turn.)
            if b.state == BlockState::Open && !last_in_file {
                let (d, t) = tail.take().expect("tail");
                self.decoder = d;
                self.absorb(j, t);
                self.final_holes.extend(holes);
                self.final_holes.truncate(MAX_TRACKED);
                self.final_end = base + b.start + BLOCK;
                self.tail_from = j.events.len();
                k += 1;
                continue;
            }
            if b.last {
                break;
            }
            k += 1;
        }
        self.tail_from = j.events.len();
        if let Some((d, t)) = tail {
            self.tail_header = d.header_seen && !self.decoder.header_seen;
            self.tail_names = (
                t.modules
                    .keys()
                    .filter(|k| !j.modules.contains_key(k))
                    .copied()
                    .collect(),
                t.stage_names
                    .keys()
                    .filter(|k| !j.stage_names.contains_key(k))
                    .copied()
                    .collect(),
            );
            self.absorb(j, t);
        }
        if self.buf.capacity() <= 8 << 20 {
            self.buf = buf;
        }
        let changed = !j.events[old_tail_from.min(j.events.len())..].starts_with(&old_tail);
        Ok(Polled {
            added: j.events.len().saturating_sub(before),
            changed,
            reread: false,
        })
    }

    fn grace_passed(&mut self, abs: usize, grace: Duration, now: Instant) -> bool {
        if self.given_up.contains(&abs) {
            return true;
        }
        let since = match self.hole {
            Some((h, since)) if h == abs => since,
            _ => now,
        };
        if now.duration_since(since) >= grace {
            if self.given_up.len() < MAX_TRACKED {
                self.given_up.insert(abs);
            }
            self.hole = None;
            true
        } else {
            self.hole = Some((abs, since));
            false
        }
    }

    /// Moves what a scratch journal read into `j`: events, names, the header, warnings not
    /// given before.
    fn absorb(&mut self, j: &mut Journal, t: Journal) {
        if !t.header.pairs.is_empty() && j.header.pairs.is_empty() {
            j.header = t.header;
        }
        j.events.extend(t.events);
        j.modules.extend(t.modules);
        j.stage_names.extend(t.stage_names);
        j.corrupt |= t.corrupt;
        for w in t.warnings {
            if !self.warned.contains(&w) {
                if self.warned.len() < MAX_TRACKED {
                    self.warned.insert(w.clone());
                }
                j.warnings.push(w);
            }
        }
    }
}
