//! The one process-wide model of the devices, behind one std Mutex (this is the fake driver,
//! not the shim: simplicity beats lock-freedom).
//!
//! Fork, as the real driver does it: a child forked after its parent initialised CUDA cannot
//! use it. Every driver call in that child, `cuInit` included, returns
//! CUDA_ERROR_NOT_INITIALIZED (3), which cudart reports as cudaErrorInitializationError (the
//! "initialization error" of forked PyTorch and TensorFlow workers). A child forked before
//! any `cuInit` initialises normally. NVML keeps working in the child.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, Once, TryLockError};

use crate::config;
use crate::types::*;
use crate::va::VaSpace;

/// Physical allocation granularity (and the VMM minimum/recommended granularity).
pub const GRANULARITY: u64 = 2 << 20;
const TIB: u64 = 1 << 40;
/// Per-device VA for linear memory and pool chunks: 0x7000_0000_0000 + dev << 40.
const DEVICE_VA_BASE: u64 = 0x7000_0000_0000;
/// cuMemAddressReserve ranges (no physical memory): 64 TiB shared by all devices.
const RESERVE_VA_BASE: u64 = 0x2000_0000_0000;
/// cuMemAllocManaged ranges.
const MANAGED_VA_BASE: u64 = 0x6000_0000_0000;

pub struct Device {
    pub total: u64,
    pub free: u64,
    pub va: VaSpace,
    /// The primary context's handle (stable across retain/release cycles) and its refcount.
    pub primary: CUhandle,
    pub primary_refs: u32,
    pub default_pool: CUhandle,
    pub current_pool: CUhandle,
}

pub struct Context {
    pub dev: usize,
    pub primary: bool,
    /// False for a primary context whose refcount is 0 (it exists again after a retain).
    pub active: bool,
}

/// A cuMemAlloc/cuMemAllocPitch/cuMemAllocManaged allocation.
pub struct Linear {
    pub dev: usize,
    pub ctx: CUhandle,
    pub size: u64,
    /// Bytes taken from the device (0 for managed memory).
    pub phys: u64,
    pub managed: bool,
}

pub struct State {
    pub initialized: bool,
    pub devices: Vec<Device>,
    pub contexts: HashMap<CUhandle, Context>,
    pub linear: BTreeMap<CUdeviceptr, Linear>,
    pub managed_va: VaSpace,
    pub reserve_va: VaSpace,
    /// Page-locked host memory: pointer -> size (cuMemHostAlloc / cuMemAllocHost).
    pub host_allocs: HashMap<usize, usize>,
    /// Registered host ranges: start -> size (cuMemHostRegister).
    pub host_registered: BTreeMap<usize, usize>,
    pub vmm: crate::vmm::Vmm,
    pub pools: crate::pools::Pools,
    pub streams: HashMap<CUhandle, crate::capture::Stream>,
    pub captures: HashMap<crate::capture::CaptureKey, crate::capture::Capture>,
    pub graphs: HashSet<CUhandle>,
    /// cuIpcOpenMemHandle mappings: address -> (device, VA size).
    pub ipc_opened: HashMap<CUdeviceptr, (usize, u64)>,
    next_token: u64,
}

impl State {
    fn new() -> State {
        let cfg = config::get();
        let devices = (0..cfg.devices)
            .map(|d| Device {
                total: cfg.mem_bytes,
                free: cfg.mem_bytes,
                va: VaSpace::new(DEVICE_VA_BASE + ((d as u64) << 40), TIB),
                primary: 0,
                primary_refs: 0,
                default_pool: 0,
                current_pool: 0,
            })
            .collect();
        State {
            initialized: false,
            devices,
            contexts: HashMap::new(),
            linear: BTreeMap::new(),
            managed_va: VaSpace::new(MANAGED_VA_BASE, 8 * TIB),
            reserve_va: VaSpace::new(RESERVE_VA_BASE, 64 * TIB),
            host_allocs: HashMap::new(),
            host_registered: BTreeMap::new(),
            vmm: Default::default(),
            pools: Default::default(),
            streams: HashMap::new(),
            captures: HashMap::new(),
            graphs: HashSet::new(),
            ipc_opened: HashMap::new(),
            next_token: 0,
        }
    }

    /// A fresh opaque handle. `kind` only makes handles readable in a debugger; the low bits
    /// stay clear of the special stream values 0, 1 and 2.
    pub fn token(&mut self, kind: u64) -> CUhandle {
        self.next_token += 1;
        (kind << 32) | (self.next_token << 4)
    }

