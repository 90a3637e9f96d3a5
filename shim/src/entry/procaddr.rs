//! `cuGetProcAddress` and `cuGetProcAddress_v2`: call the real one with the caller's
//! exact arguments, then route the returned pointer by identity.
//!
//! The driver hands out its exported, versioned functions (`cuMemAlloc` →
//! `cuMemAlloc_v2`, `cuMemAllocAsync` with the per-thread flag → `cuMemAllocAsync_ptsz`,
//! `cuCtxCreate` → `_v2`/`_v3`/`_v4` by version), so a table built once from the real
//! library's versioned names identifies every pointer it returns, and the requested
//! version and per-thread-stream flag are honoured by construction. Asking for
//! `"cuGetProcAddress"` itself returns vramledger's wrapper, so every later lookup made
//! through that pointer is routed too (cudart works this way).

#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use vramledger_format::Api;

use super::exports;
use crate::ffi::*;
use crate::guard;
use crate::hooks::forward::forward;
use crate::real;

type GpaV1 = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CUresult;
type GpaV2 =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CUresult;

static TABLE_FILLED: AtomicBool = AtomicBool::new(false);
/// What the driver returned for "cuGetProcAddress" when that was no exported function
/// (driver 580 does so for version 11000): wrapped by [`private_v1`]/[`private_v2`].
static PRIVATE_V1: AtomicUsize = AtomicUsize::new(0);
static PRIVATE_V2: AtomicUsize = AtomicUsize::new(0);

/// This file's own hooks: the two `cuGetProcAddress` versions.
pub fn own(api: Api) -> Option<usize> {
    match api {
        Api::cuGetProcAddress => Some(cuGetProcAddress as *const () as usize),
        Api::cuGetProcAddress_v2 => Some(cuGetProcAddress_v2 as *const () as usize),
        _ => None,
    }
}

/// The hook of any entry point: this file's own, or the one the export table lists.
pub fn hook_of(api: Api) -> usize {
    own(api).unwrap_or_else(|| exports::hook_addr(api))
}

fn claim(slot: &AtomicUsize, p: usize) -> bool {
    match slot.compare_exchange(0, p, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => true,
        Err(cur) => cur == p,
    }
}

/// Replaces `*pfn` with the matching hook, if the driver's pointer is one vramledger wraps.
unsafe fn route(symbol: *const c_char, pfn: *mut *mut c_void, version: c_int) {
    if pfn.is_null() || symbol.is_null() {
        return;
    }
    // SAFETY: the real call succeeded and wrote *pfn.
    let p = unsafe { *pfn } as usize;
    if p == 0 || crate::config::disabled() {
        return;
    }
    if !TABLE_FILLED.swap(true, Ordering::AcqRel) {
        real::fill_driver_table();
    }
    // SAFETY: cuGetProcAddress's contract: a NUL-terminated name.
    let name = unsafe { CStr::from_ptr(symbol) }.to_bytes();
    let replacement = if name == b"cuGetProcAddress" {
        if p == real::known(Api::cuGetProcAddress_v2) {
            cuGetProcAddress_v2 as *const () as usize
        } else if p == real::known(Api::cuGetProcAddress) {
            cuGetProcAddress as *const () as usize
        } else if version >= 12000 {
            if claim(&PRIVATE_V2, p) {
                private_v2 as *const () as usize
            } else {
                0
            }
        } else if claim(&PRIVATE_V1, p) {
            private_v1 as *const () as usize
        } else {
            0
        }
    } else {
        match real::api_of_real(p) {
            Some(api) => hook_of(api),
            None => 0,
        }
    };
    if replacement != 0 {
        // SAFETY: pfn is the caller's out-pointer, valid for writing.
        unsafe { *pfn = replacement as *mut c_void };
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> CUresult {
    let api = Api::cuGetProcAddress;
    let rc = forward!(api, GpaV1, symbol, pfn, version, flags);
    if rc == CUDA_SUCCESS {
        // SAFETY: the caller's arguments of the lookup that just succeeded.
        guard::record(|| unsafe { route(symbol, pfn, version) });
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CUresult {
    let api = Api::cuGetProcAddress_v2;
    let rc = forward!(api, GpaV2, symbol, pfn, version, flags, status);
    if rc == CUDA_SUCCESS {
        // SAFETY: the caller's arguments of the lookup that just succeeded.
        guard::record(|| unsafe { route(symbol, pfn, version) });
    }
    rc
}

unsafe extern "C" fn private_v1(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> CUresult {
    // SAFETY: only handed out after PRIVATE_V1 was set to the driver's 4-argument function.
    let f: GpaV1 = unsafe { std::mem::transmute(PRIVATE_V1.load(Ordering::Acquire)) };
    // SAFETY: the caller's arguments, passed on to the driver's function unchanged.
    let rc = unsafe { f(symbol, pfn, version, flags) };
    if rc == CUDA_SUCCESS {
        // SAFETY: the caller's arguments of the lookup that just succeeded.
        guard::record(|| unsafe { route(symbol, pfn, version) });
    }
    rc
}

unsafe extern "C" fn private_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CUresult {
    // SAFETY: only handed out after PRIVATE_V2 was set to the driver's 5-argument function.
    let f: GpaV2 = unsafe { std::mem::transmute(PRIVATE_V2.load(Ordering::Acquire)) };
    // SAFETY: the caller's arguments, passed on to the driver's function unchanged.
    let rc = unsafe { f(symbol, pfn, version, flags, status) };
    if rc == CUDA_SUCCESS {
        // SAFETY: the caller's arguments of the lookup that just succeeded.
        guard::record(|| unsafe { route(symbol, pfn, version) });
    }
    rc
}
