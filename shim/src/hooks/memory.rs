//! Device memory: the `cuMemAlloc` family, stream-ordered allocations and their pools.

#![allow(non_snake_case)]

use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::AtomicUsize;

use vramledger_format::{Api, Event, Kind, MemKind};

use super::{missing, real};
use crate::entry::real as realfns;
use crate::ffi::*;
use crate::guard;
use crate::recorder::{self, Ticket};

/// Records a finished `cuMemAlloc`-family call (success or failure) on the current device.
#[inline(always)]
fn allocated(api: Api, rc: CUresult, addr: u64, size: u64, requested: u64, mem: MemKind) {
    let kind = if rc == CUDA_SUCCESS {
        Kind::Alloc
    } else {
        Kind::AllocFailed
    };
    let mut e = recorder::event(kind, api);
    e.result = rc;
    e.addr = addr;
    e.size = size;
    e.arg0 = requested;
    e.mem = mem as u8;
    e.device = recorder::current_device();
    recorder::attribute(&mut e, false);
    recorder::emit(&e, b"");
    if rc != CUDA_SUCCESS {
        failed_allocation_context();
    }
}

/// After a failed allocation: free memory and the live books at that moment.
pub(crate) fn failed_allocation_context() {
    recorder::sample_meminfo();
    recorder::sample_nvml();
    recorder::write_live_books();
}

fn free_ticket(api: Api, dptr: CUdeviceptr) -> Option<Ticket> {
    if dptr == 0 {
        return None; // freeing NULL frees nothing (cuBLAS does it to initialise)
    }
    let mut t = None;
    guard::record(|| {
        let mut e = recorder::event(Kind::Free, api);
        e.addr = dptr;
        t = Some(Ticket::before(e));
    });
    t
}

fn finish(t: Option<Ticket>, rc: i32) {
    if let Some(t) = t {
        guard::record(|| t.finish(rc));
    }
}

