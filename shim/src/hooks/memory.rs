//! Device memory: the `cuMemAlloc` family and `cuMemFree`.

#![allow(non_snake_case)]

use std::ffi::c_uint;

use vramledger_format::{Api, Kind, MemKind};

use super::forward::{forward, release, ticket, written};
use crate::ffi::*;
use crate::thread::Thread;
use crate::{devices, guard, recorder, samples};

/// Records a finished `cuMemAlloc`-family call (success or failure).
#[inline(always)]
fn allocated(t: &Thread, api: Api, rc: CUresult, alloc: (u64, u64, u64), mem: MemKind) {
    let (addr, size, requested) = alloc;
    let kind = if rc == CUDA_SUCCESS {
        Kind::Alloc
    } else {
        Kind::AllocFailed
    };
    let mut e = recorder::event_on(t, kind, api);
    e.result = rc;
    e.addr = addr;
    e.size = size;
    e.arg0 = requested;
    e.mem = mem as u8;
    e.device = devices::of_call(t, rc);
    recorder::attribute(t, &mut e, false);
    recorder::emit_on(Some(t), &mut e, b"");
    if rc != CUDA_SUCCESS {
        samples::after_failed_allocation();
    }
}

/// Before a free of `dptr`: its ticket (none for NULL, which frees nothing: cuBLAS does it
/// to initialise).
#[inline(always)]
pub(crate) fn free_ticket(api: Api, dptr: CUdeviceptr) -> Option<recorder::Ticket> {
    if dptr == 0 {
        return None;
    }
    ticket(|t| {
        let mut e = recorder::event_on(t, Kind::Free, api);
        e.addr = dptr;
        e
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemAlloc_v2;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult,
        dptr,
        bytesize
    );
    guard::record_on(|t| {
        let addr = if rc == CUDA_SUCCESS {
            // SAFETY: the call succeeded and wrote the caller's out-pointer (or it is NULL).
            unsafe { written(dptr) }
        } else {
            0
        };
        let size = bytesize as u64;
        allocated(t, api, rc, (addr, size, size), MemKind::Device)
    });
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocPitch_v2(
    dptr: *mut CUdeviceptr,
    pitch: *mut usize,
    width: usize,
    height: usize,
    element_size: c_uint,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemAllocPitch_v2;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, usize, usize, c_uint) -> CUresult,
        dptr,
        pitch,
        width,
        height,
        element_size
    );
    guard::record_on(|t| {
        let requested = (width as u64).saturating_mul(height as u64);
        let (addr, size) = if rc == CUDA_SUCCESS && !pitch.is_null() {
            // SAFETY: the call succeeded and wrote both out-pointers (`pitch` is not NULL).
            let (a, p) = unsafe { (written(dptr), *pitch) };
            (a, p as u64 * height as u64)
        } else {
            (0, requested)
        };
        allocated(t, api, rc, (addr, size, requested), MemKind::Device)
    });
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocManaged(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    flags: c_uint,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemAllocManaged;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut CUdeviceptr, usize, c_uint) -> CUresult,
        dptr,
        bytesize,
        flags
    );
    guard::record_on(|t| {
        let addr = if rc == CUDA_SUCCESS {
            // SAFETY: the call succeeded and wrote the caller's out-pointer (or it is NULL).
            unsafe { written(dptr) }
        } else {
            0
        };
        let size = bytesize as u64;
        allocated(t, api, rc, (addr, size, size), MemKind::Managed)
    });
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFree_v2(dptr: CUdeviceptr) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemFree_v2;
    release!(
        api,
        unsafe extern "C" fn(CUdeviceptr) -> CUresult,
        free_ticket(api, dptr),
        dptr
    )
}
