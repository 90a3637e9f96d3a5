//! The one replay of a journal: every book (the report's stages × owners, the timeline, a
//! snapshot, pools, the sizing's points) is an [`Observer`] of this walk, so the rules they
//! share exist here once:
//! - what each record changes physically: [`LiveBooks`] (shared with the shim);
//! - the device memory it moves, and whose: the books' device delta, or the bytes NVML
//!   measured around a context's creation (`context`); [`Held`] per device;
//! - the stage span it belongs to, from [`super::index`]'s boundaries (records before an
//!   opening boundary belong to the opening stage);
//! - the journal's clock made non-decreasing (a record's time is read before its slot is
//!   taken, so neighbours can be a few µs out of order).

use std::ops::ControlFlow;

use vramledger_format::live::Delta;
use vramledger_format::{Event, Kind, LiveBooks, MemKind, Owner};

use super::index::Index;
use super::owners::OwnerBytes;
use super::records::Records;

/// Device memory one record moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    pub device: i32,
    pub owner: Owner,
    pub bytes: i64,
    /// The allocation's module; `None` for the measured context.
    pub module: Option<u32>,
}

/// What one device holds: bytes per owner (context included) and their running sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    pub by_owner: OwnerBytes,
    /// Σ of every move (saturating), the report's hooked total.
    pub hooked: i64,
}

/// The devices memory moved on, by ordinal (a process uses a few: a short list, the last
/// one used first).
#[derive(Debug, Default)]
pub struct Devices {
    list: Vec<(i32, Held)>,
    last: usize,
}

impl Devices {
    /// What `device` holds now (`None`: nothing ever moved there).
    #[inline]
    pub fn get(&self, device: i32) -> Option<&Held> {
        match self.list.get(self.last) {
            Some((d, h)) if *d == device => Some(h),
            _ => self.list.iter().find(|(d, _)| *d == device).map(|(_, h)| h),
        }
    }

    /// What the device moved on last holds.
    #[inline(always)]
    fn last(&self) -> Option<&Held> {
        self.list.get(self.last).map(|(_, h)| h)
    }

    #[inline]
    fn get_mut(&mut self, device: i32) -> &mut Held {
        if self.list.get(self.last).is_none_or(|(d, _)| *d != device) {
            self.last = match self.list.iter().position(|(d, _)| *d == device) {
                Some(i) => i,
                None => {
                    self.list.push((device, Held::default()));
                    self.list.len() - 1
                }
            };
        }
        &mut self.list[self.last].1
    }
}

/// One record, after the books took it.
pub struct Rec<'a> {
    pub index: usize,
    pub e: &'a Event,
    pub kind: Option<Kind>,
    /// The stage span it belongs to (index into the boundaries).
    pub span: usize,
    /// `Some(span)` when this record is the first of that span (its boundary record).
    pub boundary: Option<usize>,
    /// The non-decreasing clock at this record.
    pub clock: u64,
    /// What the live books changed (any kind of memory). Lent, not copied: read field by
    /// field right after the books wrote it, where a copy of the whole stalled each record.
    pub delta: Option<&'a Delta>,
    /// Device memory moved.
    pub moved: Option<Moved>,
    /// What the moved device holds after this record (found as it was updated).
    held: Option<&'a Held>,
    /// The books and the devices after this record.
    pub books: &'a LiveBooks,
    pub devices: &'a Devices,
}

impl Rec<'_> {
    /// What the moved device holds after this record.
    #[inline(always)]
    pub fn held(&self) -> Option<&Held> {
        self.held
    }
}

/// The books before a record, or at the end.
pub struct Now<'a> {
    /// Records taken so far.
    pub index: usize,
    pub clock: u64,
    pub books: &'a LiveBooks,
    pub devices: &'a Devices,
}

