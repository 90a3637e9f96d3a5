//! Memory over time: one journal replayed into, per device, the bytes each owner held after
//! every event that changed physical memory, the free-memory readings, and the stages as
//! time bands. Pure: journal in, timelines out (no I/O).
//!
//! The replay is the ledger's (see [`crate::ledger::process`]): [`LiveBooks`] decides what
//! each event changes physically; a context event adds the bytes NVML measured around the
//! context's creation to `context`. Long journals are downsampled to at most `max_points`
//! points per device, keeping in every time bucket the point with the most bytes held (so
//! peaks survive) and the bucket's last point (so the level carried forward is exact).

use vramledger_format::{Kind, LiveBooks, MemKind, Owner};

use crate::journal::Journal;
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
    held: OwnerBytes,
    points: Vec<Point>,
    free: Vec<FreeReading>,
}

fn dev(devs: &mut Vec<Dev>, device: i32, t0: u64) -> &mut Dev {
    let i = match devs.iter().position(|d| d.device == device) {
        Some(i) => i,
        None => {
            devs.push(Dev {
                device,
                held: OwnerBytes::default(),
                points: vec![Point {
                    t_ns: t0,
                    held: OwnerBytes::default(),
                }],
                free: Vec::new(),
            });
            devs.len() - 1
        }
    };
    &mut devs[i]
}

/// The stages of a journal as bands between `t0` and `t1`, by the ledger's boundaries
/// (`ledger::boundaries`); the first (`startup`) opens at the first event.
fn bands(j: &Journal, t0: u64, t1: u64) -> Vec<Band> {
    let mut marks: Vec<(String, u64)> = crate::ledger::boundaries::derive(j)
        .into_iter()
        .map(|b| (b.name, b.t_ns.clamp(t0, t1)))
        .collect();
    if let Some((_, t)) = marks.first_mut() {
        *t = t0;
    }
    (0..marks.len())
        .map(|i| Band {
            name: marks[i].0.clone(),
            start_t_ns: marks[i].1,
            end_t_ns: marks.get(i + 1).map_or(t1, |m| m.1),
        })
        .collect()
}

/// Replays a journal into one timeline per device (by ordinal), each downsampled to at most
/// `max_points` points (and as many free readings).
///
/// The time axis runs from the journal's start (header `start_mono_ns`) to its last record: a
/// record stamped before the start (a call timed from its entry, before the journal opened)
/// is placed at the start, so that it cannot stretch the axis and squeeze every stage into its
/// right edge. Without that header field the axis starts at the first record.
pub fn replay(j: &Journal, max_points: usize) -> Vec<DeviceTimeline> {
    let first = j
        .events
        .iter()
        .map(|e| e.t_ns)
        .filter(|&t| t > 0)
        .min()
        .unwrap_or(0);
    let last = j.events.iter().map(|e| e.t_ns).max().unwrap_or(first);
    let start = j
        .header
        .get("start_mono_ns")
        .and_then(|v| v.parse::<u64>().ok());
    let t0 = match start {
        Some(s) if s > first && s <= last => s,
        _ => first,
    };
    let t1 = last.max(t0);
    let mut books = LiveBooks::new();
    let mut devs: Vec<Dev> = Vec::new();
    for e in &j.events {
        let t = e.t_ns.clamp(t0, t1);
        match e.kind() {
            Some(Kind::MemInfo) | Some(Kind::NvmlSample) if e.device >= 0 => {
                dev(&mut devs, e.device, t0).free.push(FreeReading {
                    t_ns: t,
                    free: e.arg0,
                });
            }
            Some(Kind::Context) if e.device >= 0 && e.size > 0 && e.result == 0 => {
                let d = dev(&mut devs, e.device, t0);
                d.held.add(Owner::Context, e.size as i64);
                d.points.push(Point {
                    t_ns: t,
                    held: d.held,
                });
            }
            _ => {}
        }
        let Some(delta) = books.apply(e) else {
            continue;
        };
        if delta.mem == MemKind::Device && delta.device >= 0 && delta.bytes != 0 {
            let d = dev(&mut devs, delta.device, t0);
            d.held.add(delta.owner, delta.bytes);
            d.points.push(Point {
                t_ns: t,
                held: d.held,
            });
        }
    }
    let bands = bands(j, t0, t1);
    let mut out: Vec<DeviceTimeline> = devs
        .into_iter()
        .map(|d| DeviceTimeline {
            device: d.device,
            t0,
            t1,
            points: downsample(&d.points, max_points, t0, t1, |p| p.t_ns, |p| p.total()),
            free: downsample(
                &d.free,
                max_points,
                t0,
                t1,
                |r| r.t_ns,
                // The lowest free reading weighs most (saturating: a reading may be any u64).
                |r| (r.free.min(i64::MAX as u64) as i64).wrapping_neg(),
            ),
            bands: bands.clone(),
        })
        .collect();
    out.sort_by_key(|d| d.device);
    out
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
