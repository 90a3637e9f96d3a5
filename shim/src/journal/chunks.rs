//! The journal's 4 MiB chunks: reserved on disk for real before use, mapped shared while
//! written, unmapped as soon as every byte of one is written.
//!
//! - Growing checks `RLIMIT_FSIZE` first (the kernel would send SIGXFSZ otherwise), then
//!   that the chunk leaves the program its share of the file system ([`keeps_room`]), then
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
    /// Another chunk would leave less free than the program's share ([`keeps_room`]): bytes
    /// available now, and the share.
    LowSpace(u64, u64),
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
            Failure::LowSpace(avail, keep) => format!(
                "no space left for the journal: {} MiB more would leave less than the {} \
                 kept free for the program on its file system ({} available)",
                CHUNK >> 20,
                size(keep),
                size(avail)
            ),
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
        let mut fs: libc::statvfs = std::mem::zeroed();
        if libc::fstatvfs(fd, &mut fs) == 0 {
            let frsize = fs.f_frsize as u64;
            let (avail, total) = (
                (fs.f_bavail as u64).saturating_mul(frsize),
                (fs.f_blocks as u64).saturating_mul(frsize),
            );
            if let Err(keep) = keeps_room(avail, total) {
                return Err(Failure::LowSpace(avail, keep));
            }
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

/// `n` bytes for people: whole KiB under 1 MiB, else whole MiB (rounded down).
fn size(n: u64) -> String {
    if n < 1 << 20 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{} MiB", n >> 20)
    }
}

/// The free space a chunk must leave on the journal's file system: 5% of it, at most 256 MiB
/// (a full disk under a server breaks its own logs and checkpoints: the journal gives up
/// first). `Err(share)` when taking a chunk with `avail` of `total` bytes free would leave
/// less; a file system that reports no size (some FUSE and network ones) is not judged.
pub fn keeps_room(avail: u64, total: u64) -> Result<(), u64> {
    let keep = (total / 20).min(256 << 20);
    if total == 0 || avail >= CHUNK.saturating_add(keep) {
        Ok(())
    } else {
        Err(keep)
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

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    #[test]
    fn a_chunk_leaves_five_percent_of_the_file_system_at_most_256_mib() {
        // 8 MiB: 409 KiB stays the program's.
        let small = 8 * MIB;
        assert_eq!(keeps_room(CHUNK + small / 20, small), Ok(()));
        assert_eq!(keeps_room(CHUNK + small / 20 - 1, small), Err(small / 20));
        // 1 TiB: 256 MiB, not 51 GiB.
        let big = 1024 * GIB;
        assert_eq!(keeps_room(CHUNK + 256 * MIB, big), Ok(()));
        assert_eq!(keeps_room(CHUNK + 256 * MIB - 1, big), Err(256 * MIB));
        assert_eq!(keeps_room(0, big), Err(256 * MIB));
        // A file system that reports no size is not judged (posix_fallocate still is).
        assert_eq!(keeps_room(0, 0), Ok(()));
    }

    #[test]
    fn the_low_space_warning_names_the_share_and_what_is_left() {
        let w = Failure::LowSpace(3 * MIB + 5, 409 * 1024).describe();
        assert!(w.starts_with("no space left for the journal"), "{w}");
        assert!(
            w.contains("4 MiB more") && w.contains("the 409 KiB kept"),
            "{w}"
        );
        assert!(w.contains("(3 MiB available)"), "{w}");
    }
}
