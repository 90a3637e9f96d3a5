//! Virtual memory management (cuMemCreate and friends), modelled physically: a physical
//! allocation stays on its device until its handles' references (create + retains + imports
//! − releases) reach zero AND it is mapped nowhere. NCCL's free sequence (retain, release, unmap,
//! release, address free) therefore ends with the memory returned. Only
//! CU_MEM_LOCATION_TYPE_DEVICE allocations take device memory.
use std::collections::{BTreeMap, HashMap};
use std::os::raw::{c_int, c_uint, c_ulonglong, c_void};

use crate::capture::check_capture_rule;
use crate::state::{ffi, with_init, State, GRANULARITY};
use crate::types::*;

struct HandleRec {
    phys: u64,
    refs: u64,
}

struct Phys {
    size: u64,
    /// Some(device) for device memory; host and host-NUMA memory take nothing from a device.
    device: Option<usize>,
    refs: u64,
    maps: u64,
    handle_types: c_uint,
}

struct Mapping {
    size: u64,
    handle: CUhandle,
    phys: u64,
}

#[derive(Default)]
pub struct Vmm {
    handles: HashMap<CUhandle, HandleRec>,
    phys: HashMap<u64, Phys>,
    mappings: BTreeMap<CUdeviceptr, Mapping>,
    reservations: BTreeMap<CUdeviceptr, u64>,
    exported_fds: HashMap<c_int, u64>,
    next_phys: u64,
}

const FABRIC_MAGIC: &[u8; 8] = b"FAKEFABR";

impl Vmm {
    pub fn mapping_range(&self, addr: CUdeviceptr) -> Option<(CUdeviceptr, u64)> {
        let (&base, m) = self.mappings.range(..=addr).next_back()?;
        (addr < base + m.size).then_some((base, m.size))
    }

    /// The mappings covering [ptr, ptr+size) back to back; `exact` also requires that the range
    /// starts and ends on mapping boundaries (cuMemUnmap).
    fn covering(&self, ptr: CUdeviceptr, size: u64, exact: bool) -> Option<Vec<CUdeviceptr>> {
        let end = ptr.checked_add(size)?;
        let mut cursor = ptr;
        let mut hit = Vec::new();
        while cursor < end {
            let (&b, m) = self.mappings.range(..=cursor).next_back()?;
            if b + m.size <= cursor || (exact && (b != cursor || b + m.size > end)) {
                return None;
            }
            hit.push(b);
            cursor = b + m.size;
        }
        (!hit.is_empty()).then_some(hit)
    }

    fn new_handle(&mut self, st_token: CUhandle, phys: u64) -> CUhandle {
        self.handles.insert(st_token, HandleRec { phys, refs: 1 });
        if let Some(p) = self.phys.get_mut(&phys) {
            p.refs += 1;
        }
        st_token
    }

    fn live_handle(&mut self, handle: CUhandle) -> Result<&mut HandleRec, CUresult> {
        match self.handles.get_mut(&handle) {
            Some(h) if h.refs > 0 => Ok(h),
            _ => Err(CUDA_ERROR_INVALID_HANDLE),
        }
    }
}

/// Give a physical allocation back once nothing references or maps it.
fn maybe_free(st: &mut State, phys: u64) {
    let Some(p) = st.vmm.phys.get(&phys) else {
        return;
    };
    if p.refs > 0 || p.maps > 0 {
        return;
    }
    let (size, device) = (p.size, p.device);
    st.vmm.phys.remove(&phys);
    st.vmm.handles.retain(|_, h| h.phys != phys);
    st.vmm.exported_fds.retain(|_, p| *p != phys);
    if let Some(d) = device {
        st.give(d, size);
    }
}

/// VMM sizes must be non-zero multiples of the granularity.
pub fn is_granular(size: usize) -> bool {
    size > 0 && (size as u64) & (GRANULARITY - 1) == 0
}

