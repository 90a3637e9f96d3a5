//! The journal's 4 MiB chunks: reserved on disk for real before use, mapped shared while
//! written, unmapped as soon as every byte of one is written.
//!
//! - Growing checks `RLIMIT_FSIZE` first (the kernel would send SIGXFSZ otherwise), then
//!   `posix_fallocate`s the chunk, so a full disk is an error here and never a SIGBUS on a
//!   later store; a file that is shorter than what was reserved means someone truncated it.
//! - A chunk holds 64 blocks (`super::blocks`); the writer that seals a block adds the block
//!   to its chunk's `DONE` counter, and the one who completes the chunk unmaps it. Nobody can
//!   touch a chunk after that (all its blocks are sealed), so the target's memory stays at one
//!   or two chunks however long it runs.
//! - A chunk's slot is also claimed by the SIGBUS handler (`sigbus.rs`) while it swaps the
//!   mapping for anonymous memory; retiring waits for that claim, the handler never waits.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

pub const CHUNK: u64 = 4 << 20;
/// `madvise` advice: fault every page in for writing now (linux/mman.h, not yet in libc).
const MADV_POPULATE_WRITE: libc::c_int = 23;
/// 16 GiB of journal at most.
pub const MAX_CHUNKS: usize = 4096;

/// A slot value meaning "being unmapped" (never a real mapping: not page aligned).
pub const RETIRING: *mut u8 = std::ptr::dangling_mut::<u8>();
/// A slot value meaning "the SIGBUS handler is replacing this mapping".
pub const IN_HANDLER: *mut u8 = 3 as *mut u8;

#[allow(clippy::declare_interior_mutable_const)]
const NO_CHUNK: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU32 = AtomicU32::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const NO_BASE: AtomicUsize = AtomicUsize::new(0);
pub static CHUNKS: [AtomicPtr<u8>; MAX_CHUNKS] = [NO_CHUNK; MAX_CHUNKS];
/// Where chunk `k` is mapped, also while its slot says IN_HANDLER (0 once it is retiring or
/// unmapped: an address the program may map again must never be taken for the journal's).
pub static BASES: [AtomicUsize; MAX_CHUNKS] = [NO_BASE; MAX_CHUNKS];
static DONE: [AtomicU32; MAX_CHUNKS] = [ZERO; MAX_CHUNKS];
/// Bytes of the file reserved so far (the end of the highest chunk grown).
pub static RESERVED_END: AtomicU64 = AtomicU64::new(0);
// A spin lock rather than a Mutex: a forked child must be able to reset it even if another
// thread of the parent held it at the fork.
static GROW: AtomicBool = AtomicBool::new(false);

/// Why a chunk could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No space left on the journal's file system.
    NoSpace,
    /// The process's file-size limit (`RLIMIT_FSIZE`) would be passed.
    SizeLimit(u64),
    /// The journal reached its 16 GiB cap.
    Full,
    /// The file is shorter than what was reserved: someone else truncated it.
    Truncated,
    /// The journal's descriptor is another file now (the program closed it and opened its own).
    Replaced,
    /// Any other system error (errno).
    Os(i32),
}

impl Failure {
    /// For the one warning on stderr.
    pub fn describe(self) -> String {
        match self {
            Failure::NoSpace => "no space left for the journal".into(),
            Failure::SizeLimit(l) => {
                format!("the journal would pass this process's file-size limit (RLIMIT_FSIZE {l} bytes)")
            }
            Failure::Full => "the journal reached its 16 GiB limit".into(),
            Failure::Truncated => "the journal was truncated by another process".into(),
            Failure::Replaced => {
                "the program closed the journal's descriptor (its number now names another file)"
                    .into()
            }
            Failure::Os(e) => format!(
                "the journal cannot grow: {}",
                std::io::Error::from_raw_os_error(e)
            ),
        }
    }
}

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

fn is_mapping(p: *mut u8) -> bool {
    !p.is_null() && p != RETIRING && p != IN_HANDLER
}

/// The mapped chunk `k` of the journal `fd`, growing and mapping it if needed.
#[inline]
pub fn chunk_ptr(fd: i32, k: usize) -> Result<*mut u8, Failure> {
    if k >= MAX_CHUNKS {
        return Err(Failure::Full);
    }
    let p = CHUNKS[k].load(Ordering::Acquire);
    if is_mapping(p) {
        return Ok(p);
    }
    grow(fd, k)
}

