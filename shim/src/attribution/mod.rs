//! Who owns an allocation: the calling module, the capture window, the owner rules.
//!
//! The owning module is the first stack frame outside the driver (`libcuda*`), the runtime
//! (`libcudart*`) and vramledger itself. Most callers are found at once: a hook reads its own
//! return address from its frame record ([`note_entry!`]), and a caller that owns memory
//! (cuBLAS, libc10_cuda's VMM calls, NCCL, any direct caller) is one table lookup
//! ([`modules`]). Through the runtime, the stack is walked past it ([`unwind`]): the slow way
//! once per call path, then by the frame sizes it learned.

pub mod modules;
pub mod unwind;

use vramledger_format::record::flags;
use vramledger_format::Owner;

pub use modules::{classify, ModuleClass, NewModule};

use crate::thread::Thread;

/// Remembers the running hook's caller (its return address) and the caller's stack pointer
/// at the call, read from the hook's own frame record. Only compiled where frame pointers are
/// guaranteed (see build.rs); elsewhere the walk unwinds from the start.
#[macro_export]
#[doc(hidden)]
macro_rules! note_entry {
    () => {{
        let (ip, cfa) = $crate::frame_entry!();
        $crate::attribution::set_entry(ip, cfa)
    }};
}

#[cfg(all(vl_frame_pointers, target_arch = "x86_64"))]
#[macro_export]
#[doc(hidden)]
macro_rules! frame_entry {
    () => {{
        let fp: usize;
        // SAFETY: reads the frame pointer register; with frame pointers forced, rbp holds the
        // current function's frame record (saved rbp, then the return address), and the
        // caller's stack pointer before its call was rbp + 16.
        unsafe { core::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags)) };
        if fp == 0 || fp % 8 != 0 {
            (0usize, 0usize)
        } else {
            // SAFETY: the frame record of the function we are in is on our own stack.
            (unsafe { *((fp + 8) as *const usize) }, fp + 16)
        }
    }};
}

#[cfg(all(vl_frame_pointers, target_arch = "aarch64"))]
#[macro_export]
#[doc(hidden)]
macro_rules! frame_entry {
    () => {{
        let fp: usize;
        // SAFETY: as above; x29 holds the frame record (saved x29, then the link register).
        // The caller's stack pointer is not x29 + 16 here (the frame's size lies between), so
        // no CFA is given: walks past the runtime unwind.
        unsafe { core::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags)) };
        if fp == 0 || fp % 8 != 0 {
            (0usize, 0usize)
        } else {
            // SAFETY: the frame record of the function we are in is on our own stack.
            (unsafe { *((fp + 8) as *const usize) }, 0usize)
        }
    }};
}

#[cfg(not(all(
    vl_frame_pointers,
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
#[macro_export]
#[doc(hidden)]
macro_rules! frame_entry {
    () => {
        (0usize, 0usize)
    };
}

/// Remembers the running hook's caller for [`calling_module`].
#[inline(always)]
pub fn set_entry(ip: usize, cfa: usize) {
    let _ = crate::thread::with(|t| {
        t.entry_ip.set(ip);
        t.entry_cfa.set(cfa);
    });
}

/// The calling module: `(module id, class)`, or `(0, Other)` when the walk found none.
#[inline(always)]
pub fn calling_module(t: &Thread, on_new: NewModule) -> (u32, ModuleClass) {
    let ip = t.entry_ip.replace(0);
    let cfa = t.entry_cfa.replace(0);
    let found = if ip > 1 {
        match modules::module_of_on(&t.module, ip - 1, on_new) {
            Some(m) if m.class != ModuleClass::Skip => Some(m),
            Some(_) => unwind::fast(ip, cfa, t.stack_top()).or_else(|| unwind::slow(on_new)),
            None => unwind::slow(on_new),
        }
    } else {
        unwind::slow(on_new)
    };
    match found {
        Some(m) => (m.id, m.class),
        None => (0, ModuleClass::Other),
    }
}

// ---- capture windows ----

use std::sync::atomic::{AtomicI32, Ordering};

static OPEN_IN_PROCESS: &AtomicI32 = &crate::hot::HOT.captures_open;

/// A capture began on this thread.
pub fn capture_begun() {
    let _ = crate::thread::with(|t| t.captures.set(t.captures.get() + 1));
    OPEN_IN_PROCESS.fetch_add(1, Ordering::AcqRel);
}

/// A capture ended on this thread.
pub fn capture_ended() {
    let _ = crate::thread::with(|t| t.captures.set(t.captures.get().saturating_sub(1)));
    let _ = OPEN_IN_PROCESS.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
        Some((v - 1).max(0))
    });
}

/// The thread's stream-capture mode changed to `mode`.
pub fn set_mode(mode: u32) {
    let _ = crate::thread::with(|t| t.mode.set(mode));
}

/// The capture signals that hold now on thread `t`, as [`flags`] bits.
#[inline]
pub fn capture_flags(t: &Thread) -> u32 {
    let mut f = 0;
    if t.captures.get() > 0 {
        f |= flags::CAPTURE_THIS_THREAD;
    }
    if t.mode.get() == crate::ffi::CU_STREAM_CAPTURE_MODE_RELAXED {
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

/// In a forked child: module ids are the parent journal's.
pub fn reset_in_child() {
    modules::reset_in_child();
}

#[cfg(test)]
mod tests {
    use super::*;

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
