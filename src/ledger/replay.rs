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

use super::boundaries::StageBoundary;
use super::context;
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

/// Devices 0 to 7 (a node's GPUs) have a slot each, found by index with no lookup.
const DENSE_DEVICES: usize = 8;

/// The devices memory moved on, by ordinal.
#[derive(Debug, Default)]
pub struct Devices {
    dense: [Held; DENSE_DEVICES],
    /// Bit `d`: memory moved on device `d` (`dense[d]` is in use).
    seen: u8,
    /// Every other device (ordinals past 7, and never a negative one: see [`moved`]).
    other: Vec<(i32, Held)>,
}

impl Devices {
    /// What `device` holds now (`None`: nothing ever moved there).
    #[inline]
    pub fn get(&self, device: i32) -> Option<&Held> {
        match dense(device) {
            Some(d) => (self.seen >> d & 1 != 0).then(|| &self.dense[d]),
            None => self
                .other
                .iter()
                .find(|(d, _)| *d == device)
                .map(|(_, h)| h),
        }
    }

    /// What `device` holds, made when nothing moved there yet.
    #[inline(always)]
    fn get_mut(&mut self, device: i32) -> &mut Held {
        match dense(device) {
            Some(d) => {
                self.seen |= 1 << d;
                &mut self.dense[d]
            }
            None => self.other_mut(device),
        }
    }

    /// What `device` holds right after memory moved there (no check that it did).
    #[inline(always)]
    fn moved_to(&self, device: i32) -> Option<&Held> {
        match dense(device) {
            Some(d) => Some(&self.dense[d]),
            None => self.get(device),
        }
    }

    #[cold]
    fn other_mut(&mut self, device: i32) -> &mut Held {
        let i = match self.other.iter().position(|(d, _)| *d == device) {
            Some(i) => i,
            None => {
                self.other.push((device, Held::default()));
                self.other.len() - 1
            }
        };
        &mut self.other[i].1
    }
}

/// The dense slot of `device`, when it has one.
#[inline(always)]
fn dense(device: i32) -> Option<usize> {
    ((device as u32 as usize) < DENSE_DEVICES).then_some(device as usize)
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

/// The device memory the books' delta moved (context records have none: [`context_moved`]).
#[inline(always)]
fn moved(delta: Option<&Delta>) -> Option<Moved> {
    let d = delta?;
    (d.mem == MemKind::Device && d.device >= 0).then_some(Moved {
        device: d.device,
        owner: d.owner,
        bytes: d.bytes,
        module: Some(d.module),
    })
}

/// What a context record moved (the books know nothing of contexts: a context record never
/// has a delta), by [`super::context`]'s rules: the bytes NVML measured around a creation;
/// at a destroy or release that gave memory back, unless it ended the device's last context,
/// that much of the device's context bytes, never more than the books hold (the driver also
/// frees what the program left allocated in it).
#[cold]
#[inline(never)]
fn context_moved(e: &Event, i: usize, ix: &Index, devices: &Devices) -> Option<Moved> {
    let bytes = if let Some(size) = context::made(e) {
        size.min(i64::MAX as u64) as i64
    } else {
        let back = context::given_back(e).filter(|_| !ix.context_ends.is_last(e.device, i))?;
        let held = devices
            .get(e.device)
            .map_or(0, |h| h.by_owner.get(Owner::Context));
        -(back.min(held.max(0) as u64) as i64)
    };
    (bytes != 0).then_some(Moved {
        device: e.device,
        owner: Owner::Context,
        bytes,
        module: None,
    })
}

/// The walk's state, in one place: the closure reaches every field through one pointer.
struct Walk<'i> {
    books: LiveBooks,
    devices: Devices,
    clock: u64,
    index: usize,
    span: usize,
    bounds: &'i [StageBoundary],
    next_bound: usize,
    /// The record index of `bounds[next_bound]` (`usize::MAX` past the last): one compare a
    /// record.
    next_at: usize,
    stopped: bool,
}

impl Walk<'_> {
    /// The boundary record `index` is, if any, and the span it belongs to from now on.
    #[cold]
    fn cross(&mut self) -> Option<usize> {
        let mut boundary = None;
        while let Some(b) = self
            .bounds
            .get(self.next_bound)
            .filter(|b| b.index <= self.index)
        {
            if b.index == self.index {
                boundary = Some(self.next_bound);
            }
            self.span = self.next_bound;
            self.next_bound += 1;
        }
        self.next_at = self
            .bounds
            .get(self.next_bound)
            .map_or(usize::MAX, |b| b.index);
        boundary
    }

    fn now(&self) -> Now<'_> {
        Now {
            index: self.index,
            clock: self.clock,
            books: &self.books,
            devices: &self.devices,
        }
    }
}

/// Walks `r` (whose [`Index`] is `ix`) through the books, feeding `obs`; returns the books
/// and devices where the walk ended.
pub fn run<R: Records, O: Observer>(r: &R, ix: &Index, obs: &mut O) -> (LiveBooks, Devices) {
    let mut w = Walk {
        books: LiveBooks::new(),
        devices: Devices::default(),
        clock: 0,
        index: 0,
        span: 0,
        bounds: &ix.boundaries,
        next_bound: 0,
        next_at: ix.boundaries.first().map_or(usize::MAX, |b| b.index),
        stopped: false,
    };
    r.walk(|e| {
        if O::BEFORE && obs.before(&w.now()).is_break() {
            w.stopped = true;
            return ControlFlow::Break(());
        }
        w.clock = w.clock.max(e.t_ns);
        let boundary = if w.index >= w.next_at {
            w.cross()
        } else {
            None
        };
        let kind = e.kind();
        let delta = w.books.apply(e);
        let moved = if kind == Some(Kind::Context) {
            context_moved(e, w.index, ix, &w.devices)
        } else {
            moved(delta.as_ref())
        };
        if let Some(m) = moved {
            let h = w.devices.get_mut(m.device);
            h.by_owner.add(m.owner, m.bytes);
            h.hooked = h.hooked.saturating_add(m.bytes);
        }
        let held = moved.and_then(|m| w.devices.moved_to(m.device));
        let rec = Rec {
            index: w.index,
            e,
            kind,
            span: w.span,
            boundary,
            clock: w.clock,
            delta: delta.as_ref(),
            moved,
            held,
            books: &w.books,
            devices: &w.devices,
        };
        let flow = obs.record(&rec);
        w.index += 1;
        if flow.is_break() {
            w.stopped = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    if !w.stopped {
        obs.end(&w.now());
    }
    (w.books, w.devices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_past_the_dense_slots_and_unmoved_ones_read_as_they_were_moved() {
        let mut d = Devices::default();
        for (device, bytes) in [(0, 1), (7, 2), (8, 3), (100, 4), (7, 5), (100, 6)] {
            let h = d.get_mut(device);
            h.by_owner.add(Owner::Torch, bytes);
            h.hooked += bytes;
        }
        let hooked = |device| d.get(device).map(|h| h.hooked);
        assert_eq!(
            [0, 7, 8, 100].map(hooked),
            [Some(1), Some(7), Some(3), Some(10)]
        );
        // Nothing moved there: no books, dense slot or not.
        assert_eq!([1, 6, 9, -1].map(hooked), [None; 4]);
        assert_eq!(d.moved_to(8).map(|h| h.by_owner.get(Owner::Torch)), Some(3));
    }
}
