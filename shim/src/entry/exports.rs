//! The one list of everything `libvramledger.so` exports: each hooked entry point (by the
//! exact name the driver, runtime or NCCL exports), `dlsym`, the two `cuGetProcAddress`
//! versions, `write` (the stdout/stderr tap, [`crate::hooks::tap`]), and the public API
//! (`vramledger_stage`, `vramledger_sample`; the Python pool hooks' `vramledger_pool_*` and
//! `vramledger_torch_segment` live in [`crate::pools_api`]). A test compares this list with the
//! built library's dynamic symbol table.

use std::ffi::c_char;

use vramledger_format::Api;

use crate::hooks::{capture, context, host, meminfo, memory, nccl, pools, vmm};
use crate::{boundary, guard, samples};

/// The hook that stands in for `api`, as an address (0 for entries that are not hooks, and
/// for the two `cuGetProcAddress` versions, whose hooks [`super::procaddr::own`] gives: they
/// are the ones that route through this table).
pub fn hook_addr(api: Api) -> usize {
    use Api as A;
    match api {
        A::cuMemAlloc_v2 => memory::cuMemAlloc_v2 as *const () as usize,
        A::cuMemAllocPitch_v2 => memory::cuMemAllocPitch_v2 as *const () as usize,
        A::cuMemAllocManaged => memory::cuMemAllocManaged as *const () as usize,
        A::cuMemFree_v2 => memory::cuMemFree_v2 as *const () as usize,
        A::cuMemAllocAsync => pools::cuMemAllocAsync as *const () as usize,
        A::cuMemAllocAsync_ptsz => pools::cuMemAllocAsync_ptsz as *const () as usize,
        A::cuMemAllocFromPoolAsync => pools::cuMemAllocFromPoolAsync as *const () as usize,
        A::cuMemAllocFromPoolAsync_ptsz => {
            pools::cuMemAllocFromPoolAsync_ptsz as *const () as usize
        }
        A::cuMemFreeAsync => pools::cuMemFreeAsync as *const () as usize,
        A::cuMemFreeAsync_ptsz => pools::cuMemFreeAsync_ptsz as *const () as usize,
        A::cuMemPoolCreate => pools::cuMemPoolCreate as *const () as usize,
        A::cuMemPoolDestroy => pools::cuMemPoolDestroy as *const () as usize,
        A::cuMemPoolTrimTo => pools::cuMemPoolTrimTo as *const () as usize,
        A::cuMemCreate => vmm::cuMemCreate as *const () as usize,
        A::cuMemRetainAllocationHandle => vmm::cuMemRetainAllocationHandle as *const () as usize,
        A::cuMemRelease => vmm::cuMemRelease as *const () as usize,
        A::cuMemMap => vmm::cuMemMap as *const () as usize,
        A::cuMemUnmap => vmm::cuMemUnmap as *const () as usize,
        A::cuMemAddressReserve => vmm::cuMemAddressReserve as *const () as usize,
        A::cuMemAddressFree => vmm::cuMemAddressFree as *const () as usize,
        A::cuMemImportFromShareableHandle => {
            vmm::cuMemImportFromShareableHandle as *const () as usize
        }
        A::cuIpcOpenMemHandle_v2 => vmm::cuIpcOpenMemHandle_v2 as *const () as usize,
        A::cuIpcCloseMemHandle => vmm::cuIpcCloseMemHandle as *const () as usize,
        A::cuMemHostAlloc => host::cuMemHostAlloc as *const () as usize,
        A::cuMemAllocHost_v2 => host::cuMemAllocHost_v2 as *const () as usize,
        A::cuMemFreeHost => host::cuMemFreeHost as *const () as usize,
        A::cuMemHostRegister_v2 => host::cuMemHostRegister_v2 as *const () as usize,
        A::cuMemHostUnregister => host::cuMemHostUnregister as *const () as usize,
        A::cuInit => context::cuInit as *const () as usize,
        A::cuDevicePrimaryCtxRetain => context::cuDevicePrimaryCtxRetain as *const () as usize,
        A::cuDevicePrimaryCtxRelease_v2 => {
            context::cuDevicePrimaryCtxRelease_v2 as *const () as usize
        }
        A::cuCtxCreate_v2 => context::cuCtxCreate_v2 as *const () as usize,
        A::cuCtxCreate_v3 => context::cuCtxCreate_v3 as *const () as usize,
        A::cuCtxCreate_v4 => context::cuCtxCreate_v4 as *const () as usize,
        A::cuCtxDestroy_v2 => context::cuCtxDestroy_v2 as *const () as usize,
        A::cuGreenCtxCreate => context::cuGreenCtxCreate as *const () as usize,
        A::cuStreamBeginCapture => capture::cuStreamBeginCapture as *const () as usize,
        A::cuStreamBeginCapture_ptsz => capture::cuStreamBeginCapture_ptsz as *const () as usize,
        A::cuStreamBeginCapture_v2 => capture::cuStreamBeginCapture_v2 as *const () as usize,
        A::cuStreamBeginCapture_v2_ptsz => {
            capture::cuStreamBeginCapture_v2_ptsz as *const () as usize
        }
        A::cuStreamBeginCaptureToGraph => {
            capture::cuStreamBeginCaptureToGraph as *const () as usize
        }
        A::cuStreamBeginCaptureToGraph_ptsz => {
            capture::cuStreamBeginCaptureToGraph_ptsz as *const () as usize
        }
        A::cuStreamEndCapture => capture::cuStreamEndCapture as *const () as usize,
        A::cuStreamEndCapture_ptsz => capture::cuStreamEndCapture_ptsz as *const () as usize,
        A::cuThreadExchangeStreamCaptureMode => {
            capture::cuThreadExchangeStreamCaptureMode as *const () as usize
        }
        A::cuMemGetInfo_v2 => meminfo::cuMemGetInfo_v2 as *const () as usize,
        A::ncclMemAlloc => nccl::ncclMemAlloc as *const () as usize,
        A::ncclMemFree => nccl::ncclMemFree as *const () as usize,
        A::ncclCommRegister => nccl::ncclCommRegister as *const () as usize,
        A::ncclCommDeregister => nccl::ncclCommDeregister as *const () as usize,
        A::ncclCommWindowRegister => nccl::ncclCommWindowRegister as *const () as usize,
        A::ncclCommWindowDeregister => nccl::ncclCommWindowDeregister as *const () as usize,
        A::cuGetProcAddress
        | A::cuGetProcAddress_v2
        | A::None
        | A::VramledgerSample
        | A::VramledgerStage
        | A::VramledgerLogLine
        | A::VramledgerSettings
        | A::VramledgerEngineLine
        | A::NvmlSample
        | A::VramledgerPoolBegin
        | A::VramledgerPoolEnd
        | A::VramledgerTorchSegment
        | A::VramledgerPoolHooks => 0,
    }
}

/// Public API: the program enters stage `name` (for instance from Python:
/// `ctypes.CDLL(None).vramledger_stage(b"weight_load")`). Samples free memory and writes
/// the live books. A NULL or empty name is ignored.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn vramledger_stage(name: *const c_char) {
    if name.is_null() {
        return;
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let bytes = unsafe { crate::recorder::c_bytes(name) };
    guard::record(|| {
        // A program names its stages as it likes: the same rules as a kept line's.
        let text = vramledger_engines::redact::text(&String::from_utf8_lossy(bytes)).into_owned();
        boundary::enter(&text, Api::VramledgerStage, [None, None], b"")
    });
}

/// Public API: records free memory and the live books now, without changing the stage.
#[no_mangle]
pub extern "C" fn vramledger_sample() {
    guard::record(|| {
        if crate::recorder::ensure() {
            samples::boundary();
        }
    });
}
