//! Where a snapshot is taken in one journal: the stage spans (by the ledger's rules), the
//! point each [`At`] names, per process and, at the peak, per device; and what the replay up to
//! that point adds (stage spans on the clock, capture windows).

use std::collections::{BTreeMap, BTreeSet};

use vramledger_format::{Kind, LiveBooks, MemKind};

use super::model::{At, CaptureWindow, Point, Span, StageSpan, CUDA_ERROR_OUT_OF_MEMORY};
use crate::journal::Journal;

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
pub(super) fn spans(j: &Journal) -> Vec<Span> {
    crate::ledger::boundaries::derive(j)
        .into_iter()
        .map(|b| Span {
            name: b.name,
            index: b.index,
        })
        .collect()
}

/// Where to look: the process's point and each device's.
pub(super) struct Plan {
    pub(super) process: Point,
    /// `None`: every device seen up to the process point, at that point.
    pub(super) devices: Option<BTreeMap<i32, (Point, i64)>>,
    pub(super) oom_index: Option<usize>,
}

/// The point `at` names in journal `j`, whose stage spans are `spans`; an error says why this
/// process has none (it is then left out of the snapshot).
pub(super) fn plan(j: &Journal, at: &At, spans: &[Span]) -> Result<Plan, String> {
    let span_at = |i: usize| {
        // The span running at record i: the last one starting at or before it.
        let k = spans.partition_point(|s| s.index <= i);
        k.saturating_sub(1)
    };
    let last_t = j.events.last().map_or(0, |e| e.t_ns);
    let plan = match at {
        At::End => Plan {
            process: Point {
                events: j.events.len(),
                t_ns: last_t,
                stage: spans.last().map_or("startup".into(), |s| s.name.clone()),
            },
            devices: None,
            oom_index: None,
        },
        At::Stage(name) => {
            let k = spans
                .iter()
                .position(|s| &s.name == name)
                .ok_or_else(|| format!("no stage named {name:?}"))?;
            let (events, t_ns) = match spans.get(k + 1) {
                Some(next) => (next.index, j.events[next.index].t_ns),
                None => (j.events.len(), last_t),
            };
            Plan {
                process: Point {
                    events,
                    t_ns,
                    stage: name.clone(),
                },
                devices: None,
                oom_index: None,
            }
        }
        At::Oom => {
            let i = j
                .events
                .iter()
                .position(|e| {
                    e.kind() == Some(Kind::AllocFailed) && e.result == CUDA_ERROR_OUT_OF_MEMORY
                })
                .ok_or("no out-of-memory failure")?;
            // Just after the failed record (it changed nothing, and is then in the history).
            Plan {
                process: Point {
                    events: i + 1,
                    t_ns: j.events[i].t_ns,
                    stage: spans[span_at(i)].name.clone(),
                },
                devices: None,
                oom_index: Some(i),
            }
        }
        At::Peak => {
            let (devices, process) = peaks(j);
            let Some((_, i)) = process else {
                return Err("no device memory".into());
            };
            let point = |i: usize| Point {
                events: i + 1,
                t_ns: j.events[i].t_ns,
                stage: spans[span_at(i)].name.clone(),
            };
            Plan {
                process: point(i),
                devices: Some(
                    devices
                        .into_iter()
                        .map(|(d, (b, i))| (d, (point(i), b)))
                        .collect(),
                ),
                oom_index: None,
            }
        }
    };
    Ok(plan)
}

/// Spans up to the point, on the non-decreasing clock.
pub(super) fn stage_spans(spans: &[Span], clock_at: &[u64], point: &Point) -> Vec<StageSpan> {
    let end = point.events;
    let clock = |i: usize| {
        clock_at
            .get(i)
            .or_else(|| clock_at.last())
            .copied()
            .unwrap_or(0)
    };
    // A stage's end is where the next one begins, which may be later than the last record
    // replayed.
    let end_clock = if end == 0 { clock(0) } else { clock(end - 1) }.max(point.t_ns);
    let mut out = Vec::new();
    for (k, s) in spans.iter().enumerate() {
        // The opening span starts with the first record.
        let start = if k == 0 { 0 } else { s.index };
        if k > 0 && start >= end {
            break;
        }
        let stop = spans.get(k + 1).map_or(usize::MAX, |n| n.index);
        let end_ns = if stop >= end { end_clock } else { clock(stop) };
        let start_ns = clock(start).min(end_ns);
        out.push(StageSpan {
            name: s.name.clone(),
            start_ns,
            end_ns,
        });
    }
    out
}

/// The capture windows of the first `upto` records.
pub(super) fn capture_windows(j: &Journal, upto: usize) -> Vec<CaptureWindow> {
    let mut out: Vec<CaptureWindow> = Vec::new();
    for (i, e) in j.events.iter().enumerate().take(upto) {
        match e.kind() {
            Some(Kind::CaptureBegin) if e.result == 0 => out.push(CaptureWindow {
                device: e.device,
                stream: e.handle,
                begin: i,
                end: None,
            }),
            Some(Kind::CaptureEnd) => {
                if let Some(c) = out
                    .iter_mut()
                    .rev()
                    .find(|c| c.end.is_none() && c.stream == e.handle && c.device == e.device)
                {
                    c.end = Some(i);
                }
            }
            _ => {}
        }
    }
    out
}

/// Per device: the highest hooked total and the record that reached it; and the highest sum
/// over devices. Hooked total = device deltas of the live books + measured context bytes
/// (the ledger's `peak.total`). A device that never held anything has no peak.
#[allow(clippy::type_complexity)]
fn peaks(j: &Journal) -> (BTreeMap<i32, (i64, usize)>, Option<(i64, usize)>) {
    let mut books = LiveBooks::new();
    let mut hooked: BTreeMap<i32, i64> = BTreeMap::new();
    let mut peak: BTreeMap<i32, (i64, usize)> = BTreeMap::new();
    let mut total = 0i64;
    let mut total_peak: Option<(i64, usize)> = None;
    for (i, e) in j.events.iter().enumerate() {
        let mut moved = |dev: i32, bytes: i64| {
            let h = hooked.entry(dev).or_default();
            *h = h.saturating_add(bytes);
            total = total.saturating_add(bytes);
            let p = peak.entry(dev).or_insert((0, 0));
            if *h > p.0 {
                *p = (*h, i);
            }
            if total > total_peak.map_or(0, |p| p.0) {
                total_peak = Some((total, i));
            }
        };
        if e.kind() == Some(Kind::Context) && e.device >= 0 && e.size > 0 && e.result == 0 {
            moved(e.device, e.size as i64);
        }
        if let Some(d) = books.apply(e) {
            if d.mem == MemKind::Device && d.device >= 0 {
                moved(d.device, d.bytes);
            }
        }
    }
    peak.retain(|_, (b, _)| *b > 0);
    (peak, total_peak)
}