/// A book kept from the replay.
pub trait Observer {
    /// Whether [`Observer::before`] is to be called (it costs a call per record).
    const BEFORE: bool = false;
    /// Before record `now.index` is taken (a snapshot point). Breaking ends the walk.
    fn before(&mut self, _now: &Now<'_>) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
    /// After each record. Breaking ends the walk.
    fn record(&mut self, r: &Rec<'_>) -> ControlFlow<()>;
    /// After the last record taken.
    fn end(&mut self, _now: &Now<'_>) {}
}

/// Two books kept in the same walk.
impl<A: Observer, B: Observer> Observer for (A, B) {
    const BEFORE: bool = A::BEFORE || B::BEFORE;
    #[inline]
    fn before(&mut self, now: &Now<'_>) -> ControlFlow<()> {
        let a = self.0.before(now);
        both_break(a, self.1.before(now))
    }
    #[inline]
    fn record(&mut self, r: &Rec<'_>) -> ControlFlow<()> {
        let a = self.0.record(r);
        both_break(a, self.1.record(r))
    }
    fn end(&mut self, now: &Now<'_>) {
        self.0.end(now);
        self.1.end(now);
    }
}

/// Two books' answers as one: the walk ends only when both would end it (each was asked).
#[inline]
fn both_break(a: ControlFlow<()>, b: ControlFlow<()>) -> ControlFlow<()> {
    if a.is_break() && b.is_break() {
        ControlFlow::Break(())
    } else {
        ControlFlow::Continue(())
    }
}

/// No book.
impl Observer for () {
    fn record(&mut self, _r: &Rec<'_>) -> ControlFlow<()> {
        ControlFlow::Break(())
    }
}

/// A book kept when there is one.
impl<O: Observer> Observer for Option<O> {
    const BEFORE: bool = O::BEFORE;
    #[inline]
    fn before(&mut self, now: &Now<'_>) -> ControlFlow<()> {
        self.as_mut()
            .map_or(ControlFlow::Break(()), |o| o.before(now))
    }
    #[inline]
    fn record(&mut self, r: &Rec<'_>) -> ControlFlow<()> {
        self.as_mut()
            .map_or(ControlFlow::Break(()), |o| o.record(r))
    }
    fn end(&mut self, now: &Now<'_>) {
        if let Some(o) = self {
            o.end(now);
        }
    }
}

/// A book borrowed.
impl<O: Observer> Observer for &mut O {
    const BEFORE: bool = O::BEFORE;
    #[inline]
    fn before(&mut self, now: &Now<'_>) -> ControlFlow<()> {
        (**self).before(now)
    }
    #[inline]
    fn record(&mut self, r: &Rec<'_>) -> ControlFlow<()> {
        (**self).record(r)
    }
    fn end(&mut self, now: &Now<'_>) {
        (**self).end(now);
    }
}

/// The device memory record `e` moved, given the books' delta.
fn moved(e: &Event, kind: Option<Kind>, delta: Option<&Delta>) -> Option<Moved> {
    if kind == Some(Kind::Context) {
        // The bytes NVML measured around the context's creation (the books know nothing of
        // contexts: a context record never has a delta).
        return (e.device >= 0 && e.size > 0 && e.result == 0).then_some(Moved {
            device: e.device,
            owner: Owner::Context,
            bytes: e.size as i64,
            module: None,
        });
    }
    let d = delta?;
    (d.mem == MemKind::Device && d.device >= 0).then_some(Moved {
        device: d.device,
        owner: d.owner,
        bytes: d.bytes,
        module: Some(d.module),
    })
}

/// Walks `r` (whose [`Index`] is `ix`) through the books, feeding `obs`; returns the books
/// and devices where the walk ended.
pub fn run<R: Records, O: Observer>(r: &R, ix: &Index, obs: &mut O) -> (LiveBooks, Devices) {
    let mut books = LiveBooks::new();
    let mut devices = Devices::default();
    let mut clock = 0u64;
    let mut index = 0usize;
    let mut span = 0usize;
    let bounds = &ix.boundaries;
    let mut next_bound = 0usize;
    let mut stopped = false;
    r.walk(|e| {
        if O::BEFORE {
            let now = Now {
                index,
                clock,
                books: &books,
                devices: &devices,
            };
            if obs.before(&now).is_break() {
                stopped = true;
                return ControlFlow::Break(());
            }
        }
        clock = clock.max(e.t_ns);
        let mut boundary = None;
        while let Some(b) = bounds.get(next_bound).filter(|b| b.index <= index) {
            if b.index == index {
                boundary = Some(next_bound);
            }
            span = next_bound;
            next_bound += 1;
        }
        let kind = e.kind();
        let delta = books.apply(e);
        let moved = moved(e, kind, delta.as_ref());
        if let Some(m) = moved {
            let h = devices.get_mut(m.device);
            h.by_owner.add(m.owner, m.bytes);
            h.hooked = h.hooked.saturating_add(m.bytes);
        }
        let held = moved.and(devices.last());
        let rec = Rec {
            index,
            e,
            kind,
            span,
            boundary,
            clock,
            delta: delta.as_ref(),
            moved,
            held,
            books: &books,
            devices: &devices,
        };
        index += 1;
        if obs.record(&rec).is_break() {
            stopped = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    if !stopped {
        obs.end(&Now {
            index,
            clock,
            books: &books,
            devices: &devices,
        });
    }
    (books, devices)
}
