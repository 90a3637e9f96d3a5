//! C types and constants of the driver API, spelled as in cuda.h. Opaque handles (CUcontext,
//! CUstream, CUmemoryPool, CUgraph) are pointers in C; the fake hands out u64 tokens, which have
//! the same ABI on every 64-bit target.
use std::os::raw::{c_int, c_uint, c_void};

pub type CUresult = c_int;
pub type CUdevice = c_int;
pub type CUdeviceptr = u64;
pub type CUhandle = u64;

pub const CUDA_SUCCESS: CUresult = 0;
pub const CUDA_ERROR_INVALID_VALUE: CUresult = 1;
pub const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
pub const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;
pub const CUDA_ERROR_NO_DEVICE: CUresult = 100;
pub const CUDA_ERROR_INVALID_DEVICE: CUresult = 101;
pub const CUDA_ERROR_INVALID_CONTEXT: CUresult = 201;
pub const CUDA_ERROR_INVALID_HANDLE: CUresult = 400;
pub const CUDA_ERROR_ILLEGAL_STATE: CUresult = 401;
pub const CUDA_ERROR_NOT_FOUND: CUresult = 500;
pub const CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: CUresult = 712;
pub const CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: CUresult = 713;
pub const CUDA_ERROR_NOT_SUPPORTED: CUresult = 801;
pub const CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: CUresult = 900;
pub const CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: CUresult = 901;
pub const CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: CUresult = 908;
pub const CUDA_ERROR_UNKNOWN: CUresult = 999;

/// CUmemLocationType
pub const CU_MEM_LOCATION_TYPE_DEVICE: c_uint = 1;
pub const CU_MEM_LOCATION_TYPE_HOST: c_uint = 2;
pub const CU_MEM_LOCATION_TYPE_HOST_NUMA: c_uint = 3;
pub const CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: c_uint = 4;
/// CUmemAllocationType
pub const CU_MEM_ALLOCATION_TYPE_PINNED: c_uint = 1;
/// CUmemAllocationHandleType
pub const CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: c_uint = 1;
pub const CU_MEM_HANDLE_TYPE_FABRIC: c_uint = 8;

/// CUstreamCaptureMode
pub const CU_STREAM_CAPTURE_MODE_GLOBAL: c_int = 0;
pub const CU_STREAM_CAPTURE_MODE_RELAXED: c_int = 2;
/// Special stream handles.
pub const CU_STREAM_LEGACY: CUhandle = 1;
pub const CU_STREAM_PER_THREAD: CUhandle = 2;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUmemLocation {
    pub type_: c_uint,
    pub id: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUmemAllocationFlags {
    pub compressionType: u8,
    pub gpuDirectRDMACapable: u8,
    pub usage: u16,
    pub reserved: [u8; 4],
}

#[repr(C)]
pub struct CUmemAllocationProp {
    pub type_: c_uint,
    pub requestedHandleTypes: c_uint,
    pub location: CUmemLocation,
    pub win32HandleMetaData: *mut c_void,
    pub allocFlags: CUmemAllocationFlags,
}

#[repr(C)]
pub struct CUmemAccessDesc {
    pub location: CUmemLocation,
    pub flags: c_uint,
}

#[repr(C)]
pub struct CUmemPoolProps {
    pub allocType: c_uint,
    pub handleTypes: c_uint,
    pub location: CUmemLocation,
    pub win32SecurityAttributes: *mut c_void,
    pub maxSize: usize,
    pub usage: u16,
    pub reserved: [u8; 54],
}

/// Passed by value to cuIpcOpenMemHandle_v2.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUipcMemHandle {
    pub reserved: [u8; 64],
}

/// Borrow a C out-pointer, or fail the call with INVALID_VALUE when it is NULL.
pub unsafe fn out<'a, T>(p: *mut T) -> Result<&'a mut T, CUresult> {
    p.as_mut().ok_or(CUDA_ERROR_INVALID_VALUE)
}

/// Borrow a C in-pointer, or fail with INVALID_VALUE when it is NULL.
pub unsafe fn input<'a, T>(p: *const T) -> Result<&'a T, CUresult> {
    p.as_ref().ok_or(CUDA_ERROR_INVALID_VALUE)
}

/// Round up to a power-of-two multiple.
pub fn round_up(n: u64, to: u64) -> u64 {
    n.div_ceil(to) * to
}
