//! Finding the first frame outside the driver, the runtime and vramledger when a hook was
//! called from one of them (`cudaMalloc` → `cuMemAlloc`, from PyTorch's allocator).
//!
//! The runtime keeps no frame pointers, so the first walk past it is DWARF unwinding
//! (libgcc's `_Unwind_Backtrace`, as C++ exceptions use): thousands of instructions and a
//! cold `.eh_frame` for each frame. But at one return address a function's frame has one
//! size, so the walk *learns* it: for each frame of a skipped module, the distance from its
//! stack pointer at the call (what the unwinder's `_Unwind_GetCFA` gives while it stands at
//! that frame) to its caller's (the same at the next frame). Seen the same twice, the
//! distance is trusted, and later walks through that return address read the caller's
//! return address straight off the stack ([`fast`]): a few loads per frame. A return address
//! whose distance ever differs (a frame sized at run time) is never trusted; a walk that
//! meets anything it has not learned unwinds the slow way and learns.
//!
//! Only on x86-64, where a hook's own frame pointer gives its CFA; elsewhere every walk past
//! the runtime unwinds.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

use super::modules::{self, ModuleClass, ModuleInfo, NewModule};

#[allow(improper_ctypes)]
extern "C" {
    fn _Unwind_Backtrace(
        trace: extern "C" fn(*mut c_void, *mut c_void) -> c_int,
        arg: *mut c_void,
    ) -> c_int;
    fn _Unwind_GetIP(ctx: *mut c_void) -> usize;
    fn _Unwind_GetCFA(ctx: *mut c_void) -> usize;
}

const URC_NO_REASON: c_int = 0;
const URC_NORMAL_STOP: c_int = 4;
const MAX_FRAMES: u32 = 48;
/// Frames a fast walk follows at most.
const MAX_FAST: usize = 8;
/// Frame sizes beyond this are not learned.
const MAX_FRAME: usize = 64 << 10;

/// Walks made each way (for `VRAMLEDGER_DEBUG`'s last line).
static WALKS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// `(unwound, by learned sizes)`: the walks past skipped modules made so far.
pub fn walks() -> (u64, u64) {
    (
        WALKS[0].load(Ordering::Relaxed),
        WALKS[1].load(Ordering::Relaxed),
    )
}

const SLOTS: usize = 4096;
/// An entry: return address << 16 | frame size / 8 << 2 | state.
const SEEN_ONCE: u64 = 1;
const TRUSTED: u64 = 2;
const NEVER: u64 = 3;

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: AtomicU64 = AtomicU64::new(0);
static SIZES: [AtomicU64; SLOTS] = [EMPTY; SLOTS];

/// The entry of `ip`: the one of its 2-way set that holds it, else the one it may take (the
/// first while it is empty, then the second).
#[inline]
fn slot(ip: usize) -> &'static AtomicU64 {
    let h = ((ip as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 52) as usize & !1;
    let (a, b) = (&SIZES[h % SLOTS], &SIZES[(h + 1) % SLOTS]);
    let ea = a.load(Ordering::Acquire);
    if ea == 0 || (ea >> 16) as usize == ip {
        a
    } else {
        b
    }
}

/// The trusted frame size of the function that `ip` returns into.
#[inline]
fn trusted(ip: usize) -> Option<usize> {
    let e = slot(ip).load(Ordering::Acquire);
    ((e >> 16) as usize == ip && e & 3 == TRUSTED).then_some(((e >> 2) & 0x3fff) as usize * 8)
}

/// Learns that the frame `ip` returns into is `size` bytes.
fn learn(ip: usize, size: usize) {
    if ip == 0 || ip >> 48 != 0 {
        return;
    }
    let s = slot(ip);
    let e = s.load(Ordering::Acquire);
    let same_ip = (e >> 16) as usize == ip;
    let ok = size > 0 && size <= MAX_FRAME && size.is_multiple_of(8);
    let words = (size / 8) as u64 & 0x3fff;
    let new = match (same_ip, e & 3) {
        (true, NEVER) => return,
        (true, state) if ok && (e >> 2) & 0x3fff == words => {
            if state == TRUSTED {
                return;
            }
            TRUSTED
        }
        (true, _) => NEVER,
        (false, _) if ok => SEEN_ONCE,
        (false, _) => NEVER,
    };
    s.store((ip as u64) << 16 | words << 2 | new, Ordering::Release);
}

