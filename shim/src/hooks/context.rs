//! Contexts: not hooked memory, but measured. Around the first retain of a device's
//! primary context (and every `cuCtxCreate`), NVML's device free memory is read before
//! and after the call; the difference is the context's size. Before a context goes away,
//! and at exit, free memory is read through it once more (`crate::lifetime`).

#![allow(non_snake_case)]

use std::ffi::{c_int, c_uint, c_void};

use vramledger_format::{Api, Kind, Owner};

use super::forward::forward;
use crate::ffi::*;
use crate::{devices, guard, lifetime, nvml, recorder, samples};

fn nvml_free(device: CUdevice) -> Option<u64> {
    let mut out = None;
    guard::record(|| out = nvml::sample(device).map(|s| s.device_free));
    out
}

fn context_event(api: Api, rc: CUresult, device: CUdevice, ctx: u64, before: Option<u64>) {
    guard::record(|| {
        let after = if rc == CUDA_SUCCESS {
            nvml::sample(device)
        } else {
            None
        };
        let mut e = recorder::event(Kind::Context, api);
        e.result = rc;
        e.device = device;
        e.handle = ctx;
        e.owner = Owner::Context as u8;
        e.arg0 = before.unwrap_or(u64::MAX);
        e.arg1 = after.map_or(u64::MAX, |s| s.device_free);
        e.arg2 = after.and_then(|s| s.process_used).unwrap_or(u64::MAX);
        if let (Some(b), Some(a)) = (before, after) {
            e.size = b.saturating_sub(a.device_free);
        }
        recorder::emit(&e, b"");
    });
}

#[no_mangle]
pub unsafe extern "C" fn cuInit(flags: c_uint) -> CUresult {
    crate::note_entry!();
    let api = Api::cuInit;
    let rc = forward!(api, unsafe extern "C" fn(c_uint) -> CUresult, flags);
    guard::record(|| {
        let mut e = recorder::event(Kind::Context, api);
        e.result = rc;
        recorder::emit(&e, b"");
    });
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) -> CUresult {
    crate::note_entry!();
    let api = Api::cuDevicePrimaryCtxRetain;
    let before = nvml_free(dev);
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult,
        pctx,
        dev
    );
    let ctx = if rc == CUDA_SUCCESS && !pctx.is_null() {
        devices::context_on(dev);
        // SAFETY: the call succeeded and wrote the context (`pctx` is not NULL).
        (unsafe { *pctx }) as u64
    } else {
        0
    };
    context_event(api, rc, dev, ctx, before);
    if ctx != 0 {
        guard::record(|| lifetime::primary_retained(dev, ctx));
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) -> CUresult {
    crate::note_entry!();
    let api = Api::cuDevicePrimaryCtxRelease_v2;
    if crate::real::resolve(api) == 0 {
        return super::forward::missing(api);
    }
    // The last reading through the context, in case this release is the one that ends it
    // (the CUDA runtime's own teardown at exit does this).
    guard::record(|| lifetime::before_primary_release(dev));
    let before = nvml_free(dev);
    let rc = forward!(api, unsafe extern "C" fn(CUdevice) -> CUresult, dev);
    context_event(api, rc, dev, 0, before);
    guard::record(|| lifetime::primary_released(dev, rc));
    rc
}

/// After a `cuCtxCreate`: its record, and free memory read through it (it is current now).
///
/// # Safety
/// `pctx` is the caller's out-pointer of the call that returned `rc`.
unsafe fn created(
    api: Api,
    rc: CUresult,
    pctx: *mut CUcontext,
    dev: CUdevice,
    before: Option<u64>,
) {
    let ctx = if rc == CUDA_SUCCESS && !pctx.is_null() {
        devices::context_on(dev);
        // SAFETY (caller): the call succeeded and wrote the context (`pctx` is not NULL).
        (unsafe { *pctx }) as u64
    } else {
        0
    };
    context_event(api, rc, dev, ctx, before);
    if rc == CUDA_SUCCESS {
        // cuCtxCreate makes the new context current: free memory can be read right away.
        guard::record(|| {
            samples::meminfo();
            lifetime::created(dev, ctx);
        });
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v2(
    pctx: *mut CUcontext,
    flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuCtxCreate_v2;
    let before = nvml_free(dev);
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut CUcontext, c_uint, CUdevice) -> CUresult,
        pctx,
        flags,
        dev
    );
    // SAFETY: `pctx` is the caller's out-pointer of the call just made.
    unsafe { created(api, rc, pctx, dev, before) };
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v3(
    pctx: *mut CUcontext,
    params: *mut c_void,
    num_params: c_int,
    flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuCtxCreate_v3;
    let before = nvml_free(dev);
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut CUcontext, *mut c_void, c_int, c_uint, CUdevice) -> CUresult,
        pctx,
        params,
        num_params,
        flags,
        dev
    );
    // SAFETY: `pctx` is the caller's out-pointer of the call just made.
    unsafe { created(api, rc, pctx, dev, before) };
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v4(
    pctx: *mut CUcontext,
    params: *mut c_void,
    flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuCtxCreate_v4;
    let before = nvml_free(dev);
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut CUcontext, *mut c_void, c_uint, CUdevice) -> CUresult,
        pctx,
        params,
        flags,
        dev
    );
    // SAFETY: `pctx` is the caller's out-pointer of the call just made.
    unsafe { created(api, rc, pctx, dev, before) };
    rc
}

/// A green context (CUDA 12.4+) is a context on `dev` too: noted, so that allocations made
/// through it are told their device (`crate::devices`).
#[no_mangle]
pub unsafe extern "C" fn cuGreenCtxCreate(
    phctx: *mut *mut c_void,
    desc: *mut c_void,
    dev: CUdevice,
    flags: c_uint,
) -> CUresult {
    let api = Api::cuGreenCtxCreate;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut *mut c_void, *mut c_void, CUdevice, c_uint) -> CUresult,
        phctx,
        desc,
        dev,
        flags
    );
    if rc == CUDA_SUCCESS {
        devices::context_on(dev);
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxDestroy_v2(ctx: CUcontext) -> CUresult {
    crate::note_entry!();
    let api = Api::cuCtxDestroy_v2;
    if crate::real::resolve(api) == 0 {
        return super::forward::missing(api);
    }
    let mut dev = -1;
    guard::record(|| dev = lifetime::before_destroy(ctx as u64));
    // NVML's free memory around the destroy, on the device the context was made on (the
    // books give its bytes back by what came back): known for the last context made there.
    let before = if dev >= 0 { nvml_free(dev) } else { None };
    let rc = forward!(api, unsafe extern "C" fn(CUcontext) -> CUresult, ctx);
    guard::record(|| lifetime::destroyed(ctx as u64, rc));
    if dev >= 0 {
        context_event(api, rc, dev, ctx as u64, before);
    } else {
        guard::record(|| {
            let mut e = recorder::event(Kind::Context, api);
            e.result = rc;
            e.handle = ctx as u64;
            e.owner = Owner::Context as u8;
            recorder::emit(&e, b"");
        });
    }
    rc
}