#[no_mangle]
pub unsafe extern "C" fn cuMemCreate(
    handle: *mut CUhandle,
    size: usize,
    prop: *const CUmemAllocationProp,
    flags: c_ulonglong,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let (o, prop) = (out(handle)?, input(prop)?);
            if flags != 0 || prop.type_ != CU_MEM_ALLOCATION_TYPE_PINNED || !is_granular(size) {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            let device = match prop.location.type_ {
                CU_MEM_LOCATION_TYPE_DEVICE => {
                    st.device(prop.location.id)?;
                    Some(prop.location.id as usize)
                }
                CU_MEM_LOCATION_TYPE_HOST
                | CU_MEM_LOCATION_TYPE_HOST_NUMA
                | CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT => None,
                _ => return Err(CUDA_ERROR_INVALID_VALUE),
            };
            check_capture_rule(st)?;
            if let Some(d) = device {
                st.take(d, size as u64)?;
            }
            st.vmm.next_phys += 1;
            let phys = st.vmm.next_phys;
            let p = Phys {
                size: size as u64,
                device,
                refs: 0,
                maps: 0,
                handle_types: prop.requestedHandleTypes,
            };
            st.vmm.phys.insert(phys, p);
            let token = st.token(0x4A4D);
            *o = st.vmm.new_handle(token, phys);
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemRelease(handle: CUhandle) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let h = st.vmm.live_handle(handle)?;
            h.refs -= 1;
            let phys = h.phys;
            if let Some(p) = st.vmm.phys.get_mut(&phys) {
                p.refs -= 1;
            }
            maybe_free(st, phys);
            Ok(())
        })
    })
}

/// The handle mapped at `addr`, with one more reference (the caller releases it).
#[no_mangle]
pub unsafe extern "C" fn cuMemRetainAllocationHandle(
    handle: *mut CUhandle,
    addr: *mut c_void,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(handle)?;
            let (base, _) = st
                .vmm
                .mapping_range(addr as u64)
                .ok_or(CUDA_ERROR_INVALID_VALUE)?;
            let (h, phys) = {
                let m = &st.vmm.mappings[&base];
                (m.handle, m.phys)
            };
            st.vmm
                .handles
                .entry(h)
                .or_insert(HandleRec { phys, refs: 0 })
                .refs += 1;
            if let Some(p) = st.vmm.phys.get_mut(&phys) {
                p.refs += 1;
            }
            *o = h;
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemMap(
    ptr: CUdeviceptr,
    size: usize,
    offset: usize,
    handle: CUhandle,
    flags: c_ulonglong,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            // The real driver requires offset 0 and flags 0 too.
            if flags != 0 || offset != 0 || !is_granular(size) {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            let size = size as u64;
            let phys = st.vmm.live_handle(handle)?.phys;
            if size > st.vmm.phys[&phys].size {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            let reserved = st.vmm.reservations.range(..=ptr).next_back();
            if !matches!(reserved, Some((&b, &l)) if ptr + size <= b + l) {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            let before = st.vmm.mappings.range(..ptr + size).next_back();
            if matches!(before, Some((&b, m)) if b + m.size > ptr) {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            st.vmm.mappings.insert(ptr, Mapping { size, handle, phys });
            if let Some(p) = st.vmm.phys.get_mut(&phys) {
                p.maps += 1;
            }
            Ok(())
        })
    })
}

/// Unmaps whole mappings only: [ptr, ptr+size) must start and end on mapping boundaries.
#[no_mangle]
pub unsafe extern "C" fn cuMemUnmap(ptr: CUdeviceptr, size: usize) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let hit = st
                .vmm
                .covering(ptr, size as u64, true)
                .ok_or(CUDA_ERROR_INVALID_VALUE)?;
            for b in hit {
                let m = st.vmm.mappings.remove(&b).ok_or(CUDA_ERROR_UNKNOWN)?;
                if let Some(p) = st.vmm.phys.get_mut(&m.phys) {
                    p.maps -= 1;
                }
                maybe_free(st, m.phys);
            }
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemSetAccess(
    ptr: CUdeviceptr,
    size: usize,
    desc: *const CUmemAccessDesc,
    count: usize,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            if desc.is_null() || count == 0 {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            for d in std::slice::from_raw_parts(desc, count) {
                // Device access names a device; host access (for host-NUMA memory) a NUMA node.
                match d.location.type_ {
                    CU_MEM_LOCATION_TYPE_DEVICE => {
                        st.device(d.location.id)?;
                    }
                    CU_MEM_LOCATION_TYPE_HOST | CU_MEM_LOCATION_TYPE_HOST_NUMA => {}
                    _ => return Err(CUDA_ERROR_INVALID_VALUE),
                }
                if d.flags > 3 {
                    return Err(CUDA_ERROR_INVALID_VALUE);
                }
            }
            st.vmm
                .covering(ptr, size as u64, false)
                .map(|_| ())
                .ok_or(CUDA_ERROR_INVALID_VALUE)
        })
    })
}

