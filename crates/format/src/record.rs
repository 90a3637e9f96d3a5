//! Records: what happened, to which bytes, on behalf of whom.
//!
//! Every record except the header is an [`Event`]: a fixed 88-byte part followed by an
//! optional UTF-8 text (a module path, a stage name, a log line, a warning). The meaning
//! of the generic fields (`addr`, `size`, `handle`, `arg0..2`) depends on the [`Kind`];
//! each kind documents it.

macro_rules! tagged {
    ($(#[$m:meta])* $ty:ident : $repr:ty { $($(#[$vm:meta])* $variant:ident = $num:expr => $name:expr,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr($repr)]
        pub enum $ty { $($(#[$vm])* $variant = $num,)* }

        impl $ty {
            /// Every value, in numeric order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant,)*];
            /// The name used in JSON and reports.
            pub const fn name(self) -> &'static str {
                match self { $($ty::$variant => $name,)* }
            }
            /// One past the highest number.
            const LOOKUP_LEN: usize = {
                let mut m = 0usize;
                $(if $num as usize > m { m = $num as usize; })*
                m + 1
            };
            /// Number → value (tags are few and small: a table beats the match, which the
            /// replay ran several times a record).
            const LOOKUP: [Option<$ty>; $ty::LOOKUP_LEN] = {
                let mut t = [None; $ty::LOOKUP_LEN];
                $(t[$num as usize] = Some($ty::$variant);)*
                t
            };
            /// The value with this number, if any.
            #[inline]
            pub fn from_repr(n: $repr) -> Option<$ty> {
                match $ty::LOOKUP.get(n as usize) {
                    Some(v) => *v,
                    None => None,
                }
            }
            /// The value with this name, if any.
            pub fn from_name(s: &str) -> Option<$ty> {
                match s { $($name => Some($ty::$variant),)* _ => None }
            }
        }
    };
}

tagged! {
    /// Record kinds. Tags are fixed forever.
    Kind: u16 {
        /// Process facts as key/value pairs (see [`crate::Header`]).
        Header = 1 => "header",
        /// Defines module id `module` as the file at path `text`.
        Module = 2 => "module",
        /// The stage `stage` (named `text`) starts now. `api`: who said so.
        /// `arg0`: engine number field if any (bits of an f64), `arg1`: second number.
        Stage = 3 => "stage",
        /// Format 2: defines a template of compact records (`crate::compact`). Consumed by
        /// readers, never an event of its own.
        Template = 4 => "template",
        /// Device memory allocated at `addr`, `size` bytes (`arg0`: bytes requested).
        Alloc = 10 => "alloc",
        /// Device memory at `addr` freed (`size`, `owner`, `module` of the allocation when known).
        Free = 11 => "free",
        /// An allocation failed: `size` bytes requested, `result` the error code.
        AllocFailed = 12 => "alloc_failed",
        /// VMM physical handle `handle` created: `size` bytes on `device`; `mem` says device or host.
        VmmCreate = 20 => "vmm_create",
        /// A reference to `handle` was taken for the mapping at `addr`.
        VmmRetain = 21 => "vmm_retain",
        /// A reference to `handle` was dropped.
        VmmRelease = 22 => "vmm_release",
        /// `handle` mapped at `addr`, `size` bytes, at offset `arg0`.
        VmmMap = 23 => "vmm_map",
        /// The mapping at `addr`, `size` bytes, was removed.
        VmmUnmap = 24 => "vmm_unmap",
        /// Virtual addresses reserved: `addr`, `size` (never VRAM).
        VaReserve = 25 => "va_reserve",
        /// Virtual reservation at `addr`, `size`, freed.
        VaFree = 26 => "va_free",
        /// A peer's memory imported as `handle` (or opened at `addr` for IPC): not local VRAM.
        VmmImport = 27 => "vmm_import",
        /// An IPC mapping at `addr` closed.
        IpcClose = 28 => "ipc_close",
        /// Pinned host memory at `addr`, `size` bytes (allocated or registered; see `api`).
        HostAlloc = 30 => "host_alloc",
        /// Pinned host memory at `addr` released or unregistered.
        HostFree = 31 => "host_free",
        /// A stream-ordered pool `handle` was created on `device`.
        PoolCreate = 40 => "pool_create",
        /// Pool `handle` destroyed.
        PoolDestroy = 41 => "pool_destroy",
        /// Pool `handle` sampled: `arg0` reserved bytes, `arg1` used bytes (physical usage).
        PoolSample = 42 => "pool_sample",
        /// A registration edge: `addr`, `size` registered with NCCL comm `arg0` as `handle`.
        Register = 50 => "register",
        /// Registration `handle` with comm `arg0` removed.
        Deregister = 51 => "deregister",
        /// Stream capture began on stream `handle`, mode `arg0`.
        CaptureBegin = 60 => "capture_begin",
        /// Stream capture ended on stream `handle`.
        CaptureEnd = 61 => "capture_end",
        /// PyTorch routes thread `tid`'s (or every thread's) allocations on `device` to one of
        /// its private memory pools from now on (seen by the Python hook, not the driver):
        /// `handle` the window's serial number, `arg0`/`arg1` the pool id (both `u64::MAX`
        /// while a capture's pool is not known yet), `arg2` the [`crate::record::PoolScope`].
        PoolBegin = 62 => "pool_begin",
        /// The pool window `handle` on `device` closed: `arg0`/`arg1` the pool id (now known
        /// for every window), `arg2` the scope.
        PoolEnd = 63 => "pool_end",
        /// PyTorch's own allocator snapshot: one segment at `addr`, `size` bytes on `device`,
        /// in pool `arg0`/`arg1` ((0, 0) is the default pool); `handle` numbers the snapshot.
        TorchSegment = 64 => "torch_segment",
        /// The Python pool hooks are installed: `arg0` functions wrapped; `text` torch's version.
        PoolHooks = 65 => "pool_hooks",
        /// A device free-memory reading: `arg0` free, `arg1` total (`api` says whose).
        MemInfo = 70 => "meminfo",
        /// NVML reading for `device`: `arg0` device free, `arg1` device total, `arg2` this
        /// process's used bytes (`u64::MAX` when NVML could not tell).
        NvmlSample = 71 => "nvml_sample",
        /// A context event on `device` (`api`): `size` measured bytes it took (0 if unknown),
        /// `arg0` NVML device free before, `arg1` after, `handle` the context.
        Context = 80 => "context",
        /// Device `device` as the driver names it, once per device: `text` is
        /// `uuid=GPU-…` and `pci_bus_id=…` lines (either may be missing).
        Device = 81 => "device",
        /// The live books at this moment: `owner` holds `size` bytes on `device`
        /// (`mem` says which kind of memory). Written at stage boundaries and failed allocations.
        Live = 90 => "live",
        /// Something vramledger wants a human to know (`text`).
        Warning = 100 => "warning",
    }
}

tagged! {
    /// Physical owner of device memory.
    Owner: u8 {
        /// No owner (events that hold no memory).
        None = 0 => "none",
        /// PyTorch's caching allocator, normal pools.
        Torch = 1 => "torch",
        /// Made by PyTorch for a private pool (CUDA graphs, `MemPool`): inside a stream-capture
        /// window, or inside a pool window the Python hook saw (then with the pool id).
        TorchGraphPool = 2 => "torch_graph_pool",
        /// NCCL: internal buffers and ncclMemAlloc.
        Nccl = 3 => "nccl",
        /// cuMemAlloc / cudaMalloc by any other module.
        Direct = 4 => "direct",
        /// cuMemCreate by any other module.
        Vmm = 5 => "vmm",
        /// The CUDA context (measured, not hooked).
        Context = 6 => "context",
        /// Device memory that moved but no hook saw (reports only).
        Unattributed = 7 => "unattributed",
    }
}

tagged! {
    /// What kind of memory a record is about.
    MemKind: u8 {
        /// Device memory (VRAM).
        Device = 0 => "device",
        /// Page-locked host memory: never VRAM.
        HostPinned = 1 => "host_pinned",
        /// Another process's or device's memory mapped here: not local VRAM.
        Peer = 2 => "peer",
        /// Virtual address space only.
        Virtual = 3 => "virtual",
        /// Unified (managed) memory: resident where the driver migrates it.
        Managed = 4 => "managed",
    }
}

/// Bits of [`Event::flags`]: why an owner was chosen.
pub mod flags {
    /// The allocating thread had begun a stream capture that was still open.
    pub const CAPTURE_THIS_THREAD: u32 = 1 << 0;
    /// The allocating thread's capture mode was relaxed.
    pub const MODE_RELAXED: u32 = 1 << 1;
    /// Some capture was open in the process.
    pub const CAPTURE_OPEN: u32 = 1 << 2;
    /// The owning module could not be found (unwinding stopped early).
    pub const MODULE_UNKNOWN: u32 = 1 << 3;
    /// The memory was reached through an entry point that vramledger saw fail.
    pub const FAILED: u32 = 1 << 4;
    /// Made inside a PyTorch pool window: `arg1`/`arg2` hold the pool id.
    pub const TORCH_POOL: u32 = 1 << 5;
    /// Made inside a capture's pool window whose id was not known yet: `arg1` holds the
    /// window's serial number; the window's `pool_end` record names the pool.
    pub const TORCH_POOL_PENDING: u32 = 1 << 6;
}

/// How a PyTorch pool window chooses the allocations it routes (`arg2` of
/// [`Kind::PoolBegin`]/[`Kind::PoolEnd`]), mirroring the filters of torch's
/// `beginAllocateToPool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PoolScope {
    /// The calling thread (`_cuda_beginAllocateCurrentThreadToPool`, `use_mem_pool`).
    Thread = 1,
    /// Every thread (`_cuda_beginAllocateToPool`).
    AllThreads = 2,
    /// The caller's current stream (`_cuda_beginAllocateCurrentStreamToPool`): matched by the
    /// calling thread, because a `cudaMalloc` does not say which stream it serves.
    Stream = 3,
    /// A CUDA-graph capture (`CUDAGraph.capture_begin`): the calling thread while its stream
    /// capture is open.
    Capture = 4,
}

impl PoolScope {
    /// The scope with this number.
    pub fn from_u64(v: u64) -> Option<PoolScope> {
        match v {
            1 => Some(PoolScope::Thread),
            2 => Some(PoolScope::AllThreads),
            3 => Some(PoolScope::Stream),
            4 => Some(PoolScope::Capture),
            _ => None,
        }
    }
    /// The name in dumps and reports.
    pub fn name(self) -> &'static str {
        match self {
            PoolScope::Thread => "thread",
            PoolScope::AllThreads => "all_threads",
            PoolScope::Stream => "stream",
            PoolScope::Capture => "capture",
        }
    }
}

/// A pool id field that is not known (yet).
pub const POOL_UNKNOWN: u64 = u64::MAX;

/// Length of the fixed part of an event payload.
pub const EVENT_FIXED_LEN: usize = 88;

/// One journal record (every kind but the header).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    /// Record kind, as a raw tag (readers keep unknown tags to skip them).
    pub kind: u16,
    /// CLOCK_MONOTONIC nanoseconds.
    pub t_ns: u64,
    /// Kernel thread id.
    pub tid: u32,
    /// CUDA device ordinal, -1 when unknown.
    pub device: i32,
    /// Stage id (0 = `startup`).
    pub stage: u32,
    /// Module id (0 = unknown).
    pub module: u32,
    /// [`Owner`] as its number.
    pub owner: u8,
    /// [`MemKind`] as its number.
    pub mem: u8,
    /// [`crate::Api`] as its number.
    pub api: u16,
    /// The call's result code (CUresult or ncclResult_t), passed through unchanged.
    pub result: i32,
    /// [`flags`] bits.
    pub flags: u32,
    /// Device or host address.
    pub addr: u64,
    /// Bytes.
    pub size: u64,
    /// VMM handle, pool, stream or context, by kind.
    pub handle: u64,
    /// Kind-specific.
    pub arg0: u64,
    /// Kind-specific.
    pub arg1: u64,
    /// Kind-specific.
    pub arg2: u64,
    /// Kind-specific text (empty when none).
    pub text: String,
}

