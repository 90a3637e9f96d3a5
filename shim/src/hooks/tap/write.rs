//! `write` and `writev`, interposed: the real call first, then the tap on the bytes it took.
//!
//! `write`'s common path (a whole line on fd 1 or 2, nothing pending, grammar only, a line the
//! prefilter rejects) is what every server write before serving pays, right after a system
//! call, when little of the tap's code and state is warm. So it is kept short: the prefilter's
//! instructions are chosen before the call (on x86-64 by [`ROUTE`], one indirect jump), the
//! state is one load ([`QUICK`]), and the vector filter (AVX-512 or AVX2) is inlined into the
//! one function that runs after the call. Anything else goes to [`observe`], which decides as
//! before. Once the tap is off (serving, or `VRAMLEDGER_TAP=0`), `write` is a jump to libc's.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use super::{observe, tap_filter, OFF, QUICK};
use crate::real;

type WriteFn = unsafe extern "C" fn(c_int, *const c_void, usize) -> isize;

static REAL_WRITE: AtomicUsize = AtomicUsize::new(0);

#[inline(always)]
fn real_write() -> Option<WriteFn> {
    let mut p = REAL_WRITE.load(Ordering::Acquire);
    if p == 0 {
        p = find_real(&REAL_WRITE, c"write");
    }
    // SAFETY: the next `write` after vramledger is libc's, with this signature.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, WriteFn>(p) })
}

/// The next definition of `name` after vramledger, found once (errno kept).
#[cold]
fn find_real(slot: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    // SAFETY: errno is thread-local; the lookup must not change what the caller sees.
    let saved = unsafe { *libc::__errno_location() };
    let p = real::real_dlsym(libc::RTLD_NEXT, name);
    slot.store(p, Ordering::Release);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    p
}

/// Where the interposed `write` jumps on x86-64: [`write_plain`] until it has chosen the
/// function for this CPU ([`write_avx512`], [`write_avx2`] or itself), libc's `write` once the
/// tap is off. Each route is one indirect jump: no compare to pass, and one instruction is
/// less likely to straddle a fetch block than a compare chain (the naked `write` cannot be
/// aligned on stable Rust).
static ROUTE: AtomicPtr<()> = AtomicPtr::new(write_plain as *mut ());

/// The tap is off for good: `write` goes straight to libc's from now on (once that is known;
/// else it keeps forwarding through [`write_plain`], which sees the tap off).
pub(super) fn route_off() {
    if let Some(f) = real_write() {
        ROUTE.store(f as *mut (), Ordering::Release);
    }
}

/// The interposed `write`: on x86-64 a jump by [`ROUTE`]. No frame and no call here, so
/// nothing more to return through after the kernel ran, and none at all once the tap is off.
#[cfg(target_arch = "x86_64")]
#[no_mangle]
#[unsafe(naked)]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: usize) -> isize {
    // The arguments stay in their registers for the function jumped to, which has the same
    // signature. `ROUTE` only ever holds such a function.
    std::arch::naked_asm!("jmp qword ptr [rip + {route}]", route = sym ROUTE)
}

#[cfg(not(target_arch = "x86_64"))]
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: usize) -> isize {
    // SAFETY: the caller's own arguments.
    unsafe { write_plain(fd, buf, count) }
}

/// [`write`] with the AVX-512 filter inlined.
///
/// # Safety
/// The CPU has AVX-512BW and VL; the caller's arguments of `write`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe extern "C" fn write_avx512(fd: c_int, buf: *const c_void, count: usize) -> isize {
    // SAFETY: the caller's own arguments; the CPU has AVX-512BW and VL (this function's
    // contract).
    unsafe { write_then::<AVX512>(fd, buf, count) }
}

/// [`write`] with the AVX2 filter inlined.
///
/// # Safety
/// The CPU has AVX2; the caller's arguments of `write`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe extern "C" fn write_avx2(fd: c_int, buf: *const c_void, count: usize) -> isize {
    // SAFETY: the caller's own arguments; the CPU has AVX2 (this function's contract).
    unsafe { write_then::<AVX2>(fd, buf, count) }
}

