//! The `dlsym` override.
//!
//! cudart and cuBLAS find the driver with `dlsym(libcuda_handle, "cuGetProcAddress_v2")`
//! and friends: a lookup through a handle, which LD_PRELOAD alone does not interpose.
//!
//! Rules (each one learned from a hooking library that broke):
//! - the entry is a naked trampoline: every lookup that is not a hooked name is
//!   *tail-jumped* into the real `dlsym`, so glibc still sees the original caller (it
//!   decides RTLD_NEXT and RTLD_DEFAULT scopes from the caller's return address);
//! - RTLD_NEXT lookups are never touched;
//! - only exact names of hooked functions are redirected (`cu[A-Z]…` / `nccl[A-Z]…`
//!   prefilter, then an exact table match);
//! - the router allocates nothing, takes no lock and never calls the public `dlsym`
//!   (the real one comes from `dlvsym`), so it works before anything is initialised
//!   (Rust's std itself calls `dlsym`);
//! - the real pointer is only replaced when it is the very function vramledger forwards
//!   to (pointer identity); any other library's function with the same name passes;
//! - with `VRAMLEDGER_DISABLE=1` a lookup of any name vramledger exports in place of another
//!   library (driver, NCCL, libc) that would find vramledger's own function answers what the
//!   lookup would answer without vramledger (the next definition, or NULL), so a disabled
//!   preload hands out no hook at all.

use std::ffi::{c_char, c_void, CStr};

use vramledger_format::Api;

use super::procaddr;
use crate::real;

#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {route}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "test rax, rax",
        "jnz 2f",
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {real}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "test rax, rax",
        "jz 3f",
        "jmp rax",
        "2:",
        "cmp rax, 1",
        "je 3f",
        "ret",
        "3:",
        "xor eax, eax",
        "ret",
        route = sym route,
        real = sym real::real_dlsym_addr,
    )
}

#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "stp x29, x30, [sp, #-32]!",
        "mov x29, sp",
        "stp x0, x1, [sp, #16]",
        "bl {route}",
        "cbnz x0, 2f",
        "bl {real}",
        "mov x16, x0",
        "ldp x0, x1, [sp, #16]",
        "ldp x29, x30, [sp], #32",
        "cbz x16, 3f",
        "br x16",
        "2:",
        "ldp x29, x30, [sp], #32",
        "cmp x0, #1",
        "b.eq 3f",
        "ret",
        "3:",
        "mov x0, #0",
        "ret",
        route = sym route,
        real = sym real::real_dlsym_addr,
    )
}

/// True for `cu[A-Z]…` and `nccl[A-Z]…`: the only names vramledger may redirect.
fn may_hook(name: &[u8]) -> bool {
    match name {
        [b'c', b'u', c, ..] => c.is_ascii_uppercase(),
        [b'n', b'c', b'c', b'l', c, ..] => c.is_ascii_uppercase(),
        _ => false,
    }
}

/// What `route` returns for "answer NULL" (never an address).
const NULL_ANSWER: usize = 1;

/// Decides a lookup: the address to return, [`NULL_ANSWER`], or 0 to pass it to the real
/// `dlsym`.
extern "C" fn route(handle: *mut c_void, symbol: *const c_char) -> usize {
    if symbol.is_null() || handle == libc::RTLD_NEXT {
        return 0;
    }
    // SAFETY: dlsym's contract: a NUL-terminated name.
    let name = unsafe { CStr::from_ptr(symbol) };
    if crate::config::disabled() {
        return route_disabled(handle, name);
    }
    if !may_hook(name.to_bytes()) {
        return 0;
    }
    let Ok(text) = name.to_str() else { return 0 };
    let Some(api) = Api::from_name(text) else {
        return 0;
    };
    let hook = procaddr::hook_of(api);
    if hook == 0 || crate::config::disabled() {
        return 0;
    }
    let found = real::real_dlsym(handle, name);
    if found == 0 {
        return 0; // let the real dlsym answer (and set dlerror) itself
    }
    if found == hook {
        return hook; // a lookup that already resolved to vramledger (RTLD_DEFAULT)
    }
    if real::offer(api, found) {
        hook
    } else {
        0
    }
}

/// Names vramledger exports in place of libc's.
fn interposes_libc(name: &[u8]) -> bool {
    name == b"write"
        || name == b"writev"
        || name == b"dlsym"
        || crate::hooks::stdio::is_hooked(name)
}

/// With `VRAMLEDGER_DISABLE=1`: a lookup that finds one of vramledger's own functions gets
/// the next definition instead (what it would find without the preload), or NULL.
#[cold]
fn route_disabled(handle: *mut c_void, name: &CStr) -> usize {
    let bytes = name.to_bytes();
    if !(may_hook(bytes) || interposes_libc(bytes)) {
        return 0;
    }
    let found = real::real_dlsym(handle, name);
    if found == 0 || !is_ours(found) {
        return found; // the real answer (0: let the real dlsym answer again, setting dlerror)
    }
    match real::real_dlsym(libc::RTLD_NEXT, name) {
        0 => NULL_ANSWER,
        next => next,
    }
}

/// True when `addr` lies in libvramledger.so itself.
fn is_ours(addr: usize) -> bool {
    fn base(addr: usize) -> usize {
        // SAFETY: dladdr fills `info` for any address.
        unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            if libc::dladdr(addr as *const c_void, &mut info) == 0 {
                return 0;
            }
            info.dli_fbase as usize
        }
    }
    let ours = base(route as *const () as usize);
    ours != 0 && base(addr) == ours
}

#[cfg(test)]
mod tests {
    use super::may_hook;

    #[test]
    fn prefilter_is_exact() {
        assert!(may_hook(b"cuMemAlloc_v2"));
        assert!(may_hook(b"cuGetProcAddress_v2"));
        assert!(may_hook(b"ncclMemAlloc"));
        assert!(!may_hook(b"cudnnCreate"));
        assert!(!may_hook(b"cublasCreate_v2"));
        assert!(!may_hook(b"curandCreate"));
        assert!(!may_hook(b"ncclx"));
        assert!(!may_hook(b"cu"));
        assert!(!may_hook(b""));
        assert!(!may_hook(b"__pthread_get_minstack"));
    }
}
