//! Snapshots: every live allocation of a run at one point in time, and the history up to it.
//!
//! A point is a position in a journal: the records before it have been replayed. It is chosen
//! per process (and, for [`At::Peak`], per device):
//! - [`At::End`]: the end of each journal;
//! - [`At::Stage`]: the end of the first span of that stage (where the next stage begins);
//! - [`At::Peak`]: per device, just after the record that took the hooked total (hooked bytes
//!   plus the measured context, as the ledger's `peak.total`) to its highest value; a
//!   process's own books (pinned host, virtual, peer, managed) at the highest sum over its
//!   devices;
//! - [`At::Oom`]: the first failed allocation with `CUDA_ERROR_OUT_OF_MEMORY` (2).
//!
//! A snapshot is one more book of the ledger's one replay ([`crate::ledger::replay`]): the
//! same live books (`LiveBooks`, shared with the shim) and the same stage spans, so totals
//! agree with `vramledger report` by construction. What the live books do not keep (the stage
//! and time of each allocating record, VMM mapping ranges, pinned host and reserved address
//! ranges) is kept by [`replay`], keyed by address or handle. Pure: records in, data out; no
//! file is touched.

use std::collections::BTreeSet;

use crate::journal::Journal;
use crate::ledger::index::Index;
use crate::ledger::process::run_order;
use crate::ledger::records::Records;

mod capture;
mod model;
mod point;
mod replay;

pub use model::*;
pub use replay::Detail;

/// Takes a snapshot of every journal at `at`, with its history and timelines.
pub fn take(journals: &[Journal], at: &At) -> Result<Snapshot, SnapshotError> {
    take_with(journals, at, Detail::ALL)
}

/// Takes a snapshot of every journal at `at`, keeping `detail` besides the live allocations.
pub fn take_with(journals: &[Journal], at: &At, detail: Detail) -> Result<Snapshot, SnapshotError> {
    let taken = journals
        .iter()
        .map(|j| Taken {
            warnings: j.warnings.clone(),
            ..take_one(j, &Index::scan(j), at, detail)
        })
        .collect();
    collect(taken, at)
}

/// One journal's part of a snapshot: its process at the point, or why it is left out.
#[derive(Debug, Clone)]
pub struct Taken {
    pub journal: String,
    pub pid: u32,
    pub process: Result<ProcessSnapshot, String>,
    /// Its stage names, in order.
    pub stages: Vec<String>,
    /// The journal's own warnings.
    pub warnings: Vec<String>,
}

/// The snapshot of one journal (indexed as `ix`) at `at`.
pub fn take_one<R: Records>(r: &R, ix: &Index, at: &At, detail: Detail) -> Taken {
    Taken {
        journal: r.path().display().to_string(),
        pid: r
            .header()
            .get("pid")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        process: point::take_process(r, ix, at, detail),
        stages: ix.boundaries.iter().map(|b| b.name.clone()).collect(),
        // The caller's: the source's reader knows them.
        warnings: Vec::new(),
    }
}

/// The run's snapshot from each journal's part, in journal order.
pub fn collect(taken: Vec<Taken>, at: &At) -> Result<Snapshot, SnapshotError> {
    let mut processes = Vec::new();
    let mut skipped = Vec::new();
    let mut warnings = Vec::new();
    let mut known = Vec::new();
    let mut seen = BTreeSet::new();
    let any = !taken.is_empty();
    for t in taken {
        for name in t.stages {
            if seen.insert(name.clone()) {
                known.push(name);
            }
        }
        warnings.extend(t.warnings);
        match t.process {
            Ok(p) => processes.push(p),
            Err(reason) => skipped.push(Skipped {
                journal: t.journal,
                pid: t.pid,
                reason,
            }),
        }
    }
    if processes.is_empty() && any {
        match at {
            At::Stage(stage) => {
                return Err(SnapshotError::UnknownStage {
                    stage: stage.clone(),
                    known,
                })
            }
            At::Oom => return Err(SnapshotError::NoOom),
            At::End | At::Peak => {}
        }
    }
    processes.sort_by(|a, b| {
        run_order(&a.host, a.rank, a.start_unix_ns, a.pid).cmp(&run_order(
            &b.host,
            b.rank,
            b.start_unix_ns,
            b.pid,
        ))
    });
    Ok(Snapshot {
        at: at.clone(),
        processes,
        skipped,
        warnings,
    })
}

