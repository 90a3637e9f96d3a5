//! Memory over time: one journal replayed into, per device, the bytes each owner held after
//! every record that changed physical memory, the free-memory readings, and the stages as
//! time bands. Pure: journal in, timelines out (no I/O).
//!
//! An observer of the ledger's replay ([`crate::ledger::replay`]): what each record moves,
//! and whose, is decided there. Long journals are downsampled to at most `max_points` points
//! per device as they stream past, keeping in every time bucket the point with the most bytes
//! held (so peaks survive) and the bucket's last point (so the level carried forward is
//! exact).

use std::ops::ControlFlow;

use vramledger_format::{Kind, Owner};

use crate::journal::Journal;
use crate::ledger::index::Index;
use crate::ledger::records::Records;
use crate::ledger::replay::{self, Observer, Rec};
use crate::ledger::OwnerBytes;

/// The owners a timeline stacks, bottom to top (`unattributed` is never held).
pub const STACK: [Owner; 6] = [
    Owner::Context,
    Owner::Torch,
    Owner::TorchGraphPool,
    Owner::Nccl,
    Owner::Direct,
    Owner::Vmm,
];

/// Bytes held per owner from `t_ns` until the next point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub t_ns: u64,
    pub held: OwnerBytes,
}

impl Point {
    /// Bytes held by every owner together.
    pub fn total(&self) -> i64 {
        self.held.hooked()
    }
}

/// A free-memory reading of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreeReading {
    pub t_ns: u64,
    pub free: u64,
}

/// A stage as a band of time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Band {
    pub name: String,
    pub start_t_ns: u64,
    pub end_t_ns: u64,
}

/// The timeline of one device of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceTimeline {
    pub device: i32,
    /// The process's first and last event (CLOCK_MONOTONIC).
    pub t0: u64,
    pub t1: u64,
    /// Starts with nothing held at `t0`.
    pub points: Vec<Point>,
    pub free: Vec<FreeReading>,
    /// The process's stages (shared by its devices).
    pub bands: Vec<Band>,
}

impl DeviceTimeline {
    /// The most bytes held at any point.
    pub fn max_total(&self) -> i64 {
        self.points.iter().map(Point::total).max().unwrap_or(0)
    }
}

struct Dev {
    device: i32,
    points: Downsampler<Point>,
    free: Downsampler<FreeReading>,
}

/// The timeline observer of one journal.
pub struct Timeline<'a> {
    ix: &'a Index,
    t0: u64,
    t1: u64,
    max_points: usize,
    devs: Vec<Dev>,
}

fn point_weight(p: &Point) -> i64 {
    p.total()
}

/// The lowest free reading weighs most (saturating: a reading may be any u64).
fn free_weight(r: &FreeReading) -> i64 {
    (r.free.min(i64::MAX as u64) as i64).wrapping_neg()
}

