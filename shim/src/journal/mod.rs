//! The journal writer: the only code that touches files.
//!
//! One append-only file per process, grown in 4 MiB chunks ([`chunks`]) that are reserved on
//! disk before use and mapped shared, so a record is in the page cache (and survives
//! `kill -9`) as soon as it is copied. Writers never wait for each other: each reserves its
//! bytes with one atomic add, copies the record and commits it by storing its head word
//! last. Records never straddle a chunk: the writer whose reservation would, turns the whole
//! reservation into one padding frame (the reader steps over it, across the boundary) and
//! tries again.
//!
//! A release-type call (free, release, unmap) reserves its slot *before* forwarding, so
//! that the journal order matches the driver's order when an address or handle is reused
//! at once by another thread; the slot is filled after the call.
//!
//! Any failure (no space, the file-size limit, a mapping error, the file truncated by someone
//! else: [`chunks::Failure`], [`sigbus`]) stops recording for good with one warning; the
//! target's calls pass through unchanged. [`file`] keeps the folder and file private.

pub mod chunks;
pub mod file;
pub mod sigbus;

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering};

use vramledger_format::frame::{encode_frame_body_parts, frame_len, head_word, PADDING_KIND};
use vramledger_format::{preamble, Event, EVENT_FIXED_LEN, PREAMBLE_LEN};

use crate::guard;
use chunks::CHUNK;

/// Text beyond this is cut (log lines, paths): a record must fit well inside a chunk.
pub const MAX_TEXT: usize = 8 * 1024;

static CURSOR: AtomicU64 = AtomicU64::new(0);
static FD: AtomicI32 = AtomicI32::new(-1);
// 0 closed, 1 opening, 2 open, 3 failed for good.
static STATE: AtomicU8 = AtomicU8::new(0);
static OPEN_GENERATION: AtomicU32 = AtomicU32::new(0);

/// True once a journal is open in this process.
#[inline]
pub fn is_open() -> bool {
    STATE.load(Ordering::Acquire) == 2
}

/// Opens the journal if needed. Returns false when recording is impossible.
/// `opener` gives what goes right after the preamble (header, current stage); it is written
/// before any other thread may write. It must not call the driver or the dynamic loader:
/// other threads wait while it runs, and one of them may hold the loader's lock (a library
/// constructor that allocates).
pub fn ensure_open(opener: impl FnOnce() -> Vec<(u16, Vec<u8>)>) -> bool {
    loop {
        match STATE.load(Ordering::Acquire) {
            2 => return true,
            3 => return false,
            0 => {
                if STATE
                    .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    let mut ok = open_file();
                    crate::fork::register();
                    if ok {
                        for (kind, payload) in opener() {
                            ok &= append_unchecked(kind, &payload);
                        }
                    }
                    STATE.store(if ok { 2 } else { 3 }, Ordering::Release);
                    return ok;
                }
            }
            // Another thread is opening: it holds no lock that we could hold, and opening
            // makes no driver or loader call (see `opener`), so waiting here cannot deadlock.
            _ => std::thread::yield_now(),
        }
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
        crate::process::realtime_ns(),
    );
    let (fd, path) = match file::create(&cfg.out_dir, &name) {
        Ok(v) => v,
        Err(why) => {
            guard::give_up(&format!("{why}; nothing is recorded"));
            return false;
        }
    };
    // The preamble first, with one write: a process killed at any later point leaves a file
    // that reads as its journal (empty), never one that is not a journal at all.
    let pre = preamble();
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
    FD.store(fd, Ordering::Release);
    OPEN_GENERATION.fetch_add(1, Ordering::AcqRel);
    let base = match chunks::chunk_ptr(fd, 0) {
        Ok(b) => b,
        Err(f) => {
            // Not even the first chunk: leave no empty journal behind.
            FD.store(-1, Ordering::Release);
            forget_new_file(fd, &path);
            guard::give_up(&format!("{}; nothing is recorded", f.describe()));
            return false;
        }
    };
    let _ = base; // the preamble is in the file already; the cursor starts after it
    chunks::done(0, PREAMBLE_LEN as u64);
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

/// The journal file's current size (async-signal-safe: one `fstat`).
pub fn file_size() -> Option<u64> {
    let fd = FD.load(Ordering::Acquire);
    if fd < 0 {
        return None;
    }
    // SAFETY: fstat on our descriptor into a zeroed struct.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut st) == 0).then_some(st.st_size as u64)
    }
}

/// Called by the SIGBUS handler: the journal is unusable, stop recording (no allocation).
pub fn fail_from_signal() {
    STATE.store(3, Ordering::Release);
    guard::give_up_in_signal("the journal was truncated by another process");
}

#[cold]
fn fail(f: chunks::Failure) {
    STATE.store(3, Ordering::Release);
    guard::give_up(&f.describe());
}