/// Slow path, once per 4 MiB: no driver call is made under this lock. The SIGBUS handler
/// (`super::sigbus`) is installed before the first chunk is grown.
#[cold]
fn grow(fd: i32, k: usize) -> Result<*mut u8, Failure> {
    let _g = GrowGuard::lock();
    loop {
        let p = CHUNKS[k].load(Ordering::Acquire);
        if is_mapping(p) {
            return Ok(p);
        }
        if p.is_null() {
            break;
        }
        // The SIGBUS handler holds the slot for a moment (it never waits for anyone).
        std::thread::yield_now();
    }
    if fd < 0 {
        return Err(Failure::Os(libc::EBADF));
    }
    let start = k as u64 * CHUNK;
    let end = start + CHUNK;
    // Never grow a file that is not the journal any more (nor map it).
    let Some(st) = super::state::journal_stat(fd) else {
        return Err(Failure::Replaced);
    };
    // SAFETY: plain system calls on our own descriptor and out-structs.
    unsafe {
        if (st.st_size as u64) < RESERVED_END.load(Ordering::Acquire) {
            return Err(Failure::Truncated);
        }
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim) == 0
            && lim.rlim_cur != libc::RLIM_INFINITY
            && end > lim.rlim_cur
        {
            return Err(Failure::SizeLimit(lim.rlim_cur));
        }
        let rc = loop {
            let rc = libc::posix_fallocate(fd, start as libc::off_t, CHUNK as libc::off_t);
            if rc != libc::EINTR {
                break rc;
            }
        };
        match rc {
            0 => {}
            libc::ENOSPC | libc::EDQUOT => return Err(Failure::NoSpace),
            libc::EFBIG => return Err(Failure::SizeLimit(end)),
            e => return Err(Failure::Os(e)),
        }
        RESERVED_END.fetch_max(end, Ordering::AcqRel);
        // MAP_POPULATE: take the page faults of a new chunk here, once per 4 MiB, rather
        // than one per page on the hook path.
        let m = libc::mmap(
            std::ptr::null_mut(),
            CHUNK as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            start as libc::off_t,
        );
        if m == libc::MAP_FAILED {
            return Err(Failure::Os(errno()));
        }
        // Take the write faults too (Linux 5.14+; older kernels say EINVAL and the pages
        // fault one by one on first write, as before): a reserved but unwritten extent costs
        // the file system more per first store than a hole does.
        libc::madvise(m, CHUNK as usize, MADV_POPULATE_WRITE);
        BASES[k].store(m as usize, Ordering::Release);
        CHUNKS[k].store(m as *mut u8, Ordering::Release);
        Ok(m as *mut u8)
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `n` more bytes of chunk `k` are written for good (a sealed block); the writer who completes
/// the chunk unmaps it.
#[inline]
pub fn done(k: u64, n: u64) {
    let k = k as usize;
    if k >= MAX_CHUNKS || n == 0 {
        return;
    }
    let before = DONE[k].fetch_add(n as u32, Ordering::AcqRel) as u64;
    if before + n >= CHUNK {
        retire(k);
    }
}

#[cold]
fn retire(k: usize) {
    loop {
        let p = CHUNKS[k].load(Ordering::Acquire);
        if !is_mapping(p) {
            if p == IN_HANDLER {
                std::thread::yield_now();
                continue;
            }
            return; // never mapped (its writers failed) or already retired
        }
        if CHUNKS[k]
            .compare_exchange(p, RETIRING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            BASES[k].store(0, Ordering::Release);
            // SAFETY: every byte of the chunk is written and no writer holds a pointer into it;
            // the slot is ours (RETIRING), so the SIGBUS handler leaves it alone.
            unsafe { libc::munmap(p.cast(), CHUNK as usize) };
            CHUNKS[k].store(std::ptr::null_mut(), Ordering::Release);
            return;
        }
    }
}

/// Chunks mapped now (for tests and the handler's bookkeeping).
pub fn mapped_count() -> usize {
    CHUNKS
        .iter()
        .filter(|c| is_mapping(c.load(Ordering::Relaxed)))
        .count()
}

/// In a forked child (one thread): unmap everything, forget every counter.
pub fn reset_in_child() {
    for ((c, d), b) in CHUNKS.iter().zip(DONE.iter()).zip(BASES.iter()) {
        b.store(0, Ordering::Relaxed);
        let p = c.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if is_mapping(p) {
            // SAFETY: our mapping, of this length; no other thread exists in the child.
            unsafe { libc::munmap(p.cast(), CHUNK as usize) };
        }
        d.store(0, Ordering::Relaxed);
    }
    RESERVED_END.store(0, Ordering::Release);
    GROW.store(false, Ordering::Release);
}
