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

use super::follow_blocks::Blocks;
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
    /// Format 2's state, once the preamble said so.
    blocks: Option<Blocks>,
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
            blocks: None,
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
        if self.offset == 0 && self.blocks.is_none() {
            let mut pre = Vec::with_capacity(PREAMBLE_LEN);
            (&mut f)
                .take(PREAMBLE_LEN as u64)
                .read_to_end(&mut pre)
                .map_err(io)?;
            match check_preamble(&pre) {
                PreambleCheck::Truncated => return Ok(0), // created, nothing written yet
                PreambleCheck::NotAJournal => return Err(ReadError::NotAJournal(path)),
                PreambleCheck::NewerVersion(v) => return Err(ReadError::NewerVersion(path, v)),
                PreambleCheck::Ok(1) => {}
                PreambleCheck::Ok(_) => self.blocks = Some(Blocks::default()),
            }
        }
        if self.blocks.is_some() {
            return self.poll_blocks(&mut f, now);
        }
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

    /// [`Self::poll_at`] for a journal of format 2.
    fn poll_blocks(&mut self, f: &mut File, now: Instant) -> Result<usize, ReadError> {
        let path = self.journal.path.clone();
        let io = |e| ReadError::Io(path.clone(), e);
        let len = f.metadata().map_err(io)?.len() as usize;
        let mut blocks = self.blocks.take().unwrap_or_default();
        if len < blocks.consumed {
            // Shorter than what was read: not the same file any more. Start again.
            blocks = Blocks::default();
            self.journal = Journal {
                path: path.clone(),
                ..Journal::default()
            };
            self.restarts += 1;
        }
        let mut polled = blocks
            .poll(f, &mut self.journal, self.grace, now)
            .map_err(io)?;
        if polled.reread {
            blocks = Blocks::default();
            self.journal = Journal {
                path: path.clone(),
                ..Journal::default()
            };
            self.restarts += 1;
            polled = blocks
                .poll(f, &mut self.journal, self.grace, now)
                .map_err(io)?;
            polled.added = self.journal.events.len();
        }
        if polled.changed {
            self.restarts += 1;
        }
        self.header_seen = blocks.header_seen();
        self.offset = blocks.consumed;
        self.blocks = Some(blocks);
        Ok(polled.added)
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
                PreambleCheck::Ok(_) => at = PREAMBLE_LEN,
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
                        self.damaged_once(abs, || {
                            format!(
                                "{}: a corrupt record at offset {abs} ends the readable part (for now)",
                                path.display()
                            )
                        });
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
        // A record cut inside its head, once the writer cannot be at it any more (no grace),
        // as the full reader says.
        if self.grace.is_zero() && super::cut_in_head(bytes, at) {
            let abs = base + at;
            self.damaged_once(abs, || super::cut_off(&path, abs));
        }
        self.offset = base + at;
        Ok(self.journal.events.len() - before)
    }

    /// Damage at file offset `abs` that ends what can be read for now: said once, however
    /// often the journal is polled while it stays there.
    fn damaged_once(&mut self, abs: usize, warning: impl FnOnce() -> String) {
        if self.warned_at != Some(abs) {
            self.warned_at = Some(abs);
            self.journal.corrupt = true;
            self.journal.warnings.push(warning());
        }
    }

    fn record(&mut self, kind: u16, payload: &[u8], abs: usize) {
        let path = self.journal.path.display().to_string();
        if kind == Kind::Header as u16 {
            match Header::decode(payload) {
                Some(h) if !self.header_seen => {
                    self.journal.header = super::secrets::header(h);
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
#[path = "follow_tests.rs"]
mod tests;