impl<'a> Timeline<'a> {
    /// The time axis runs from the journal's start (header `start_mono_ns`) to its last
    /// record: a record stamped before the start (a call timed from its entry, before the
    /// journal opened) is placed at the start, so that it cannot stretch the axis and squeeze
    /// every stage into its right edge. Without that header field the axis starts at the
    /// first record.
    pub fn new<R: Records>(r: &R, ix: &'a Index, max_points: usize) -> Timeline<'a> {
        let first = ix.min_t.unwrap_or(0);
        let last = ix.max_t.unwrap_or(first);
        let start = r
            .header()
            .get("start_mono_ns")
            .and_then(|v| v.parse::<u64>().ok());
        let t0 = match start {
            Some(s) if s > first && s <= last => s,
            _ => first,
        };
        Timeline {
            ix,
            t0,
            t1: last.max(t0),
            max_points,
            devs: Vec::new(),
        }
    }

    fn dev(&mut self, device: i32) -> &mut Dev {
        let i = match self.devs.iter().position(|d| d.device == device) {
            Some(i) => i,
            None => {
                let (max, t0, t1) = (self.max_points, self.t0, self.t1);
                let mut points = Downsampler::new(max, t0, t1, |p: &Point| p.t_ns, point_weight);
                points.push(Point {
                    t_ns: t0,
                    held: OwnerBytes::default(),
                });
                self.devs.push(Dev {
                    device,
                    points,
                    free: Downsampler::new(max, t0, t1, |r: &FreeReading| r.t_ns, free_weight),
                });
                self.devs.len() - 1
            }
        };
        &mut self.devs[i]
    }

    /// The stages of the journal as bands between `t0` and `t1`, by the ledger's boundaries;
    /// the first (`startup`) opens at the first event.
    fn bands(&self) -> Vec<Band> {
        let (t0, t1) = (self.t0, self.t1);
        let mut marks: Vec<(&str, u64)> = self
            .ix
            .boundaries
            .iter()
            .map(|b| (b.name.as_str(), b.t_ns.clamp(t0, t1)))
            .collect();
        if let Some((_, t)) = marks.first_mut() {
            *t = t0;
        }
        (0..marks.len())
            .map(|i| Band {
                name: marks[i].0.to_string(),
                start_t_ns: marks[i].1,
                end_t_ns: marks.get(i + 1).map_or(t1, |m| m.1),
            })
            .collect()
    }

    /// One timeline per device, by ordinal.
    pub fn finish(self) -> Vec<DeviceTimeline> {
        let bands = self.bands();
        let (t0, t1) = (self.t0, self.t1);
        let mut out: Vec<DeviceTimeline> = self
            .devs
            .into_iter()
            .map(|d| DeviceTimeline {
                device: d.device,
                t0,
                t1,
                points: d.points.finish(),
                free: d.free.finish(),
                bands: bands.clone(),
            })
            .collect();
        out.sort_by_key(|d| d.device);
        out
    }
}

impl Observer for Timeline<'_> {
    fn record(&mut self, r: &Rec<'_>) -> ControlFlow<()> {
        let e = r.e;
        let t = e.t_ns.clamp(self.t0, self.t1);
        if matches!(r.kind, Some(Kind::MemInfo | Kind::NvmlSample)) && e.device >= 0 {
            self.dev(e.device).free.push(FreeReading {
                t_ns: t,
                free: e.arg0,
            });
        }
        if let (Some(m), Some(held)) = (r.moved.filter(|m| m.bytes != 0), r.held()) {
            let held = held.by_owner;
            self.dev(m.device).points.push(Point { t_ns: t, held });
        }
        ControlFlow::Continue(())
    }
}

/// Replays a journal into one timeline per device (by ordinal), each downsampled to at most
/// `max_points` points (and as many free readings).
pub fn replay(j: &Journal, max_points: usize) -> Vec<DeviceTimeline> {
    let ix = Index::scan(j);
    let mut tl = Timeline::new(j, &ix, max_points);
    replay::run(j, &ix, &mut tl);
    tl.finish()
}

/// [`downsample`] as items stream past: the same items kept, never more than `max` held
/// while their count is unknown.
pub struct Downsampler<T> {
    max: usize,
    t0: u64,
    buckets: usize,
    span: u128,
    time: fn(&T) -> u64,
    weight: fn(&T) -> i64,
    count: usize,
    /// Every item, while there are at most `max`.
    all: Vec<T>,
    /// The first item, then per finished run of one bucket its heaviest and its last.
    kept: Vec<T>,
    /// The open run: bucket, heaviest, last, and whether the heaviest is the last.
    run: Option<(usize, T, T, bool)>,
}

impl<T: Copy> Downsampler<T> {
    pub fn new(max: usize, t0: u64, t1: u64, time: fn(&T) -> u64, weight: fn(&T) -> i64) -> Self {
        let max = max.max(4);
        Downsampler {
            max,
            t0,
            buckets: (max - 1) / 2,
            span: (t1.saturating_sub(t0)).max(1) as u128,
            time,
            weight,
            count: 0,
            all: Vec::new(),
            kept: Vec::new(),
            run: None,
        }
    }

    fn bucket(&self, t: u64) -> usize {
        ((t.saturating_sub(self.t0) as u128 * self.buckets as u128) / self.span)
            .min(self.buckets as u128 - 1) as usize
    }

    fn close_run(&mut self) {
        if let Some((_, best, last, best_is_last)) = self.run.take() {
            self.kept.push(best);
            if !best_is_last {
                self.kept.push(last);
            }
        }
    }

    pub fn push(&mut self, item: T) {
        self.count += 1;
        if self.count <= self.max {
            self.all.push(item);
        } else if !self.all.is_empty() {
            self.all = Vec::new();
        }
        if self.count == 1 {
            self.kept.push(item);
            return;
        }
        let b = self.bucket((self.time)(&item));
        match &mut self.run {
            Some((rb, best, last, best_is_last)) if *rb == b => {
                *best_is_last = (self.weight)(&item) > (self.weight)(best);
                if *best_is_last {
                    *best = item;
                }
                *last = item;
            }
            _ => {
                self.close_run();
                self.run = Some((b, item, item, true));
            }
        }
    }

