//! A run folder read as it grows: new journals are found, each is followed
//! ([`crate::journal::follow`]), replayed into the books when it got new records, and turned
//! into a [`ProcessView`]. `serve` and `top` poll one of these.
//!
//! A process that ended stays visible until it has been shown (`mark_shown`) at least once
//! after its end *and* `keep_finished` has passed since; then it is dropped and its journal is
//! not read again, so a folder that collects many runs does not grow the exposition forever.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::system;
use super::view::{self, ProcessView};
use crate::journal;
use crate::journal::follow::Follower;
use crate::ledger::process;

/// Whether `path` can be watched: it exists, or its parent folder does (a run folder the
/// program has not created yet). Anything else is a typo worth exit 2.
pub fn check_root(path: &Path) -> Result<(), String> {
    if path.exists() {
        return Ok(());
    }
    let parent = match path.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new("."),
        Some(p) => p,
        None => Path::new("/"),
    };
    if parent.is_dir() {
        return Ok(());
    }
    Err(format!(
        "cannot watch {}: neither it nor its parent folder {} exists",
        path.display(),
        parent.display()
    ))
}

/// How a watch behaves.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// How long an ended process stays after it was shown once (`None`: forever).
    pub keep_finished: Option<Duration>,
    /// The least time between two scans of the folder for new journals.
    pub rescan: Duration,
    /// `model_name` for every process (else derived from the launch command lines).
    pub model_name: Option<String>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            keep_finished: Some(Duration::from_secs(300)),
            rescan: Duration::from_millis(500),
            model_name: None,
        }
    }
}

struct Entry {
    follower: Follower,
    view: Option<ProcessView>,
    /// The follower's restarts when the view was built (a restart rebuilds it).
    restarts: u32,
    finished_at: Option<Instant>,
    shown_after_finish: bool,
}

/// Every journal of a run folder, followed.
pub struct RunWatch {
    root: PathBuf,
    opts: WatchOptions,
    entries: BTreeMap<PathBuf, Entry>,
    retired: BTreeSet<PathBuf>,
    unreadable: BTreeMap<PathBuf, String>,
    last_scan: Option<Instant>,
    local_host: String,
    /// Messages for a human, drained by [`RunWatch::take_notes`].
    notes: Vec<String>,
}

impl RunWatch {
    /// A watch of `root` (a run folder, or one journal); nothing is read until `refresh`.
    pub fn new(root: &Path, opts: WatchOptions) -> RunWatch {
        RunWatch {
            root: root.to_path_buf(),
            opts,
            entries: BTreeMap::new(),
            retired: BTreeSet::new(),
            unreadable: BTreeMap::new(),
            last_scan: None,
            local_host: system::hostname(),
            notes: Vec::new(),
        }
    }

    /// The folder watched.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Journals followed now.
    pub fn journals(&self) -> usize {
        self.entries.len()
    }

    /// Journal files that cannot be read.
    pub fn unreadable(&self) -> usize {
        self.unreadable.len()
    }

    /// What happened that a human should know (new unreadable files, warnings), once each.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn scan(&mut self, now: Instant) {
        if self
            .last_scan
            .is_some_and(|t| now.duration_since(t) < self.opts.rescan)
        {
            return;
        }
        self.last_scan = Some(now);
        // A folder that does not exist yet is a run that has not started.
        let Ok(files) = journal::find(&self.root) else {
            return;
        };
        for f in files {
            if self.entries.contains_key(&f) || self.retired.contains(&f) {
                continue;
            }
            self.entries.insert(
                f.clone(),
                Entry {
                    follower: Follower::new(&f),
                    view: None,
                    restarts: 0,
                    finished_at: None,
                    shown_after_finish: false,
                },
            );
        }
    }

    /// Reads what every journal gained, finds new journals, drops ended processes whose
    /// time is up.
    pub fn refresh(&mut self) {
        let now = Instant::now();
        self.scan(now);
        let mut gone = Vec::new();
        for (path, e) in self.entries.iter_mut() {
            let warnings_before = e.follower.journal().warnings.len();
            let mut added = match e.follower.poll_at(now) {
                Ok(n) => n,
                Err(err) => {
                    // A file removed under us just goes; any other error is said once.
                    if path.exists() {
                        let msg = err.to_string();
                        if self.unreadable.insert(path.clone(), msg.clone()).is_none() {
                            self.notes.push(msg);
                        }
                    }
                    gone.push(path.clone());
                    continue;
                }
            };
            self.notes.extend(
                e.follower.journal().warnings[warnings_before..]
                    .iter()
                    .cloned(),
            );
            let j = e.follower.journal();
            if !e.follower.has_header() {
                continue; // nothing to show before the header
            }
            let running = system::running(
                j.header.get("host").unwrap_or(""),
                j.pid().unwrap_or(0),
                j.header
                    .get("start_unix_ns")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
                &self.local_host,
            );
            if running == Some(false) && e.finished_at.is_none() {
                // It ended: what it wrote last may have landed after the poll above, and a
                // slot it left empty will stay so (read past it as the full reader does).
                e.finished_at = Some(now);
                e.follower.grace = Duration::ZERO;
                added += e.follower.poll_at(now).unwrap_or(0);
            }
            let j = e.follower.journal();
            let stale = e.view.is_none() || added > 0 || e.restarts != e.follower.restarts;
            if stale {
                let books = process::replay(j);
                e.view = Some(view::build(j, &books, running));
                e.restarts = e.follower.restarts;
            } else if let Some(v) = e.view.as_mut() {
                v.running = running;
            }
            if let (Some(t), Some(keep)) = (e.finished_at, self.opts.keep_finished) {
                if e.shown_after_finish && now.duration_since(t) >= keep {
                    gone.push(path.clone());
                }
            }
        }
        for p in gone {
            self.entries.remove(&p);
            self.retired.insert(p);
        }
    }

    /// The processes to show, ordered as reports order them (host, rank, start, pid).
    pub fn views(&self) -> Vec<ProcessView> {
        let mut views: Vec<ProcessView> = self
            .entries
            .values()
            .filter_map(|e| e.view.clone())
            .collect();
        view::arrange(&mut views, self.opts.model_name.as_deref());
        views
    }

    /// Records that the current views were shown (scraped, drawn): an ended process may be
    /// dropped once this happened after its end.
    pub fn mark_shown(&mut self) {
        for e in self.entries.values_mut() {
            if e.finished_at.is_some() && e.view.is_some() {
                e.shown_after_finish = true;
            }
        }
    }
}
