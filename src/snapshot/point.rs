//! One process's snapshot: where its point is (from the journal's index, or for the peak
//! from a first replay that finds it), then the replay up to the point that captures it.

use super::replay::{Detail, Plan, Replay};
use super::{At, FreeReading, Point, ProcessSnapshot, StageSpan};
use crate::ledger::index::Index;
use crate::ledger::peaks::Peaks;
use crate::ledger::process;
use crate::ledger::records::Records;
use crate::ledger::replay;

/// Where `at` falls in the journal indexed as `ix` (`Err`: it has no such point).
fn plan<R: Records>(r: &R, ix: &Index, at: &At) -> Result<Plan, String> {
    let spans = &ix.boundaries;
    let name = |i: usize| ix.stage_name(ix.span_of(i)).to_string();
    Ok(match at {
        At::End => Plan {
            process: Point {
                events: ix.records,
                t_ns: ix.last_t.unwrap_or(0),
                stage: spans.last().map_or("startup".into(), |s| s.name.clone()),
            },
            devices: None,
            oom_index: None,
        },
        At::Stage(stage) => {
            let k = spans
                .iter()
                .position(|s| &s.name == stage)
                .ok_or_else(|| format!("no stage named {stage:?}"))?;
            let (events, t_ns) = match spans.get(k + 1) {
                Some(next) => (next.index, next.record_t_ns),
                None => (ix.records, ix.last_t.unwrap_or(0)),
            };
            Plan {
                process: Point {
                    events,
                    t_ns,
                    stage: stage.clone(),
                },
                devices: None,
                oom_index: None,
            }
        }
        At::Oom => {
            let (i, t_ns) = ix.first_oom.ok_or("no out-of-memory failure")?;
            // Just after the failed record (it changed nothing, and is then in the history).
            Plan {
                process: Point {
                    events: i + 1,
                    t_ns,
                    stage: name(i),
                },
                devices: None,
                oom_index: Some(i),
            }
        }
        At::Peak => {
            let mut peaks = Peaks::default();
            replay::run(r, ix, &mut peaks);
            if !peaks.process.reached() {
                return Err("no device memory".into());
            }
            let point = |p: &crate::ledger::peaks::PeakAt| Point {
                events: p.index + 1,
                t_ns: p.t_ns,
                stage: name(p.index),
            };
            Plan {
                process: point(&peaks.process),
                devices: Some(
                    peaks
                        .devices
                        .iter()
                        .filter(|(_, p)| p.reached())
                        .map(|(d, p)| (*d, (point(p), p.bytes)))
                        .collect(),
                ),
                oom_index: None,
            }
        }
    })
}

/// The snapshot of one journal (indexed as `ix`) at `at`, keeping `detail`.
pub(super) fn take_process<R: Records>(
    r: &R,
    ix: &Index,
    at: &At,
    detail: Detail,
) -> Result<ProcessSnapshot, String> {
    let plan = plan(r, ix, at)?;
    let mut rp = Replay::new(ix, plan, detail);
    replay::run(r, ix, &mut rp);
    rp.devices.sort_by_key(|d| d.device);
    // Each device was captured once: move its history (cut at its point) into it.
    for d in &mut rp.devices {
        let st = rp.devs.entry(d.device).or_default();
        let cut = rp.cuts.get(&d.device).copied().unwrap_or_default();
        st.history.truncate(cut.history);
        st.timeline.truncate(cut.timeline);
        st.readings.truncate(cut.readings);
        st.failures.truncate(cut.failures);
        d.history = std::mem::take(&mut st.history);
        d.timeline = std::mem::take(&mut st.timeline);
        if detail.timeline {
            d.free_readings = std::mem::take(&mut st.readings)
                .into_iter()
                .map(|(t_ns, free_bytes, _)| FreeReading { t_ns, free_bytes })
                .collect();
        }
        d.failures = std::mem::take(&mut st.failures);
    }
    let (host_pinned, managed, peer, reservations) = rp.process_books.take().unwrap_or_default();
    let stages = stage_spans(&rp, ix);
    let header = r.header();
    let h = |k: &str| header.get(k).unwrap_or("").to_string();
    let first_t_ns = ix.first_t.unwrap_or(0);
    let (_, rank) = process::rank(ix, header);
    Ok(ProcessSnapshot {
        journal: r.path().display().to_string(),
        host: h("host"),
        pid: h("pid").parse().unwrap_or(0),
        run_id: h("run_id"),
        rank,
        start_unix_ns: h("start_unix_ns").parse().unwrap_or(0),
        start_mono_ns: header
            .get("start_mono_ns")
            .and_then(|v| v.parse().ok())
            .unwrap_or(first_t_ns),
        first_t_ns,
        point: rp.plan.process.clone(),
        stages,
        devices: std::mem::take(&mut rp.devices),
        host_pinned,
        managed,
        peer,
        reservations,
        oom: rp.oom.take(),
        captures: std::mem::take(&mut rp.captures),
    })
}

/// Spans up to the point, on the non-decreasing clock.
fn stage_spans(rp: &Replay<'_>, ix: &Index) -> Vec<StageSpan> {
    let point = &rp.plan.process;
    let end = point.events;
    let clock0 = rp.clock0.unwrap_or(0);
    let clock_at = |span: usize| rp.span_clock.get(span).copied().flatten().unwrap_or(clock0);
    // A stage's end is where the next one begins, which may be later than the last record
    // replayed.
    let end_clock = if end == 0 { clock0 } else { rp.point_clock }.max(point.t_ns);
    let spans = &ix.boundaries;
    let mut out = Vec::new();
    for (k, s) in spans.iter().enumerate() {
        // The opening span starts with the first record.
        let start = if k == 0 { 0 } else { s.index };
        if k > 0 && start >= end {
            break;
        }
        let stop = spans.get(k + 1).map_or(usize::MAX, |n| n.index);
        let end_ns = if stop >= end {
            end_clock
        } else {
            clock_at(k + 1)
        };
        let start_ns = if k == 0 { clock0 } else { clock_at(k) }.min(end_ns);
        out.push(StageSpan {
            name: s.name.clone(),
            start_ns,
            end_ns,
        });
    }
    out
}
