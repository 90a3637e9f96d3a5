//! Pinned host memory: recorded in books of its own, never as VRAM.

#![allow(non_snake_case)]

use std::ffi::{c_uint, c_void};

use vramledger_format::{Api, Kind, MemKind};

use super::{missing, real};
use crate::ffi::*;
use crate::guard;
use crate::recorder::{self, Ticket};

fn host_taken(api: Api, addr: *mut c_void, size: usize) {
    guard::record(|| {
        let mut e = recorder::event(Kind::HostAlloc, api);
        e.addr = addr as u64;
        e.size = size as u64;
        e.mem = MemKind::HostPinned as u8;
        recorder::attribute(&mut e, false);
        recorder::emit(&e, b"");
    });
}

unsafe fn host_released(api: Api, addr: *mut c_void, call: impl FnOnce() -> CUresult) -> CUresult {
    let mut t = None;
    guard::record(|| {
        let mut e = recorder::event(Kind::HostFree, api);
        e.addr = addr as u64;
        e.mem = MemKind::HostPinned as u8;
        t = Some(Ticket::before(e));
    });
    let rc = call();
    if let Some(t) = t {
        guard::record(|| t.finish(rc));
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemHostAlloc;
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(pp, size, flags) };
    if rc == CUDA_SUCCESS && !pp.is_null() {
        host_taken(api, unsafe { *pp }, size);
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, size: usize) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemAllocHost_v2;
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(*mut *mut c_void, usize) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(pp, size) };
    if rc == CUDA_SUCCESS && !pp.is_null() {
        host_taken(api, unsafe { *pp }, size);
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemFreeHost;
    let Some(f) = real!(api, unsafe extern "C" fn(*mut c_void) -> CUresult) else {
        return missing(api);
    };
    unsafe { host_released(api, p, || f(p)) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostRegister_v2(
    p: *mut c_void,
    size: usize,
    flags: c_uint,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemHostRegister_v2;
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(*mut c_void, usize, c_uint) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(p, size, flags) };
    if rc == CUDA_SUCCESS {
        host_taken(api, p, size);
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostUnregister(p: *mut c_void) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemHostUnregister;
    let Some(f) = real!(api, unsafe extern "C" fn(*mut c_void) -> CUresult) else {
        return missing(api);
    };
    unsafe { host_released(api, p, || f(p)) }
}
