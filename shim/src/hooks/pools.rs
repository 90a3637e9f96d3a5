//! Stream-ordered allocations and their pools: per-call sizes are requests served from a
//! pool, so each allocation is followed by a sample of the pool's physical (reserved) bytes.

#![allow(non_snake_case)]

use std::ffi::{c_int, c_void};
use std::sync::atomic::AtomicUsize;

use vramledger_format::{Api, Event, Kind};

use super::forward::{forward, release, ticket, written};
use super::memory::free_ticket;
use crate::ffi::*;
use crate::thread::Thread;
use crate::{devices, guard, real, recorder, samples};

/// Samples a pool's physical (reserved) and used bytes through the real driver.
pub(crate) fn sample_pool(pool: CUmemoryPool, device: i32, template: &Event) {
    static F: AtomicUsize = AtomicUsize::new(0);
    let f = real::driver_fn(c"cuMemPoolGetAttribute", &F);
    if f == 0 || pool.is_null() {
        return;
    }
    // SAFETY: cuMemPoolGetAttribute(CUmemoryPool, CUmemPool_attribute, void*) of the real
    // driver.
    let f: unsafe extern "C" fn(CUmemoryPool, c_int, *mut c_void) -> CUresult =
        // SAFETY: looked up under this very name, whose C signature this is.
        unsafe { std::mem::transmute(f) };
    let (mut reserved, mut used) = (0u64, 0u64);
    // SAFETY: a pool handle the program just used, and two locals of the attributes' type
    // (cuuint64_t).
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
    let f = real::driver_fn(c"cuDeviceGetMemPool", &F);
    if f == 0 || device < 0 {
        return std::ptr::null_mut();
    }
    let mut pool: CUmemoryPool = std::ptr::null_mut();
    // SAFETY: cuDeviceGetMemPool(CUmemoryPool*, CUdevice) of the real driver, into a local.
    let f: unsafe extern "C" fn(*mut CUmemoryPool, CUdevice) -> CUresult =
        // SAFETY: looked up under this very name, whose C signature this is.
        unsafe { std::mem::transmute(f) };
    // SAFETY: as above.
    if unsafe { f(&mut pool, device) } == 0 {
        pool
    } else {
        std::ptr::null_mut()
    }
}

fn async_allocated(
    t: &Thread,
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
    let mut e = recorder::event_on(t, kind, api);
    e.result = rc;
    e.addr = if rc == CUDA_SUCCESS {
        // SAFETY: the call succeeded and wrote the caller's out-pointer (or it is NULL).
        unsafe { written(dptr) }
    } else {
        0
    };
    e.size = size as u64;
    e.arg0 = size as u64;
    e.device = devices::of_call(t, rc);
    recorder::attribute(t, &mut e, false);
    let pool = if pool.is_null() {
        device_pool(e.device)
    } else {
        pool
    };
    e.handle = pool as u64;
    let device = e.device;
    let sampled = e.clone();
    recorder::emit_on(Some(t), &mut e, b"");
    sample_pool(pool, device, &sampled);
    if rc != CUDA_SUCCESS {
        samples::after_failed_allocation();
    }
}

type AllocAsyncFn = unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> CUresult;
type AllocFromPoolFn =
    unsafe extern "C" fn(*mut CUdeviceptr, usize, CUmemoryPool, CUstream) -> CUresult;
type FreeAsyncFn = unsafe extern "C" fn(CUdeviceptr, CUstream) -> CUresult;

#[inline(always)]
unsafe fn alloc_async(api: Api, dptr: *mut CUdeviceptr, size: usize, stream: CUstream) -> CUresult {
    let rc = forward!(api, AllocAsyncFn, dptr, size, stream);
    guard::record_on(|t| async_allocated(t, api, rc, dptr, size, std::ptr::null_mut()));
    rc
}

#[inline(always)]
unsafe fn alloc_from_pool(
    api: Api,
    dptr: *mut CUdeviceptr,
    size: usize,
    pool: CUmemoryPool,
    stream: CUstream,
) -> CUresult {
    let rc = forward!(api, AllocFromPoolFn, dptr, size, pool, stream);
    guard::record_on(|t| async_allocated(t, api, rc, dptr, size, pool));
    rc
}

#[inline(always)]
unsafe fn free_async(api: Api, dptr: CUdeviceptr, stream: CUstream) -> CUresult {
    release!(api, FreeAsyncFn, free_ticket(api, dptr), dptr, stream)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUstream,
) -> CUresult {
    crate::note_entry!();
    // SAFETY: the caller's arguments, passed on as the same C call.
    unsafe { alloc_async(Api::cuMemAllocAsync, dptr, size, stream) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocAsync_ptsz(
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUstream,
) -> CUresult {
    crate::note_entry!();
    // SAFETY: the caller's arguments, passed on as the same C call.
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
    // SAFETY: the caller's arguments, passed on as the same C call.
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
    // SAFETY: the caller's arguments, passed on as the same C call.
    unsafe { alloc_from_pool(Api::cuMemAllocFromPoolAsync_ptsz, dptr, size, pool, stream) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeAsync(dptr: CUdeviceptr, stream: CUstream) -> CUresult {
    crate::note_entry!();
    // SAFETY: the caller's arguments, passed on as the same C call.
    unsafe { free_async(Api::cuMemFreeAsync, dptr, stream) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeAsync_ptsz(dptr: CUdeviceptr, stream: CUstream) -> CUresult {
    crate::note_entry!();
    // SAFETY: the caller's arguments, passed on as the same C call.
    unsafe { free_async(Api::cuMemFreeAsync_ptsz, dptr, stream) }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemPoolCreate(
    pool: *mut CUmemoryPool,
    props: *const CUmemPoolProps,
) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemPoolCreate;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut CUmemoryPool, *const CUmemPoolProps) -> CUresult,
        pool,
        props
    );
    if rc == CUDA_SUCCESS && !pool.is_null() {
        guard::record_on(|t| {
            let mut e = recorder::event_on(t, Kind::PoolCreate, api);
            // SAFETY: the call succeeded and wrote the pool handle (`pool` is not NULL).
            e.handle = unsafe { *pool } as u64;
            if !props.is_null() {
                // SAFETY: the caller's properties, which the driver just read.
                let loc = unsafe { (*props).location };
                if loc.type_ == CU_MEM_LOCATION_TYPE_DEVICE {
                    e.device = loc.id;
                }
            }
            recorder::attribute(t, &mut e, false);
            recorder::emit_on(Some(t), &mut e, b"");
        });
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn cuMemPoolDestroy(pool: CUmemoryPool) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemPoolDestroy;
    release!(
        api,
        unsafe extern "C" fn(CUmemoryPool) -> CUresult,
        ticket(|t| {
            let mut e = recorder::event_on(t, Kind::PoolDestroy, api);
            e.handle = pool as u64;
            e
        }),
        pool
    )
}

#[no_mangle]
pub unsafe extern "C" fn cuMemPoolTrimTo(pool: CUmemoryPool, min_bytes_to_keep: usize) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemPoolTrimTo;
    let rc = forward!(
        api,
        unsafe extern "C" fn(CUmemoryPool, usize) -> CUresult,
        pool,
        min_bytes_to_keep
    );
    if rc == CUDA_SUCCESS {
        guard::record_on(|t| {
            let mut e = recorder::event_on(t, Kind::PoolSample, api);
            recorder::attribute(t, &mut e, false);
            let device = devices::current();
            sample_pool(pool, device, &e);
        });
    }
    rc
}
