//! A run read for `report`, `diff` and `snapshot` journal by journal, each replayed as it is
//! decoded: no journal's records are ever held, and a journal of format 2 is read from its
//! file a part at a time ([`Stream`]; a format-1 journal's file bytes are held while it is
//! replayed), so memory stays that of the books, whatever the journals' length.
//!
//! The journal policy is [`crate::journal::load`]'s: files that cannot be read are listed
//! (each a message), damaged journals are read as far as they can be and flagged.

use std::cell::{Cell, OnceCell};
use std::collections::BTreeMap;
use std::fs::File;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use vramledger_format::block::BLOCK;
use vramledger_format::walk::{BlockState, BlockView};
use vramledger_format::{check_preamble, Event, Header, PreambleCheck, PREAMBLE_LEN};

use crate::journal::{self, Journal, ReadError};
use crate::ledger::index::Index;
use crate::ledger::records::{Offer, Records};
use crate::ledger::{self, process, RunBooks};
use crate::snapshot::{self, At, Detail, Snapshot, SnapshotError, Taken};
use crate::timeline::{DeviceTimeline, Timeline};

/// One journal file, decoded each time it is walked.
pub struct Stream {
    path: PathBuf,
    body: Body,
    /// The header as the first records give it (until a whole walk gave the journal's).
    head: Header,
    /// What the first whole walk found: header, modules, warnings, damage (no events).
    meta: OnceCell<Journal>,
    /// The journal held whole, when a walk found the file changed since the first one (see
    /// [`Parts`]); every walk and answer is then that copy's ([`Stream::reread`]).
    again: OnceCell<Box<Stream>>,
}

/// Where a stream's bytes are.
enum Body {
    /// All of them in memory (format 1, or bytes handed over).
    Held {
        bytes: Vec<u8>,
        /// Their blocks, seals checked once (by the first whole walk).
        views: journal::BlockViews,
    },
    /// A format-2 file read a part at a time at each walk.
    Parts(Parts),
}

/// Bytes read from the file per part: whole blocks, few enough that the part stays in the
/// core's cache beside the books (a walk in 1 MiB parts ran 5-10% slower at 10^7 records).
const PART: usize = 4 * BLOCK;

/// A format-2 journal read from its file a part at a time, so that a walk holds one part,
/// never the journal. Later walks must see what the first whole walk saw: a sealed block is
/// never written again, so it is read again (and its seal checked again); a block that was
/// not sealed (a live journal's tail, a torn block) may still change on disk, so the first
/// walk keeps its bytes and later walks use those. A later walk that finds a sealed block
/// changed anyway (the file rewritten) stops there, and the file is read again whole
/// ([`Stream::reread`]).
struct Parts {
    file: File,
    /// What the first whole walk saw.
    first: OnceCell<Seen>,
    changed: Cell<bool>,
}

/// The blocks the first whole walk saw (views in file offsets), with the bytes of those not
/// sealed; and how many bytes it walked.
struct Seen {
    len: usize,
    blocks: Vec<(BlockView, Option<Box<[u8]>>)>,
}

impl Stream {
    /// Opens the journal at `path` (errors as [`journal::read`]'s).
    pub fn open(path: &Path) -> Result<Stream, ReadError> {
        let (file, _) =
            crate::infile::open(path, crate::infile::Kind::Journal).map_err(ReadError::Input)?;
        Stream::open_file(path, file)
    }

    /// The journal at `path`, opened as `file` (checked to be a regular file within the
    /// limit): a format-2 journal is read a part at a time, others whole.
    pub fn open_file(path: &Path, file: File) -> Result<Stream, ReadError> {
        match Stream::open_format2(path, file) {
            Some(s) => Ok(s),
            None => Stream::from_bytes(path, journal::read_bytes(path)?),
        }
    }

    /// The journal at `path`, opened as `file`, read a part at a time when it is of format 2
    /// (its preamble says so); `None` for any other file.
    pub fn open_format2(path: &Path, file: File) -> Option<Stream> {
        let mut preamble = [0u8; PREAMBLE_LEN];
        let n = read_at_most(&file, &mut preamble, 0);
        if !matches!(check_preamble(&preamble[..n]), PreambleCheck::Ok(v) if v >= 2) {
            return None;
        }
        let mut s = Stream {
            path: path.to_path_buf(),
            body: Body::Parts(Parts {
                file,
                first: OnceCell::new(),
                changed: Cell::new(false),
            }),
            head: Header::default(),
            meta: OnceCell::new(),
            again: OnceCell::new(),
        };
        s.head = s
            .walk_each(&mut |_: &mut Event| ControlFlow::Break(()))
            .header;
        Some(s)
    }

