//! Who owns an allocation: the calling module, the capture window, the owner rules.
//!
//! The owning module is the first stack frame outside the driver (`libcuda*`), the
//! runtime (`libcudart*`) and vramledger itself, found by unwinding (libgcc's
//! `_Unwind_Backtrace`, the same unwinder C++ exceptions use) and named by file. Module
//! names are cached by object base address and frame addresses by value, so `dladdr`
//! runs once per new return address. No lock is held while the loader is asked.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use vramledger_format::record::flags;
use vramledger_format::Owner;

use crate::forksafe::ForkSafeMutex;

/// How a module's allocations are owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleClass {
    /// Frames to look past: the driver, the runtime, vramledger.
    Skip,
    /// PyTorch (c10, libtorch).
    Torch,
    /// NCCL.
    Nccl,
    /// Anything else.
    Other,
}

/// Classifies a module by its file name.
pub fn classify(file_name: &str) -> ModuleClass {
    let n = file_name;
    if n.starts_with("libcuda.") || n.starts_with("libcudart") || n.starts_with("libvramledger") {
        ModuleClass::Skip
    } else if n.starts_with("libc10") || n.starts_with("libtorch") {
        ModuleClass::Torch
    } else if n.starts_with("libnccl") || n.starts_with("librccl") {
        ModuleClass::Nccl
    } else {
        ModuleClass::Other
    }
}

#[derive(Clone, Copy)]
struct ModuleInfo {
    id: u32,
    class: ModuleClass,
}

struct Cache {
    by_ip: BTreeMap<usize, ModuleInfo>,
    by_base: BTreeMap<usize, ModuleInfo>,
    next_id: u32,
}

impl Default for Cache {
    fn default() -> Self {
        Cache {
            by_ip: BTreeMap::new(),
            by_base: BTreeMap::new(),
            next_id: 1,
        }
    }
}

static CACHE: ForkSafeMutex<Cache> = ForkSafeMutex::new();
static OWN_BASE: AtomicUsize = AtomicUsize::new(0);

fn own_base() -> usize {
    let b = OWN_BASE.load(Ordering::Relaxed);
    if b != 0 {
        return b;
    }
    let (base, _) = dladdr(own_base as *const () as usize);
    OWN_BASE.store(base, Ordering::Relaxed);
    base
}

fn dladdr(ip: usize) -> (usize, String) {
    // SAFETY: dladdr fills info for any address.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(ip as *const c_void, &mut info) == 0 {
            return (0, String::new());
        }
        let name = if info.dli_fname.is_null() {
            String::new()
        } else {
            CStr::from_ptr(info.dli_fname)
                .to_string_lossy()
                .into_owned()
        };
        (info.dli_fbase as usize, name)
    }
}

/// Called with each new module: `(id, path)`; the recorder writes a module record.
pub type NewModule = fn(u32, &str);

fn module_of(ip: usize, on_new: NewModule) -> Option<ModuleInfo> {
    if let Some(m) = CACHE.lock().by_ip.get(&ip) {
        return Some(*m);
    }
    let (base, mut path) = dladdr(ip);
    if base == 0 {
        return None;
    }
    if path.is_empty() {
        path = std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
    }
    let is_self = base == own_base();
    let mut c = CACHE.lock();
    if c.by_ip.len() > 1 << 16 {
        c.by_ip.clear();
    }
    let info = match c.by_base.get(&base) {
        Some(m) => *m,
        None => {
            let file = path.rsplit('/').next().unwrap_or(&path);
            let class = if is_self {
                ModuleClass::Skip
            } else {
                classify(file)
            };
            let m = ModuleInfo {
                id: c.next_id,
                class,
            };
            c.next_id += 1;
            c.by_base.insert(base, m);
            on_new(m.id, &path);
            m
        }
    };
    c.by_ip.insert(ip, info);
    Some(info)
}

/// Forgets every module id (a forked child's journal defines its own).
pub fn reset_modules() {
    CACHE.reset_in_child();
}

#[allow(improper_ctypes)]
extern "C" {
    fn _Unwind_Backtrace(
        trace: extern "C" fn(*mut c_void, *mut c_void) -> c_int,
        arg: *mut c_void,
    ) -> c_int;
    fn _Unwind_GetIP(ctx: *mut c_void) -> usize;
}

