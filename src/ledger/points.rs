//! The books at chosen points of one journal: owner bytes held on a device just before given
//! records, and the lowest free memory from a record on. Observers of the one replay
//! ([`super::replay`]); free memory between readings by [`super::samples::derived_free`].

use std::ops::ControlFlow;

use super::index::Index;
use super::owners::OwnerBytes;
use super::replay::{self, Now, Observer, Rec};
use super::samples;
use crate::journal::Journal;

/// Calls `f(index, held before that record)` for every record of one device, and once more
/// after the last (index = records).
struct Before<F> {
    device: i32,
    f: F,
}

impl<F: FnMut(usize, &OwnerBytes)> Observer for Before<F> {
    const BEFORE: bool = true;
    fn before(&mut self, now: &Now<'_>) -> ControlFlow<()> {
        let held = now.devices.get(self.device).map(|h| h.by_owner);
        (self.f)(now.index, &held.unwrap_or_default());
        ControlFlow::Continue(())
    }
    fn record(&mut self, _r: &Rec<'_>) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
    fn end(&mut self, now: &Now<'_>) {
        let _ = self.before(now);
    }
}

/// Owner bytes of `device` held just before each record index of `at` (any order).
pub fn owners_before(j: &Journal, device: i32, at: &[usize]) -> Vec<OwnerBytes> {
    let mut out = vec![OwnerBytes::default(); at.len()];
    let ix = Index::scan(j);
    let obs = Before {
        device,
        f: |i: usize, held: &OwnerBytes| {
            for (k, &a) in at.iter().enumerate() {
                if a == i {
                    out[k] = *held;
                }
            }
        },
    };
    // The observer (and its borrow of what it fills) ends with the walk.
    replay::run(j, &ix, &mut { obs });
    out
}

/// The lowest free memory of `device` at or after record `from`: (bytes, record index),
/// from the readings and the hooked bytes between them. `None` without any reading.
pub fn lowest_free_from(j: &Journal, device: i32, from: usize) -> Option<(u64, usize)> {
    let mut last: Option<(u64, i64)> = None;
    let mut low: Option<(u64, usize)> = None;
    let mut consider = |free: u64, i: usize| {
        if low.is_none_or(|(l, _)| free < l) {
            low = Some((free, i));
        }
    };
    let ix = Index::scan(j);
    let obs = Before {
        device,
        f: |i: usize, held: &OwnerBytes| {
            let hooked = held.hooked();
            let read = j
                .events
                .get(i)
                .and_then(samples::reading)
                .filter(|&(d, _)| d == device);
            if let Some((_, free)) = read {
                last = Some((free, hooked));
                if i >= from {
                    consider(free, i);
                }
            } else if let Some((free, at)) = last.filter(|_| i >= from) {
                consider(samples::derived_free(free, at, hooked), i);
            }
        },
    };
    // The observer (and its borrow of what it fills) ends with the walk.
    replay::run(j, &ix, &mut { obs });
    low
}