    /// A journal held as `bytes` (read from `path`).
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Stream, ReadError> {
        let head =
            journal::parse_each(path, &bytes, &mut |_: &mut Event| ControlFlow::Break(()))?.header;
        Ok(Stream {
            path: path.to_path_buf(),
            body: Body::Held {
                bytes,
                views: journal::BlockViews::default(),
            },
            head,
            meta: OnceCell::new(),
            again: OnceCell::new(),
        })
    }

    /// The journal without its events: header, modules, warnings, damage.
    pub fn meta(&self) -> &Journal {
        if let Some(a) = self.again.get() {
            return a.meta();
        }
        self.meta.get_or_init(|| {
            let mut none = |_: &mut Event| ControlFlow::Continue(());
            self.walk_each(&mut none)
        })
    }

    /// Whether a walk found the file changed since the first whole walk, and it was read
    /// again, whole: every walk is then that copy's, and what was walked before is to be
    /// walked again.
    pub fn reread(&self) -> bool {
        if !self.changed() || self.again.get().is_some() {
            return false;
        }
        let fresh = journal::read_bytes(&self.path).and_then(|b| Stream::from_bytes(&self.path, b));
        match fresh {
            Ok(s) => {
                let _ = self.again.set(Box::new(s));
                true
            }
            // Unreadable now: what the walks found stands.
            Err(_) => false,
        }
    }

    /// One walk of the journal's records through `each`: the journal without its events
    /// (`Journal::default()` when the bytes are no journal).
    fn walk_each<E: journal::Each>(&self, each: &mut E) -> Journal {
        match &self.body {
            Body::Held { bytes, views } => {
                journal::parse_each_in(&self.path, bytes, views, each).unwrap_or_default()
            }
            Body::Parts(p) => p.walk(&self.path, each),
        }
    }

    /// A walk stopped at a change (see [`Parts`]).
    fn changed(&self) -> bool {
        matches!(&self.body, Body::Parts(p) if p.changed.get())
    }
}

/// Reads up to `buf.len()` bytes at `offset` (fewer at the end of the file, none past an
/// error).
fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], offset + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    n
}

/// The file offset of the first byte other than zero at or after `from`, read a part at a
/// time (none past the journal limit).
fn first_nonzero(file: &File, from: usize) -> Option<usize> {
    let limit = crate::infile::Kind::Journal.limit() as usize;
    let mut buf = vec![0u8; PART.min(1 << 20)];
    let mut at = from;
    while at < limit {
        let n = read_at_most(file, &mut buf, at as u64);
        if let Some(k) = buf[..n].iter().position(|&x| x != 0) {
            return Some(at + k);
        }
        if n < buf.len() {
            return None;
        }
        at += n;
    }
    None
}

impl Parts {
    /// One walk: the journal without its events.
    fn walk<E: journal::Each>(&self, path: &Path, each: &mut E) -> Journal {
        let mut j = Journal {
            path: path.to_path_buf(),
            ..Journal::default()
        };
        let first = self.first.get();
        let mut w = journal::blocks::PartWalk::new(each);
        let mut buf = vec![0u8; PART];
        let mut seen: Vec<(BlockView, Option<Box<[u8]>>)> = Vec::new();
        let mut base = 0usize;
        let mut k = 0usize;
        let limit = crate::infile::Kind::Journal.limit() as usize;
        while !w.done {
            let (n, file_ends) = match first {
                None => {
                    // As far as the file goes now (a live journal grows).
                    let len = self
                        .file
                        .metadata()
                        .map_or(0, |m| m.len() as usize)
                        .min(limit);
                    let want = len.saturating_sub(base).min(PART);
                    let n = read_at_most(&self.file, &mut buf[..want], base as u64);
                    (n, n < want || base + n >= len)
                }
                Some(s) => {
                    let n = s.len.saturating_sub(base).min(PART);
                    let got = read_at_most(&self.file, &mut buf[..n], base as u64);
                    buf[got..n].fill(0);
                    // The blocks that may have changed since, as the first walk saw them.
                    for (v, kept) in s.blocks.iter().skip(k) {
                        if v.start >= base + n {
                            break;
                        }
                        if let Some(kept) = kept {
                            let at = v.start - base;
                            buf[at..at + kept.len()].copy_from_slice(kept);
                        }
                    }
                    (n, base + n >= s.len)
                }
            };
            if n == 0 {
                break;
            }
            let mut check = |v: &BlockView, bytes: &[u8]| match first {
                None => {
                    let keep = (v.state != BlockState::Sealed).then(|| bytes.into());
                    seen.push((v.clone(), keep));
                    true
                }
                Some(s) => {
                    let same = s.blocks.get(k).is_some_and(|(f, _)| f == v);
                    k += 1;
                    if !same {
                        self.changed.set(true);
                    }
                    same
                }
            };
            w.part(&mut j, &buf[..n], base, file_ends, &mut check);
            base += n;
            if file_ends {
                break;
            }
        }
        let whole = !w.broke && !self.changed.get();
        if let Some(at) = w.final_end.and_then(|end| first_nonzero(&self.file, end)) {
            journal::blocks::after_final_seal(&mut j, at);
        }
        w.finish(path, &mut j);
        if first.is_none() && whole {
            let _ = self.first.set(Seen {
                len: base,
                blocks: seen,
            });
        }
        j
    }
}

