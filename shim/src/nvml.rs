//! NVML readings: device free memory without a context, and this process's used bytes.
//!
//! Optional (`VRAMLEDGER_NVML=0` turns it off) and loaded lazily with `dlopen`; every
//! failure just means "no NVML reading". Devices are matched by PCI bus id, so
//! CUDA_VISIBLE_DEVICES renumbering cannot confuse them.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use crate::{devices, real};

/// One NVML reading.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub device_free: u64,
    pub device_total: u64,
    pub process_used: Option<u64>,
}

#[repr(C)]
struct Memory {
    total: u64,
    free: u64,
    used: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ProcessInfo {
    pid: c_uint,
    used_gpu_memory: u64,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

type ByBusIdFn = unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> c_int;
type MemoryFn = unsafe extern "C" fn(*mut c_void, *mut Memory) -> c_int;
type ProcessesFn = unsafe extern "C" fn(*mut c_void, *mut c_uint, *mut ProcessInfo) -> c_int;

struct Api {
    by_bus_id: ByBusIdFn,
    memory: MemoryFn,
    processes: Option<ProcessesFn>,
}

// 0 not tried, 1 ready, 2 unavailable.
static STATE: AtomicU8 = AtomicU8::new(0);
static FUNCS: [AtomicUsize; 3] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

fn api() -> Option<Api> {
    match STATE.load(Ordering::Acquire) {
        1 => {}
        2 => return None,
        _ => {
            let ok = crate::config::get().nvml && load();
            STATE.store(if ok { 1 } else { 2 }, Ordering::Release);
            if !ok {
                return None;
            }
        }
    }
    let f = |i: usize| FUNCS[i].load(Ordering::Acquire);
    // SAFETY: the pointers were looked up under these exact names and signatures.
    unsafe {
        Some(Api {
            by_bus_id: std::mem::transmute::<usize, ByBusIdFn>(f(0)),
            memory: std::mem::transmute::<usize, MemoryFn>(f(1)),
            processes: (f(2) != 0).then(|| std::mem::transmute::<usize, ProcessesFn>(f(2))),
        })
    }
}

fn load() -> bool {
    // SAFETY: dlopen/dlsym of NVML by its documented soname.
    let h = unsafe {
        libc::dlopen(
            c"libnvidia-ml.so.1".as_ptr(),
            libc::RTLD_LAZY | libc::RTLD_LOCAL,
        )
    };
    if h.is_null() {
        return false;
    }
    let init = real::real_dlsym(h, c"nvmlInit_v2");
    let by_bus = real::real_dlsym(h, c"nvmlDeviceGetHandleByPciBusId_v2");
    let memory = real::real_dlsym(h, c"nvmlDeviceGetMemoryInfo");
    let procs = real::real_dlsym(h, c"nvmlDeviceGetComputeRunningProcesses_v3");
    if init == 0 || by_bus == 0 || memory == 0 {
        return false;
    }
    // SAFETY: nvmlInit_v2(void).
    let init: unsafe extern "C" fn() -> c_int = unsafe { std::mem::transmute(init) };
    // SAFETY: NVML's own initialisation, no arguments.
    if unsafe { init() } != 0 {
        return false;
    }
    FUNCS[0].store(by_bus, Ordering::Release);
    FUNCS[1].store(memory, Ordering::Release);
    FUNCS[2].store(procs, Ordering::Release);
    true
}

/// Reads NVML for CUDA device `device`.
pub fn sample(device: i32) -> Option<Sample> {
    if device < 0 {
        return None;
    }
    let api = api()?;
    let bus = devices::pci_bus_id_c(device)?;
    let mut handle = std::ptr::null_mut();
    // SAFETY: bus is NUL-terminated; handle is an out-pointer.
    if unsafe { (api.by_bus_id)(bus.as_ptr().cast(), &mut handle) } != 0 {
        return None;
    }
    let mut m = Memory {
        total: 0,
        free: 0,
        used: 0,
    };
    // SAFETY: valid handle and out-struct.
    if unsafe { (api.memory)(handle, &mut m) } != 0 {
        return None;
    }
    Some(Sample {
        device_free: m.free,
        device_total: m.total,
        process_used: api.processes.and_then(|f| process_used(f, handle)),
    })
}

fn process_used(f: ProcessesFn, handle: *mut c_void) -> Option<u64> {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as c_uint;
    let mut list = vec![ProcessInfo::default(); 64];
    for _ in 0..3 {
        let mut n = list.len() as c_uint;
        // SAFETY: list holds n entries.
        let rc = unsafe { f(handle, &mut n, list.as_mut_ptr()) };
        if rc == 0 {
            let n = (n as usize).min(list.len());
            return list[..n]
                .iter()
                .find(|p| p.pid == pid)
                .map(|p| p.used_gpu_memory);
        }
        if rc != 7 {
            return None; // not NVML_ERROR_INSUFFICIENT_SIZE
        }
        list = vec![ProcessInfo::default(); (n as usize).max(list.len() * 2).min(8192)];
    }
    None
}
