//! cuGetProcAddress / cuGetProcAddress_v2 as driver 580 implements them: a base name, a CUDA
//! version and the stream flags pick one of the library's own exported, versioned functions, so
//! `dlsym(libcuda, <versioned name>)` identifies every pointer handed out. Asking for
//! "cuGetProcAddress" below 12000 gives an internal, unexported function with the 4-argument ABI.
use std::ffi::CStr;
use std::hint::black_box;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};

use crate::types::*;
use crate::{capture as cap, context as ctx, errors as err, ipc, memory as mem, pools, vmm};

/// CUdriverProcAddressQueryResult
const STATUS_SUCCESS: c_int = 0;
const STATUS_SYMBOL_NOT_FOUND: c_int = 1;
const STATUS_VERSION_NOT_SUFFICIENT: c_int = 2;

/// Which entry point served the last lookup (for a debugger). Each entry point passes its
/// number through `black_box`, which keeps the three bodies distinct: otherwise LLVM's function
/// merging makes the unexported entry point an alias of the exported `cuGetProcAddress`.
static LAST_ENTRY: AtomicI32 = AtomicI32::new(0);

/// A function's address (function items are cast through a pointer, not straight to usize).
macro_rules! a {
    ($f:path) => {
        $f as *const () as usize
    };
}

enum Lookup {
    Found(usize),
    TooOld,
    Unknown,
}

/// The versioned export for a base name; `ptsz` selects the per-thread-default-stream variant.
fn resolve(name: &str, v: c_int, ptsz: bool) -> Lookup {
    let pick = |legacy: usize, per_thread: usize| if ptsz { per_thread } else { legacy };
    let (min, addr): (c_int, usize) = match name {
        "cuGetProcAddress" if v >= 12000 => (0, a!(cuGetProcAddress_v2)),
        "cuGetProcAddress" => (0, a!(get_proc_address_internal)),
        "cuInit" => (0, a!(ctx::cuInit)),
        "cuDriverGetVersion" => (0, a!(ctx::cuDriverGetVersion)),
        "cuDeviceGet" => (0, a!(ctx::cuDeviceGet)),
        "cuDeviceGetCount" => (0, a!(ctx::cuDeviceGetCount)),
        "cuDeviceGetName" => (0, a!(ctx::cuDeviceGetName)),
        "cuDeviceGetPCIBusId" => (0, a!(ctx::cuDeviceGetPCIBusId)),
        "cuDeviceTotalMem" => (0, a!(ctx::cuDeviceTotalMem_v2)),
        "cuDevicePrimaryCtxRetain" => (0, a!(ctx::cuDevicePrimaryCtxRetain)),
        "cuDevicePrimaryCtxRelease" => (0, a!(ctx::cuDevicePrimaryCtxRelease_v2)),
        "cuCtxCreate" if v >= 12050 => (0, a!(ctx::cuCtxCreate_v4)),
        "cuCtxCreate" if v >= 11040 => (0, a!(ctx::cuCtxCreate_v3)),
        "cuCtxCreate" => (0, a!(ctx::cuCtxCreate_v2)),
        "cuCtxDestroy" => (0, a!(ctx::cuCtxDestroy_v2)),
        "cuCtxSetCurrent" => (0, a!(ctx::cuCtxSetCurrent)),
        "cuCtxGetCurrent" => (0, a!(ctx::cuCtxGetCurrent)),
        "cuCtxGetDevice" => (0, a!(ctx::cuCtxGetDevice)),
        "cuCtxPushCurrent" => (0, a!(ctx::cuCtxPushCurrent_v2)),
        "cuCtxPopCurrent" => (0, a!(ctx::cuCtxPopCurrent_v2)),
        "cuCtxSynchronize" => (0, a!(ctx::cuCtxSynchronize)),
        "cuMemGetInfo" => (0, a!(mem::cuMemGetInfo_v2)),
        "cuMemAlloc" => (0, a!(mem::cuMemAlloc_v2)),
        "cuMemAllocPitch" => (0, a!(mem::cuMemAllocPitch_v2)),
        "cuMemAllocManaged" => (0, a!(mem::cuMemAllocManaged)),
        "cuMemFree" => (0, a!(mem::cuMemFree_v2)),
        "cuMemGetAddressRange" => (0, a!(mem::cuMemGetAddressRange_v2)),
        "cuMemHostAlloc" => (0, a!(mem::cuMemHostAlloc)),
        "cuMemAllocHost" => (0, a!(mem::cuMemAllocHost_v2)),
        "cuMemFreeHost" => (0, a!(mem::cuMemFreeHost)),
        "cuMemHostRegister" => (0, a!(mem::cuMemHostRegister_v2)),
        "cuMemHostUnregister" => (0, a!(mem::cuMemHostUnregister)),
        "cuMemAllocAsync" => (
            11020,
            pick(a!(pools::cuMemAllocAsync), a!(pools::cuMemAllocAsync_ptsz)),
        ),
        "cuMemAllocFromPoolAsync" => (
            11020,
            pick(
                a!(pools::cuMemAllocFromPoolAsync),
                a!(pools::cuMemAllocFromPoolAsync_ptsz),
            ),
        ),
        "cuMemFreeAsync" => (
            11020,
            pick(a!(pools::cuMemFreeAsync), a!(pools::cuMemFreeAsync_ptsz)),
        ),
        "cuMemPoolCreate" => (11020, a!(pools::cuMemPoolCreate)),
        "cuMemPoolDestroy" => (11020, a!(pools::cuMemPoolDestroy)),
        "cuMemPoolTrimTo" => (11020, a!(pools::cuMemPoolTrimTo)),
        "cuMemPoolGetAttribute" => (11020, a!(pools::cuMemPoolGetAttribute)),
        "cuDeviceGetDefaultMemPool" => (11020, a!(pools::cuDeviceGetDefaultMemPool)),
        "cuDeviceGetMemPool" => (11020, a!(pools::cuDeviceGetMemPool)),
        "cuMemCreate" => (10020, a!(vmm::cuMemCreate)),
        "cuMemRelease" => (10020, a!(vmm::cuMemRelease)),
        "cuMemMap" => (10020, a!(vmm::cuMemMap)),
        "cuMemUnmap" => (10020, a!(vmm::cuMemUnmap)),
        "cuMemSetAccess" => (10020, a!(vmm::cuMemSetAccess)),
        "cuMemAddressReserve" => (10020, a!(vmm::cuMemAddressReserve)),
        "cuMemAddressFree" => (10020, a!(vmm::cuMemAddressFree)),
        "cuMemGetAllocationGranularity" => (10020, a!(vmm::cuMemGetAllocationGranularity)),
        "cuMemExportToShareableHandle" => (10020, a!(vmm::cuMemExportToShareableHandle)),
        "cuMemImportFromShareableHandle" => (10020, a!(vmm::cuMemImportFromShareableHandle)),
        "cuMemRetainAllocationHandle" => (11000, a!(vmm::cuMemRetainAllocationHandle)),
        "cuIpcGetMemHandle" => (0, a!(ipc::cuIpcGetMemHandle)),
        "cuIpcOpenMemHandle" => (0, a!(ipc::cuIpcOpenMemHandle_v2)),
        "cuIpcCloseMemHandle" => (0, a!(ipc::cuIpcCloseMemHandle)),
        "cuStreamCreate" => (0, a!(cap::cuStreamCreate)),
        "cuStreamDestroy" => (0, a!(cap::cuStreamDestroy_v2)),
        "cuStreamBeginCapture" if v >= 10010 => (
            0,
            pick(
                a!(cap::cuStreamBeginCapture_v2),
                a!(cap::cuStreamBeginCapture_v2_ptsz),
            ),
        ),
        "cuStreamBeginCapture" => (
            0,
            pick(
                a!(cap::cuStreamBeginCapture),
                a!(cap::cuStreamBeginCapture_ptsz),
            ),
        ),
        "cuStreamBeginCaptureToGraph" => (
            12030,
            pick(
                a!(cap::cuStreamBeginCaptureToGraph),
                a!(cap::cuStreamBeginCaptureToGraph_ptsz),
            ),
        ),
        "cuStreamEndCapture" => (
            0,
            pick(
                a!(cap::cuStreamEndCapture),
                a!(cap::cuStreamEndCapture_ptsz),
            ),
        ),
        "cuStreamIsCapturing" => (
            0,
            pick(
                a!(cap::cuStreamIsCapturing),
                a!(cap::cuStreamIsCapturing_ptsz),
            ),
        ),
        "cuThreadExchangeStreamCaptureMode" => (10010, a!(cap::cuThreadExchangeStreamCaptureMode)),
        "cuGraphDestroy" => (0, a!(cap::cuGraphDestroy)),
        "cuDeviceGetGraphMemAttribute" => (11040, a!(cap::cuDeviceGetGraphMemAttribute)),
        "cuGetErrorName" => (0, a!(err::cuGetErrorName)),
        "cuGetErrorString" => (0, a!(err::cuGetErrorString)),
        _ => return Lookup::Unknown,
    };
    if v < min {
        Lookup::TooOld
    } else {
        Lookup::Found(addr)
    }
}