    pub fn device(&mut self, dev: CUdevice) -> Result<&mut Device, CUresult> {
        usize::try_from(dev)
            .ok()
            .and_then(|d| self.devices.get_mut(d))
            .ok_or(CUDA_ERROR_INVALID_DEVICE)
    }

    /// Take `bytes` of physical memory from a device, or OUT_OF_MEMORY with nothing changed.
    pub fn take(&mut self, dev: usize, bytes: u64) -> Result<(), CUresult> {
        let d = &mut self.devices[dev];
        if bytes > d.free {
            return Err(CUDA_ERROR_OUT_OF_MEMORY);
        }
        d.free -= bytes;
        Ok(())
    }

    pub fn give(&mut self, dev: usize, bytes: u64) {
        let d = &mut self.devices[dev];
        d.free = (d.free + bytes).min(d.total);
    }

    /// Whether any context (primary or created) lives on `dev`: NVML lists the process then.
    pub fn has_context_on(&self, dev: usize) -> bool {
        self.contexts.values().any(|c| c.dev == dev && c.active)
    }
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
/// Set once cuInit succeeded in this process (or in the parent it was forked from).
static INITIALIZED: AtomicBool = AtomicBool::new(false);
/// This process was forked after CUDA was initialised: the driver is unusable here.
static FORKED_AFTER_INIT: AtomicBool = AtomicBool::new(false);
/// Any fork child: the state lock may be held by a parent thread that does not exist here.
static IN_FORK_CHILD: AtomicBool = AtomicBool::new(false);

extern "C" fn in_fork_child() {
    IN_FORK_CHILD.store(true, Ordering::SeqCst);
    if INITIALIZED.load(Ordering::SeqCst) {
        FORKED_AFTER_INIT.store(true, Ordering::SeqCst);
    }
}

/// Called by a successful cuInit.
pub fn mark_initialized() {
    static ATFORK: Once = Once::new();
    ATFORK.call_once(|| {
        // SAFETY: registering a child handler that only stores atomics.
        unsafe { libc::pthread_atfork(None, None, Some(in_fork_child)) };
    });
    INITIALIZED.store(true, Ordering::SeqCst);
}

/// CUDA_ERROR_NOT_INITIALIZED in a child forked after cuInit (checked before any lock).
pub fn check_not_forked() -> Result<(), CUresult> {
    if FORKED_AFTER_INIT.load(Ordering::Relaxed) {
        Err(CUDA_ERROR_NOT_INITIALIZED)
    } else {
        Ok(())
    }
}

fn lock() -> Result<MutexGuard<'static, Option<State>>, CUresult> {
    if IN_FORK_CHILD.load(Ordering::Relaxed) {
        // The lock may be held for ever by a thread of the parent: never wait for it here.
        return match STATE.try_lock() {
            Ok(g) => Ok(g),
            Err(TryLockError::Poisoned(e)) => Ok(e.into_inner()),
            Err(TryLockError::WouldBlock) => Err(CUDA_ERROR_UNKNOWN),
        };
    }
    // A panic while the lock was held (caught by `ffi`) must not wedge every later call.
    Ok(STATE.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Run `f` on the state, initialised or not (cuInit, NVML).
pub fn with<R>(f: impl FnOnce(&mut State) -> Result<R, CUresult>) -> Result<R, CUresult> {
    let mut guard = lock()?;
    f(guard.get_or_insert_with(State::new))
}

/// Run `f` on the state after cuInit, else NOT_INITIALIZED (always so in a child forked after
/// cuInit).
pub fn with_init<R>(f: impl FnOnce(&mut State) -> Result<R, CUresult>) -> Result<R, CUresult> {
    check_not_forked()?;
    with(|st| {
        if !st.initialized {
            return Err(CUDA_ERROR_NOT_INITIALIZED);
        }
        f(st)
    })
}

/// Called first by exports whose bodies would otherwise be identical (a `_ptsz` twin, two
/// spellings of one call): it keeps LLVM's function merging from folding them into one address,
/// so every exported name keeps its own address, as in the real driver.
#[inline(always)]
pub fn distinct(export: &'static str) {
    std::hint::black_box(export);
}

/// The body of every export: a Result becomes a CUresult and no panic crosses the FFI boundary.
pub fn ffi(f: impl FnOnce() -> Result<(), CUresult>) -> CUresult {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => CUDA_SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => CUDA_ERROR_UNKNOWN,
    }
}