impl Event {
    /// The kind, if this reader knows it.
    #[inline]
    pub fn kind(&self) -> Option<Kind> {
        Kind::from_repr(self.kind)
    }
    /// The owner, if known.
    #[inline]
    pub fn owner(&self) -> Owner {
        Owner::from_repr(self.owner).unwrap_or(Owner::None)
    }
    /// The memory kind.
    #[inline]
    pub fn mem(&self) -> MemKind {
        MemKind::from_repr(self.mem).unwrap_or(MemKind::Device)
    }
    /// The entry point.
    pub fn api(&self) -> Option<crate::Api> {
        crate::Api::from_u16(self.api)
    }
    /// The PyTorch pool id of an allocation made inside a pool window (`None` when the window
    /// was not seen, or its pool was named only at its end: see [`flags::TORCH_POOL_PENDING`]).
    pub fn torch_pool(&self) -> Option<(u64, u64)> {
        (self.flags & flags::TORCH_POOL != 0).then_some((self.arg1, self.arg2))
    }

    /// Writes the fixed part into `out[..EVENT_FIXED_LEN]`.
    pub fn encode_fixed(&self, out: &mut [u8]) {
        let mut w = Writer { out, at: 0 };
        w.u64(self.t_ns);
        w.u32(self.tid);
        w.u32(self.device as u32);
        w.u32(self.stage);
        w.u32(self.module);
        w.bytes(&[self.owner, self.mem]);
        w.bytes(&self.api.to_le_bytes());
        w.u32(self.result as u32);
        w.u32(self.flags);
        w.u32(0);
        for v in [
            self.addr,
            self.size,
            self.handle,
            self.arg0,
            self.arg1,
            self.arg2,
        ] {
            w.u64(v);
        }
        debug_assert_eq!(w.at, EVENT_FIXED_LEN);
    }

