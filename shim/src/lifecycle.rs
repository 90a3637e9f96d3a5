//! What happens at the library's load, at a fork and at exit: the top of the house.
//!
//! - load (before the program's own code): the stdio wrappers are connected to the tap, the
//!   rule file is read (so a warning about it comes before any line the program prints) and
//!   the fork handler is registered; no other setting is read and nothing is resolved with
//!   `VRAMLEDGER_DISABLE=1`;
//! - fork: the child writes its own journal. The one place that says what a child forgets:
//!   the parent's file, locks, module and template ids, books, contexts, stages, the tap's
//!   partial lines and PyTorch's pool windows;
//! - exit (after every `atexit` handler): the journal is sealed and cut to its used size.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::{
    attribution, books, devices, guard, hooks, journal, lifetime, pools, samples, selftime, stages,
    thread,
};

static REGISTERED: AtomicBool = AtomicBool::new(false);

extern "C" fn in_child() {
    journal::reset_in_child();
    devices::reset_in_child();
    lifetime::reset_in_child();
    attribution::reset_in_child();
    let _ = thread::with(|t| t.reset_in_child());
    books::reset_in_child();
    stages::reset_in_child();
    hooks::tap::reset_in_child();
    pools::reset_in_child();
    samples::reset_in_child();
    selftime::reset_in_child();
    guard::reset_in_child();
}

/// Registers the `atfork` child handler (once per process image).
fn register_fork() {
    if !REGISTERED.swap(true, Ordering::AcqRel) {
        // SAFETY: registering a handler that lives as long as the library; no preconditions.
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    }
}

extern "C" fn on_load() {
    let _ = std::panic::catch_unwind(|| {
        hooks::signals::init_at_load();
        hooks::stdio::init_at_load();
        hooks::tap::init_at_load();
        selftime::init_at_load();
        register_fork();
    });
}

extern "C" fn on_unload() {
    let _ = std::panic::catch_unwind(|| {
        journal::close_at_exit();
        selftime::say(|| "exit".to_string());
        guard::debug(|| {
            let (unwound, learned) = attribution::unwind::walks();
            format!("walks past the runtime: {unwound} unwound, {learned} by learned frame sizes")
        });
        // Last: warnings still waiting for a line the program never ended.
        guard::flush_deferred();
    });
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

#[used]
#[link_section = ".fini_array"]
static ON_UNLOAD: extern "C" fn() = on_unload;
