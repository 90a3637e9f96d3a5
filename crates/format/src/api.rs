//! Which entry point produced a record: one stable number per hooked function, under the
//! exact (versioned) name the driver, runtime or NCCL exports.
//!
//! Numbers are part of the format: append new entries, never renumber.

macro_rules! apis {
    ($($variant:ident = $num:expr => $name:expr,)*) => {
        /// A hooked entry point (or an internal source such as a vramledger sample).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        #[allow(non_camel_case_types)]
        pub enum Api { $($variant = $num,)* }

        impl Api {
            /// Every known entry point, in numeric order.
            pub const ALL: &'static [Api] = &[$(Api::$variant,)*];

            /// The exported (versioned) name, e.g. `cuMemAlloc_v2`.
            pub const fn name(self) -> &'static str {
                match self { $(Api::$variant => $name,)* }
            }

            /// The entry point with this number, if any.
            pub fn from_u16(n: u16) -> Option<Api> {
                match n { $($num => Some(Api::$variant),)* _ => None }
            }

            /// The entry point exported under this exact name.
            pub fn from_name(name: &str) -> Option<Api> {
                match name { $($name => Some(Api::$variant),)* _ => None }
            }
        }
    };
}

apis! {
    None = 0 => "-",
    // Device memory.
    cuMemAlloc_v2 = 1 => "cuMemAlloc_v2",
    cuMemAllocPitch_v2 = 2 => "cuMemAllocPitch_v2",
    cuMemAllocManaged = 3 => "cuMemAllocManaged",
    cuMemFree_v2 = 4 => "cuMemFree_v2",
    cuMemAllocAsync = 5 => "cuMemAllocAsync",
    cuMemAllocAsync_ptsz = 6 => "cuMemAllocAsync_ptsz",
    cuMemAllocFromPoolAsync = 7 => "cuMemAllocFromPoolAsync",
    cuMemAllocFromPoolAsync_ptsz = 8 => "cuMemAllocFromPoolAsync_ptsz",
    cuMemFreeAsync = 9 => "cuMemFreeAsync",
    cuMemFreeAsync_ptsz = 10 => "cuMemFreeAsync_ptsz",
    cuMemPoolCreate = 11 => "cuMemPoolCreate",
    cuMemPoolDestroy = 12 => "cuMemPoolDestroy",
    cuMemPoolTrimTo = 13 => "cuMemPoolTrimTo",
    // VMM.
    cuMemCreate = 20 => "cuMemCreate",
    cuMemRetainAllocationHandle = 21 => "cuMemRetainAllocationHandle",
    cuMemRelease = 22 => "cuMemRelease",
    cuMemMap = 23 => "cuMemMap",
    cuMemUnmap = 24 => "cuMemUnmap",
    cuMemAddressReserve = 25 => "cuMemAddressReserve",
    cuMemAddressFree = 26 => "cuMemAddressFree",
    cuMemImportFromShareableHandle = 27 => "cuMemImportFromShareableHandle",
    cuIpcOpenMemHandle_v2 = 28 => "cuIpcOpenMemHandle_v2",
    cuIpcCloseMemHandle = 29 => "cuIpcCloseMemHandle",
    // Host memory.
    cuMemHostAlloc = 30 => "cuMemHostAlloc",
    cuMemAllocHost_v2 = 31 => "cuMemAllocHost_v2",
    cuMemFreeHost = 32 => "cuMemFreeHost",
    cuMemHostRegister_v2 = 33 => "cuMemHostRegister_v2",
    cuMemHostUnregister = 34 => "cuMemHostUnregister",
    // Context.
    cuInit = 40 => "cuInit",
    cuDevicePrimaryCtxRetain = 41 => "cuDevicePrimaryCtxRetain",
    cuDevicePrimaryCtxRelease_v2 = 42 => "cuDevicePrimaryCtxRelease_v2",
    cuCtxCreate_v2 = 43 => "cuCtxCreate_v2",
    cuCtxCreate_v3 = 44 => "cuCtxCreate_v3",
    cuCtxCreate_v4 = 45 => "cuCtxCreate_v4",
    cuCtxDestroy_v2 = 46 => "cuCtxDestroy_v2",
    // Green contexts (CUDA 12.4+): noted as contexts on their device, not recorded.
    cuGreenCtxCreate = 47 => "cuGreenCtxCreate",
    // Stream capture.
    cuStreamBeginCapture = 50 => "cuStreamBeginCapture",
    cuStreamBeginCapture_ptsz = 51 => "cuStreamBeginCapture_ptsz",
    cuStreamBeginCapture_v2 = 52 => "cuStreamBeginCapture_v2",
    cuStreamBeginCapture_v2_ptsz = 53 => "cuStreamBeginCapture_v2_ptsz",
    cuStreamBeginCaptureToGraph = 54 => "cuStreamBeginCaptureToGraph",
    cuStreamBeginCaptureToGraph_ptsz = 55 => "cuStreamBeginCaptureToGraph_ptsz",
    cuStreamEndCapture = 56 => "cuStreamEndCapture",
    cuStreamEndCapture_ptsz = 57 => "cuStreamEndCapture_ptsz",
    cuThreadExchangeStreamCaptureMode = 58 => "cuThreadExchangeStreamCaptureMode",
    // Memory information and entry-point lookup.
    cuMemGetInfo_v2 = 60 => "cuMemGetInfo_v2",
    cuGetProcAddress = 61 => "cuGetProcAddress",
    cuGetProcAddress_v2 = 62 => "cuGetProcAddress_v2",
    // NCCL.
    ncclMemAlloc = 70 => "ncclMemAlloc",
    ncclMemFree = 71 => "ncclMemFree",
    ncclCommRegister = 72 => "ncclCommRegister",
    ncclCommDeregister = 73 => "ncclCommDeregister",
    ncclCommWindowRegister = 74 => "ncclCommWindowRegister",
    ncclCommWindowDeregister = 75 => "ncclCommWindowDeregister",
    // Sources inside vramledger itself.
    VramledgerSample = 100 => "vramledger_sample",
    VramledgerStage = 101 => "vramledger_stage",
    VramledgerLogLine = 102 => "vramledger_log_line",
    NvmlSample = 103 => "nvml",
    // An engine settings line or the model path it names: a `warning`-kind record whose
    // text is a part of `vramledger_engines::log::settings`, never a stage change.
    VramledgerSettings = 104 => "vramledger_settings",
    // An engine line that carries sizing numbers without changing the stage (vLLM's
    // `GPU KV cache size: …`, `Maximum concurrency …`, the `--kv-cache-memory=` summary):
    // a `warning`-kind record whose text is the line, secrets redacted.
    VramledgerEngineLine = 105 => "vramledger_engine_line",
    // The Python pool hooks, through libvramledger's C API.
    VramledgerPoolBegin = 110 => "vramledger_pool_begin",
    VramledgerPoolEnd = 111 => "vramledger_pool_end",
    VramledgerTorchSegment = 112 => "vramledger_torch_segment",
    VramledgerPoolHooks = 113 => "vramledger_pool_hooks",
}

#[cfg(test)]
mod tests {
    use super::Api;

    #[test]
    fn names_and_numbers_round_trip() {
        for &api in Api::ALL {
            assert_eq!(Api::from_u16(api as u16), Some(api));
            assert_eq!(Api::from_name(api.name()), Some(api));
        }
        assert_eq!(Api::from_u16(9999), None);
        assert_eq!(Api::from_name("cuMemAlloc"), None);
    }
}
