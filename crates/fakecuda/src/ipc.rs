//! Legacy CUDA IPC (cuIpcGetMemHandle / cuIpcOpenMemHandle_v2). The 64-byte handle names the
//! exporting process and range; opening maps peer memory at a new address on the current device
//! without taking device memory. As on the real driver, a process cannot open its own handle.
use std::os::raw::c_uint;

use crate::context::current;
use crate::state::{ffi, with_init, GRANULARITY};
use crate::types::*;

const MAGIC: &[u8; 8] = b"FAKEIPC\0";

#[no_mangle]
pub unsafe extern "C" fn cuIpcGetMemHandle(
    handle: *mut CUipcMemHandle,
    dptr: CUdeviceptr,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(handle)?;
            current(st)?;
            let (&base, l) = st
                .linear
                .range(..=dptr)
                .next_back()
                .ok_or(CUDA_ERROR_INVALID_VALUE)?;
            if l.managed || dptr >= base + l.size {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            let mut b = [0u8; 64];
            b[..8].copy_from_slice(MAGIC);
            b[8..12].copy_from_slice(&(libc::getpid() as u32).to_le_bytes());
            b[12..16].copy_from_slice(&(l.dev as u32).to_le_bytes());
            b[16..24].copy_from_slice(&base.to_le_bytes());
            b[24..32].copy_from_slice(&l.size.to_le_bytes());
            o.reserved = b;
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuIpcOpenMemHandle_v2(
    pdptr: *mut CUdeviceptr,
    handle: CUipcMemHandle,
    _flags: c_uint,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(pdptr)?;
            let (_, dev) = current(st)?;
            let b = handle.reserved;
            if &b[..8] != MAGIC {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            let word = |r: std::ops::Range<usize>| {
                b[r].iter()
                    .rev()
                    .fold(0u64, |acc, &x| (acc << 8) | x as u64)
            };
            if word(8..12) as i32 == libc::getpid() {
                return Err(CUDA_ERROR_INVALID_CONTEXT);
            }
            let size = round_up(word(24..32).max(1), GRANULARITY);
            let addr = st.devices[dev]
                .va
                .alloc(size, GRANULARITY)
                .ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
            st.ipc_opened.insert(addr, (dev, size));
            *o = addr;
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuIpcCloseMemHandle(dptr: CUdeviceptr) -> CUresult {
    ffi(|| {
        with_init(|st| {
            current(st)?;
            let (dev, _) = st
                .ipc_opened
                .remove(&dptr)
                .ok_or(CUDA_ERROR_INVALID_VALUE)?;
            st.devices[dev].va.free(dptr);
            Ok(())
        })
    })
}
