//! The journal writer: the only code that touches files.
//!
//! One append-only file per process, grown in 4 MiB chunks that are mapped shared, so a
//! record is in the page cache (and survives `kill -9`) as soon as it is copied. Writers
//! never wait for each other: each reserves its bytes with one atomic add, copies the
//! record and commits it by storing its head word last. Records never straddle a chunk;
//! the writer whose reservation would, pads the rest of the chunk and tries again.
//!
//! A release-type call (free, release, unmap) reserves its slot *before* forwarding, so
//! that the journal order matches the driver's order when an address or handle is reused
//! at once by another thread; the slot is filled after the call.

use std::ffi::CString;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering,
};

use vramledger_format::frame::{encode_frame_body_parts, frame_len, head_word, PADDING_KIND};
use vramledger_format::{preamble, Event, EVENT_FIXED_LEN, JOURNAL_SUFFIX, PREAMBLE_LEN};

use crate::guard;

const CHUNK: u64 = 4 << 20;
const MAX_CHUNKS: usize = 4096;
/// Text beyond this is cut (log lines, paths): a record must fit well inside a chunk.
pub const MAX_TEXT: usize = 8 * 1024;

#[allow(clippy::declare_interior_mutable_const)]
const NO_CHUNK: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static CHUNKS: [AtomicPtr<u8>; MAX_CHUNKS] = [NO_CHUNK; MAX_CHUNKS];
static CURSOR: AtomicU64 = AtomicU64::new(0);
static FD: AtomicI32 = AtomicI32::new(-1);
// 0 closed, 1 opening, 2 open, 3 failed for good.
static STATE: AtomicU8 = AtomicU8::new(0);
static OPEN_GENERATION: AtomicU32 = AtomicU32::new(0);
// A spin lock rather than a Mutex: a forked child must be able to reset it even if
// another thread of the parent held it at the fork.
static GROW: AtomicBool = AtomicBool::new(false);

struct GrowGuard;

impl GrowGuard {
    fn lock() -> GrowGuard {
        while GROW
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        GrowGuard
    }
}

impl Drop for GrowGuard {
    fn drop(&mut self) {
        GROW.store(false, Ordering::Release);
    }
}

/// True once a journal is open in this process.
pub fn is_open() -> bool {
    STATE.load(Ordering::Acquire) == 2
}

/// Opens the journal if needed. Returns false when recording is impossible.
/// `opener` gives what goes right after the preamble (header, current stage). It must not
/// call the driver or the dynamic loader: other threads wait while it runs, and one of them
/// may hold the loader's lock (a library constructor that allocates).
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
                    let ok = open_file();
                    crate::fork::register();
                    STATE.store(if ok { 2 } else { 3 }, Ordering::Release);
                    if ok {
                        for (kind, payload) in opener() {
                            append_raw(kind, &payload);
                        }
                    }
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
    let dir = &cfg.out_dir;
    if let Err(e) = std::fs::create_dir_all(dir) {
        guard::warn(&format!("cannot create journal folder {dir}: {e}"));
        return false;
    }
    // SAFETY: plain libc calls without preconditions.
    let pid = unsafe { libc::getpid() };
    let host = crate::process::hostname();
    let start = crate::process::realtime_ns();
    let name = format!(
        "{dir}/{}.{}.{pid}.{start}{JOURNAL_SUFFIX}",
        cfg.run_id,
        sanitize(&host)
    );
    let Ok(cpath) = CString::new(name.clone()) else {
        return false;
    };
    // SAFETY: open with a valid path; O_EXCL so a reused pid never overwrites a journal.
    let fd = unsafe {
        libc::open(
            cpath.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        guard::warn(&format!(
            "cannot create journal {name}: {}",
            std::io::Error::last_os_error()
        ));
        return false;
    }
    FD.store(fd, Ordering::Release);
    OPEN_GENERATION.fetch_add(1, Ordering::AcqRel);
    let Some(base) = chunk_ptr(0) else {
        return false;
    };
    // SAFETY: chunk 0 is mapped and at least PREAMBLE_LEN long; nobody else writes there
    // because the cursor starts after the preamble.
    unsafe { std::ptr::copy_nonoverlapping(preamble().as_ptr(), base, PREAMBLE_LEN) };
    CURSOR.store(PREAMBLE_LEN as u64, Ordering::Release);
    guard::debug(|| format!("journal {name}"));
    true
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The mapped chunk `k`, mapping (and growing the file) if needed.
fn chunk_ptr(k: usize) -> Option<*mut u8> {
    if k >= MAX_CHUNKS {
        return None;
    }
    let p = CHUNKS[k].load(Ordering::Acquire);
    if !p.is_null() {
        return Some(p);
    }
    // Slow path, once per 4 MiB: no driver call is made under this lock.
    let _g = GrowGuard::lock();
    let p = CHUNKS[k].load(Ordering::Acquire);
    if !p.is_null() {
        return Some(p);
    }
    let fd = FD.load(Ordering::Acquire);
    if fd < 0 {
        return None;
    }
    let end = (k as u64 + 1) * CHUNK;
    // SAFETY: fd is our journal; growing a file we own; mapping a range that exists.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return None;
        }
        if (st.st_size as u64) < end && libc::ftruncate(fd, end as libc::off_t) != 0 {
            return None;
        }
        // MAP_POPULATE: take the page faults of a new chunk here, once per 4 MiB, rather
        // than one per page on the hook path.
        let m = libc::mmap(
            std::ptr::null_mut(),
            CHUNK as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            (k as u64 * CHUNK) as libc::off_t,
        );
        if m == libc::MAP_FAILED {
            return None;
        }
        CHUNKS[k].store(m as *mut u8, Ordering::Release);
        Some(m as *mut u8)
    }
}

