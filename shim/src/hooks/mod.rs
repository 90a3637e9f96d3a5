//! One file per family of hooked entry points. Every hook forwards first, with the
//! caller's exact arguments, returns the real result unchanged, and only then describes
//! what happened (inside [`crate::guard::record`]). Release-type calls reserve their
//! record before forwarding (see [`crate::recorder::Ticket`]).

pub mod capture;
pub mod context;
pub mod host;
pub mod meminfo;
pub mod memory;
pub mod nccl;
pub mod stdio;
pub mod tap;
pub mod vmm;

use vramledger_format::Api;

/// The real function of `api` as a typed pointer, or `None` when it cannot be found.
macro_rules! real {
    ($api:expr, $ty:ty) => {{
        let p = $crate::entry::real::resolve($api);
        if p == 0 {
            None
        } else {
            // SAFETY: the pointer was looked up under the exported name of `$api`,
            // whose C signature is `$ty`.
            Some(unsafe { std::mem::transmute::<usize, $ty>(p) })
        }
    }};
}
pub(crate) use real;

/// Calls the real `api` (C signature `ty`) with the caller's arguments; when it cannot be
/// found, returns from the hook with [`missing`]'s code.
macro_rules! forward {
    ($api:expr, $ty:ty, $($arg:expr),* $(,)?) => {{
        match $crate::hooks::real!($api, $ty) {
            // SAFETY: the caller's own arguments, passed on unchanged.
            Some(f) => unsafe { f($($arg),*) },
            None => return $crate::hooks::missing($api),
        }
    }};
}
pub(crate) use forward;

/// What a hook returns when the real function cannot be found at all (never expected:
/// the caller reached the hook through the library that defines it).
#[cold]
pub fn missing(api: Api) -> i32 {
    crate::guard::warn(&format!("cannot find the real {}", api.name()));
    if api.name().starts_with("nccl") {
        crate::ffi::NCCL_INTERNAL_ERROR
    } else {
        crate::ffi::CUDA_ERROR_NOT_FOUND
    }
}