/// The walk from a hook's caller `ip` (in a skipped module), whose stack pointer at the call
/// was `cfa`, through learned frames only; `stack_top` bounds every read. `None` when it
/// meets anything not learned.
#[inline]
pub fn fast(mut ip: usize, mut cfa: usize, stack_top: usize) -> Option<ModuleInfo> {
    if cfa == 0 || stack_top == 0 {
        return None;
    }
    for _ in 0..MAX_FAST {
        let next = cfa.checked_add(trusted(ip)?)?;
        if next > stack_top || next < cfa + 8 {
            return None;
        }
        // SAFETY: `next - 8` lies between this frame's stack pointer and the top of this
        // thread's stack (checked above): mapped, 8-byte aligned stack memory. The value is
        // the return address of the frame whose size was learned at `ip`.
        let ra = unsafe { *((next - 8) as *const usize) };
        let m = modules::lookup(ra.checked_sub(1)?)?;
        if m.class != ModuleClass::Skip {
            WALKS[1].fetch_add(1, Ordering::Relaxed);
            return Some(m);
        }
        ip = ra;
        cfa = next;
    }
    None
}

struct Walk {
    on_new: NewModule,
    found: Option<ModuleInfo>,
    frames: u32,
    /// The frame before this one: its return address and stack pointer at its call, when it
    /// was a skipped module's (then its size is learned here).
    prev: Option<(usize, usize)>,
}

extern "C" fn step(ctx: *mut c_void, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the Walk passed to _Unwind_Backtrace below; ctx is the unwinder's.
    let walk = unsafe { &mut *(arg as *mut Walk) };
    walk.frames += 1;
    if walk.frames > MAX_FRAMES {
        return URC_NORMAL_STOP;
    }
    // SAFETY: the unwinder's own context, valid for the duration of this callback.
    let (ip, cfa) = unsafe { (_Unwind_GetIP(ctx), _Unwind_GetCFA(ctx)) };
    if ip == 0 {
        return URC_NORMAL_STOP;
    }
    // `cfa` is the stack pointer of this frame at its call: the previous (skipped) frame
    // spans from its own to this one.
    if let Some((prev_ip, prev_sp)) = walk.prev.take() {
        if cfa > prev_sp {
            learn(prev_ip, cfa - prev_sp);
        }
    }
    // The return address points after the call; look up the call instruction itself.
    let m = modules::module_of(ip - 1, walk.on_new);
    match m {
        Some(m) if m.class == ModuleClass::Skip => {
            walk.prev = Some((ip, cfa));
            URC_NO_REASON
        }
        Some(m) => {
            walk.found = Some(m);
            URC_NORMAL_STOP
        }
        None => URC_NO_REASON,
    }
}

/// The slow walk: unwinds from here, learning the frame sizes of skipped modules.
pub fn slow(on_new: NewModule) -> Option<ModuleInfo> {
    let mut walk = Walk {
        on_new,
        found: None,
        frames: 0,
        prev: None,
    };
    // SAFETY: the callback only touches `walk`, which outlives the call.
    unsafe { _Unwind_Backtrace(step, &mut walk as *mut Walk as *mut c_void) };
    WALKS[0].fetch_add(1, Ordering::Relaxed);
    walk.found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_is_trusted_once_seen_twice_the_same_and_never_if_it_varies() {
        let ip = 0x7f00_1234_5678usize;
        assert_eq!(trusted(ip), None);
        learn(ip, 64);
        assert_eq!(trusted(ip), None, "seen once");
        learn(ip, 64);
        assert_eq!(trusted(ip), Some(64));
        learn(ip, 80);
        assert_eq!(trusted(ip), None, "it varied");
        learn(ip, 64);
        learn(ip, 64);
        assert_eq!(trusted(ip), None, "never again");
        let other = 0x7f00_1234_9000usize;
        learn(other, 1 << 20);
        learn(other, 1 << 20);
        assert_eq!(trusted(other), None, "too large");
    }

    #[test]
    fn a_fast_walk_reads_learned_frames_and_stops_at_what_it_does_not_know() {
        // A fake stack: [frame of size 32 whose return address is `ra`].
        let mut stack = [0usize; 16];
        let base = stack.as_ptr() as usize;
        let ip = 0x7f00_2222_0000usize;
        learn(ip, 32);
        learn(ip, 32);
        stack[3] = 0x7f00_3333_0010; // at cfa + 32 - 8 with cfa = base
        let top = base + stack.len() * 8;
        // Not a known module: the fast walk gives up (the slow one would take over).
        assert_eq!(fast(ip, base, top), None);
        // A stack top below the slot: never read.
        assert_eq!(fast(ip, base, base + 16), None);
        let _ = &mut stack;
    }
}