/// A virtual range only (no physical memory), from its own huge address space.
#[no_mangle]
pub unsafe extern "C" fn cuMemAddressReserve(
    ptr: *mut CUdeviceptr,
    size: usize,
    alignment: usize,
    addr: CUdeviceptr,
    flags: c_ulonglong,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(ptr)?;
            if flags != 0 || !is_granular(size) || (alignment != 0 && !alignment.is_power_of_two())
            {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            let (size, align) = (size as u64, (alignment as u64).max(GRANULARITY));
            let at = addr != 0 && addr & (align - 1) == 0 && st.reserve_va.alloc_at(addr, size);
            let base = if at {
                addr
            } else {
                st.reserve_va
                    .alloc(size, align)
                    .ok_or(CUDA_ERROR_OUT_OF_MEMORY)?
            };
            st.vmm.reservations.insert(base, size);
            *o = base;
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuMemAddressFree(ptr: CUdeviceptr, size: usize) -> CUresult {
    ffi(|| {
        with_init(|st| {
            if st.vmm.reservations.get(&ptr) != Some(&(size as u64)) {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            if st
                .vmm
                .mappings
                .range(ptr..ptr + size as u64)
                .next()
                .is_some()
            {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            st.vmm.reservations.remove(&ptr);
            st.reserve_va.free(ptr);
            Ok(())
        })
    })
}

/// CU_MEM_ALLOC_GRANULARITY_MINIMUM (0) and RECOMMENDED (1) are both 2 MiB.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetAllocationGranularity(
    granularity: *mut usize,
    prop: *const CUmemAllocationProp,
    option: c_int,
) -> CUresult {
    ffi(|| {
        with_init(|_| {
            let (o, _) = (out(granularity)?, input(prop)?);
            if option != 0 && option != 1 {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            *o = GRANULARITY as usize;
            Ok(())
        })
    })
}

/// POSIX_FD: a fresh (eventfd) descriptor the fake remembers; FABRIC: 64 bytes naming the memory.
#[no_mangle]
pub unsafe extern "C" fn cuMemExportToShareableHandle(
    shareable: *mut c_void,
    handle: CUhandle,
    handle_type: c_uint,
    flags: c_ulonglong,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            if shareable.is_null() || flags != 0 {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            let phys = st.vmm.live_handle(handle)?.phys;
            if st.vmm.phys[&phys].handle_types & handle_type == 0 {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            match handle_type {
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR => {
                    let fd = libc::eventfd(0, libc::EFD_CLOEXEC);
                    if fd < 0 {
                        return Err(CUDA_ERROR_UNKNOWN);
                    }
                    st.vmm.exported_fds.insert(fd, phys);
                    *(shareable as *mut c_int) = fd;
                }
                CU_MEM_HANDLE_TYPE_FABRIC => {
                    let mut bytes = [0u8; 64];
                    bytes[..8].copy_from_slice(FABRIC_MAGIC);
                    bytes[8..16].copy_from_slice(&phys.to_le_bytes());
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), shareable as *mut u8, 64);
                }
                _ => return Err(CUDA_ERROR_NOT_SUPPORTED),
            }
            Ok(())
        })
    })
}

/// A new handle to the same physical memory: no new device memory.
#[no_mangle]
pub unsafe extern "C" fn cuMemImportFromShareableHandle(
    handle: *mut CUhandle,
    os_handle: *mut c_void,
    handle_type: c_uint,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(handle)?;
            let phys = match handle_type {
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR => st
                    .vmm
                    .exported_fds
                    .get(&(os_handle as usize as c_int))
                    .copied(),
                CU_MEM_HANDLE_TYPE_FABRIC if !os_handle.is_null() => {
                    let bytes = std::slice::from_raw_parts(os_handle as *const u8, 64);
                    (&bytes[..8] == FABRIC_MAGIC)
                        .then(|| u64::from_le_bytes(bytes[8..16].try_into().unwrap_or_default()))
                }
                CU_MEM_HANDLE_TYPE_FABRIC => None,
                _ => return Err(CUDA_ERROR_NOT_SUPPORTED),
            };
            let phys = phys
                .filter(|p| st.vmm.phys.contains_key(p))
                .ok_or(CUDA_ERROR_INVALID_VALUE)?;
            let token = st.token(0x4A4D);
            *o = st.vmm.new_handle(token, phys);
            Ok(())
        })
    })
}
