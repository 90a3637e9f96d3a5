//! The journal writer: the only code that touches files.
//!
//! One append-only file per process, format 2 (`vramledger_format::block`), grown in 4 MiB
//! chunks ([`chunks`]) that are reserved on disk before use and mapped shared, so a record is
//! in the page cache (and survives `kill -9`) as soon as it is copied. Writers never wait for
//! each other: each reserves its bytes with one atomic add, copies its record and commits it
//! by storing its first word last ([`slots`]); the writer that completes a 64 KiB block seals
//! it with one CRC ([`blocks`]). Events are compact records named by templates
//! ([`events`], [`templates`]). At exit the journal is sealed after its last record and cut
//! to its used size ([`close_at_exit`]); after a kill it ends in zeros and reads the same.
//!
//! Any failure (no space, the file-size limit, a mapping error, the file truncated by someone
//! else: [`chunks::Failure`], [`sigbus`]) stops recording for good with one warning; the
//! target's calls pass through unchanged. [`file`] keeps the folder and file private.

pub mod blocks;
pub mod chunks;
pub mod events;
pub mod file;
pub mod sigbus;
pub mod slots;
pub mod state;
pub mod templates;

use std::sync::atomic::Ordering;

use vramledger_format::{preamble_of, FORMAT_VERSION, PREAMBLE_LEN};

use crate::guard;
use state::{CLOSED, CURSOR, ENDED, FAILED, FD, GENERATION, OPEN, OPENING, STATE};

pub use events::{append as append_event, reserve as reserve_event, Reserved, MAX_TEXT};
pub use state::is_open;

/// What goes right after the preamble: the journal's start (CLOCK_MONOTONIC ns, the time
/// base of its compact records) and its first records (header, current stage).
pub struct Opening {
    pub start_mono: u64,
    pub records: Vec<(u16, Vec<u8>)>,
}

/// Opens the journal if needed. Returns false when recording is impossible.
/// `opener` gives what goes right after the preamble; it is written before any other thread
/// may write. It must not call the driver or the dynamic loader: other threads wait while it
/// runs, and one of them may hold the loader's lock (a library constructor that allocates).
pub fn ensure_open(opener: impl FnOnce() -> Opening) -> bool {
    loop {
        match STATE.load(Ordering::Acquire) {
            OPEN => return true,
            CLOSED => {
                if STATE
                    .compare_exchange(CLOSED, OPENING, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    let mut ok = open_file();
                    if ok {
                        let opening = opener();
                        state::START_MONO.store(opening.start_mono, Ordering::Release);
                        for (kind, payload) in opening.records {
                            ok &= slots::append_frame(kind, &[&payload]);
                        }
                    }
                    // A failure while writing the opening records set FAILED already.
                    let _ = STATE.compare_exchange(
                        OPENING,
                        if ok { OPEN } else { FAILED },
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    return ok && is_open();
                }
            }
            OPENING => std::thread::yield_now(),
            // Failed, or closed at exit: nothing more is recorded.
            _ => return false,
        }
        // Another thread is opening: it holds no lock that we could hold, and opening makes
        // no driver or loader call (see `opener`), so waiting here cannot deadlock.
    }
}

fn open_file() -> bool {
    let cfg = crate::config::get();
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let name = file::file_name(
        &cfg.run_id,
        &crate::process::hostname(),
        pid,
        crate::clock::realtime_ns(),
    );
    let (fd, path) = match cfg
        .out_dir
        .as_deref()
        .map_err(String::clone)
        .and_then(|dir| file::create(dir, &name))
    {
        Ok(v) => v,
        Err(why) => {
            guard::give_up(&format!("{why}; nothing is recorded"));
            return false;
        }
    };
    // The preamble first, with one write: a process killed at any later point leaves a file
    // that reads as its journal (empty), never one that is not a journal at all.
    let pre = preamble_of(FORMAT_VERSION);
    // SAFETY: pwrite of our own buffer to the descriptor created just now.
    let wrote = unsafe { libc::pwrite(fd, pre.as_ptr().cast(), PREAMBLE_LEN, 0) };
    if wrote != PREAMBLE_LEN as isize {
        let why = std::io::Error::last_os_error();
        forget_new_file(fd, &path);
        guard::give_up(&format!(
            "cannot write journal {path}: {why}; nothing is recorded"
        ));
        return false;
    }
    state::remember_file(fd);
    FD.store(fd, Ordering::Release);
    GENERATION.fetch_add(1, Ordering::AcqRel);
    sigbus::install();
    if let Err(f) = chunks::chunk_ptr(fd, 0) {
        // Not even the first chunk: leave no empty journal behind.
        FD.store(-1, Ordering::Release);
        forget_new_file(fd, &path);
        guard::give_up(&format!("{}; nothing is recorded", f.describe()));
        return false;
    }
    // The preamble is in the file already; the cursor starts after it.
    blocks::done(fd, 0, PREAMBLE_LEN as u32);
    CURSOR.store(PREAMBLE_LEN as u64, Ordering::Release);
    guard::debug(|| format!("journal {path}"));
    true
}

/// Removes a journal created just now that will hold nothing, and closes it.
fn forget_new_file(fd: i32, path: &str) {
    if let Ok(c) = std::ffi::CString::new(path) {
        // SAFETY: unlink of the file this process created a moment ago, in its own folder.
        unsafe { libc::unlink(c.as_ptr()) };
    }
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(fd) };
}

/// At exit (the library's destructor, after every `atexit` handler): no record is taken from
/// now on, the last block gets its final seal, and the file is cut to its used size. A thread
/// still writing past that end meets the SIGBUS handler, which absorbs it quietly.
pub fn close_at_exit() {
    if STATE
        .compare_exchange(OPEN, ENDED, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    let fd = FD.load(Ordering::Acquire);
    let off = CURSOR.fetch_add(vramledger_format::block::SEAL_LEN as u64, Ordering::AcqRel);
    let used = blocks::close(fd, off);
    if state::journal_stat(fd).is_some() {
        // SAFETY: ftruncate of our own descriptor to a size inside what was reserved.
        unsafe { libc::ftruncate(fd, used as libc::off_t) };
    }
}

/// In a forked child: forget the parent's journal; the next event opens the child's own.
pub fn reset_in_child() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
    let fd = FD.swap(-1, Ordering::AcqRel);
    chunks::reset_in_child();
    blocks::reset_in_child(CURSOR.load(Ordering::Acquire));
    templates::reset_in_child();
    if fd >= 0 && state::journal_stat(fd).is_some() {
        // SAFETY: closing our own descriptor in the child.
        unsafe { libc::close(fd) };
    }
    CURSOR.store(0, Ordering::Release);
    STATE.store(CLOSED, Ordering::Release);
}