    /// Encodes the whole payload (fixed part and text) into a new buffer.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8; EVENT_FIXED_LEN + self.text.len()];
        self.encode_fixed(&mut out);
        out[EVENT_FIXED_LEN..].copy_from_slice(self.text.as_bytes());
        out
    }

    /// Decodes a payload of `kind`. Payloads longer than this reader expects keep their
    /// known part; shorter ones are an error.
    pub fn decode(kind: u16, payload: &[u8]) -> Option<Event> {
        let fixed: &[u8; EVENT_FIXED_LEN] = payload.get(..EVENT_FIXED_LEN)?.try_into().ok()?;
        // Fixed offsets into a fixed-size array: no bounds check survives compilation.
        let u32_at = |at: usize| {
            u32::from_le_bytes([fixed[at], fixed[at + 1], fixed[at + 2], fixed[at + 3]])
        };
        let u64_at = |at: usize| u32_at(at) as u64 | (u32_at(at + 4) as u64) << 32;
        let text = match &payload[EVENT_FIXED_LEN..] {
            [] => String::new(),
            rest => String::from_utf8_lossy(rest).into_owned(),
        };
        Some(Event {
            kind,
            t_ns: u64_at(0),
            tid: u32_at(8),
            device: u32_at(12) as i32,
            stage: u32_at(16),
            module: u32_at(20),
            owner: fixed[24],
            mem: fixed[25],
            api: u16::from_le_bytes([fixed[26], fixed[27]]),
            result: u32_at(28) as i32,
            flags: u32_at(32),
            addr: u64_at(40),
            size: u64_at(48),
            handle: u64_at(56),
            arg0: u64_at(64),
            arg1: u64_at(72),
            arg2: u64_at(80),
            text,
        })
    }
}

