//! Linear device memory (cuMemAlloc, cuMemAllocPitch), managed memory, memory info, address
//! ranges and page-locked host memory. Linear allocations take their size rounded up to 2 MiB
//! from the device; managed and host memory take nothing from it.
use std::os::raw::{c_uint, c_void};

use crate::capture::check_capture_rule;
use crate::config;
use crate::context::current;
use crate::state::{distinct, ffi, with_init, Linear, State, GRANULARITY};
use crate::types::*;

fn alloc_linear(st: &mut State, size: u64, managed: bool) -> Result<CUdeviceptr, CUresult> {
    if size == 0 {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    let (ctx, dev) = current(st)?;
    let rsize = round_up(size, GRANULARITY);
    let (addr, phys) = if managed {
        (
            st.managed_va
                .alloc(rsize, GRANULARITY)
                .ok_or(CUDA_ERROR_OUT_OF_MEMORY)?,
            0,
        )
    } else {
        st.take(dev, rsize)?;
        match st.devices[dev].va.alloc(rsize, GRANULARITY) {
            Some(a) => (a, rsize),
            None => {
                st.give(dev, rsize);
                return Err(CUDA_ERROR_OUT_OF_MEMORY);
            }
        }
    };
    st.linear.insert(
        addr,
        Linear {
            dev,
            ctx,
            size,
            phys,
            managed,
        },
    );
    Ok(addr)
}

fn free_linear(st: &mut State, addr: CUdeviceptr) -> Result<(), CUresult> {
    let l = st.linear.remove(&addr).ok_or(CUDA_ERROR_INVALID_VALUE)?;
    if l.managed {
        st.managed_va.free(addr);
    } else {
        st.devices[l.dev].va.free(addr);
        st.give(l.dev, l.phys);
    }
    Ok(())
}

/// A destroyed context's linear and managed allocations go back to the device.
pub fn release_context_memory(st: &mut State, ctx: CUhandle) {
    let owned: Vec<_> = st
        .linear
        .iter()
        .filter(|(_, l)| l.ctx == ctx)
        .map(|(&a, _)| a)
        .collect();
    for a in owned {
        let _ = free_linear(st, a);
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let (f, t) = (out(free)?, out(total)?);
            let (_, dev) = current(st)?;
            *f = st.devices[dev].free as usize;
            *t = st.devices[dev].total as usize;
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) -> CUresult {
    config::evict();
    ffi(|| {
        with_init(|st| {
            let o = out(dptr)?;
            if bytesize == 0 {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            current(st)?;
            check_capture_rule(st)?;
            if let Some(code) = config::get().fail_result {
                return Err(code);
            }
            *o = alloc_linear(st, bytesize as u64, false)?;
            Ok(())
        })
    })
}

/// Pitch = width rounded up to 512 bytes; the allocation is pitch x height.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocPitch_v2(
    dptr: *mut CUdeviceptr,
    pitch: *mut usize,
    width: usize,
    height: usize,
    element_size: c_uint,
) -> CUresult {
    config::evict();
    ffi(|| {
        with_init(|st| {
            let (o, p) = (out(dptr)?, out(pitch)?);
            if ![4, 8, 16].contains(&element_size) || width == 0 || height == 0 {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            current(st)?;
            check_capture_rule(st)?;
            let row = round_up(width as u64, 512);
            let bytes = row
                .checked_mul(height as u64)
                .ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
            *o = alloc_linear(st, bytes, false)?;
            *p = row as usize;
            Ok(())
        })
    })
}

/// CU_MEM_ATTACH_GLOBAL = 1, CU_MEM_ATTACH_HOST = 2. Managed memory does not lower free memory.
#[no_mangle]
pub unsafe extern "C" fn cuMemAllocManaged(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    flags: c_uint,
) -> CUresult {
    config::evict();
    ffi(|| {
        with_init(|st| {
            let o = out(dptr)?;
            if flags != 1 && flags != 2 {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            *o = alloc_linear(st, bytesize as u64, true)?;
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFree_v2(dptr: CUdeviceptr) -> CUresult {
    config::evict();
    ffi(|| {
        with_init(|st| {
            current(st)?;
            check_capture_rule(st)?;
            if st.linear.contains_key(&dptr) {
                return free_linear(st, dptr);
            }
            // Stream-ordered memory may also be freed synchronously.
            crate::pools::free_async(st, dptr)
        })
    })
}

/// The allocation (or VMM mapping, pool block, IPC mapping) that contains `addr`.
fn address_range(st: &State, addr: CUdeviceptr) -> Option<(CUdeviceptr, u64)> {
    if let Some((&base, l)) = st.linear.range(..=addr).next_back() {
        if addr < base + l.size.max(1) {
            return Some((base, l.size));
        }
    }
    if let Some(r) = st.vmm.mapping_range(addr) {
        return Some(r);
    }
    if let Some(r) = st.pools.block_range(addr) {
        return Some(r);
    }
    st.ipc_opened
        .iter()
        .find(|(&b, &(_, s))| addr >= b && addr < b + s)
        .map(|(&b, &(_, s))| (b, s))
}

#[no_mangle]
pub unsafe extern "C" fn cuMemGetAddressRange_v2(
    pbase: *mut CUdeviceptr,
    psize: *mut usize,
    dptr: CUdeviceptr,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            current(st)?;
            let (base, size) = address_range(st, dptr).ok_or(CUDA_ERROR_NOT_FOUND)?;
            if let Some(b) = pbase.as_mut() {
                *b = base;
            }
            if let Some(s) = psize.as_mut() {
                *s = size as usize;
            }
            Ok(())
        })
    })
}

/// Page-locked host memory is real (page-aligned) malloc'd memory; the device does not change.
unsafe fn host_alloc(pp: *mut *mut c_void, bytesize: usize) -> CUresult {
    config::evict();
    ffi(|| {
        with_init(|st| {
            let o = out(pp)?;
            if bytesize == 0 {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            current(st)?;
            let mut p: *mut c_void = std::ptr::null_mut();
            if libc::posix_memalign(&mut p, 4096, bytesize) != 0 {
                return Err(CUDA_ERROR_OUT_OF_MEMORY);
            }
            st.host_allocs.insert(p as usize, bytesize);
            *o = p;
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    bytesize: usize,
    _flags: c_uint,
) -> CUresult {
    distinct("cuMemHostAlloc");
    host_alloc(pp, bytesize)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytesize: usize) -> CUresult {
    distinct("cuMemAllocHost_v2");
    host_alloc(pp, bytesize)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    config::evict();
    ffi(|| {
        with_init(|st| {
            current(st)?;
            st.host_allocs
                .remove(&(p as usize))
                .ok_or(CUDA_ERROR_INVALID_VALUE)?;
            libc::free(p);
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostRegister_v2(
    p: *mut c_void,
    bytesize: usize,
    _flags: c_uint,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            if p.is_null() || bytesize == 0 {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            current(st)?;
            let (start, end) = (p as usize, p as usize + bytesize);
            let overlaps = st
                .host_registered
                .range(..end)
                .next_back()
                .is_some_and(|(&s, &l)| s + l > start);
            if overlaps {
                return Err(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
            }
            st.host_registered.insert(start, bytesize);
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemHostUnregister(p: *mut c_void) -> CUresult {
    ffi(|| {
        with_init(|st| {
            current(st)?;
            st.host_registered
                .remove(&(p as usize))
                .map(|_| ())
                .ok_or(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
        })
    })
}
