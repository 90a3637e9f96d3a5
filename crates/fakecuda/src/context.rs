//! Initialisation, devices and contexts: primary contexts with a refcount, created contexts,
//! and the per-thread context stack. A context takes FAKECUDA_CONTEXT_BYTES on its device.
use std::cell::RefCell;
use std::os::raw::{c_char, c_int, c_uint, c_void};

use crate::config;
use crate::state::{ffi, with, with_init, Context, State};
use crate::types::*;

/// A thread's context stack, of fixed capacity and without a destructor: like the real
/// driver's, it still works in `atexit` handlers, after the thread's Rust TLS destructors ran.
struct CtxStack {
    items: [CUhandle; 64],
    len: usize,
}

impl CtxStack {
    fn last(&self) -> Option<CUhandle> {
        self.len.checked_sub(1).map(|i| self.items[i])
    }

    fn push(&mut self, c: CUhandle) -> Result<(), CUresult> {
        if self.len == self.items.len() {
            return Err(CUDA_ERROR_OUT_OF_MEMORY);
        }
        self.items[self.len] = c;
        self.len += 1;
        Ok(())
    }

    fn pop(&mut self) -> Option<CUhandle> {
        let top = self.last()?;
        self.len -= 1;
        Some(top)
    }

    fn retain(&mut self, keep: impl Fn(CUhandle) -> bool) {
        let mut n = 0;
        for i in 0..self.len {
            if keep(self.items[i]) {
                self.items[n] = self.items[i];
                n += 1;
            }
        }
        self.len = n;
    }
}

thread_local! {
    /// The calling thread's context stack; the top is the current context.
    static STACK: RefCell<CtxStack> = const { RefCell::new(CtxStack { items: [0; 64], len: 0 }) };
}

fn top() -> Option<CUhandle> {
    STACK.with(|s| s.borrow().last())
}

/// The calling thread's current (live) context and its device, else INVALID_CONTEXT.
pub fn current(st: &State) -> Result<(CUhandle, usize), CUresult> {
    let ctx = top().ok_or(CUDA_ERROR_INVALID_CONTEXT)?;
    match st.contexts.get(&ctx) {
        Some(c) if c.active => Ok((ctx, c.dev)),
        _ => Err(CUDA_ERROR_INVALID_CONTEXT),
    }
}

