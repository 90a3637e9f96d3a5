//! Stream-ordered memory pools. Like the real ones, a pool reserves physical memory in 32 MiB
//! chunks (lowering device free memory) and keeps freed blocks cached until cuMemPoolTrimTo or
//! destruction, so per-call sizes are not physical usage.
use std::collections::{BTreeMap, HashMap};
use std::os::raw::c_int;

use crate::capture::stream_device;
use crate::state::{distinct, ffi, with_init, State, GRANULARITY};
use crate::types::*;
use crate::va::VaSpace;

const CHUNK: u64 = 32 << 20;
const BLOCK_ALIGN: u64 = 512;

struct Chunk {
    base: u64,
    size: u64,
    space: VaSpace,
    live: usize,
}

pub struct Pool {
    dev: usize,
    chunks: Vec<Chunk>,
    reserved: u64,
    reserved_high: u64,
    used: u64,
    used_high: u64,
    destroyed: bool,
    is_default: bool,
}

#[derive(Default)]
pub struct Pools {
    pools: HashMap<CUhandle, Pool>,
    /// Every live block: address -> (pool, size).
    blocks: BTreeMap<CUdeviceptr, (CUhandle, u64)>,
}

impl Pools {
    pub fn block_range(&self, addr: CUdeviceptr) -> Option<(CUdeviceptr, u64)> {
        let (&base, &(_, size)) = self.blocks.range(..=addr).next_back()?;
        (addr < base + size).then_some((base, size))
    }

    fn live(&mut self, pool: CUhandle) -> Result<&mut Pool, CUresult> {
        match self.pools.get_mut(&pool) {
            Some(p) if !p.destroyed => Ok(p),
            _ => Err(CUDA_ERROR_INVALID_VALUE),
        }
    }
}

fn new_pool(st: &mut State, dev: usize, is_default: bool) -> CUhandle {
    let h = st.token(0x9001);
    let pool = Pool {
        dev,
        chunks: Vec::new(),
        reserved: 0,
        reserved_high: 0,
        used: 0,
        used_high: 0,
        destroyed: false,
        is_default,
    };
    st.pools.pools.insert(h, pool);
    h
}

fn default_pool(st: &mut State, dev: usize) -> CUhandle {
    if st.devices[dev].default_pool == 0 {
        st.devices[dev].default_pool = new_pool(st, dev, true);
    }
    st.devices[dev].default_pool
}

fn current_pool(st: &mut State, dev: usize) -> CUhandle {
    match st.devices[dev].current_pool {
        0 => default_pool(st, dev),
        p => p,
    }
}

fn alloc(st: &mut State, pool: CUhandle, size: u64) -> Result<CUdeviceptr, CUresult> {
    if size == 0 {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    let rsize = round_up(size, BLOCK_ALIGN);
    let p = st.pools.live(pool)?;
    let cached = p
        .chunks
        .iter_mut()
        .find_map(|c| c.space.alloc(rsize, BLOCK_ALIGN).map(|a| (c, a)));
    let addr = match cached {
        Some((c, a)) => {
            c.live += 1;
            a
        }
        None => {
            // Reserve a new chunk from the device.
            let dev = p.dev;
            let csize = round_up(rsize, CHUNK);
            st.take(dev, csize)?;
            let Some(base) = st.devices[dev].va.alloc(csize, GRANULARITY) else {
                st.give(dev, csize);
                return Err(CUDA_ERROR_OUT_OF_MEMORY);
            };
            let mut space = VaSpace::new(base, csize);
            let a = space.alloc(rsize, BLOCK_ALIGN).ok_or(CUDA_ERROR_UNKNOWN)?;
            let p = st.pools.live(pool)?;
            p.chunks.push(Chunk {
                base,
                size: csize,
                space,
                live: 1,
            });
            p.reserved += csize;
            p.reserved_high = p.reserved_high.max(p.reserved);
            a
        }
    };
    let p = st.pools.live(pool)?;
    p.used += rsize;
    p.used_high = p.used_high.max(p.used);
    st.pools.blocks.insert(addr, (pool, rsize));
    Ok(addr)
}

/// Give empty chunks back to the device until at most `keep` bytes stay reserved.
fn trim(st: &mut State, pool: CUhandle, keep: u64) {
    let Some(p) = st.pools.pools.get_mut(&pool) else {
        return;
    };
    let dev = p.dev;
    let mut released = Vec::new();
    let mut i = p.chunks.len();
    while i > 0 && p.reserved > keep {
        i -= 1;
        if p.chunks[i].live == 0 {
            let c = p.chunks.remove(i);
            p.reserved -= c.size;
            released.push((c.base, c.size));
        }
    }
    let gone = p.destroyed && p.chunks.is_empty();
    for (base, size) in released {
        st.devices[dev].va.free(base);
        st.give(dev, size);
    }
    if gone {
        st.pools.pools.remove(&pool);
    }
}

/// Return a block to its pool (cuMemFreeAsync, or cuMemFree_v2 on stream-ordered memory).
pub fn free_async(st: &mut State, addr: CUdeviceptr) -> Result<(), CUresult> {
    let (pool, size) = st
        .pools
        .blocks
        .remove(&addr)
        .ok_or(CUDA_ERROR_INVALID_VALUE)?;
    let p = st.pools.pools.get_mut(&pool).ok_or(CUDA_ERROR_UNKNOWN)?;
    if let Some(c) = p
        .chunks
        .iter_mut()
        .find(|c| addr >= c.base && addr < c.base + c.size)
    {
        c.space.free(addr);
        c.live -= 1;
    }
    p.used -= size;
    if p.destroyed {
        trim(st, pool, 0);
    }
    Ok(())
}

unsafe fn alloc_async(
    dptr: *mut CUdeviceptr,
    size: usize,
    pool: Option<CUhandle>,
    stream: CUhandle,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(dptr)?;
            let dev = stream_device(st, stream)?;
            let pool = match pool {
                Some(p) => p,
                None => current_pool(st, dev),
            };
            *o = alloc(st, pool, size as u64)?;
            Ok(())
        })
    })
}

