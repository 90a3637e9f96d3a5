//! VMM: physical handles (create, retain, release), mappings, address reservations, and
//! memory imported from peers (shareable handles, IPC).
//!
//! Only `CU_MEM_LOCATION_TYPE_DEVICE` handles are VRAM; NCCL also creates host-NUMA ones.

#![allow(non_snake_case)]

use std::ffi::{c_uint, c_ulonglong, c_void};
use std::sync::atomic::AtomicUsize;

use vramledger_format::{Api, Kind, MemKind};

use super::memory::failed_allocation_context;
use super::{missing, real};
use crate::entry::real as realfns;
use crate::ffi::*;
use crate::guard;
use crate::recorder::{self, Ticket};

fn release_ticket(kind: Kind, api: Api, addr: u64, size: u64, handle: u64) -> Option<Ticket> {
    let mut t = None;
    guard::record(|| {
        let mut e = recorder::event(kind, api);
        e.addr = addr;
        e.size = size;
        e.handle = handle;
        t = Some(Ticket::before(e));
    });
    t
}

fn finish(t: Option<Ticket>, rc: i32) {
    if let Some(t) = t {
        guard::record(|| t.finish(rc));
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemCreate(
    handle: *mut CUmemGenericAllocationHandle,
    size: usize,
    prop: *const CUmemAllocationProp,
    flags: c_ulonglong,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemCreate;
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(
            *mut CUmemGenericAllocationHandle,
            usize,
            *const CUmemAllocationProp,
            c_ulonglong,
        ) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(handle, size, prop, flags) };
    guard::record(|| {
        let (mem, device) = if prop.is_null() {
            (MemKind::Device, -1)
        } else {
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
        let mut e = recorder::event(kind, api);
        e.result = rc;
        e.handle = if rc == CUDA_SUCCESS && !handle.is_null() {
            unsafe { *handle }
        } else {
            0
        };
        e.size = size as u64;
        e.arg0 = size as u64;
        e.mem = mem as u8;
        e.device = device;
        recorder::attribute(&mut e, true);
        recorder::emit(&e, b"");
        if rc != CUDA_SUCCESS && mem == MemKind::Device {
            failed_allocation_context();
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
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, *mut c_void) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(handle, addr) };
    if rc == CUDA_SUCCESS && !handle.is_null() {
        guard::record(|| {
            let mut e = recorder::event(Kind::VmmRetain, api);
            e.handle = unsafe { *handle };
            e.addr = addr as u64;
            recorder::emit(&e, b"");
        });
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemRelease(handle: CUmemGenericAllocationHandle) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemRelease;
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(CUmemGenericAllocationHandle) -> CUresult
    ) else {
        return missing(api);
    };
    let t = release_ticket(Kind::VmmRelease, api, 0, 0, handle);
    let rc = unsafe { f(handle) };
    finish(t, rc);
    rc
}

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
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(
            CUdeviceptr,
            usize,
            usize,
            CUmemGenericAllocationHandle,
            c_ulonglong,
        ) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(ptr, size, offset, handle, flags) };
    if rc == CUDA_SUCCESS {
        guard::record(|| {
            let mut e = recorder::event(Kind::VmmMap, api);
            e.addr = ptr;
            e.size = size as u64;
            e.handle = handle;
            e.arg0 = offset as u64;
            recorder::emit(&e, b"");
        });
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemUnmap(ptr: CUdeviceptr, size: usize) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemUnmap;
    let Some(f) = real!(api, unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult) else {
        return missing(api);
    };
    let t = release_ticket(Kind::VmmUnmap, api, ptr, size as u64, 0);
    let rc = unsafe { f(ptr, size) };
    finish(t, rc);
    rc
}

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
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(*mut CUdeviceptr, usize, usize, CUdeviceptr, c_ulonglong) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(ptr, size, alignment, addr, flags) };
    if rc == CUDA_SUCCESS && !ptr.is_null() {
        guard::record(|| {
            let mut e = recorder::event(Kind::VaReserve, api);
            e.addr = unsafe { *ptr };
            e.size = size as u64;
            e.mem = MemKind::Virtual as u8;
            recorder::attribute(&mut e, true);
            recorder::emit(&e, b"");
        });
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAddressFree(ptr: CUdeviceptr, size: usize) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemAddressFree;
    let Some(f) = real!(api, unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult) else {
        return missing(api);
    };
    let t = release_ticket(Kind::VaFree, api, ptr, size as u64, 0);
    let rc = unsafe { f(ptr, size) };
    finish(t, rc);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemImportFromShareableHandle(
    handle: *mut CUmemGenericAllocationHandle,
    os_handle: *mut c_void,
    handle_type: c_uint,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemImportFromShareableHandle;
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, *mut c_void, c_uint) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(handle, os_handle, handle_type) };
    if rc == CUDA_SUCCESS && !handle.is_null() {
        guard::record(|| {
            let mut e = recorder::event(Kind::VmmImport, api);
            e.handle = unsafe { *handle };
            e.mem = MemKind::Peer as u8;
            recorder::attribute(&mut e, true);
            recorder::emit(&e, b"");
        });
    }
    rc
}

/// The size of the allocation containing `ptr`, through the real driver.
fn range_size(ptr: CUdeviceptr) -> u64 {
    static F: AtomicUsize = AtomicUsize::new(0);
    let f = realfns::driver_fn(c"cuMemGetAddressRange_v2", &F);
    if f == 0 {
        return 0;
    }
    let (mut base, mut size) = (0u64, 0usize);
    // SAFETY: cuMemGetAddressRange_v2(CUdeviceptr*, size_t*, CUdeviceptr).
    let f: unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUdeviceptr) -> CUresult =
        unsafe { std::mem::transmute(f) };
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
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(*mut CUdeviceptr, CUipcMemHandle, c_uint) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(dptr, handle, flags) };
    if rc == CUDA_SUCCESS && !dptr.is_null() {
        guard::record(|| {
            let mut e = recorder::event(Kind::VmmImport, api);
            e.addr = unsafe { *dptr };
            // IPC opens have no handle of their own: the address stands for it.
            e.handle = e.addr;
            e.size = range_size(e.addr);
            e.mem = MemKind::Peer as u8;
            e.device = recorder::current_device();
            recorder::attribute(&mut e, false);
            recorder::emit(&e, b"");
        });
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuIpcCloseMemHandle(dptr: CUdeviceptr) -> CUresult {
    crate::note_entry!();
    let api = Api::cuIpcCloseMemHandle;
    let Some(f) = real!(api, unsafe extern "C" fn(CUdeviceptr) -> CUresult) else {
        return missing(api);
    };
    let t = release_ticket(Kind::IpcClose, api, dptr, 1, 0);
    let rc = unsafe { f(dptr) };
    finish(t, rc);
    rc
}
