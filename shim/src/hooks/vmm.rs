//! VMM: physical handles (create, retain, release), mappings, address reservations, and
//! memory imported from peers (shareable handles, IPC).
//!
//! Only `CU_MEM_LOCATION_TYPE_DEVICE` handles are VRAM; NCCL also creates host-NUMA ones.

#![allow(non_snake_case)]

use std::ffi::{c_uint, c_ulonglong, c_void};
use std::sync::atomic::AtomicUsize;

use vramledger_format::{Api, Kind, MemKind};

use super::forward::{forward, release, ticket, written};
use crate::ffi::*;
use crate::recorder::{self, Ticket};
use crate::{devices, guard, real, samples};

fn release_ticket(kind: Kind, api: Api, addr: u64, size: u64, handle: u64) -> Option<Ticket> {
    ticket(|t| {
        let mut e = recorder::event_on(t, kind, api);
        e.addr = addr;
        e.size = size;
        e.handle = handle;
        e
    })
}

type CreateFn = unsafe extern "C" fn(
    *mut CUmemGenericAllocationHandle,
    usize,
    *const CUmemAllocationProp,
    c_ulonglong,
) -> CUresult;

#[no_mangle]
pub unsafe extern "C" fn cuMemCreate(
    handle: *mut CUmemGenericAllocationHandle,
    size: usize,
    prop: *const CUmemAllocationProp,
    flags: c_ulonglong,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemCreate;
    let rc = forward!(api, CreateFn, handle, size, prop, flags);
    guard::record_on(|t| {
        let (mem, device) = if prop.is_null() {
            (MemKind::Device, -1)
        } else {
            // SAFETY: the caller's properties, which the driver just read.
            let loc = unsafe { (*prop).location };
            if loc.type_ == CU_MEM_LOCATION_TYPE_DEVICE {
                (MemKind::Device, loc.id)
            } else {
                (MemKind::HostPinned, -1)
            }
        };
        let kind = if rc == CUDA_SUCCESS {
            Kind::VmmCreate
        } else {
            Kind::AllocFailed
        };
        let mut e = recorder::event_on(t, kind, api);
        e.result = rc;
        e.handle = if rc == CUDA_SUCCESS {
            // SAFETY: the call succeeded and wrote the handle (or the pointer is NULL).
            unsafe { written(handle) }
        } else {
            0
        };
        e.size = size as u64;
        e.arg0 = size as u64;
        e.mem = mem as u8;
        e.device = device;
        recorder::attribute(t, &mut e, true);
        recorder::emit_on(Some(t), &mut e, b"");
        if rc != CUDA_SUCCESS && mem == MemKind::Device {
            samples::after_failed_allocation();
        }
    });
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemRetainAllocationHandle(
    handle: *mut CUmemGenericAllocationHandle,
    addr: *mut c_void,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemRetainAllocationHandle;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, *mut c_void) -> CUresult,
        handle,
        addr
    );
    if rc == CUDA_SUCCESS && !handle.is_null() {
        guard::record_on(|t| {
            let mut e = recorder::event_on(t, Kind::VmmRetain, api);
            // SAFETY: the call succeeded and wrote the handle (`handle` is not NULL).
            e.handle = unsafe { *handle };
            e.addr = addr as u64;
            recorder::emit_on(Some(t), &mut e, b"");
        });
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemRelease(handle: CUmemGenericAllocationHandle) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemRelease;
    release!(
        api,
        unsafe extern "C" fn(CUmemGenericAllocationHandle) -> CUresult,
        release_ticket(Kind::VmmRelease, api, 0, 0, handle),
        handle
    )
}

type MapFn = unsafe extern "C" fn(
    CUdeviceptr,
    usize,
    usize,
    CUmemGenericAllocationHandle,
    c_ulonglong,
) -> CUresult;