unsafe fn get(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
    entry: c_int,
) -> CUresult {
    LAST_ENTRY.store(entry, Ordering::Relaxed);
    if symbol.is_null() || pfn.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pfn = std::ptr::null_mut();
    // CU_GET_PROC_ADDRESS_DEFAULT 0, LEGACY_STREAM 1, PER_THREAD_DEFAULT_STREAM 2
    let ptsz = match flags {
        0 | 1 => false,
        2 => true,
        _ => return CUDA_ERROR_INVALID_VALUE,
    };
    let name = CStr::from_ptr(symbol).to_str().unwrap_or("");
    let (code, st) = match resolve(name, version, ptsz) {
        Lookup::Found(addr) => {
            *pfn = addr as *mut c_void;
            (CUDA_SUCCESS, STATUS_SUCCESS)
        }
        Lookup::TooOld => (CUDA_ERROR_NOT_FOUND, STATUS_VERSION_NOT_SUFFICIENT),
        Lookup::Unknown => (CUDA_ERROR_NOT_FOUND, STATUS_SYMBOL_NOT_FOUND),
    };
    if let Some(s) = status.as_mut() {
        *s = st;
    }
    code
}

/// The exported pre-12.0 ABI (no status argument).
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> CUresult {
    get(
        symbol,
        pfn,
        cuda_version,
        flags,
        std::ptr::null_mut(),
        black_box(1),
    )
}

#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CUresult {
    get(symbol, pfn, cuda_version, flags, status, black_box(2))
}

/// What "cuGetProcAddress" resolves to below 12000: the 4-argument ABI at an address that no
/// exported name has (as on driver 580).
unsafe extern "C" fn get_proc_address_internal(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> CUresult {
    get(
        symbol,
        pfn,
        cuda_version,
        flags,
        std::ptr::null_mut(),
        black_box(3),
    )
}
