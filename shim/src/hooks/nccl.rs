//! NCCL's public memory API. Registrations are edges on existing memory, never new
//! memory; `ncclMemAlloc`'s bytes are counted once, at the driver (its `cuMemCreate` or
//! `cuMemAlloc` comes from libnccl and is owned by NCCL), and recorded here as an edge
//! that says which buffer the caller received.

#![allow(non_snake_case)]

use std::ffi::{c_int, c_void};

use vramledger_format::{Api, Kind, Owner};

use super::forward::forward;
use crate::ffi::NcclResult;
use crate::{guard, recorder};

fn edge(kind: Kind, api: Api, rc: NcclResult, addr: u64, size: u64, comm: u64, handle: u64) {
    guard::record_on(|t| {
        let mut e = recorder::event_on(t, kind, api);
        e.result = rc;
        e.addr = addr;
        e.size = size;
        e.arg0 = comm;
        e.handle = handle;
        e.owner = Owner::Nccl as u8;
        if kind == Kind::Register {
            let mut probe = e.clone();
            recorder::attribute(t, &mut probe, false);
            e.module = probe.module;
        }
        recorder::emit_on(Some(t), &mut e, b"");
    });
}

#[no_mangle]
pub unsafe extern "C" fn ncclMemAlloc(ptr: *mut *mut c_void, size: usize) -> NcclResult {
    crate::note_entry!();
    let api = Api::ncclMemAlloc;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut *mut c_void, usize) -> NcclResult,
        ptr,
        size
    );
    if rc == 0 && !ptr.is_null() {
        // SAFETY: the call succeeded and wrote the buffer's address (`ptr` is not NULL).
        let addr = unsafe { *ptr } as u64;
        edge(Kind::Register, api, rc, addr, size as u64, 0, 0);
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn ncclMemFree(ptr: *mut c_void) -> NcclResult {
    crate::note_entry!();
    let api = Api::ncclMemFree;
    let rc = forward!(api, unsafe extern "C" fn(*mut c_void) -> NcclResult, ptr);
    edge(Kind::Deregister, api, rc, ptr as u64, 0, 0, 0);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommRegister(
    comm: *mut c_void,
    buff: *mut c_void,
    size: usize,
    handle: *mut *mut c_void,
) -> NcclResult {
    crate::note_entry!();
    let api = Api::ncclCommRegister;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut c_void, *mut c_void, usize, *mut *mut c_void) -> NcclResult,
        comm,
        buff,
        size,
        handle
    );
    if rc == 0 {
        let h = if handle.is_null() {
            0
        } else {
            // SAFETY: the call succeeded and wrote the handle (`handle` is not NULL).
            (unsafe { *handle }) as u64
        };
        edge(
            Kind::Register,
            api,
            rc,
            buff as u64,
            size as u64,
            comm as u64,
            h,
        );
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommDeregister(comm: *mut c_void, handle: *mut c_void) -> NcclResult {
    crate::note_entry!();
    let api = Api::ncclCommDeregister;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut c_void, *mut c_void) -> NcclResult,
        comm,
        handle
    );
    edge(Kind::Deregister, api, rc, 0, 0, comm as u64, handle as u64);
    rc
}

type WindowRegisterFn =
    unsafe extern "C" fn(*mut c_void, *mut c_void, usize, *mut *mut c_void, c_int) -> NcclResult;

#[no_mangle]
pub unsafe extern "C" fn ncclCommWindowRegister(
    comm: *mut c_void,
    buff: *mut c_void,
    size: usize,
    win: *mut *mut c_void,
    win_flags: c_int,
) -> NcclResult {
    crate::note_entry!();
    let api = Api::ncclCommWindowRegister;
    let rc = forward!(api, WindowRegisterFn, comm, buff, size, win, win_flags);
    if rc == 0 {
        let h = if win.is_null() {
            0
        } else {
            // SAFETY: the call succeeded and wrote the window (`win` is not NULL).
            (unsafe { *win }) as u64
        };
        edge(
            Kind::Register,
            api,
            rc,
            buff as u64,
            size as u64,
            comm as u64,
            h,
        );
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommWindowDeregister(
    comm: *mut c_void,
    win: *mut c_void,
) -> NcclResult {
    crate::note_entry!();
    let api = Api::ncclCommWindowDeregister;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut c_void, *mut c_void) -> NcclResult,
        comm,
        win
    );
    edge(Kind::Deregister, api, rc, 0, 0, comm as u64, win as u64);
    rc
}
