//! The program's own free-memory readings (SGLang reads one at every stage boundary).

#![allow(non_snake_case)]

use vramledger_format::{Api, Kind};

use super::forward::forward;
use crate::ffi::*;
use crate::{devices, guard, recorder};

#[no_mangle]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CUresult {
    crate::note_entry!();
    let api = Api::cuMemGetInfo_v2;
    let rc = forward!(
        api,
        unsafe extern "C" fn(*mut usize, *mut usize) -> CUresult,
        free,
        total
    );
    if rc == CUDA_SUCCESS && !free.is_null() && !total.is_null() {
        guard::record_on(|t| {
            let mut e = recorder::event_on(t, Kind::MemInfo, api);
            // SAFETY: the call succeeded and wrote both (neither pointer is NULL).
            let (f, tot) = unsafe { (*free, *total) };
            e.arg0 = f as u64;
            e.arg1 = tot as u64;
            e.device = devices::current();
            recorder::emit_on(Some(t), &mut e, b"");
        });
    }
    rc
}
