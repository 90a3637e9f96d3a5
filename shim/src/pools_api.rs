//! The C API the Python pool hooks call (python-boot/vramledger_pools.py, through
//! `ctypes.CDLL(None)`): PyTorch pool windows opening and closing, and PyTorch's own segment
//! list for the cross-check. Every call is recorded after PyTorch's own call returned
//! successfully; with `VRAMLEDGER_DISABLE=1` (or after an internal error) each is a no-op.

use std::ffi::{c_char, c_int};

use vramledger_format::{Api, Kind, PoolScope, POOL_UNKNOWN};

use crate::{guard, journal, pools, recorder, thread};

fn pool_id(a: u64, b: u64) -> pools::PoolId {
    (a != POOL_UNKNOWN || b != POOL_UNKNOWN).then_some((a, b))
}

fn scope(s: c_int) -> Option<PoolScope> {
    PoolScope::from_u64(u64::try_from(s).ok()?)
}

fn window_event(
    kind: Kind,
    api: Api,
    device: c_int,
    serial: u64,
    pool: pools::PoolId,
    s: PoolScope,
) {
    let mut e = recorder::event(kind, api);
    e.device = device;
    e.handle = serial;
    let (a, b) = pool.unwrap_or((POOL_UNKNOWN, POOL_UNKNOWN));
    e.arg0 = a;
    e.arg1 = b;
    e.arg2 = s as u64;
    recorder::emit(&e, b"");
}

/// PyTorch routes allocations on `device` into pool (`pool_a`, `pool_b`) from now on, for the
/// calling thread or every thread as `scope` says (1 thread, 2 all threads, 3 the caller's
/// current stream, 4 the caller's CUDA-graph capture). A capture whose pool is not known yet
/// passes `u64::MAX` for both halves and names it at its end.
#[no_mangle]
pub extern "C" fn vramledger_pool_begin(
    device: c_int,
    pool_a: u64,
    pool_b: u64,
    scope_code: c_int,
) {
    let Some(s) = scope(scope_code) else {
        return;
    };
    guard::record(|| {
        let tid = thread::tid();
        let pool = pool_id(pool_a, pool_b);
        if let Some(serial) = pools::with(|r| r.begin(tid, device, pool, s)) {
            window_event(
                Kind::PoolBegin,
                Api::VramledgerPoolBegin,
                device,
                serial,
                pool,
                s,
            );
        }
    });
}

/// PyTorch stopped routing allocations on `device` into pool (`pool_a`, `pool_b`)
/// (`endAllocateToPool`). With `scope` 4 this is the end of the calling thread's capture; any
/// other valid scope is a plain end.
#[no_mangle]
pub extern "C" fn vramledger_pool_end(device: c_int, pool_a: u64, pool_b: u64, scope_code: c_int) {
    let Some(s) = scope(scope_code) else {
        return;
    };
    guard::record(|| {
        let tid = thread::tid();
        let pool = pool_id(pool_a, pool_b);
        let capture = s == PoolScope::Capture;
        // The record names the window it closed (serial 0: none, torch's error path).
        let (serial, closed) = pools::with(|r| r.end(tid, device, pool, capture)).unwrap_or((0, s));
        window_event(
            Kind::PoolEnd,
            Api::VramledgerPoolEnd,
            device,
            serial,
            pool,
            closed,
        );
    });
}

/// One segment of PyTorch's own allocator snapshot number `snapshot`: `size` bytes at `addr`
/// on `device`, in pool (`pool_a`, `pool_b`).
#[no_mangle]
pub extern "C" fn vramledger_torch_segment(
    device: c_int,
    addr: u64,
    size: u64,
    pool_a: u64,
    pool_b: u64,
    snapshot: u64,
) {
    guard::record(|| {
        let mut e = recorder::event(Kind::TorchSegment, Api::VramledgerTorchSegment);
        e.device = device;
        e.addr = addr;
        e.size = size;
        e.arg0 = pool_a;
        e.arg1 = pool_b;
        e.handle = snapshot;
        recorder::emit(&e, b"");
    });
}

/// The Python pool hooks are installed in this process: `wrapped` functions, torch `version`
/// (NULL or a NUL-terminated string).
///
/// # Safety
/// `version` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn vramledger_pool_hooks(wrapped: c_int, version: *const c_char) {
    // SAFETY: guaranteed by the caller.
    let text = unsafe { recorder::c_bytes(version) };
    guard::record(|| {
        let first = pools::announce(wrapped.max(0) as u64, text);
        if first && journal::is_open() {
            let mut e = recorder::event(Kind::PoolHooks, Api::VramledgerPoolHooks);
            e.arg0 = wrapped.max(0) as u64;
            recorder::emit(&e, text);
        }
    });
}
