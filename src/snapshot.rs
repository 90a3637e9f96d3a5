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
//! The replay uses the same physical rules as the ledger ([`LiveBooks`], shared with the shim)
//! and the same stage spans, so totals agree with `vramledger report` by construction. What
//! `LiveBooks` does not keep (the stage and time of each allocating record, VMM mapping
//! ranges, pinned host and reserved address ranges) is mirrored here, keyed by address or
//! handle. Pure: journals in, data out; no file is touched.

mod model;
mod points;
mod replay;

use std::collections::BTreeSet;

pub use model::*;
pub use points::stage_names;
use points::{capture_windows, plan, spans, stage_spans, Plan};
use replay::{ProcessBooks, Replay};

use crate::journal::Journal;
use crate::ledger;

/// Takes a snapshot of every journal at `at`.
pub fn take(journals: &[Journal], at: &At) -> Result<Snapshot, SnapshotError> {
    let mut processes = Vec::new();
    let mut skipped = Vec::new();
    for j in journals {
        match take_process(j, at) {
            Ok(p) => processes.push(p),
            Err(reason) => skipped.push(Skipped {
                journal: j.path.display().to_string(),
                pid: j.pid().unwrap_or(0),
                reason,
            }),
        }
    }
    if processes.is_empty() && !journals.is_empty() {
        match at {
            At::Stage(stage) => {
                return Err(SnapshotError::UnknownStage {
                    stage: stage.clone(),
                    known: stage_names(journals),
                })
            }
            At::Oom => return Err(SnapshotError::NoOom),
            At::End | At::Peak => {}
        }
    }
    processes.sort_by(|a, b| {
        (
            a.host.as_str(),
            a.rank.unwrap_or(u32::MAX),
            a.start_unix_ns,
            a.pid,
        )
            .cmp(&(
                b.host.as_str(),
                b.rank.unwrap_or(u32::MAX),
                b.start_unix_ns,
                b.pid,
            ))
    });
    let warnings = journals
        .iter()
        .flat_map(|j| j.warnings.iter().cloned())
        .collect();
    Ok(Snapshot {
        at: at.clone(),
        processes,
        skipped,
        warnings,
    })
}

fn take_process(j: &Journal, at: &At) -> Result<ProcessSnapshot, String> {
    let spans = spans(j);
    let plan = plan(j, at, &spans)?;
    let books = ledger::process::replay(j);
    let Replayed {
        mut r,
        mut devices,
        process_books,
        oom,
        last,
    } = replay_to(j, &spans, &plan);
    devices.sort_by_key(|d| d.device);
    // Each device was captured once: move its history (cut at its point) into it.
    for d in &mut devices {
        let st = r.devs.entry(d.device).or_default();
        let cut = r.cuts.get(&d.device).copied().unwrap_or_default();
        st.history.truncate(cut.history);
        st.timeline.truncate(cut.timeline);
        st.readings.truncate(cut.readings);
        st.failures.truncate(cut.failures);
        d.history = std::mem::take(&mut st.history);
        d.timeline = std::mem::take(&mut st.timeline);
        d.free_readings = std::mem::take(&mut st.readings)
            .into_iter()
            .map(|(t_ns, free_bytes, _)| FreeReading { t_ns, free_bytes })
            .collect();
        d.failures = std::mem::take(&mut st.failures);
    }
    let (host_pinned, managed, peer, reservations) = process_books.unwrap_or_default();
    let stages = stage_spans(&spans, &r.clock_at, &plan.process);
    let h = |k: &str| j.header.get(k).unwrap_or("").to_string();
    let first_t_ns = j.events.first().map_or(0, |e| e.t_ns);
    Ok(ProcessSnapshot {
        journal: j.path.display().to_string(),
        host: h("host"),
        pid: books.pid,
        run_id: h("run_id"),
        rank: books.rank,
        start_unix_ns: books.start_unix_ns,
        start_mono_ns: j
            .header
            .get("start_mono_ns")
            .and_then(|v| v.parse().ok())
            .unwrap_or(first_t_ns),
        first_t_ns,
        point: plan.process,
        stages,
        devices,
        host_pinned,
        managed,
        peer,
        reservations,
        oom,
        captures: capture_windows(j, last),
    })
}

/// What the replay captured at the plan's points.
struct Replayed<'a> {
    r: Replay<'a>,
    devices: Vec<DeviceSnapshot>,
    process_books: Option<ProcessBooks>,
    oom: Option<Failure>,
    /// The last record index replayed up to.
    last: usize,
}

/// Replays `j` up to the last point of `plan`, capturing the process's books at its point and
/// each device at its own.
fn replay_to<'a>(j: &'a Journal, spans: &'a [Span], plan: &Plan) -> Replayed<'a> {
    let mut r = Replay::new(j, spans);
    let mut checkpoints: BTreeSet<usize> = BTreeSet::new();
    checkpoints.insert(plan.process.events);
    if let Some(devs) = &plan.devices {
        checkpoints.extend(devs.values().map(|(p, _)| p.events));
    }
    let last = checkpoints.last().copied().unwrap_or(0);
    let mut devices: Vec<DeviceSnapshot> = Vec::new();
    let mut process_books = None;
    let mut oom = None;
    for i in 0..=last {
        if checkpoints.contains(&i) {
            if i == plan.process.events {
                process_books = Some(r.process_books());
                if let Some(k) = plan.oom_index {
                    oom = r.failure(&j.events[k], k);
                }
                if plan.devices.is_none() {
                    let seen: Vec<i32> = r.seen.iter().copied().collect();
                    for d in seen {
                        devices.push(r.capture(d, plan.process.clone(), None));
                    }
                }
            }
            if let Some(devs) = &plan.devices {
                for (&d, (p, bytes)) in devs {
                    if p.events == i {
                        devices.push(r.capture(d, p.clone(), Some(*bytes)));
                    }
                }
            }
        }
        if let Some(e) = j.events.get(i) {
            r.step(i, e);
        }
    }
    Replayed {
        r,
        devices,
        process_books,
        oom,
        last,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
