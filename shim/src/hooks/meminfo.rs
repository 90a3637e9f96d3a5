//! The program's own free-memory readings (SGLang reads one at every stage boundary).

#![allow(non_snake_case)]

use vramledger_format::{Api, Kind};

use super::{missing, real};
use crate::ffi::*;
use crate::guard;
use crate::recorder;

#[no_mangle]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemGetInfo_v2;
    let Some(f) = real!(
        api,
        unsafe extern "C" fn(*mut usize, *mut usize) -> CUresult
    ) else {
        return missing(api);
    };
    let rc = unsafe { f(free, total) };
    if rc == CUDA_SUCCESS && !free.is_null() && !total.is_null() {
        guard::record(|| {
            let mut e = recorder::event(Kind::MemInfo, api);
            e.arg0 = unsafe { *free } as u64;
            e.arg1 = unsafe { *total } as u64;
            e.device = recorder::current_device();
            recorder::emit(&e, b"");
        });
    }
    rc
}