struct Walk {
    on_new: NewModule,
    found: Option<ModuleInfo>,
    frames: u32,
}

const URC_NO_REASON: c_int = 0;
const URC_NORMAL_STOP: c_int = 4;
const MAX_FRAMES: u32 = 48;

extern "C" fn step(ctx: *mut c_void, arg: *mut c_void) -> c_int {
    // SAFETY: arg is the Walk passed to _Unwind_Backtrace below; ctx is the unwinder's.
    let walk = unsafe { &mut *(arg as *mut Walk) };
    walk.frames += 1;
    if walk.frames > MAX_FRAMES {
        return URC_NORMAL_STOP;
    }
    let ip = unsafe { _Unwind_GetIP(ctx) };
    if ip == 0 {
        return URC_NORMAL_STOP;
    }
    // The return address points after the call; look up the call instruction itself.
    match module_of(ip - 1, walk.on_new) {
        Some(m) if m.class == ModuleClass::Skip => URC_NO_REASON,
        Some(m) => {
            walk.found = Some(m);
            URC_NORMAL_STOP
        }
        None => URC_NO_REASON,
    }
}

thread_local! {
    static ENTRY_IP: Cell<usize> = const { Cell::new(0) };
}

/// The return address of the hook that is running now (its caller), read from the hook's
/// own frame record. Only compiled where frame pointers are guaranteed (see build.rs).
#[macro_export]
#[doc(hidden)]
macro_rules! note_entry {
    () => {
        $crate::attribution::set_entry_ip($crate::attribution::frame_return_address!())
    };
}

#[cfg(all(vl_frame_pointers, target_arch = "x86_64"))]
#[macro_export]
#[doc(hidden)]
macro_rules! frame_return_address {
    () => {{
        let fp: usize;
        // SAFETY: reads the frame pointer register; with frame pointers forced, rbp holds the
        // current function's frame record (saved rbp, then the return address).
        unsafe { core::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags)) };
        if fp == 0 || fp % 8 != 0 {
            0
        } else {
            // SAFETY: the frame record of the function we are in is on our own stack.
            unsafe { *((fp + 8) as *const usize) }
        }
    }};
}

#[cfg(all(vl_frame_pointers, target_arch = "aarch64"))]
#[macro_export]
#[doc(hidden)]
macro_rules! frame_return_address {
    () => {{
        let fp: usize;
        // SAFETY: as above; x29 holds the frame record (saved x29, then the link register).
        unsafe { core::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags)) };
        if fp == 0 || fp % 8 != 0 {
            0
        } else {
            // SAFETY: the frame record of the function we are in is on our own stack.
            unsafe { *((fp + 8) as *const usize) }
        }
    }};
}

#[cfg(not(all(
    vl_frame_pointers,
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
#[macro_export]
#[doc(hidden)]
macro_rules! frame_return_address {
    () => {
        0usize
    };
}

pub use frame_return_address;

/// Remembers the running hook's return address for [`calling_module`].
#[inline(always)]
pub fn set_entry_ip(ip: usize) {
    let _ = ENTRY_IP.try_with(|c| c.set(ip));
}

/// The calling module: `(module id, class)`, or `(0, Other)` when unwinding found none.
///
/// Fast path: when the hook's immediate caller is already an owning module (cuBLAS,
/// libc10_cuda's VMM calls, NCCL, any direct caller), no unwinding is needed. Through the
/// runtime (`libcudart`), the stack is unwound past it.
#[inline(always)]
pub fn calling_module(on_new: NewModule) -> (u32, ModuleClass) {
    let ip = ENTRY_IP.try_with(|c| c.replace(0)).unwrap_or(0);
    if ip > 1 {
        if let Some(m) = module_of(ip - 1, on_new) {
            if m.class != ModuleClass::Skip {
                return (m.id, m.class);
            }
        }
    }
    let mut walk = Walk {
        on_new,
        found: None,
        frames: 0,
    };
    // SAFETY: the callback only touches `walk`, which outlives the call.
    unsafe { _Unwind_Backtrace(step, &mut walk as *mut Walk as *mut c_void) };
    match walk.found {
        Some(m) => (m.id, m.class),
        None => (0, ModuleClass::Other),
    }
}

