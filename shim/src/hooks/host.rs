//! Pinned host memory: recorded in books of its own, never as VRAM.

#![allow(non_snake_case)]

use std::ffi::{c_uint, c_void};

use vramledger_format::{Api, Kind, MemKind};

use super::forward::{forward, release, ticket};
use crate::ffi::*;
use crate::guard;
use crate::recorder::{self, Ticket};

fn host_taken(api: Api, addr: *mut c_void, size: usize) {
    guard::record_on(|t| {
        let mut e = recorder::event_on(t, Kind::HostAlloc, api);
        e.addr = addr as u64;
        e.size = size as u64;
        e.mem = MemKind::HostPinned as u8;
        recorder::attribute(t, &mut e, false);
        recorder::emit_on(Some(t), &mut e, b"");
    });
}

fn host_ticket(api: Api, addr: *mut c_void) -> Option<Ticket> {
    ticket(|t| {
        let mut e = recorder::event_on(t, Kind::HostFree, api);
        e.addr = addr as u64;
        e.mem = MemKind::HostPinned as u8;
        e
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemHostAlloc;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CUresult,
        pp,
        size,
        flags
    );
    if rc == CUDA_SUCCESS && !pp.is_null() {
        // SAFETY: the call succeeded and wrote the pointer (`pp` is not NULL).
        host_taken(api, unsafe { *pp }, size);
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, size: usize) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemAllocHost_v2;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut *mut c_void, usize) -> CUresult,
        pp,
        size
    );
    if rc == CUDA_SUCCESS && !pp.is_null() {
        // SAFETY: the call succeeded and wrote the pointer (`pp` is not NULL).
        host_taken(api, unsafe { *pp }, size);
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemFreeHost;
    release!(
        api,
        unsafe extern "C" fn(*mut c_void) -> CUresult,
        host_ticket(api, p),
        p
    )
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostRegister_v2(
    p: *mut c_void,
    size: usize,
    flags: c_uint,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemHostRegister_v2;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut c_void, usize, c_uint) -> CUresult,
        p,
        size,
        flags
    );
    if rc == CUDA_SUCCESS {
        host_taken(api, p, size);
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostUnregister(p: *mut c_void) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemHostUnregister;
    release!(
        api,
        unsafe extern "C" fn(*mut c_void) -> CUresult,
        host_ticket(api, p),
        p
    )
}
