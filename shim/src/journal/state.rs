//! The journal's state words: the file, its cursor, whether it is open, and the journal's
//! time base. Every other journal file reads these; they read nothing of the journal.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// No journal yet (the first event opens one).
pub const CLOSED: u8 = 0;
/// One thread is opening it; the others wait.
pub const OPENING: u8 = 1;
/// Open: records may be written.
pub const OPEN: u8 = 2;
/// Failed for good: pass-through.
pub const FAILED: u8 = 3;
/// Closed at exit (truncated to its used size): nothing more is written, quietly.
pub const ENDED: u8 = 4;

/// The next free byte of the file.
pub static CURSOR: AtomicU64 = AtomicU64::new(0);
/// The journal's descriptor, -1 when none.
pub static FD: &AtomicI32 = &crate::hot::HOT.fd;
/// One of the states above.
pub static STATE: &AtomicU8 = &crate::hot::HOT.journal_state;
/// Bumped whenever the journal is replaced (opened, or forgotten in a forked child): a slot
/// reserved in another generation is never written.
pub static GENERATION: &AtomicU32 = &crate::hot::HOT.generation;
/// The journal's start (CLOCK_MONOTONIC ns, as its header says): the time base of compact
/// records; no record is stamped earlier.
pub static START_MONO: &AtomicU64 = &crate::hot::HOT.start_mono;

/// The journal file's identity (device, inode), taken when it was created: a program may close
/// every descriptor it did not open (daemons do) and get the journal's number back for a file
/// of its own, which the journal must then never grow, cut or close.
static FILE_DEV: AtomicU64 = AtomicU64::new(u64::MAX);
static FILE_INO: AtomicU64 = AtomicU64::new(u64::MAX);

/// Notes which file `fd` is (right after the journal was created).
pub fn remember_file(fd: i32) {
    if let Some(st) = stat_of(fd) {
        FILE_DEV.store(st.st_dev, Ordering::Release);
        FILE_INO.store(st.st_ino, Ordering::Release);
    }
}

/// `fstat` of `fd` (async-signal-safe).
fn stat_of(fd: i32) -> Option<libc::stat> {
    // SAFETY: fstat of a descriptor number into a zeroed struct it fills.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut st) == 0).then_some(st)
    }
}

/// `fd`'s status when it still is the journal file (async-signal-safe: one `fstat`).
pub fn journal_stat(fd: i32) -> Option<libc::stat> {
    let st = stat_of(fd)?;
    (st.st_dev == FILE_DEV.load(Ordering::Acquire) && st.st_ino == FILE_INO.load(Ordering::Acquire))
        .then_some(st)
}

/// True once a journal is open in this process.
#[inline]
pub fn is_open() -> bool {
    STATE.load(Ordering::Acquire) == OPEN
}

/// The journal file's current size (async-signal-safe: one `fstat`).
pub fn file_size() -> Option<u64> {
    let fd = FD.load(Ordering::Acquire);
    if fd < 0 {
        return None;
    }
    journal_stat(fd).map(|st| st.st_size as u64)
}

/// Called by the SIGBUS handler: the journal is unusable, stop recording (no allocation).
/// After the journal was closed at exit a fault is a late writer's past the end: no warning.
pub fn fail_from_signal() {
    if STATE.swap(FAILED, Ordering::AcqRel) == ENDED {
        return;
    }
    crate::guard::give_up_in_signal("the journal was truncated by another process");
}

/// Stops recording for good with one warning.
#[cold]
pub fn fail(why: &str) {
    STATE.store(FAILED, Ordering::Release);
    crate::guard::give_up(why);
}