// ---- capture windows ----

thread_local! {
    static OPEN_ON_THREAD: Cell<u32> = const { Cell::new(0) };
    static MODE: Cell<u32> = const { Cell::new(0) };
}
static OPEN_IN_PROCESS: AtomicI32 = AtomicI32::new(0);

/// A capture began on this thread.
pub fn capture_begun() {
    let _ = OPEN_ON_THREAD.try_with(|c| c.set(c.get() + 1));
    OPEN_IN_PROCESS.fetch_add(1, Ordering::AcqRel);
}

/// A capture ended on this thread.
pub fn capture_ended() {
    let _ = OPEN_ON_THREAD.try_with(|c| c.set(c.get().saturating_sub(1)));
    let _ = OPEN_IN_PROCESS.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
        Some((v - 1).max(0))
    });
}

/// The thread's stream-capture mode changed to `mode`.
pub fn set_mode(mode: u32) {
    let _ = MODE.try_with(|m| m.set(mode));
}

/// The capture signals that hold now, as [`flags`] bits.
pub fn capture_flags() -> u32 {
    let mut f = 0;
    if OPEN_ON_THREAD.try_with(|c| c.get()).unwrap_or(0) > 0 {
        f |= flags::CAPTURE_THIS_THREAD;
    }
    if MODE.try_with(|m| m.get()).unwrap_or(0) == crate::ffi::CU_STREAM_CAPTURE_MODE_RELAXED {
        f |= flags::MODE_RELAXED;
    }
    if OPEN_IN_PROCESS.load(Ordering::Acquire) > 0 {
        f |= flags::CAPTURE_OPEN;
    }
    f
}

/// The owner rules. `vmm` says the memory came from `cuMemCreate`.
pub fn owner(class: ModuleClass, vmm: bool, capture: u32) -> Owner {
    let in_capture = capture & flags::CAPTURE_THIS_THREAD != 0
        || (capture & flags::CAPTURE_OPEN != 0 && capture & flags::MODE_RELAXED != 0);
    match class {
        ModuleClass::Torch if in_capture => Owner::TorchGraphPool,
        ModuleClass::Torch => Owner::Torch,
        ModuleClass::Nccl => Owner::Nccl,
        _ if vmm => Owner::Vmm,
        _ => Owner::Direct,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_by_file_name() {
        assert_eq!(classify("libcuda.so.1"), ModuleClass::Skip);
        assert_eq!(classify("libcuda.so.580.159.04"), ModuleClass::Skip);
        assert_eq!(classify("libcudart.so.13"), ModuleClass::Skip);
        assert_eq!(classify("libc10_cuda.so"), ModuleClass::Torch);
        assert_eq!(classify("libtorch_cuda.so"), ModuleClass::Torch);
        assert_eq!(classify("libnccl.so.2"), ModuleClass::Nccl);
        assert_eq!(classify("libcublas.so.13"), ModuleClass::Other);
        assert_eq!(classify("libcudnn.so.9"), ModuleClass::Other);
    }

    #[test]
    fn owner_rules() {
        let t = flags::CAPTURE_THIS_THREAD;
        let relaxed_elsewhere = flags::CAPTURE_OPEN | flags::MODE_RELAXED;
        assert_eq!(owner(ModuleClass::Torch, false, 0), Owner::Torch);
        assert_eq!(owner(ModuleClass::Torch, false, t), Owner::TorchGraphPool);
        assert_eq!(
            owner(ModuleClass::Torch, true, relaxed_elsewhere),
            Owner::TorchGraphPool
        );
        assert_eq!(
            owner(ModuleClass::Torch, false, flags::CAPTURE_OPEN),
            Owner::Torch
        );
        assert_eq!(owner(ModuleClass::Nccl, true, t), Owner::Nccl);
        assert_eq!(owner(ModuleClass::Other, true, t), Owner::Vmm);
        assert_eq!(owner(ModuleClass::Other, false, 0), Owner::Direct);
    }
}
