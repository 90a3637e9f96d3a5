//! A run read for `report`, `diff` and `snapshot` journal by journal, each replayed as it is
//! decoded: no journal's records are ever held (one journal's file bytes are, while it is
//! replayed), so memory stays that of the books, whatever the journals' length.
//!
//! The journal policy is [`crate::journal::load`]'s: files that cannot be read are listed
//! (each a message), damaged journals are read as far as they can be and flagged.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use vramledger_format::{Event, Header};

use crate::journal::{self, Journal, ReadError};
use crate::ledger::index::Index;
use crate::ledger::records::{Offer, Records};
use crate::ledger::{self, process, RunBooks};
use crate::snapshot::{self, At, Detail, Snapshot, SnapshotError, Taken};
use crate::timeline::{DeviceTimeline, Timeline};

/// One journal file, decoded each time it is walked.
pub struct Stream {
    path: PathBuf,
    bytes: Vec<u8>,
    /// Its blocks, their seals checked once (by the first whole walk).
    views: journal::BlockViews,
    /// The header as the first records give it (until a whole walk gave the journal's).
    head: Header,
    /// What the first whole walk found: header, modules, warnings, damage (no events).
    meta: OnceCell<Journal>,
}

impl Stream {
    /// Opens the journal at `path` (errors as [`journal::read`]'s).
    pub fn open(path: &Path) -> Result<Stream, ReadError> {
        Stream::from_bytes(path, journal::read_bytes(path)?)
    }

    /// A journal held as `bytes` (read from `path`).
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Stream, ReadError> {
        let head = journal::parse_each(path, &bytes, &mut |_: &mut Event| ControlFlow::Break(()))?
            .header;
        Ok(Stream {
            path: path.to_path_buf(),
            bytes,
            views: journal::BlockViews::default(),
            head,
            meta: OnceCell::new(),
        })
    }

    /// The journal without its events: header, modules, warnings, damage.
    pub fn meta(&self) -> &Journal {
        self.meta.get_or_init(|| {
            journal::parse_each_in(&self.path, &self.bytes, &self.views, &mut |_: &mut Event| {
                ControlFlow::Continue(())
            })
            .unwrap_or_default()
        })
    }
}

impl Records for Stream {
    fn path(&self) -> &Path {
        &self.path
    }

    fn header(&self) -> &Header {
        self.meta.get().map_or(&self.head, |m| &m.header)
    }

    fn walk<F: FnMut(&Event) -> ControlFlow<()>>(&self, mut f: F) {
        self.walk_brief(|o| match o {
            Offer::Whole(e) => Some(f(e)),
            Offer::Brief { .. } => None,
        });
    }

    fn walk_brief<F: FnMut(Offer<'_>) -> Option<ControlFlow<()>>>(&self, f: F) {
        let mut each = Offers { f, broke: false };
        let walked = journal::parse_each_in(&self.path, &self.bytes, &self.views, &mut each);
        if let (Ok(j), false) = (walked, each.broke) {
            let _ = self.meta.set(j);
        }
    }
}

/// A walk's records offered to `f` (a break noted: the walk was not whole).
struct Offers<F> {
    f: F,
    broke: bool,
}

impl<F: FnMut(Offer<'_>) -> Option<ControlFlow<()>>> journal::Each for Offers<F> {
    #[inline]
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
    let ix = Index::scan(s);
    let mut tl = timeline_points.map(|n| Timeline::new(s, &ix, n));
    let books = process::replay_indexed(s, &ix, &mut tl);
    (books, tl.map(Timeline::finish))
}

/// The books of the run at `path` (a folder of journals, or one journal). An error only
/// when nothing can be read at all.
pub fn books(path: &Path, want: Want<'_>) -> Result<RunRead, String> {
    let files = journal::find(path).map_err(|e| e.to_string())?;
    if files.is_empty() {
        return Err(format!("no journals (*.vlj) found in {}", path.display()));
    }
    let mut out = RunRead::default();
    let mut processes = Vec::new();
    for f in files {
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
        if let Some(tl) = timeline {
            out.timelines.insert(meta.path.display().to_string(), tl);
        }
        processes.push(books);
        out.loaded.journals.push(meta);
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

/// A snapshot of the run at `path`, all or nothing: an unreadable or corrupt journal is an
/// error (a snapshot would miss allocations). With the snapshot (or why none can be taken
/// at `at`), the journals' warnings.
pub fn snapshot(path: &Path, at: &At, detail: Detail) -> Result<SnapshotRead, String> {
    let files = journal::find(path).map_err(|e| e.to_string())?;
    if files.is_empty() {
        return Err(format!("no journals (*.vlj) found in {}", path.display()));
    }
    let refuse =
        |why: String| format!("{why}; a snapshot would miss allocations, so none was written");
    // Every file readable first (as the policy names the first unreadable one); with one
    // file, opening it below says the same.
    if files.len() > 1 {
        for f in &files {
            Stream::open(f).map_err(|e| refuse(e.to_string()))?;
        }
    }
    let mut taken = Vec::new();
    let mut warnings = Vec::new();
    for f in &files {
        let s = Stream::open(f).map_err(|e| refuse(e.to_string()))?;
        let ix = Index::scan(&s);
        let meta = s.meta();
        if meta.corrupt {
            let why = meta.warnings.join("; ");
            return Err(refuse(format!(
                "{} is corrupt ({why})",
                meta.path.display()
            )));
        }
        warnings.extend(meta.warnings.iter().cloned());
        taken.push(Taken {
            warnings: meta.warnings.clone(),
            ..snapshot::take_one(&s, &ix, at, detail)
        });
    }
    Ok(SnapshotRead {
        snapshot: snapshot::collect(taken, at),
        warnings,
    })
}

/// What [`snapshot`] read.
#[derive(Debug)]
pub struct SnapshotRead {
    pub snapshot: Result<Snapshot, SnapshotError>,
    /// Every journal's warnings, in file order.
    pub warnings: Vec<String>,
}