unsafe fn free_async_call(dptr: CUdeviceptr, stream: CUhandle) -> CUresult {
    ffi(|| {
        with_init(|st| {
            stream_device(st, stream)?;
            free_async(st, dptr)
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUhandle,
) -> CUresult {
    crate::config::evict();
    distinct("cuMemAllocAsync");
    alloc_async(dptr, size, None, stream)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocAsync_ptsz(
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUhandle,
) -> CUresult {
    crate::config::evict();
    distinct("cuMemAllocAsync_ptsz");
    alloc_async(dptr, size, None, stream)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocFromPoolAsync(
    dptr: *mut CUdeviceptr,
    size: usize,
    pool: CUhandle,
    stream: CUhandle,
) -> CUresult {
    crate::config::evict();
    distinct("cuMemAllocFromPoolAsync");
    alloc_async(dptr, size, Some(pool), stream)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAllocFromPoolAsync_ptsz(
    dptr: *mut CUdeviceptr,
    size: usize,
    pool: CUhandle,
    stream: CUhandle,
) -> CUresult {
    crate::config::evict();
    distinct("cuMemAllocFromPoolAsync_ptsz");
    alloc_async(dptr, size, Some(pool), stream)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeAsync(dptr: CUdeviceptr, stream: CUhandle) -> CUresult {
    crate::config::evict();
    distinct("cuMemFreeAsync");
    free_async_call(dptr, stream)
}

#[no_mangle]
pub unsafe extern "C" fn cuMemFreeAsync_ptsz(dptr: CUdeviceptr, stream: CUhandle) -> CUresult {
    crate::config::evict();
    distinct("cuMemFreeAsync_ptsz");
    free_async_call(dptr, stream)
}

/// Only pinned device pools exist in the fake.
#[no_mangle]
pub unsafe extern "C" fn cuMemPoolCreate(
    pool: *mut CUhandle,
    props: *const CUmemPoolProps,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let (o, props) = (out(pool)?, input(props)?);
            if props.allocType != CU_MEM_ALLOCATION_TYPE_PINNED
                || props.location.type_ != CU_MEM_LOCATION_TYPE_DEVICE
            {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            st.device(props.location.id)
                .map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
            *o = new_pool(st, props.location.id as usize, false);
            Ok(())
        })
    })
}

/// Memory still allocated from a destroyed pool is released when its last block is freed.
#[no_mangle]
pub unsafe extern "C" fn cuMemPoolDestroy(pool: CUhandle) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let p = st.pools.live(pool)?;
            if p.is_default {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            p.destroyed = true;
            let dev = p.dev;
            if st.devices[dev].current_pool == pool {
                st.devices[dev].current_pool = 0;
            }
            trim(st, pool, 0);
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemPoolTrimTo(pool: CUhandle, min_bytes_to_keep: usize) -> CUresult {
    ffi(|| {
        with_init(|st| {
            st.pools.live(pool)?;
            trim(st, pool, min_bytes_to_keep as u64);
            Ok(())
        })
    })
}

/// CUmemPool_attribute: 1..=3 are ints (reuse policies, always on), 4..=8 are cuuint64_t
/// (RELEASE_THRESHOLD, RESERVED_MEM_CURRENT/HIGH, USED_MEM_CURRENT/HIGH).
#[no_mangle]
pub unsafe extern "C" fn cuMemPoolGetAttribute(
    pool: CUhandle,
    attr: c_int,
    value: *mut std::os::raw::c_void,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            if value.is_null() {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            let p = st.pools.live(pool)?;
            let v = match attr {
                1..=3 => {
                    *(value as *mut c_int) = 1;
                    return Ok(());
                }
                4 => 0,
                5 => p.reserved,
                6 => p.reserved_high,
                7 => p.used,
                8 => p.used_high,
                _ => return Err(CUDA_ERROR_INVALID_VALUE),
            };
            *(value as *mut u64) = v;
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetDefaultMemPool(pool: *mut CUhandle, dev: CUdevice) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(pool)?;
            st.device(dev)?;
            *o = default_pool(st, dev as usize);
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetMemPool(pool: *mut CUhandle, dev: CUdevice) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(pool)?;
            st.device(dev)?;
            *o = current_pool(st, dev as usize);
            Ok(())
        })
    })
}