/// Copy `s` into a C buffer of `len` bytes, truncating, always NUL-terminated.
unsafe fn write_cstr(buf: *mut c_char, len: c_int, s: &str) -> Result<(), CUresult> {
    if buf.is_null() || len <= 0 {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    let n = s.len().min(len as usize - 1);
    std::ptr::copy_nonoverlapping(s.as_ptr() as *const c_char, buf, n);
    *buf.add(n) = 0;
    Ok(())
}

/// The PCI bus id of a device, shared with NVML: "0000:1A:00.0", "0000:26:00.0", ...
pub fn pci_bus_id(dev: usize) -> String {
    format!("0000:{:02X}:00.0", 0x1A + 0x0C * dev)
}

pub const DEVICE_NAME: &str = "NVIDIA H200 (fakecuda)";

/// Device `dev`'s UUID (16 bytes, stable across runs): `GPU-fa4ecda0-0000-4000-8000-00000000000N`.
pub fn uuid(dev: usize) -> [u8; 16] {
    let mut u = [0u8; 16];
    u[..4].copy_from_slice(&[0xfa, 0x4e, 0xcd, 0xa0]);
    u[6] = 0x40;
    u[8] = 0x80;
    u[15] = dev as u8;
    u
}

fn check_device(st: &mut State, dev: CUdevice) -> Result<usize, CUresult> {
    st.device(dev)?;
    Ok(dev as usize)
}

#[no_mangle]
pub unsafe extern "C" fn cuInit(flags: c_uint) -> CUresult {
    ffi(|| {
        crate::state::check_not_forked()?;
        if flags != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        with(|st| {
            if st.devices.is_empty() {
                return Err(CUDA_ERROR_NO_DEVICE);
            }
            st.initialized = true;
            Ok(())
        })?;
        crate::state::mark_initialized();
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CUresult {
    ffi(|| {
        *out(version)? = 13000;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(device)?;
            check_device(st, ordinal)?;
            *o = ordinal;
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CUresult {
    ffi(|| {
        with_init(|st| {
            *out(count)? = st.devices.len() as c_int;
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult {
    ffi(|| {
        with_init(|st| {
            check_device(st, dev)?;
            write_cstr(name, len, DEVICE_NAME)
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetPCIBusId(
    bus_id: *mut c_char,
    len: c_int,
    dev: CUdevice,
) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let d = check_device(st, dev)?;
            let id = pci_bus_id(d);
            if len < id.len() as c_int + 1 {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            write_cstr(bus_id, len, &id)
        })
    })
}

/// `cuDeviceGetUuid` and `_v2` (the same 16 bytes here; the real `_v2` also names MIG
/// instances).
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetUuid_v2(uuid_out: *mut [u8; 16], dev: CUdevice) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let d = check_device(st, dev)?;
            *out(uuid_out)? = uuid(d);
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetUuid(uuid_out: *mut [u8; 16], dev: CUdevice) -> CUresult {
    cuDeviceGetUuid_v2(uuid_out, dev)
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(bytes)?;
            *o = st.device(dev)?.total as usize;
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(pctx: *mut CUhandle, dev: CUdevice) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(pctx)?;
            let d = check_device(st, dev)?;
            if st.devices[d].primary_refs == 0 {
                st.take(d, config::get().context_bytes)?;
                if st.devices[d].primary == 0 {
                    st.devices[d].primary = st.token(0xC7);
                }
                let handle = st.devices[d].primary;
                st.contexts.insert(
                    handle,
                    Context {
                        dev: d,
                        primary: true,
                        active: true,
                    },
                );
            }
            st.devices[d].primary_refs += 1;
            *o = st.devices[d].primary;
            Ok(())
        })
    })
}

/// Everything a dying context owned goes back to its device.
fn retire(st: &mut State, ctx: CUhandle, dev: usize) {
    crate::memory::release_context_memory(st, ctx);
    crate::capture::release_context_streams(st, ctx);
    st.give(dev, config::get().context_bytes);
}

#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let d = check_device(st, dev)?;
            if st.devices[d].primary_refs == 0 {
                return Err(CUDA_ERROR_INVALID_CONTEXT);
            }
            st.devices[d].primary_refs -= 1;
            if st.devices[d].primary_refs == 0 {
                let handle = st.devices[d].primary;
                if let Some(c) = st.contexts.get_mut(&handle) {
                    c.active = false;
                }
                retire(st, handle, d);
            }
            Ok(())
        })
    })
}

/// cuCtxCreate (all versions): a new context that takes its own memory and becomes current.
unsafe fn create(pctx: *mut CUhandle, dev: CUdevice) -> CUresult {
    ffi(|| {
        let handle = with_init(|st| {
            let o = out(pctx)?;
            let d = check_device(st, dev)?;
            st.take(d, config::get().context_bytes)?;
            let handle = st.token(0xC7);
            st.contexts.insert(
                handle,
                Context {
                    dev: d,
                    primary: false,
                    active: true,
                },
            );
            *o = handle;
            Ok(handle)
        })?;
        STACK.with(|s| s.borrow_mut().push(handle))
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v2(
    pctx: *mut CUhandle,
    _flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    create(pctx, dev)
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v3(
    pctx: *mut CUhandle,
    params: *mut c_void,
    num_params: c_int,
    _flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    if num_params < 0 || (num_params > 0 && params.is_null()) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    create(pctx, dev)
}

/// `params` is a CUctxCreateParams* (may be NULL); the fake ignores its contents.
#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v4(
    pctx: *mut CUhandle,
    _params: *mut c_void,
    _flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    create(pctx, dev)
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxDestroy_v2(ctx: CUhandle) -> CUresult {
    ffi(|| {
        with_init(|st| match st.contexts.get(&ctx) {
            Some(c) if !c.primary => {
                let dev = c.dev;
                st.contexts.remove(&ctx);
                retire(st, ctx, dev);
                Ok(())
            }
            _ => Err(CUDA_ERROR_INVALID_CONTEXT),
        })?;
        // The real driver pops it if it is current on the calling thread.
        STACK.with(|s| s.borrow_mut().retain(|c| c != ctx));
        Ok(())
    })
}

fn valid_context(ctx: CUhandle) -> Result<(), CUresult> {
    with_init(|st| match st.contexts.get(&ctx) {
        Some(c) if c.active => Ok(()),
        _ => Err(CUDA_ERROR_INVALID_CONTEXT),
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxSetCurrent(ctx: CUhandle) -> CUresult {
    ffi(|| {
        if ctx == 0 {
            with_init(|_| Ok(()))?;
            STACK.with(|s| s.borrow_mut().pop());
            return Ok(());
        }
        valid_context(ctx)?;
        STACK.with(|s| {
            let mut s = s.borrow_mut();
            s.pop();
            s.push(ctx)
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxGetCurrent(pctx: *mut CUhandle) -> CUresult {
    ffi(|| {
        with_init(|_| Ok(()))?;
        *out(pctx)? = top().unwrap_or(0);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxPushCurrent_v2(ctx: CUhandle) -> CUresult {
    ffi(|| {
        valid_context(ctx)?;
        STACK.with(|s| s.borrow_mut().push(ctx))
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxPopCurrent_v2(pctx: *mut CUhandle) -> CUresult {
    ffi(|| {
        with_init(|_| Ok(()))?;
        let ctx = STACK
            .with(|s| s.borrow_mut().pop())
            .ok_or(CUDA_ERROR_INVALID_CONTEXT)?;
        if let Some(o) = pctx.as_mut() {
            *o = ctx;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxGetDevice(device: *mut CUdevice) -> CUresult {
    ffi(|| {
        with_init(|st| {
            let o = out(device)?;
            *o = current(st)?.1 as CUdevice;
            Ok(())
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxSynchronize() -> CUresult {
    ffi(|| with_init(|st| current(st).map(|_| ())))
}
