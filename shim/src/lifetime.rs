//! The last moments a process can be seen: free memory is sampled before the last context of
//! a device goes away and when the process exits, so every run's books balance (`free@end`
//! is known) even when the program never prints an engine line or asks for free memory
//! (plain PyTorch).
//!
//! - Contexts seen per device: the primary context's handle and the retains not yet
//!   released, and the last created context (`cuCtxCreate`/`cuCtxDestroy`).
//! - Before the release that drops a device's last context, and before a `cuCtxDestroy`,
//!   free memory is read through that very context (pushed for the one call if it is not
//!   current on the calling thread) with NVML's device reading and the live books.
//! - At exit (an `atexit` handler, registered after the first context exists, so it runs
//!   before a teardown the CUDA runtime registered when it initialised), the same for every
//!   device that still has a context. NVML's device reading is kept only while the context
//!   still exists (the driver answered through it, or NVML still lists this process with
//!   memory on the device): a reading after the runtime's own teardown would count memory
//!   that nothing recorded as freed.
//!
//! A forked child forgets all of it (it cannot use its parent's contexts); nothing is
//! registered with `VRAMLEDGER_DISABLE=1` (the hooks record nothing).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

use crate::{journal, real, samples};

const DEVICES: usize = 64;

#[allow(clippy::declare_interior_mutable_const)]
const NO_HANDLE: AtomicU64 = AtomicU64::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicI32 = AtomicI32::new(0);
static PRIMARY: [AtomicU64; DEVICES] = [NO_HANDLE; DEVICES];
static PRIMARY_REFS: [AtomicI32; DEVICES] = [ZERO; DEVICES];
static CREATED: [AtomicU64; DEVICES] = [NO_HANDLE; DEVICES];
static AT_EXIT: AtomicBool = AtomicBool::new(false);

fn slot(dev: i32) -> Option<usize> {
    usize::try_from(dev).ok().filter(|&d| d < DEVICES)
}

fn register_exit() {
    if !AT_EXIT.swap(true, Ordering::AcqRel) {
        // SAFETY: registering a handler that lives as long as the library.
        unsafe { libc::atexit(at_exit) };
    }
}

/// After a successful `cuDevicePrimaryCtxRetain`.
pub fn primary_retained(dev: i32, ctx: u64) {
    if let Some(d) = slot(dev) {
        PRIMARY[d].store(ctx, Ordering::Release);
        PRIMARY_REFS[d].fetch_add(1, Ordering::AcqRel);
        register_exit();
    }
}

/// Before `cuDevicePrimaryCtxRelease`: if this release may drop the device's primary
/// context (vramledger saw no other retain still held), sample through it first.
pub fn before_primary_release(dev: i32) {
    let Some(d) = slot(dev) else { return };
    if PRIMARY_REFS[d].load(Ordering::Acquire) <= 1 {
        let ctx = PRIMARY[d].load(Ordering::Acquire);
        if ctx != 0 {
            sample_through(ctx, dev);
        }
    }
}

/// After `cuDevicePrimaryCtxRelease` returned `rc`.
pub fn primary_released(dev: i32, rc: i32) {
    if rc != 0 {
        return;
    }
    if let Some(d) = slot(dev) {
        if PRIMARY_REFS[d].fetch_sub(1, Ordering::AcqRel) <= 1 {
            PRIMARY_REFS[d].store(0, Ordering::Release);
        }
    }
}

/// After a successful `cuCtxCreate`.
pub fn created(dev: i32, ctx: u64) {
    if let Some(d) = slot(dev) {
        CREATED[d].store(ctx, Ordering::Release);
        register_exit();
    }
}

/// Before `cuCtxDestroy(ctx)`: the last reading through it. Returns the device it was made
/// on when it is the last context made there (-1: not known).
pub fn before_destroy(ctx: u64) -> i32 {
    if ctx == 0 {
        return -1;
    }
    let dev = CREATED
        .iter()
        .position(|c| c.load(Ordering::Acquire) == ctx)
        .map_or(-1, |d| d as i32);
    sample_through(ctx, dev);
    dev
}

/// After `cuCtxDestroy(ctx)` returned `rc`.
pub fn destroyed(ctx: u64, rc: i32) {
    if rc != 0 || ctx == 0 {
        return;
    }
    for c in &CREATED {
        let _ = c.compare_exchange(ctx, 0, Ordering::AcqRel, Ordering::Acquire);
    }
}

type CtxFn = unsafe extern "C" fn(u64) -> i32;
type PopFn = unsafe extern "C" fn(*mut u64) -> i32;

/// Free memory (and NVML, and the live books) read through context `ctx`, pushed on the
/// calling thread for the one call and popped right after. Returns false when the driver
/// did not answer.
fn sample_through(ctx: u64, dev: i32) -> bool {
    static PUSH: AtomicUsize = AtomicUsize::new(0);
    static POP: AtomicUsize = AtomicUsize::new(0);
    let push = real::driver_fn(c"cuCtxPushCurrent_v2", &PUSH);
    let pop = real::driver_fn(c"cuCtxPopCurrent_v2", &POP);
    if push == 0 || pop == 0 {
        return false;
    }
    // SAFETY: the driver's cuCtxPushCurrent_v2(CUcontext) and cuCtxPopCurrent_v2(CUcontext*).
    let (push, pop) = unsafe {
        (
            std::mem::transmute::<usize, CtxFn>(push),
            std::mem::transmute::<usize, PopFn>(pop),
        )
    };
    // SAFETY: a context handle the driver gave this process; popped again below.
    if unsafe { push(ctx) } != 0 {
        return false;
    }
    let read = samples::meminfo();
    let mut popped = 0u64;
    // SAFETY: pops what was pushed above, leaving the thread's stack as it was.
    unsafe { pop(&mut popped) };
    let Some((device, _, _)) = read else {
        return false;
    };
    let dev = if device >= 0 { device } else { dev };
    if let Some(s) = crate::nvml::sample(dev) {
        samples::nvml_event(dev, s);
    }
    samples::live_books();
    true
}

/// NVML's device reading alone (it needs no context), kept only while NVML still lists this
/// process on the device with memory: otherwise the context may be gone already, and the
/// reading would count its memory as freed.
fn nvml_while_listed(dev: i32) {
    if let Some(s) = crate::nvml::sample(dev) {
        if s.process_used.is_some_and(|u| u > 0) {
            samples::nvml_event(dev, s);
            samples::live_books();
        }
    }
}

extern "C" fn at_exit() {
    crate::guard::record(|| {
        if !journal::is_open() {
            return;
        }
        for d in 0..DEVICES {
            let primary = PRIMARY[d].load(Ordering::Acquire);
            let alive = primary != 0 && PRIMARY_REFS[d].load(Ordering::Acquire) > 0;
            let ctx = if alive {
                primary
            } else {
                CREATED[d].load(Ordering::Acquire)
            };
            if ctx != 0 && !sample_through(ctx, d as i32) {
                nvml_while_listed(d as i32);
            }
        }
    });
}

/// In a forked child: the parent's contexts are not this process's.
pub fn reset_in_child() {
    for d in 0..DEVICES {
        PRIMARY[d].store(0, Ordering::Relaxed);
        PRIMARY_REFS[d].store(0, Ordering::Relaxed);
        CREATED[d].store(0, Ordering::Relaxed);
    }
}