/// A reserved place for one frame.
pub struct Slot {
    ptr: *mut u8,
    len: usize,
    generation: u32,
}

/// Reserves room for a frame whose payload is `payload_len` bytes.
pub fn reserve(payload_len: usize) -> Option<Slot> {
    if !is_open() {
        return None;
    }
    let len = frame_len(payload_len) as u64;
    loop {
        let generation = OPEN_GENERATION.load(Ordering::Acquire);
        let off = CURSOR.fetch_add(len, Ordering::AcqRel);
        let first = off / CHUNK;
        let last = (off + len - 1) / CHUNK;
        if first != last {
            // Pad to the end of this chunk so the reader can step over it, and retry.
            let rest = ((first + 1) * CHUNK - off) as usize;
            if let Some(base) = chunk_ptr(first as usize) {
                // SAFETY: [off, off+rest) lies inside chunk `first`, reserved by us.
                unsafe { write_padding(base.add((off % CHUNK) as usize), rest) };
            }
            continue;
        }
        let Some(base) = chunk_ptr(first as usize) else {
            guard::give_up("the journal cannot grow (disk full or over 16 GiB)");
            return None;
        };
        // SAFETY: the range is inside the chunk and reserved for this writer alone.
        let ptr = unsafe { base.add((off % CHUNK) as usize) };
        return Some(Slot {
            ptr,
            len: len as usize,
            generation,
        });
    }
}

unsafe fn write_padding(at: *mut u8, len: usize) {
    // SAFETY (caller): `at..at+len` is reserved by this writer; len >= 8, multiple of 8.
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
        let buf = unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) };
        encode_frame_body_parts(kind, parts, buf);
        // SAFETY: the slot is 8-byte aligned (frames are multiples of 8 from offset 16).
        unsafe { (*(self.ptr as *const AtomicU32)).store(head_word(kind), Ordering::Release) };
    }
}

/// Appends one frame (reserve + commit).
pub fn append_raw(kind: u16, payload: &[u8]) {
    if let Some(slot) = reserve(payload.len()) {
        slot.commit(kind, payload);
    }
}

/// Encodes an event into a stack buffer (text cut at [`MAX_TEXT`]) and appends it.
pub fn append_event(e: &Event, text: &[u8]) {
    if let Some(slot) = reserve(EVENT_FIXED_LEN + text.len().min(MAX_TEXT)) {
        commit_event(slot, e, text);
    }
}

/// Fills a slot reserved with `reserve(EVENT_FIXED_LEN + text.len().min(MAX_TEXT))`.
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
    for c in CHUNKS.iter() {
        let p = c.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !p.is_null() {
            // SAFETY: the mapping was made by us with this length; no other thread exists.
            unsafe { libc::munmap(p.cast(), CHUNK as usize) };
        }
    }
    if fd >= 0 {
        // SAFETY: closing our own descriptor in the child.
        unsafe { libc::close(fd) };
    }
    CURSOR.store(0, Ordering::Release);
    GROW.store(false, Ordering::Release);
    STATE.store(0, Ordering::Release);
}
