//! The books at chosen points of one journal: owner bytes held on a device just before given
//! events, and the lowest free memory from an event on.
//!
//! Same accounting as [`super::process`] (the live books, the context as measured at its
//! creation); free memory between readings is the last reading corrected by the hooked bytes
//! that moved since, as in [`super::samples`].

use vramledger_format::{Kind, LiveBooks, MemKind, Owner};

use super::owners::OwnerBytes;
use crate::journal::Journal;

/// A free-memory reading of `device` carried by `e` (driver or NVML), if any.
fn reading(e: &vramledger_format::Event, device: i32) -> Option<u64> {
    match e.kind()? {
        Kind::MemInfo | Kind::NvmlSample if e.device == device => Some(e.arg0),
        _ => None,
    }
}

/// Walks the device's books, calling `f(index, held before the event, hooked total before)`
/// for every event and once more after the last (index `events.len()`).
fn walk(j: &Journal, device: i32, mut f: impl FnMut(usize, &OwnerBytes, i64)) {
    let mut books = LiveBooks::new();
    let mut held = OwnerBytes::default();
    for (i, e) in j.events.iter().enumerate() {
        f(i, &held, held.hooked());
        if e.kind() == Some(Kind::Context) && e.device == device && e.size > 0 && e.result == 0 {
            held.add(Owner::Context, e.size as i64);
        }
        if let Some(d) = books.apply(e) {
            if d.mem == MemKind::Device && d.device == device {
                held.add(d.owner, d.bytes);
            }
        }
    }
    f(j.events.len(), &held, held.hooked());
}

/// Owner bytes of `device` held just before each event index of `at` (any order).
pub fn owners_before(j: &Journal, device: i32, at: &[usize]) -> Vec<OwnerBytes> {
    let mut out = vec![OwnerBytes::default(); at.len()];
    walk(j, device, |i, held, _| {
        for (k, &a) in at.iter().enumerate() {
            if a == i {
                out[k] = *held;
            }
        }
    });
    out
}

/// The lowest free memory of `device` at or after event `from`: (bytes, event index), from the
/// readings and the hooked bytes between them. `None` without any reading.
pub fn lowest_free_from(j: &Journal, device: i32, from: usize) -> Option<(u64, usize)> {
    let mut last: Option<(u64, i64)> = None;
    let mut low: Option<(u64, usize)> = None;
    let consider = |free: i128, i: usize, low: &mut Option<(u64, usize)>| {
        let free = free.clamp(0, u64::MAX as i128) as u64;
        if low.is_none_or(|(l, _)| free < l) {
            *low = Some((free, i));
        }
    };
    walk(j, device, |i, _, hooked| {
        if let Some(free) = j.events.get(i).and_then(|e| reading(e, device)) {
            last = Some((free, hooked));
            if i >= from {
                consider(free as i128, i, &mut low);
            }
        } else if let Some((free, at)) = last.filter(|_| i >= from) {
            consider(free as i128 - (hooked as i128 - at as i128), i, &mut low);
        }
    });
    low
}