unsafe fn out(p: *const CUdeviceptr) -> u64 {
    if p.is_null() {
        0
    } else {
        // SAFETY (caller): p came from the caller and the call succeeded.
        unsafe { *p }
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemAlloc_v2;
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(dptr, bytesize) };
    guard::record(|| {
        let addr = if rc == CUDA_SUCCESS {
            unsafe { out(dptr) }
        } else {
            0
        };
        allocated(
            api,
            rc,
            addr,
            bytesize as u64,
            bytesize as u64,
            MemKind::Device,
        )
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
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, usize, usize, c_uint) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(dptr, pitch, width, height, element_size) };
    guard::record(|| {
        let requested = (width as u64).saturating_mul(height as u64);
        let (addr, size) = if rc == CUDA_SUCCESS && !pitch.is_null() {
            (
                unsafe { out(dptr) },
                unsafe { *pitch } as u64 * height as u64,
            )
        } else {
            (0, requested)
        };
        allocated(api, rc, addr, size, requested, MemKind::Device)
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
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(*mut CUdeviceptr, usize, c_uint) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(dptr, bytesize, flags) };
    guard::record(|| {
        let addr = if rc == CUDA_SUCCESS {
            unsafe { out(dptr) }
        } else {
            0
        };
        allocated(
            api,
            rc,
            addr,
            bytesize as u64,
            bytesize as u64,
            MemKind::Managed,
        )
    });
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFree_v2(dptr: CUdeviceptr) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemFree_v2;
    let Some(f) = real!(api, unsafe extern "C" fn(CUdeviceptr) -> CUresult) else {
        return missing(api);
    };
    let t = free_ticket(api, dptr);
    let rc = unsafe { f(dptr) };
    finish(t, rc);
    rc
}

// ---- stream-ordered allocations ----

type AllocAsyncFn = unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> CUresult;
type AllocFromPoolFn =
    unsafe extern "C" fn(*mut CUdeviceptr, usize, CUmemoryPool, CUstream) -> CUresult;
type FreeAsyncFn = unsafe extern "C" fn(CUdeviceptr, CUstream) -> CUresult;

/// Samples a pool's physical (reserved) and used bytes through the real driver.
pub(crate) fn sample_pool(pool: CUmemoryPool, device: i32, template: &Event) {
    static F: AtomicUsize = AtomicUsize::new(0);
    let f = realfns::driver_fn(c"cuMemPoolGetAttribute", &F);
    if f == 0 || pool.is_null() {
        return;
    }
    // SAFETY: cuMemPoolGetAttribute(CUmemoryPool, CUmemPool_attribute, void*).
    let f: unsafe extern "C" fn(CUmemoryPool, c_int, *mut c_void) -> CUresult =
        unsafe { std::mem::transmute(f) };
    let (mut reserved, mut used) = (0u64, 0u64);
    let ok = unsafe {
        f(
            pool,
            CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
            (&mut reserved as *mut u64).cast(),
        ) == 0
            && f(
                pool,
                CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
                (&mut used as *mut u64).cast(),
            ) == 0
    };
    if !ok {
        return;
    }
    let mut e = recorder::event(Kind::PoolSample, Api::VramledgerSample);
    e.handle = pool as u64;
    e.device = device;
    e.owner = template.owner;
    e.module = template.module;
    e.flags = template.flags;
    e.arg0 = reserved;
    e.arg1 = used;
    recorder::emit(&e, b"");
}

fn device_pool(device: i32) -> CUmemoryPool {
    static F: AtomicUsize = AtomicUsize::new(0);
    let f = realfns::driver_fn(c"cuDeviceGetMemPool", &F);
    if f == 0 || device < 0 {
        return std::ptr::null_mut();
    }
    let mut pool: CUmemoryPool = std::ptr::null_mut();
    // SAFETY: cuDeviceGetMemPool(CUmemoryPool*, CUdevice).
    let f: unsafe extern "C" fn(*mut CUmemoryPool, CUdevice) -> CUresult =
        unsafe { std::mem::transmute(f) };
    if unsafe { f(&mut pool, device) } == 0 {
        pool
    } else {
        std::ptr::null_mut()
    }
}

fn async_allocated(
    api: Api,
    rc: CUresult,
    dptr: *mut CUdeviceptr,
    size: usize,
    pool: CUmemoryPool,
) {
    let kind = if rc == CUDA_SUCCESS {
        Kind::Alloc
    } else {
        Kind::AllocFailed
    };
    let mut e = recorder::event(kind, api);
    e.result = rc;
    e.addr = if rc == CUDA_SUCCESS {
        unsafe { out(dptr) }
    } else {
        0
    };
    e.size = size as u64;
    e.arg0 = size as u64;
    e.device = recorder::current_device();
    recorder::attribute(&mut e, false);
    let pool = if pool.is_null() {
        device_pool(e.device)
    } else {
        pool
    };
    e.handle = pool as u64;
    recorder::emit(&e, b"");
    sample_pool(pool, e.device, &e);
    if rc != CUDA_SUCCESS {
        failed_allocation_context();
    }
}

unsafe fn alloc_async(api: Api, dptr: *mut CUdeviceptr, size: usize, stream: CUstream) -> CUresult {
    let Some(f) = real!(api, AllocAsyncFn) else {
        return missing(api);
    };
    let rc = unsafe { f(dptr, size, stream) };
    guard::record(|| async_allocated(api, rc, dptr, size, std::ptr::null_mut()));
    rc
}

unsafe fn alloc_from_pool(
    api: Api,
    dptr: *mut CUdeviceptr,
    size: usize,
    pool: CUmemoryPool,
    stream: CUstream,
) -> CUresult {
    let Some(f) = real!(api, AllocFromPoolFn) else {
        return missing(api);
    };
    let rc = unsafe { f(dptr, size, pool, stream) };
    guard::record(|| async_allocated(api, rc, dptr, size, pool));
    rc
}

unsafe fn free_async(api: Api, dptr: CUdeviceptr, stream: CUstream) -> CUresult {
    let Some(f) = real!(api, FreeAsyncFn) else {
        return missing(api);
    };
    let t = free_ticket(api, dptr);
    let rc = unsafe { f(dptr, stream) };
    finish(t, rc);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUstream,
) -> CUresult {
    crate::note_entry!();
    unsafe { alloc_async(Api::cuMemAllocAsync, dptr, size, stream) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocAsync_ptsz(
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUstream,
) -> CUresult {
    crate::note_entry!();
    unsafe { alloc_async(Api::cuMemAllocAsync_ptsz, dptr, size, stream) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocFromPoolAsync(
    dptr: *mut CUdeviceptr,
    size: usize,
    pool: CUmemoryPool,
    stream: CUstream,
) -> CUresult {
    crate::note_entry!();
    unsafe { alloc_from_pool(Api::cuMemAllocFromPoolAsync, dptr, size, pool, stream) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocFromPoolAsync_ptsz(
    dptr: *mut CUdeviceptr,
    size: usize,
    pool: CUmemoryPool,
    stream: CUstream,
) -> CUresult {
    crate::note_entry!();
    unsafe { alloc_from_pool(Api::cuMemAllocFromPoolAsync_ptsz, dptr, size, pool, stream) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeAsync(dptr: CUdeviceptr, stream: CUstream) -> CUresult {
    crate::note_entry!();
    unsafe { free_async(Api::cuMemFreeAsync, dptr, stream) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeAsync_ptsz(dptr: CUdeviceptr, stream: CUstream) -> CUresult {
    crate::note_entry!();
    unsafe { free_async(Api::cuMemFreeAsync_ptsz, dptr, stream) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemPoolCreate(
    pool: *mut CUmemoryPool,
    props: *const CUmemPoolProps,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemPoolCreate;
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(*mut CUmemoryPool, *const CUmemPoolProps) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(pool, props) };
    if rc == CUDA_SUCCESS && !pool.is_null() {
        guard::record(|| {
            let mut e = recorder::event(Kind::PoolCreate, api);
            e.handle = unsafe { *pool } as u64;
            if !props.is_null() {
                let loc = unsafe { (*props).location };
                if loc.type_ == CU_MEM_LOCATION_TYPE_DEVICE {
                    e.device = loc.id;
                }
            }
            recorder::attribute(&mut e, false);
            recorder::emit(&e, b"");
        });
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemPoolDestroy(pool: CUmemoryPool) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemPoolDestroy;
    let Some(f) = real!(api, unsafe extern "C" fn(CUmemoryPool) -> CUresult) else {
        return missing(api);
    };
    let mut t = None;
    guard::record(|| {
        let mut e = recorder::event(Kind::PoolDestroy, api);
        e.handle = pool as u64;
        t = Some(Ticket::before(e));
    });
    let rc = unsafe { f(pool) };
    finish(t, rc);
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemPoolTrimTo(pool: CUmemoryPool, min_bytes_to_keep: usize) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemPoolTrimTo;
    let Some(f) = real!(api, unsafe extern "C" fn(CUmemoryPool, usize) -> CUresult) else {
        return missing(api);
    };
    let rc = unsafe { f(pool, min_bytes_to_keep) };
    if rc == CUDA_SUCCESS {
        guard::record(|| {
            let mut e = recorder::event(Kind::PoolSample, api);
            recorder::attribute(&mut e, false);
            let device = recorder::current_device();
            sample_pool(pool, device, &e);
        });
    }
    rc
}