    /// The items kept, in their order.
    pub fn finish(mut self) -> Vec<T> {
        if self.count <= self.max {
            return self.all;
        }
        self.close_run();
        self.kept
    }
}

/// At most `max` items of a time series: per time bucket, the item where `weight` is
/// largest and the bucket's last item, in time order; the first item is always kept.
pub fn downsample<T: Copy>(
    items: &[T],
    max: usize,
    t0: u64,
    t1: u64,
    time: impl Fn(&T) -> u64,
    weight: impl Fn(&T) -> i64,
) -> Vec<T> {
    let max = max.max(4);
    if items.len() <= max {
        return items.to_vec();
    }
    let buckets = (max - 1) / 2;
    let span = (t1 - t0).max(1) as u128;
    let bucket = |t: u64| {
        ((t.saturating_sub(t0) as u128 * buckets as u128) / span).min(buckets as u128 - 1) as usize
    };
    let mut keep = vec![false; items.len()];
    keep[0] = true;
    let mut i = 1;
    while i < items.len() {
        let b = bucket(time(&items[i]));
        let mut best = i;
        let mut j = i;
        while j < items.len() && bucket(time(&items[j])) == b {
            if weight(&items[j]) > weight(&items[best]) {
                best = j;
            }
            j += 1;
        }
        keep[best] = true;
        keep[j - 1] = true;
        i = j;
    }
    items
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(x, _)| *x)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramledger_format::Event;

    #[test]
    fn the_axis_starts_at_the_journal_start() {
        // A context record stamped 5 s before the journal opened, then a run of 2 ms.
        let ev = |kind: Kind, t_ns: u64, size: u64, text: &str| Event {
            kind: kind as u16,
            t_ns,
            device: 0,
            size,
            owner: Owner::Torch as u8,
            text: text.into(),
            ..Event::default()
        };
        let mut j = Journal {
            events: vec![
                ev(Kind::Context, 1_000_000_000, 0, ""),
                ev(Kind::Stage, 6_000_000_000, 0, "weight_load"),
                ev(Kind::Alloc, 6_001_000_000, 1 << 20, ""),
                ev(Kind::Stage, 6_002_000_000, 0, "serving"),
            ],
            ..Journal::default()
        };
        j.header.push("start_mono_ns", "6000000000");
        let tl = replay(&j, 100);
        assert_eq!((tl[0].t0, tl[0].t1), (6_000_000_000, 6_002_000_000));
        let bands: Vec<(&str, u64, u64)> = tl[0]
            .bands
            .iter()
            .map(|b| (b.name.as_str(), b.start_t_ns, b.end_t_ns))
            .collect();
        assert_eq!(
            bands,
            [
                // The early record is startup's (as in the ledger), placed at the start.
                ("startup", 6_000_000_000, 6_000_000_000),
                ("weight_load", 6_000_000_000, 6_002_000_000),
                ("serving", 6_002_000_000, 6_002_000_000)
            ]
        );
        // Without the header field, the first record starts the axis.
        j.header.pairs.clear();
        assert_eq!(replay(&j, 100)[0].t0, 1_000_000_000);
    }

    #[test]
    fn downsampling_keeps_peaks_and_levels() {
        // A sawtooth: 10 000 points; one spike in the middle.
        let pts: Vec<(u64, i64)> = (0..10_000u64)
            .map(|t| {
                (
                    t,
                    if t == 5_000 {
                        1_000_000
                    } else {
                        (t % 100) as i64
                    },
                )
            })
            .collect();
        let d = downsample(&pts, 1000, 0, 9_999, |p| p.0, |p| p.1);
        assert!(d.len() <= 1000, "{}", d.len());
        assert_eq!(d[0], (0, 0));
        assert!(d.contains(&(5_000, 1_000_000)));
        assert_eq!(*d.last().unwrap(), (9_999, 99));
        assert!(d.windows(2).all(|w| w[0].0 < w[1].0));
        let few = downsample(&pts[..10], 1000, 0, 9, |p| p.0, |p| p.1);
        assert_eq!(few.len(), 10);
    }
}