#[no_mangle]
pub unsafe extern "C" fn cuMemMap(
    ptr: CUdeviceptr,
    size: usize,
    offset: usize,
    handle: CUmemGenericAllocationHandle,
    flags: c_ulonglong,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemMap;
    let rc = forward!(api, MapFn, ptr, size, offset, handle, flags);
    if rc == CUDA_SUCCESS {
        guard::record_on(|t| {
            let mut e = recorder::event_on(t, Kind::VmmMap, api);
            e.addr = ptr;
            e.size = size as u64;
            e.handle = handle;
            e.arg0 = offset as u64;
            recorder::emit_on(Some(t), &mut e, b"");
        });
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemUnmap(ptr: CUdeviceptr, size: usize) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemUnmap;
    release!(
        api,
        unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult,
        release_ticket(Kind::VmmUnmap, api, ptr, size as u64, 0),
        ptr,
        size
    )
}

type ReserveFn =
    unsafe extern "C" fn(*mut CUdeviceptr, usize, usize, CUdeviceptr, c_ulonglong) -> CUresult;

#[no_mangle]
pub unsafe extern "C" fn cuMemAddressReserve(
    ptr: *mut CUdeviceptr,
    size: usize,
    alignment: usize,
    addr: CUdeviceptr,
    flags: c_ulonglong,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemAddressReserve;
    let rc = forward!(api, ReserveFn, ptr, size, alignment, addr, flags);
    if rc == CUDA_SUCCESS && !ptr.is_null() {
        guard::record_on(|t| {
            let mut e = recorder::event_on(t, Kind::VaReserve, api);
            // SAFETY: the call succeeded and wrote the address (`ptr` is not NULL).
            e.addr = unsafe { *ptr };
            e.size = size as u64;
            e.mem = MemKind::Virtual as u8;
            recorder::attribute(t, &mut e, true);
            recorder::emit_on(Some(t), &mut e, b"");
        });
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAddressFree(ptr: CUdeviceptr, size: usize) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemAddressFree;
    release!(
        api,
        unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult,
        release_ticket(Kind::VaFree, api, ptr, size as u64, 0),
        ptr,
        size
    )
}

#[no_mangle]
pub unsafe extern "C" fn cuMemImportFromShareableHandle(
    handle: *mut CUmemGenericAllocationHandle,
    os_handle: *mut c_void,
    handle_type: c_uint,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemImportFromShareableHandle;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, *mut c_void, c_uint) -> CUresult,
        handle,
        os_handle,
        handle_type
    );
    if rc == CUDA_SUCCESS && !handle.is_null() {
        guard::record_on(|t| {
            let mut e = recorder::event_on(t, Kind::VmmImport, api);
            // SAFETY: the call succeeded and wrote the handle (`handle` is not NULL).
            e.handle = unsafe { *handle };
            e.mem = MemKind::Peer as u8;
            recorder::attribute(t, &mut e, true);
            recorder::emit_on(Some(t), &mut e, b"");
        });
    }
    rc
}

/// The size of the allocation containing `ptr`, through the real driver.
fn range_size(ptr: CUdeviceptr) -> u64 {
    static F: AtomicUsize = AtomicUsize::new(0);
    let f = real::driver_fn(c"cuMemGetAddressRange_v2", &F);
    if f == 0 {
        return 0;
    }
    let (mut base, mut size) = (0u64, 0usize);
    // SAFETY: cuMemGetAddressRange_v2(CUdeviceptr*, size_t*, CUdeviceptr) of the real driver.
    let f: unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUdeviceptr) -> CUresult =
        // SAFETY: looked up under this very name, whose C signature this is.
        unsafe { std::mem::transmute(f) };
    // SAFETY: two locals for its answers.
    if unsafe { f(&mut base, &mut size, ptr) } == 0 {
        size as u64
    } else {
        0
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuIpcOpenMemHandle_v2(
    dptr: *mut CUdeviceptr,
    handle: CUipcMemHandle,
    flags: c_uint,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuIpcOpenMemHandle_v2;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut CUdeviceptr, CUipcMemHandle, c_uint) -> CUresult,
        dptr,
        handle,
        flags
    );
    if rc == CUDA_SUCCESS && !dptr.is_null() {
        guard::record_on(|t| {
            let mut e = recorder::event_on(t, Kind::VmmImport, api);
            // SAFETY: the call succeeded and wrote the address (`dptr` is not NULL).
            e.addr = unsafe { *dptr };
            // IPC opens have no handle of their own: the address stands for it.
            e.handle = e.addr;
            e.size = range_size(e.addr);
            e.mem = MemKind::Peer as u8;
            e.device = devices::current();
            recorder::attribute(t, &mut e, false);
            recorder::emit_on(Some(t), &mut e, b"");
        });
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuIpcCloseMemHandle(dptr: CUdeviceptr) -> CUresult {
    crate::note_entry!();
    let api = Api::cuIpcCloseMemHandle;
    release!(
        api,
        unsafe extern "C" fn(CUdeviceptr) -> CUresult,
        release_ticket(Kind::IpcClose, api, dptr, 1, 0),
        dptr
    )
}
