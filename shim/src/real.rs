//! Where the real functions are: the real `dlsym`, the real driver library, and one real
//! pointer per hooked entry point. On the ground floor: every hook, the recorder and the
//! entry points read it; it reads nothing of vramledger.
//!
//! Everything here is lock-free and idempotent: two threads resolving at once compute
//! the same answers and store them with compare-and-swap, so nothing ever waits (a wait
//! here could deadlock against the dynamic loader's lock).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

use vramledger_format::Api;

const SLOTS: usize = 128;
#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: AtomicUsize = AtomicUsize::new(0);
/// Line-aligned: the allocation and free entry points (slots 1 and 4) share one cache line.
#[repr(align(64))]
struct Slots([AtomicUsize; SLOTS]);
static REAL: Slots = Slots([EMPTY; SLOTS]);
static REAL_DLSYM: AtomicUsize = AtomicUsize::new(0);
static LIBCUDA: AtomicUsize = AtomicUsize::new(0);

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// The real `dlsym`, found with `dlvsym` (newest glibc version first), never through the
/// public `dlsym` (which is vramledger's own). Called by the `dlsym` trampoline too.
pub extern "C" fn real_dlsym_addr() -> usize {
    let cached = REAL_DLSYM.load(Ordering::Acquire);
    if cached != 0 {
        return cached;
    }
    let versions: &[&CStr] = &[c"GLIBC_2.34", c"GLIBC_2.2.5", c"GLIBC_2.17"];
    for v in versions {
        // SAFETY: dlvsym with RTLD_NEXT and NUL-terminated strings; it does not call dlsym.
        let p = unsafe { libc::dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), v.as_ptr()) };
        if !p.is_null() {
            REAL_DLSYM.store(p as usize, Ordering::Release);
            return p as usize;
        }
    }
    0
}

/// `dlsym` through the real function. `handle` may be any handle or pseudo-handle; it is
/// only passed on, never dereferenced here.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn real_dlsym(handle: *mut c_void, name: &CStr) -> usize {
    let f = real_dlsym_addr();
    if f == 0 {
        return 0;
    }
    // SAFETY: f is glibc's dlsym; name is NUL-terminated.
    let f: DlsymFn = unsafe { std::mem::transmute::<usize, DlsymFn>(f) };
    // SAFETY: glibc's dlsym with the caller's handle (only passed on) and a C string.
    unsafe { f(handle, name.as_ptr()) as usize }
}

/// The real pointer of `api`, if known.
#[inline]
pub fn known(api: Api) -> usize {
    REAL.0[api as usize % SLOTS].load(Ordering::Acquire)
}

/// Offers `ptr` as the real `api` (never one of vramledger's own hooks: the caller checks).
/// True when it is (now or already) the real one.
pub fn offer(api: Api, ptr: usize) -> bool {
    if ptr == 0 {
        return false;
    }
    let slot = &REAL.0[api as usize % SLOTS];
    match slot.compare_exchange(0, ptr, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => true,
        Err(current) => current == ptr,
    }
}

/// The driver library's handle, without loading anything new.
pub fn libcuda() -> *mut c_void {
    let h = LIBCUDA.load(Ordering::Acquire);
    if h != 0 {
        return h as *mut c_void;
    }
    // Prefer the library that the already known driver pointers live in.
    let mut handle = std::ptr::null_mut();
    for api in [Api::cuGetProcAddress_v2, Api::cuGetProcAddress, Api::cuInit] {
        let p = known(api);
        if p != 0 {
            handle = handle_of(p);
            if !handle.is_null() {
                break;
            }
        }
    }
    if handle.is_null() {
        // SAFETY: RTLD_NOLOAD only returns a handle of a library already loaded.
        handle = unsafe {
            libc::dlopen(
                c"libcuda.so.1".as_ptr(),
                libc::RTLD_LAZY | libc::RTLD_NOLOAD,
            )
        };
    }
    if !handle.is_null() {
        LIBCUDA.store(handle as usize, Ordering::Release);
    }
    handle
}