impl Records for Stream {
    fn path(&self) -> &Path {
        &self.path
    }

    fn header(&self) -> &Header {
        if let Some(a) = self.again.get() {
            return a.header();
        }
        self.meta.get().map_or(&self.head, |m| &m.header)
    }

    fn walk<F: FnMut(&Event) -> ControlFlow<()>>(&self, f: F) {
        if let Some(a) = self.again.get() {
            return a.walk(f);
        }
        // Every record whole: no brief offer to decline first.
        self.walk_keeping(&mut Wholes { f, broke: false }, |w| w.broke);
    }

    fn walk_brief<F: FnMut(Offer<'_>) -> Option<ControlFlow<()>>>(&self, f: F) {
        if let Some(a) = self.again.get() {
            return a.walk_brief(f);
        }
        self.walk_keeping(&mut Offers { f, broke: false }, |o| o.broke);
    }
}

impl Stream {
    /// One walk through `each`; a walk that went through the whole journal (`broke` says
    /// whether `each` ended it) keeps what it found of it: header, modules, warnings, damage.
    fn walk_keeping<E: journal::Each>(&self, each: &mut E, broke: impl Fn(&E) -> bool) {
        let j = self.walk_each(each);
        if !broke(each) && !self.changed() {
            let _ = self.meta.set(j);
        }
    }
}

/// A walk's events handed to `f` (a break noted: the walk was not whole).
struct Wholes<F> {
    f: F,
    broke: bool,
}

impl<F: FnMut(&Event) -> ControlFlow<()>> journal::Each for Wholes<F> {
    #[inline(always)]
    fn event(&mut self, e: &mut Event) -> ControlFlow<()> {
        let flow = (self.f)(e);
        self.broke = flow.is_break();
        flow
    }
}

/// A walk's records offered to `f` (a break noted: the walk was not whole).
struct Offers<F> {
    f: F,
    broke: bool,
}

impl<F: FnMut(Offer<'_>) -> Option<ControlFlow<()>>> journal::Each for Offers<F> {
    #[inline(always)]
    fn brief(&mut self, kind: u16, t_ns: u64) -> Option<ControlFlow<()>> {
        let flow = (self.f)(Offer::Brief { kind, t_ns })?;
        self.broke = flow.is_break();
        Some(flow)
    }

    #[inline]
    fn event(&mut self, e: &mut Event) -> ControlFlow<()> {
        let flow = (self.f)(Offer::Whole(e)).unwrap_or(ControlFlow::Continue(()));
        self.broke = flow.is_break();
        flow
    }
}

/// A run's books, read journal by journal.
#[derive(Debug, Default)]
pub struct RunRead {
    pub books: RunBooks,
    /// Per journal path, its devices' timelines (when asked for).
    pub timelines: BTreeMap<String, Vec<DeviceTimeline>>,
    /// The journals read (without their events, in file order) and the files that could not
    /// be read: [`journal::Loaded::damaged`] and [`journal::Loaded::messages`] apply.
    pub loaded: journal::Loaded,
}

/// What to read of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Want<'a> {
    /// Only the journals of this run id.
    pub run_id: Option<&'a str>,
    /// Timelines of at most this many points per device.
    pub timeline_points: Option<usize>,
}

/// One journal's books (and timeline), from its two walks.
pub fn replay_stream(
    s: &Stream,
    timeline_points: Option<usize>,
) -> (process::ProcessBooks, Option<Vec<DeviceTimeline>>) {
    let walks = || {
        let ix = Index::scan(s);
        let mut tl = timeline_points.map(|n| Timeline::new(s, &ix, n));
        let books = process::replay_indexed(s, &ix, &mut tl);
        (books, tl.map(Timeline::finish))
    };
    let out = walks();
    if s.reread() {
        return walks();
    }
    out
}