struct Writer<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn bytes(&mut self, b: &[u8]) {
        self.out[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
    }
    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_round_trip() {
        let e = Event {
            kind: Kind::Alloc as u16,
            t_ns: 123_456_789_012,
            tid: 4242,
            device: -1,
            stage: 3,
            module: 7,
            owner: Owner::TorchGraphPool as u8,
            mem: MemKind::Device as u8,
            api: crate::Api::cuMemAlloc_v2 as u16,
            result: -12345,
            flags: flags::CAPTURE_THIS_THREAD | flags::MODE_RELAXED,
            addr: 0x7f00_0000_0000,
            size: 2 << 20,
            handle: u64::MAX,
            arg0: 1,
            arg1: 2,
            arg2: 3,
            text: "libc10_cuda.so ünïcode".into(),
        };
        let p = e.encode();
        assert_eq!(Event::decode(e.kind, &p), Some(e.clone()));
        // A newer writer's longer fixed part is not text we can trust, but the known
        // fields still decode; a short payload is rejected.
        assert_eq!(Event::decode(e.kind, &p[..EVENT_FIXED_LEN - 1]), None);
    }

    #[test]
    fn names_round_trip() {
        for &k in Kind::ALL {
            assert_eq!(Kind::from_name(k.name()), Some(k));
            assert_eq!(Kind::from_repr(k as u16), Some(k));
        }
        for &o in Owner::ALL {
            assert_eq!(Owner::from_name(o.name()), Some(o));
        }
        assert_eq!(Owner::from_name("torch_cache"), None);
    }

    #[test]
    fn every_number_maps_to_its_value_or_none() {
        for n in 0..=u16::MAX {
            let want = Kind::ALL.iter().copied().find(|&k| k as u16 == n);
            assert_eq!(Kind::from_repr(n), want, "{n}");
        }
        for n in 0..=u8::MAX {
            let want = Owner::ALL.iter().copied().find(|&o| o as u8 == n);
            assert_eq!(Owner::from_repr(n), want, "{n}");
            let want = MemKind::ALL.iter().copied().find(|&m| m as u8 == n);
            assert_eq!(MemKind::from_repr(n), want, "{n}");
        }
    }
}
