//! After `fork()` the child writes its own journal. The one place that says what a child
//! forgets: the parent's file, locks, module and template ids, books, contexts, stages, the
//! tap's partial lines and PyTorch's pool windows. Registered when the library is loaded.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::{attribution, books, devices, hooks, journal, lifetime, pools, samples, stages};

static REGISTERED: AtomicBool = AtomicBool::new(false);

extern "C" fn in_child() {
    journal::reset_in_child();
    devices::reset_in_child();
    lifetime::reset_in_child();
    attribution::reset_in_child();
    let _ = crate::thread::with(|t| t.reset_in_child());
    books::reset_in_child();
    stages::reset_in_child();
    hooks::tap::reset_in_child();
    pools::reset_in_child();
    samples::reset_in_child();
}

/// Registers the `atfork` child handler (once per process image).
pub fn register() {
    if !REGISTERED.swap(true, Ordering::AcqRel) {
        // SAFETY: registering a handler that lives as long as the library; no preconditions.
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    }
}
