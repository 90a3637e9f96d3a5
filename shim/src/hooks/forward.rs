//! The one forwarding body every hook uses, and the halves of a release-type record.

use vramledger_format::{Api, Event};

use crate::guard;
use crate::recorder::Ticket;
use crate::thread::Thread;

/// The real function of `api` as a typed pointer, or `None` when it cannot be found.
macro_rules! real {
    ($api:expr, $ty:ty) => {{
        let p = $crate::real::resolve($api);
        if p == 0 {
            None
        } else {
            // SAFETY: the pointer was looked up under the exported name of `$api`, whose C
            // signature is `$ty`.
            Some(unsafe { std::mem::transmute::<usize, $ty>(p) })
        }
    }};
}
pub(crate) use real;

/// Calls the real `api` (C signature `ty`) with the caller's arguments and gives its result;
/// when it cannot be found, returns from the hook with [`missing`]'s code.
macro_rules! forward {
    ($api:expr, $ty:ty, $($arg:expr),* $(,)?) => {{
        match $crate::hooks::forward::real!($api, $ty) {
            // SAFETY: the real function of this very signature, called with the caller's own
            // arguments, unchanged: whatever held for the caller's call holds for this one.
            Some(f) => unsafe { f($($arg),*) },
            None => return $crate::hooks::forward::missing($api),
        }
    }};
}
pub(crate) use forward;

/// [`forward!`] for a release-type call: `ticket` (an `Option<Ticket>`, the record's place
/// taken before the call) once the real function is found, then the call, then the record
/// committed with its result.
macro_rules! release {
    ($api:expr, $ty:ty, $ticket:expr, $($arg:expr),* $(,)?) => {{
        match $crate::hooks::forward::real!($api, $ty) {
            Some(f) => {
                let mut t = $ticket;
                // SAFETY: the real function of this very signature, called with the caller's
                // own arguments, unchanged.
                let rc = unsafe { f($($arg),*) };
                $crate::hooks::forward::finish(&mut t, rc);
                rc
            }
            None => return $crate::hooks::forward::missing($api),
        }
    }};
}
pub(crate) use release;

/// What a hook returns when the real function cannot be found at all (never expected:
/// the caller reached the hook through the library that defines it).
#[cold]
pub fn missing(api: Api) -> i32 {
    guard::warn(&format!("cannot find the real {}", api.name()));
    if api.name().starts_with("nccl") {
        crate::ffi::NCCL_INTERNAL_ERROR
    } else {
        crate::ffi::CUDA_ERROR_NOT_FOUND
    }
}

/// Before a release-type call: the record's place, and the memory out of the books.
#[inline(always)]
pub fn ticket(make: impl FnOnce(&Thread) -> Event) -> Option<Ticket> {
    let mut t = None;
    guard::record_on(|th| t = Some(Ticket::before(th, make(th))));
    t
}

/// After it: the record, with the call's result (the ticket stays where it is).
#[inline(always)]
pub fn finish(t: &mut Option<Ticket>, rc: i32) {
    if let Some(t) = t {
        guard::record_on(|th| t.finish(th, rc));
    }
}

/// A value the real call wrote through the caller's out-pointer `p` (0 for NULL).
///
/// # Safety
/// `p` is NULL or points to a `T` the real call just wrote (it returned success).
#[inline(always)]
pub unsafe fn written<T: Copy + Default>(p: *const T) -> T {
    if p.is_null() {
        T::default()
    } else {
        // SAFETY (caller): the call succeeded and wrote *p.
        unsafe { *p }
    }
}