/// Every stage name of the run, in order of first appearance.
pub fn stage_names(journals: &[Journal]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for j in journals {
        for s in spans(j) {
            if seen.insert(s.name.clone()) {
                out.push(s.name);
            }
        }
    }
    out
}

/// The stage spans of a journal, by the ledger's rules (`ledger::boundaries`): a span runs from
/// its boundary (a stage record, or the API event that set it) to the next one.
fn spans(j: &Journal) -> Vec<crate::ledger::boundaries::StageBoundary> {
    crate::ledger::boundaries::derive(j)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger;
    use vramledger_format::{Event, Kind, Owner};

    fn ev(kind: Kind, text: &str) -> Event {
        Event {
            kind: kind as u16,
            text: text.into(),
            ..Event::default()
        }
    }

    fn alloc(addr: u64, size: u64) -> Event {
        Event {
            kind: Kind::Alloc as u16,
            addr,
            size,
            owner: Owner::Torch as u8,
            ..Event::default()
        }
    }

    fn journal(events: Vec<Event>) -> Journal {
        Journal {
            events,
            ..Journal::default()
        }
    }

    fn names(j: &Journal) -> Vec<(String, usize)> {
        spans(j).into_iter().map(|s| (s.name, s.index)).collect()
    }

    #[test]
    fn spans_follow_the_ledger() {
        // Records before any stage open `startup`; a first `startup` record continues it.
        let j = journal(vec![
            alloc(1, 1),
            ev(Kind::Stage, "startup"),
            ev(Kind::Stage, "load\n[TP0] line"),
        ]);
        assert_eq!(names(&j), [("startup".into(), 1), ("load".into(), 2)]);
        let j = journal(vec![alloc(1, 1), ev(Kind::Stage, "load")]);
        assert_eq!(names(&j), [("startup".into(), 0), ("load".into(), 1)]);
        assert_eq!(names(&journal(vec![])), [("startup".into(), 0)]);
        // The ledger names the same stages.
        let books = ledger::process::replay(&j);
        assert_eq!(books.devices.len(), 1);
        let ledger: Vec<&str> = books.devices[0]
            .stages
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(ledger, ["startup", "load"]);
    }

    #[test]
    fn peak_and_stage_points() {
        let free = |addr| Event {
            kind: Kind::Free as u16,
            addr,
            ..Event::default()
        };
        let j = journal(vec![
            ev(Kind::Stage, "a"),
            alloc(0x1000, 10),
            alloc(0x2000, 20),
            ev(Kind::Stage, "b"),
            free(0x2000),
            alloc(0x3000, 5),
        ]);
        let s = take(std::slice::from_ref(&j), &At::Peak).unwrap();
        let d = &s.processes[0].devices[0];
        assert_eq!((d.point.events, d.peak_bytes), (3, Some(30)));
        assert_eq!(d.point.stage, "a");
        let s = take(std::slice::from_ref(&j), &At::Stage("a".into())).unwrap();
        assert_eq!(s.processes[0].devices[0].total_bytes(), 30);
        let s = take(std::slice::from_ref(&j), &At::End).unwrap();
        let d = &s.processes[0].devices[0];
        assert_eq!(d.total_bytes(), 15);
        assert_eq!(
            d.by_stage
                .iter()
                .map(|s| (s.stage.as_str(), s.by_owner.hooked()))
                .collect::<Vec<_>>(),
            [("a", 10), ("b", 5)]
        );
        assert_eq!(
            take(std::slice::from_ref(&j), &At::Stage("c".into())).unwrap_err(),
            SnapshotError::UnknownStage {
                stage: "c".into(),
                known: vec!["a".into(), "b".into()]
            }
        );
        assert_eq!(
            take(std::slice::from_ref(&j), &At::Oom).unwrap_err(),
            SnapshotError::NoOom
        );
    }
}