/// The handle of the loaded object that contains `addr`.
pub fn handle_of(addr: usize) -> *mut c_void {
    // SAFETY: dladdr fills `info` for any address; the file name is copied by dlopen.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr as *const c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return std::ptr::null_mut();
        }
        libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD)
    }
}

/// A driver function vramledger calls for itself (not hooked), e.g. `cuCtxGetDevice`.
#[inline]
pub fn driver_fn(name: &CStr, cache: &AtomicUsize) -> usize {
    let p = cache.load(Ordering::Acquire);
    if p != 0 {
        return p;
    }
    driver_fn_slow(name, cache)
}

#[cold]
fn driver_fn_slow(name: &CStr, cache: &AtomicUsize) -> usize {
    let h = libcuda();
    if h.is_null() {
        return 0;
    }
    let p = real_dlsym(h, name);
    cache.store(p, Ordering::Release);
    p
}

/// The real pointer for a hooked entry point, resolving it if needed: from the driver
/// library for `cu*`, from the next object after vramledger (or the caller's own
/// dependencies) for NCCL.
#[inline(always)]
pub fn resolve(api: Api) -> usize {
    let p = known(api);
    if p != 0 {
        return p;
    }
    resolve_slow(api)
}

#[cold]
fn resolve_slow(api: Api) -> usize {
    let Ok(name) = CString::new(api.name()) else {
        return 0;
    };
    let name = name.as_c_str();
    let mut found = 0;
    if api.name().starts_with("cu") {
        let h = libcuda();
        if !h.is_null() {
            found = real_dlsym(h, name);
        }
    }
    if found == 0 {
        found = real_dlsym(libc::RTLD_NEXT, name);
    }
    if found == 0 && api.name().starts_with("nccl") {
        found = find_in_loaded(c"libnccl", name);
    }
    if offer(api, found) {
        found
    } else {
        known(api)
    }
}

/// Fills every `cu*` slot from the driver library (for pointer-identity routing).
pub fn fill_driver_table() {
    let h = libcuda();
    if h.is_null() {
        return;
    }
    for &api in Api::ALL {
        if api.name().starts_with("cu") && known(api) == 0 {
            if let Ok(name) = CString::new(api.name()) {
                offer(api, real_dlsym(h, &name));
            }
        }
    }
}

/// The hooked entry point whose real pointer is `ptr`, if any.
pub fn api_of_real(ptr: usize) -> Option<Api> {
    if ptr == 0 {
        return None;
    }
    Api::ALL.iter().copied().find(|&a| known(a) == ptr)
}

/// Looks `name` up in a loaded library whose path contains `needle` (for libraries that
/// were loaded into a local scope, where RTLD_NEXT cannot see them).
fn find_in_loaded(needle: &CStr, name: &CStr) -> usize {
    struct Search<'a> {
        needle: &'a [u8],
        path: Option<std::ffi::CString>,
    }
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: dl_iterate_phdr passes valid info and our own data pointer.
        let s = unsafe { &mut *(data as *mut Search) };
        // SAFETY: as above: valid for the duration of the callback.
        let info = unsafe { &*info };
        if info.dlpi_name.is_null() {
            return 0;
        }
        // SAFETY: not NULL (checked above): the loader's NUL-terminated path.
        let path = unsafe { CStr::from_ptr(info.dlpi_name) };
        let bytes = path.to_bytes();
        if bytes.windows(s.needle.len()).any(|w| w == s.needle) {
            s.path = Some(path.to_owned());
            return 1;
        }
        0
    }
    let mut s = Search {
        needle: needle.to_bytes(),
        path: None,
    };
    // SAFETY: the callback only reads the info it is given.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut s as *mut Search as *mut c_void) };
    let Some(path) = s.path else { return 0 };
    // SAFETY: RTLD_NOLOAD on a path that is loaded.
    let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return 0;
    }
    real_dlsym(h, name)
}
