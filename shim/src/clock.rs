//! The journal's clock: CLOCK_MONOTONIC through the vDSO (tens of nanoseconds, no system
//! call). Where the kernel's clock source cannot be read from user space (some virtual
//! machines), every CLOCK_MONOTONIC reading is a system call, several times the whole hook's
//! cost: the journal then uses CLOCK_MONOTONIC_COARSE (always served by the vDSO, to the
//! kernel's tick, 1 to 4 ms), and its header says `clock=monotonic_coarse`. Decided once,
//! when the journal opens, from a few timed readings.

use std::sync::atomic::{AtomicI32, Ordering};

/// A reading slower than this is a system call, not the vDSO.
const SYSCALL_NS: u64 = 400;

static CLOCK: &AtomicI32 = &crate::hot::HOT.clock;

fn read(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a valid timespec.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The journal's time now, in nanoseconds.
#[inline]
pub fn mono_ns() -> u64 {
    read(CLOCK.load(Ordering::Relaxed))
}

/// CLOCK_MONOTONIC in nanoseconds, whichever clock the journal chose (for durations).
pub fn precise_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in nanoseconds since the Unix epoch.
pub fn realtime_ns() -> u64 {
    read(libc::CLOCK_REALTIME)
}

/// Chooses the clock (before the journal's first reading); returns its name for the header.
pub fn choose() -> &'static str {
    let per_read = (0..3)
        .map(|_| {
            let t0 = read(libc::CLOCK_MONOTONIC);
            for _ in 0..8 {
                read(libc::CLOCK_MONOTONIC);
            }
            (read(libc::CLOCK_MONOTONIC) - t0) / 9
        })
        .min()
        .unwrap_or(0);
    if per_read > SYSCALL_NS {
        CLOCK.store(libc::CLOCK_MONOTONIC_COARSE, Ordering::Relaxed);
        "monotonic_coarse"
    } else {
        CLOCK.store(libc::CLOCK_MONOTONIC, Ordering::Relaxed);
        "monotonic"
    }
}
