//! After `fork()` the child writes its own journal: the child handler forgets the
//! parent's file, locks, module ids and books. Registered once, when the first journal
//! opens.

use std::sync::atomic::{AtomicBool, Ordering};

static REGISTERED: AtomicBool = AtomicBool::new(false);

extern "C" fn in_child() {
    crate::recorder::reset_after_fork();
}

/// Registers the `atfork` child handler (once per process image).
pub fn register() {
    if !REGISTERED.swap(true, Ordering::AcqRel) {
        // SAFETY: registering a handler without preconditions.
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    }
}
