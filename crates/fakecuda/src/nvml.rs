//! The NVML subset the interposer reads, exported from the same library (tests symlink
//! libnvidia-ml.so.1 to it). It reports the same devices as the driver: NVML's total is the CUDA
//! total plus a fixed reservation (as on the H200), and this process is listed with
//! usedGpuMemory = context bytes + physical allocations on that device.
use std::os::raw::{c_char, c_int, c_uint};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::context::pci_bus_id;
use crate::state::{ffi, with};

type NvmlReturn = c_int;
const NVML_SUCCESS: NvmlReturn = 0;
const NVML_ERROR_UNINITIALIZED: NvmlReturn = 1;
const NVML_ERROR_INVALID_ARGUMENT: NvmlReturn = 2;
const NVML_ERROR_NOT_FOUND: NvmlReturn = 6;
const NVML_ERROR_INSUFFICIENT_SIZE: NvmlReturn = 7;
/// NVML_VALUE_NOT_AVAILABLE for the MIG instance ids of a non-MIG GPU.
const NOT_AVAILABLE: c_uint = 0xFFFF_FFFF;
/// What NVML counts as used on an idle H200 and cudaMemGetInfo leaves out of the total.
pub const NVML_RESERVED_BYTES: u64 = 644_939_776;
const DRIVER_VERSION: &str = "580.159.04";

#[repr(C)]
pub struct NvmlMemory {
    pub total: u64,
    pub free: u64,
    pub used: u64,
}

#[repr(C)]
pub struct NvmlProcessInfo {
    pub pid: c_uint,
    pub usedGpuMemory: u64,
    pub gpuInstanceId: c_uint,
    pub computeInstanceId: c_uint,
}

static INIT_COUNT: AtomicU32 = AtomicU32::new(0);
/// nvmlDevice_t values are addresses inside this array: real, stable, distinct pointers.
static HANDLES: [u8; 16] = [0; 16];

fn initialized() -> Result<(), NvmlReturn> {
    if INIT_COUNT.load(Ordering::SeqCst) == 0 {
        Err(NVML_ERROR_UNINITIALIZED)
    } else {
        Ok(())
    }
}

fn device_count() -> usize {
    with(|st| Ok(st.devices.len())).unwrap_or(0)
}

fn handle(i: usize) -> *const u8 {
    HANDLES[i..].as_ptr()
}

fn index(h: *const u8) -> Result<usize, NvmlReturn> {
    let off = (h as usize).wrapping_sub(HANDLES.as_ptr() as usize);
    if off < device_count() {
        Ok(off)
    } else {
        Err(NVML_ERROR_INVALID_ARGUMENT)
    }
}

/// (domain, bus, device, function) from "dddd:bb:dd.f" or "dddddddd:bb:dd.f", any case.
fn parse_bus_id(s: &str) -> Option<(u32, u32, u32, u32)> {
    let (dom, rest) = s.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (dev, func) = rest.split_once('.')?;
    let hex = |x: &str| u32::from_str_radix(x, 16).ok();
    Some((hex(dom)?, hex(bus)?, hex(dev)?, hex(func)?))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlInit_v2() -> NvmlReturn {
    INIT_COUNT.fetch_add(1, Ordering::SeqCst);
    NVML_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlShutdown() -> NvmlReturn {
    match INIT_COUNT.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)) {
        Ok(_) => NVML_SUCCESS,
        Err(_) => NVML_ERROR_UNINITIALIZED,
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    ffi(|| {
        initialized()?;
        if version.is_null() {
            return Err(NVML_ERROR_INVALID_ARGUMENT);
        }
        if (length as usize) < DRIVER_VERSION.len() + 1 {
            return Err(NVML_ERROR_INSUFFICIENT_SIZE);
        }
        std::ptr::copy_nonoverlapping(
            DRIVER_VERSION.as_ptr() as *const c_char,
            version,
            DRIVER_VERSION.len(),
        );
        *version.add(DRIVER_VERSION.len()) = 0;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> NvmlReturn {
    ffi(|| {
        initialized()?;
        *count.as_mut().ok_or(NVML_ERROR_INVALID_ARGUMENT)? = device_count() as c_uint;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    idx: c_uint,
    device: *mut *const u8,
) -> NvmlReturn {
    ffi(|| {
        initialized()?;
        let o = device.as_mut().ok_or(NVML_ERROR_INVALID_ARGUMENT)?;
        if idx as usize >= device_count() {
            return Err(NVML_ERROR_INVALID_ARGUMENT);
        }
        *o = handle(idx as usize);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    bus_id: *const c_char,
    device: *mut *const u8,
) -> NvmlReturn {
    ffi(|| {
        initialized()?;
        let o = device.as_mut().ok_or(NVML_ERROR_INVALID_ARGUMENT)?;
        if bus_id.is_null() {
            return Err(NVML_ERROR_INVALID_ARGUMENT);
        }
        let wanted = std::ffi::CStr::from_ptr(bus_id)
            .to_str()
            .ok()
            .and_then(parse_bus_id);
        let wanted = wanted.ok_or(NVML_ERROR_INVALID_ARGUMENT)?;
        let i = (0..device_count()).find(|&i| parse_bus_id(&pci_bus_id(i)) == Some(wanted));
        *o = handle(i.ok_or(NVML_ERROR_NOT_FOUND)?);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: *const u8,
    memory: *mut NvmlMemory,
) -> NvmlReturn {
    ffi(|| {
        initialized()?;
        let i = index(device)?;
        let o = memory.as_mut().ok_or(NVML_ERROR_INVALID_ARGUMENT)?;
        let (total, free) = with(|st| Ok((st.devices[i].total, st.devices[i].free)))?;
        let total = total + NVML_RESERVED_BYTES;
        *o = NvmlMemory {
            total,
            free,
            used: total - free,
        };
        Ok(())
    })
}

/// Lists this process when it has a context or memory on the device. With too small a buffer,
/// *infoCount becomes the number needed and the call returns NVML_ERROR_INSUFFICIENT_SIZE.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: *const u8,
    info_count: *mut c_uint,
    infos: *mut NvmlProcessInfo,
) -> NvmlReturn {
    ffi(|| {
        initialized()?;
        let i = index(device)?;
        let count = info_count.as_mut().ok_or(NVML_ERROR_INVALID_ARGUMENT)?;
        let used = with(|st| {
            let d = &st.devices[i];
            Ok((st.has_context_on(i) || d.free < d.total).then_some(d.total - d.free))
        })?;
        let needed = used.is_some() as c_uint;
        if *count < needed {
            *count = needed;
            return Err(NVML_ERROR_INSUFFICIENT_SIZE);
        }
        *count = needed;
        if let Some(used) = used {
            if infos.is_null() {
                return Err(NVML_ERROR_INVALID_ARGUMENT);
            }
            *infos = NvmlProcessInfo {
                pid: libc::getpid() as c_uint,
                usedGpuMemory: used,
                gpuInstanceId: NOT_AVAILABLE,
                computeInstanceId: NOT_AVAILABLE,
            };
        }
        Ok(())
    })
}
