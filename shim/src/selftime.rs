//! With `VRAMLEDGER_DEBUG=1`: how much of the process's time vramledger's own recording took.
//!
//! A whole-program A/B cannot see a cost below its run-to-run spread (a few percent for an
//! engine's startup), so this measures it from inside: the recording half of every hook
//! ([`crate::guard::record_on`]: the record, the caller's module, the books, stage
//! boundaries and their driver readings) is timed, and each stage boundary and the exit say
//! the sum so far next to the time since the library was loaded. Not timed: the forwarding
//! itself (a pointer load and a call) and the stdout tap's first look at a line (measured on
//! its own by `scripts/bench_tap.sh`). Off, it costs one relaxed load per recording.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::{clock, config, guard};

static ON: &AtomicBool = &crate::hot::HOT.selftime;
static LOADED_NS: AtomicU64 = AtomicU64::new(0);
static INSIDE_NS: AtomicU64 = AtomicU64::new(0);
static RECORDINGS: AtomicU64 = AtomicU64::new(0);

/// At load: switched on with `VRAMLEDGER_DEBUG=1`.
pub fn init_at_load() {
    LOADED_NS.store(mono(), Ordering::Relaxed);
    ON.store(config::get().debug, Ordering::Relaxed);
}

/// In a forked child: its own sums from here.
pub fn reset_in_child() {
    LOADED_NS.store(mono(), Ordering::Relaxed);
    INSIDE_NS.store(0, Ordering::Relaxed);
    RECORDINGS.store(0, Ordering::Relaxed);
}

/// The start of a recording: 0 when off.
#[inline(always)]
pub fn start() -> u64 {
    if ON.load(Ordering::Relaxed) {
        mono()
    } else {
        0
    }
}

/// The end of the recording that [`start`] began.
#[inline(always)]
pub fn stop(t0: u64) {
    if t0 != 0 {
        INSIDE_NS.fetch_add(mono().saturating_sub(t0), Ordering::Relaxed);
        RECORDINGS.fetch_add(1, Ordering::Relaxed);
    }
}

/// One debug line: the sums at `when` (a stage's name, or the exit), once anything was recorded.
pub fn say(when: impl FnOnce() -> String) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let up = mono().saturating_sub(LOADED_NS.load(Ordering::Relaxed));
    let inside = INSIDE_NS.load(Ordering::Relaxed);
    let n = RECORDINGS.load(Ordering::Relaxed);
    // A process that never recorded (a compiler worker, a helper) has nothing to say.
    if n > 0 {
        guard::debug(|| summary(&when(), n, inside, up));
    }
}

/// `self time at WHEN: N recordings, X ms inside vramledger of Y s since load (P%)`.
pub fn summary(when: &str, recordings: u64, inside_ns: u64, up_ns: u64) -> String {
    let share = if up_ns == 0 {
        0.0
    } else {
        inside_ns as f64 * 100.0 / up_ns as f64
    };
    format!(
        "self time at {when}: {recordings} recordings, {:.3} ms inside vramledger of {:.3} s since load ({share:.4}%)",
        inside_ns as f64 / 1e6,
        up_ns as f64 / 1e9,
    )
}

/// CLOCK_MONOTONIC itself (the journal's clock may be the coarse one), never 0.
fn mono() -> u64 {
    clock::precise_ns().max(1)
}

#[cfg(test)]
mod tests {
    use super::summary;

    #[test]
    fn the_summary_says_the_share_of_the_time_since_load() {
        assert_eq!(
            summary("serving", 6827, 13_654_000, 28_000_000_000),
            "self time at serving: 6827 recordings, 13.654 ms inside vramledger of 28.000 s since load (0.0488%)"
        );
        assert!(summary("exit", 0, 0, 0).ends_with("(0.0000%)"));
    }
}
