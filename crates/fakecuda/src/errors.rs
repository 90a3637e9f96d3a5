//! cuGetErrorName / cuGetErrorString for the codes the fake can return (and a few common
//! others). Unknown codes give INVALID_VALUE and a NULL string, as the real driver does.
use std::ffi::CStr;
use std::os::raw::c_char;

use crate::types::*;

const TABLE: &[(CUresult, &CStr, &CStr)] = &[
    (0, c"CUDA_SUCCESS", c"no error"),
    (1, c"CUDA_ERROR_INVALID_VALUE", c"invalid argument"),
    (2, c"CUDA_ERROR_OUT_OF_MEMORY", c"out of memory"),
    (3, c"CUDA_ERROR_NOT_INITIALIZED", c"initialization error"),
    (4, c"CUDA_ERROR_DEINITIALIZED", c"driver shutting down"),
    (
        100,
        c"CUDA_ERROR_NO_DEVICE",
        c"no CUDA-capable device is detected",
    ),
    (101, c"CUDA_ERROR_INVALID_DEVICE", c"invalid device ordinal"),
    (
        201,
        c"CUDA_ERROR_INVALID_CONTEXT",
        c"invalid device context",
    ),
    (
        400,
        c"CUDA_ERROR_INVALID_HANDLE",
        c"invalid resource handle",
    ),
    (
        401,
        c"CUDA_ERROR_ILLEGAL_STATE",
        c"the operation cannot be performed in the present state",
    ),
    (500, c"CUDA_ERROR_NOT_FOUND", c"named symbol not found"),
    (
        712,
        c"CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
        c"part or all of the requested memory range is already mapped",
    ),
    (
        713,
        c"CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
        c"pointer does not correspond to a registered memory region",
    ),
    (801, c"CUDA_ERROR_NOT_SUPPORTED", c"operation not supported"),
    (
        900,
        c"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        c"operation not permitted when stream is capturing",
    ),
    (
        901,
        c"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
        c"operation failed due to a previous error during capture",
    ),
    (
        908,
        c"CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
        c"attempt to terminate a thread-local capture sequence from another thread",
    ),
    (999, c"CUDA_ERROR_UNKNOWN", c"unknown error"),
];

unsafe fn lookup(code: CUresult, out_str: *mut *const c_char, name: bool) -> CUresult {
    if out_str.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    match TABLE.iter().find(|(c, _, _)| *c == code) {
        Some((_, n, s)) => {
            *out_str = if name { n.as_ptr() } else { s.as_ptr() };
            CUDA_SUCCESS
        }
        None => {
            *out_str = std::ptr::null();
            CUDA_ERROR_INVALID_VALUE
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuGetErrorName(error: CUresult, p_str: *mut *const c_char) -> CUresult {
    lookup(error, p_str, true)
}

#[no_mangle]
pub unsafe extern "C" fn cuGetErrorString(error: CUresult, p_str: *mut *const c_char) -> CUresult {
    lookup(error, p_str, false)
}
