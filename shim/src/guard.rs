//! The safety net around everything vramledger does inside a hook.
//!
//! - a thread-local guard stops re-entry (vramledger's own driver calls, or a hook that
//!   fires while vramledger is recording on the same thread);
//! - the recording half of every hook runs under `catch_unwind`; a panic switches the
//!   whole library to pass-through with one warning on stderr;
//! - `VRAMLEDGER_DISABLE=1` makes every hook a plain forward.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::config;

thread_local! {
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

static BROKEN: AtomicBool = AtomicBool::new(false);

/// True when hooks should record (enabled, not broken, not re-entered on this thread).
pub fn active() -> bool {
    !BROKEN.load(Ordering::Relaxed)
        && !config::disabled()
        && BUSY.try_with(|b| !b.get()).unwrap_or(false)
}

/// Runs `f` as recording work: never re-entered, never unwinding into the caller.
// Inlined, like the recording helpers below it: every frame between a hook and its caller
// is one more step for the unwinder that finds the owning module.
#[inline(always)]
pub fn record<F: FnOnce()>(f: F) {
    if !active() {
        return;
    }
    let entered = BUSY.try_with(|b| !b.replace(true)).unwrap_or(false);
    if !entered {
        return;
    }
    let outcome = catch_unwind(AssertUnwindSafe(f));
    let _ = BUSY.try_with(|b| b.set(false));
    if outcome.is_err() {
        give_up("an internal error (panic) while recording");
    }
}

/// Switches to pass-through for the rest of the process, warning once.
#[cold]
pub fn give_up(why: &str) {
    if !BROKEN.swap(true, Ordering::Relaxed) {
        warn(&format!(
            "{why}; recording stopped, calls pass through unchanged"
        ));
    }
}

/// One line on stderr, prefixed so it stands out in server logs.
#[cold]
pub fn warn(msg: &str) {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let line = format!("vramledger[{pid}]: {msg}\n");
    // SAFETY: writing a valid buffer to fd 2; errors are ignored on purpose.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
    }
}

/// A debug line, only with `VRAMLEDGER_DEBUG=1`.
pub fn debug(msg: impl FnOnce() -> String) {
    if config::get().debug {
        warn(&msg());
    }
}
