//! The safety net around everything vramledger does inside a hook.
//!
//! - a thread-local guard stops re-entry (vramledger's own driver calls, or a hook that
//!   fires while vramledger is recording on the same thread);
//! - the recording half of every hook runs under `catch_unwind`; a panic switches the
//!   whole library to pass-through with one warning on stderr;
//! - `VRAMLEDGER_DISABLE=1` makes every hook a plain forward;
//! - `errno` is the same after the recording as before it (the target may read it after
//!   any call, and a journal write or an NVML reading could change it).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::forksafe::ForkSafeMutex;
use crate::thread::{self, Thread};
use crate::{config, selftime};

static BROKEN: &AtomicBool = &crate::hot::HOT.broken;

/// True when hooks should record (enabled, not broken, not re-entered on this thread).
pub fn active() -> bool {
    enabled() && thread::with(|t| !t.busy.get()).unwrap_or(false)
}

/// Enabled and not broken (the thread's own state aside).
#[inline(always)]
fn enabled() -> bool {
    !BROKEN.load(Ordering::Relaxed) && !config::disabled()
}

/// Runs `f` as recording work: never re-entered, never unwinding into the caller.
#[inline(always)]
pub fn record<F: FnOnce()>(f: F) {
    record_on(|_| f())
}

/// [`record`], handing `f` this thread's state (one thread-local lookup for the whole hook).
// Inlined, like the recording helpers below it: every frame between a hook and its caller
// is one more step for the unwinder that finds the owning module.
#[inline(always)]
pub fn record_on<F: FnOnce(&Thread)>(f: F) {
    if !enabled() {
        return;
    }
    let _ = thread::with(|t| {
        if t.busy.replace(true) {
            return; // re-entered: vramledger's own work on this thread
        }
        // SAFETY: errno is thread-local; its address is this thread's while it runs, and the
        // caller must find the value the real call left there.
        let errno = unsafe { libc::__errno_location() };
        // SAFETY: as above.
        let saved = unsafe { *errno };
        let t0 = selftime::start();
        let outcome = catch_unwind(AssertUnwindSafe(|| f(t)));
        selftime::stop(t0);
        // SAFETY: as above.
        unsafe { *errno = saved };
        t.busy.set(false);
        if outcome.is_err() {
            give_up("an internal error (panic) while recording");
        }
    });
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

/// Like [`give_up`], from a signal handler: no allocation, no lock.
pub fn give_up_in_signal(why: &'static str) {
    if !BROKEN.swap(true, Ordering::Relaxed) {
        let mut buf = [0u8; 512];
        let mut n = prefix(&mut buf);
        for part in [
            why.as_bytes(),
            b"; recording stopped, calls pass through unchanged\n",
        ] {
            let take = part.len().min(buf.len() - n);
            buf[n..n + take].copy_from_slice(&part[..take]);
            n += take;
        }
        raw_stderr(&buf[..n]);
    }
}

/// `vramledger[PID]: ` into `buf`, returning its length (no allocation).
fn prefix(buf: &mut [u8; 512]) -> usize {
    // SAFETY: getpid has no preconditions.
    let mut pid = unsafe { libc::getpid() } as u32;
    let head = b"vramledger[";
    buf[..head.len()].copy_from_slice(head);
    let mut n = head.len();
    let mut digits = [0u8; 10];
    let mut d = 0;
    loop {
        digits[d] = b'0' + (pid % 10) as u8;
        d += 1;
        pid /= 10;
        if pid == 0 {
            break;
        }
    }
    while d > 0 {
        d -= 1;
        buf[n] = digits[d];
        n += 1;
    }
    buf[n..n + 3].copy_from_slice(b"]: ");
    n + 3
}

/// Straight to the kernel: never through the interposed `write` (the tap), errno kept.
fn raw_stderr(bytes: &[u8]) {
    // SAFETY: errno is thread-local; a raw write(2) of a valid buffer, errors ignored.
    unsafe {
        let saved = *libc::__errno_location();
        libc::syscall(libc::SYS_write, 2, bytes.as_ptr(), bytes.len());
        *libc::__errno_location() = saved;
    }
}

/// One line on stderr, prefixed so it stands out in server logs. A message names paths and
/// values from the environment and quotes rule files: secret shapes in them are redacted, control
/// characters shown escaped, never sent to the terminal (nor a newline that would forge a line
/// of the server's log).
#[cold]
pub fn warn(msg: &str) {
    let line = warning_line(msg);
    if crate::hooks::tap::stderr_mid_line() {
        // The program is in the middle of a line on stderr: this one waits for its end (or
        // for the exit), so that neither is cut in two.
        DEFERRED.lock().push(line);
        HAS_DEFERRED.store(true, Ordering::Release);
        return;
    }
    raw_stderr(&line);
}

/// Warnings that wait for the program's line on stderr to end ([`warn`]).
static DEFERRED: ForkSafeMutex<Vec<Vec<u8>>> = ForkSafeMutex::new();
/// Some warning waits: the tap's path looks at nothing more than this when none does (it may
/// run in a signal handler, where taking a lock or making one is not safe).
static HAS_DEFERRED: AtomicBool = AtomicBool::new(false);

/// Writes the warnings that waited (the tap saw the program's line end, or the process exits).
pub fn flush_deferred() {
    if HAS_DEFERRED.swap(false, Ordering::AcqRel) {
        flush_deferred_now();
    }
}

#[cold]
fn flush_deferred_now() {
    let lines = std::mem::take(&mut *DEFERRED.lock());
    for line in lines {
        raw_stderr(&line);
    }
}

/// In a forked child: the parent's waiting warnings are the parent's.
pub fn reset_in_child() {
    DEFERRED.reset_in_child();
    HAS_DEFERRED.store(false, Ordering::Release);
}

/// `vramledger[PID]: msg` and a newline, as [`warn`] writes it.
fn warning_line(msg: &str) -> Vec<u8> {
    let mut buf = [0u8; 512];
    let n = prefix(&mut buf);
    let mut line = buf[..n].to_vec();
    // Secret shapes anywhere (a token in a path or a quoted line); what a message quotes of a
    // rule file is redacted where it is quoted.
    let msg = vramledger_engines::redact::shapes(msg);
    line.extend_from_slice(vramledger_engines::terminal_text::escaped(&msg).as_bytes());
    line.push(b'\n');
    line
}

/// A debug line, only with `VRAMLEDGER_DEBUG=1` (and never with `VRAMLEDGER_DISABLE=1`: off
/// is silent, whatever else is set).
pub fn debug(msg: impl FnOnce() -> String) {
    if !config::disabled() && config::get().debug {
        warn(&msg());
    }
}