/// The books of the run at `path` (a folder of journals, or one journal). An error only
/// when nothing can be read at all.
pub fn books(path: &Path, want: Want<'_>) -> Result<RunRead, String> {
    let found = journal::find_all(path).map_err(|e| e.to_string())?;
    if found.files.is_empty() && found.unreadable.is_empty() {
        return Err(format!("no journals (*.vlj) found in {}", path.display()));
    }
    let mut out = RunRead::default();
    out.loaded.unreadable = found.unreadable;
    let mut read = Vec::new();
    for f in found.files {
        let s = match Stream::open(&f) {
            Ok(s) => s,
            Err(e) => {
                out.loaded.unreadable.push(e.to_string());
                continue;
            }
        };
        let (books, timeline) = replay_stream(&s, want.timeline_points);
        let meta = s.meta().clone();
        if want
            .run_id
            .is_some_and(|id| meta.header.get("run_id") != Some(id))
        {
            continue;
        }
        read.push(ReadOne {
            meta,
            books,
            timeline,
        });
    }
    let mut processes = Vec::new();
    for r in journal::once_per_process(read, |r| (&r.meta.header, r.books.events)) {
        if let Some(tl) = r.timeline {
            out.timelines.insert(r.meta.path.display().to_string(), tl);
        }
        processes.push(r.books);
        out.loaded.journals.push(r.meta);
    }
    let warnings = out
        .loaded
        .journals
        .iter()
        .flat_map(|j| j.warnings.iter().cloned())
        .collect();
    out.books = ledger::build_processes(processes, warnings);
    Ok(out)
}

/// One journal as [`books`] read it.
struct ReadOne {
    meta: Journal,
    books: process::ProcessBooks,
    timeline: Option<Vec<DeviceTimeline>>,
}

impl journal::HasWarnings for ReadOne {
    fn path(&self) -> &Path {
        &self.meta.path
    }
    fn warnings_mut(&mut self) -> &mut Vec<String> {
        &mut self.meta.warnings
    }
}

/// A snapshot of the run at `path`, all or nothing: an unreadable or corrupt journal is an
/// error (a snapshot would miss allocations). With the snapshot (or why none can be taken
/// at `at`), the journals' warnings.
pub fn snapshot(path: &Path, at: &At, detail: Detail) -> Result<SnapshotRead, String> {
    let found = journal::find_all(path).map_err(|e| e.to_string())?;
    let refuse =
        |why: String| format!("{why}; a snapshot would miss allocations, so none was written");
    if let Some(why) = found.unreadable.first() {
        return Err(refuse(why.clone()));
    }
    let files = found.files;
    if files.is_empty() {
        return Err(format!("no journals (*.vlj) found in {}", path.display()));
    }
    // Every file readable first (as the policy names the first unreadable one); with one
    // file, opening it below says the same.
    if files.len() > 1 {
        for f in &files {
            Stream::open(f).map_err(|e| refuse(e.to_string()))?;
        }
    }
    let mut taken = Vec::new();
    for f in &files {
        let s = Stream::open(f).map_err(|e| refuse(e.to_string()))?;
        let take = || {
            let ix = Index::scan(&s);
            let one = (!s.meta().corrupt).then(|| snapshot::take_one(&s, &ix, at, detail));
            (one, ix.records)
        };
        let (mut one, mut records) = take();
        if s.reread() {
            (one, records) = take();
        }
        let meta = s.meta();
        let Some(one) = one else {
            let why = meta.warnings.join("; ");
            return Err(refuse(format!(
                "{} is corrupt ({why})",
                meta.path.display()
            )));
        };
        taken.push(TakenOne {
            header: meta.header.clone(),
            records,
            taken: Taken {
                warnings: meta.warnings.clone(),
                ..one
            },
        });
    }
    let taken: Vec<Taken> = journal::once_per_process(taken, |t| (&t.header, t.records))
        .into_iter()
        .map(|t| t.taken)
        .collect();
    let warnings = taken.iter().flat_map(|t| t.warnings.clone()).collect();
    Ok(SnapshotRead {
        snapshot: snapshot::collect(taken, at),
        warnings,
    })
}

/// One journal's snapshot, with what tells its process.
struct TakenOne {
    header: vramledger_format::Header,
    records: usize,
    taken: Taken,
}

impl journal::HasWarnings for TakenOne {
    fn path(&self) -> &Path {
        Path::new(&self.taken.journal)
    }
    fn warnings_mut(&mut self) -> &mut Vec<String> {
        &mut self.taken.warnings
    }
}

/// What [`snapshot`] read.
#[derive(Debug)]
pub struct SnapshotRead {
    pub snapshot: Result<Snapshot, SnapshotError>,
    /// Every journal's warnings, in file order.
    pub warnings: Vec<String>,
}

#[cfg(test)]
#[path = "run_replay_tests.rs"]
mod tests;