/// [`write`] with the portable filter; the CPU is asked here, the first time.
///
/// # Safety
/// The caller's arguments of `write`.
#[inline(never)]
unsafe extern "C" fn write_plain(fd: c_int, buf: *const c_void, count: usize) -> isize {
    #[cfg(target_arch = "x86_64")]
    {
        let (avx512, avx2) = (tap_filter::avx512(), tap_filter::avx2());
        let to: Option<WriteFn> = match (avx512, avx2) {
            (true, _) => Some(write_avx512),
            (_, true) => Some(write_avx2),
            // The route stays here: no atomic write on every `write` of such a CPU.
            _ => None,
        };
        if let Some(to) = to {
            // Only from `write_plain`: the tap may have turned off meanwhile (`route_off`).
            let plain: WriteFn = write_plain;
            let (from, to) = (plain as *mut (), to as *mut ());
            let _ = ROUTE.compare_exchange(from, to, Ordering::AcqRel, Ordering::Relaxed);
        }
        if avx512 {
            // SAFETY: the CPU has AVX-512BW and VL (asked just above); the caller's own
            // arguments.
            return unsafe { write_avx512(fd, buf, count) };
        }
        if avx2 {
            // SAFETY: the CPU has AVX2 (asked just above); the caller's own arguments.
            return unsafe { write_avx2(fd, buf, count) };
        }
    }
    // SAFETY: the caller's own arguments.
    unsafe { write_then::<PLAIN>(fd, buf, count) }
}

/// Which filter [`write_then`] inlines: each vector one only inside the function compiled for
/// it ([`write_avx512`], [`write_avx2`]).
const PLAIN: u8 = 0;
#[cfg(target_arch = "x86_64")]
const AVX2: u8 = 1;
#[cfg(target_arch = "x86_64")]
const AVX512: u8 = 2;

/// The real `write`, then the tap on the bytes it took, with the filter `F`.
#[inline(always)]
unsafe fn write_then<const F: u8>(fd: c_int, buf: *const c_void, count: usize) -> isize {
    let Some(f) = real_write() else {
        // SAFETY: errno is thread-local; EIO says the write did not happen.
        unsafe { *libc::__errno_location() = libc::EIO };
        return -1;
    };
    // SAFETY: the caller's own arguments, passed on unchanged.
    let rc = unsafe { f(fd, buf, count) };
    if rc > 0 && (fd == 1 || fd == 2) {
        // SAFETY: the real write just read these `rc` ≤ `count` bytes from `buf`.
        let bytes = unsafe { std::slice::from_raw_parts(buf as *const u8, rc as usize) };
        let quick = QUICK.load(Ordering::Relaxed);
        // fd 1 or 2 is its own bit (`1 << (fd - 1)`).
        if quick & fd as u8 != 0 {
            // A whole line, nothing pending, grammar only: the prefilter alone decides.
            // (`observe` would do the same, with more loads and branches.)
            if tap_filter::ends_line(bytes) && !line_may_match::<F>(bytes) {
                return rc;
            }
            observe(fd, bytes);
        } else if quick & OFF == 0 {
            observe(fd, bytes);
        }
    }
    rc
}

/// The prefilter on a line that ends with a line end, with the filter `F`.
#[inline(always)]
fn line_may_match<const F: u8>(bytes: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if F == AVX512 {
        // SAFETY: `AVX512` only on the way from `write_avx512`, whose caller found AVX-512BW
        // and VL and which is compiled for them; the caller checked the line end.
        return unsafe { tap_filter::line_may_match_avx512(bytes) };
    }
    #[cfg(target_arch = "x86_64")]
    if F == AVX2 {
        // SAFETY: `AVX2` only on the way from `write_avx2`, whose caller found AVX2 and which
        // is compiled for it; the caller checked the line end.
        return unsafe { tap_filter::line_may_match_avx2(bytes) };
    }
    tap_filter::may_match(bytes)
}

type WritevFn = unsafe extern "C" fn(c_int, *const libc::iovec, c_int) -> isize;
static REAL_WRITEV: AtomicUsize = AtomicUsize::new(0);

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const libc::iovec, iovcnt: c_int) -> isize {
    let mut p = REAL_WRITEV.load(Ordering::Acquire);
    if p == 0 {
        p = find_real(&REAL_WRITEV, c"writev");
    }
    if p == 0 {
        // SAFETY: errno is thread-local; EIO says the write did not happen.
        unsafe { *libc::__errno_location() = libc::EIO };
        return -1;
    }
    // SAFETY: the next `writev` after vramledger is libc's, with this signature; the caller's
    // own arguments, passed on unchanged.
    let rc = unsafe { std::mem::transmute::<usize, WritevFn>(p)(fd, iov, iovcnt) };
    if rc > 0 && (fd == 1 || fd == 2) && !iov.is_null() && iovcnt > 0 {
        // SAFETY: the real writev read the array and took `rc` bytes from its buffers, in order.
        let iovs = unsafe { std::slice::from_raw_parts(iov, iovcnt as usize) };
        let mut left = rc as usize;
        for v in iovs {
            if left == 0 {
                break;
            }
            let n = v.iov_len.min(left);
            if n > 0 {
                // SAFETY: the first `n` bytes of this buffer were taken by the real writev.
                observe(fd, unsafe {
                    std::slice::from_raw_parts(v.iov_base as *const u8, n)
                });
            }
            left -= n;
        }
    }
    rc
}
