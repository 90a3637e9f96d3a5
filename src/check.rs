//! What `vramledger check` holds a run to: the drift rule between two runs (budgets are
//! [`crate::budgets`]); the findings are written by `crate::output::check_text`.
//!
//! A figure drifts when its absolute change exceeds the tolerance: bytes, or a percentage of
//! the baseline figure (a figure the baseline does not have counts as 0 there, so any
//! percentage of it is 0). Given several tolerances (one absolute, one percent), a figure
//! drifts only when it exceeds every one of them.

use crate::diff::{Diff, Figure};
use crate::size_arg::Tolerance;

/// The default tolerance: 64 MiB.
pub const DEFAULT_TOLERANCE: Tolerance = Tolerance::Bytes(64 << 20);

/// Whether a figure moved further than every tolerance allows.
pub fn drifts(f: &Figure, tolerances: &[Tolerance]) -> bool {
    let base = f.bytes.a.unwrap_or(0);
    let change = f.bytes.change();
    change != 0 && tolerances.iter().all(|t| !t.allows(base, change))
}

/// The figures that drifted, largest change first.
pub fn drifted<'d>(d: &'d Diff, tolerances: &[Tolerance]) -> Vec<&'d Figure> {
    d.figures.iter().filter(|f| drifts(f, tolerances)).collect()
}