/// A reserved place for one frame. It must be committed: one dropped uncommitted reads as a
/// record lost in flight and keeps its chunk mapped (no `Drop` on purpose: a drop flag would
/// cost every release hook a copy of its ticket).
// Kept small (24 bytes): a ticket carrying one is moved through every release hook.
pub struct Slot {
    ptr: *mut u8,
    len: u32,
    chunk: u32,
    generation: u32,
}

/// Reserves room for a frame whose payload is `payload_len` bytes.
#[inline]
pub fn reserve(payload_len: usize) -> Option<Slot> {
    if !is_open() {
        return None;
    }
    reserve_unchecked(payload_len)
}

#[inline]
fn reserve_unchecked(payload_len: usize) -> Option<Slot> {
    let len = frame_len(payload_len) as u64;
    let fd = FD.load(Ordering::Acquire);
    loop {
        let generation = OPEN_GENERATION.load(Ordering::Acquire);
        let off = CURSOR.fetch_add(len, Ordering::AcqRel);
        let first = off / CHUNK;
        let last = (off + len - 1) / CHUNK;
        let base = match chunks::chunk_ptr(fd, first as usize) {
            Ok(b) => b,
            Err(f) => {
                fail(f);
                return None;
            }
        };
        if first != last {
            // One padding frame over the whole reservation: its head is in this chunk, its
            // tail (zeros, never read) in the next; the reader steps over both.
            // SAFETY: [off, chunk end) lies inside chunk `first`, reserved by us.
            unsafe { write_padding(base.add((off % CHUNK) as usize), len as usize) };
            let rest = (first + 1) * CHUNK - off;
            chunks::done(first, rest);
            chunks::done(last, len - rest);
            continue;
        }
        // SAFETY: the range is inside the chunk and reserved for this writer alone.
        let ptr = unsafe { base.add((off % CHUNK) as usize) };
        return Some(Slot {
            ptr,
            len: len as u32,
            chunk: first as u32,
            generation,
        });
    }
}

unsafe fn write_padding(at: *mut u8, len: usize) {
    // SAFETY (caller): the frame's first 8 bytes at `at` are reserved by this writer and
    // mapped; len >= 8, a multiple of 8.
    let pad_len = (len - 8) as u32;
    unsafe {
        std::ptr::copy_nonoverlapping(pad_len.to_le_bytes().as_ptr(), at.add(4), 4);
        (*(at as *const AtomicU32)).store(head_word(PADDING_KIND), Ordering::Release);
    }
}

impl Slot {
    /// Writes the frame and commits it (head word last).
    pub fn commit(self, kind: u16, payload: &[u8]) {
        self.commit_parts(kind, &[payload]);
    }

    /// Like [`Slot::commit`], with the payload in pieces.
    pub fn commit_parts(self, kind: u16, parts: &[&[u8]]) {
        if self.generation != OPEN_GENERATION.load(Ordering::Acquire) {
            return; // the journal was replaced (fork) since the reservation
        }
        // SAFETY: the slot's bytes are ours (reserved), inside a live mapping.
        let buf = unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len as usize) };
        encode_frame_body_parts(kind, parts, buf);
        // SAFETY: the slot is 8-byte aligned (frames are multiples of 8 from offset 16).
        unsafe { (*(self.ptr as *const AtomicU32)).store(head_word(kind), Ordering::Release) };
        chunks::done(self.chunk as u64, self.len as u64);
    }
}

/// Appends one frame while the journal is being opened (the state is not "open" yet).
fn append_unchecked(kind: u16, payload: &[u8]) -> bool {
    match reserve_unchecked(payload.len()) {
        Some(slot) => {
            slot.commit(kind, payload);
            true
        }
        None => false,
    }
}

/// Appends one frame (reserve + commit).
pub fn append_raw(kind: u16, payload: &[u8]) {
    if let Some(slot) = reserve(payload.len()) {
        slot.commit(kind, payload);
    }
}

/// Encodes an event into a stack buffer (text cut at [`MAX_TEXT`]) and appends it.
#[inline]
pub fn append_event(e: &Event, text: &[u8]) {
    if let Some(slot) = reserve(EVENT_FIXED_LEN + text.len().min(MAX_TEXT)) {
        commit_event(slot, e, text);
    }
}

/// Fills a slot reserved with `reserve(EVENT_FIXED_LEN + text.len().min(MAX_TEXT))`.
#[inline]
pub fn commit_event(slot: Slot, e: &Event, text: &[u8]) {
    let text = &text[..text.len().min(MAX_TEXT)];
    let mut fixed = [0u8; EVENT_FIXED_LEN];
    e.encode_fixed(&mut fixed);
    slot.commit_parts(e.kind, &[&fixed, text]);
}

/// In a forked child: forget the parent's journal; the next event opens the child's own.
pub fn reset_after_fork() {
    OPEN_GENERATION.fetch_add(1, Ordering::AcqRel);
    let fd = FD.swap(-1, Ordering::AcqRel);
    chunks::reset_after_fork();
    if fd >= 0 {
        // SAFETY: closing our own descriptor in the child.
        unsafe { libc::close(fd) };
    }
    CURSOR.store(0, Ordering::Release);
    STATE.store(0, Ordering::Release);
}
