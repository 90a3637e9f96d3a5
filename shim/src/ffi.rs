//! C types and constants of the driver, runtime and NCCL ABIs, spelled as raw integers.
//!
//! Results stay plain `c_int`: a code these bindings do not know must pass through
//! unchanged, which an `enum` could not promise.

#![allow(non_camel_case_types)]

use std::ffi::{c_int, c_uint, c_void};

pub type CUresult = c_int;
pub type CUdevice = c_int;
pub type CUdeviceptr = u64;
pub type CUcontext = *mut c_void;
pub type CUstream = *mut c_void;
pub type CUmemoryPool = *mut c_void;
pub type CUgraph = *mut c_void;
pub type CUmemGenericAllocationHandle = u64;
pub type NcclResult = c_int;

pub const CUDA_SUCCESS: CUresult = 0;
/// Returned only when vramledger cannot find the real function at all (never otherwise).
pub const CUDA_ERROR_NOT_FOUND: CUresult = 500;
pub const NCCL_INTERNAL_ERROR: NcclResult = 3;

pub const CU_MEM_LOCATION_TYPE_DEVICE: c_int = 1;
pub const CU_STREAM_CAPTURE_MODE_RELAXED: c_uint = 2;
pub const CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: c_int = 5;
pub const CU_MEMPOOL_ATTR_USED_MEM_CURRENT: c_int = 7;

/// `CUmemLocation`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUmemLocation {
    pub type_: c_int,
    pub id: c_int,
}

/// `CUmemAllocationProp` (the fields vramledger reads come first and are stable).
#[repr(C)]
pub struct CUmemAllocationProp {
    pub type_: c_int,
    pub requested_handle_types: c_int,
    pub location: CUmemLocation,
    pub win32_handle_meta_data: *mut c_void,
    pub alloc_flags: [u8; 8],
}

/// `CUmemPoolProps` (only the leading fields are read).
#[repr(C)]
pub struct CUmemPoolProps {
    pub alloc_type: c_int,
    pub handle_types: c_int,
    pub location: CUmemLocation,
}

/// `CUipcMemHandle`: 64 opaque bytes passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUipcMemHandle {
    pub reserved: [u8; 64],
}
