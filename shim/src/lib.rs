//! `libvramledger.so`: the part of vramledger that runs inside the target process.
//!
//! Small, boring and paranoid: it lives inside someone else's server. From the ground up:
//! - [`ffi`], [`config`], [`real`] (the real functions), [`thread`] (per-thread state),
//!   [`clock`], [`forksafe`]: what everything else stands on;
//! - [`guard`], [`journal`] (records into the file), [`attribution`] (who owns an
//!   allocation), [`books`], [`devices`], [`stages`], [`pools`], [`nvml`], [`process`];
//! - [`recorder`] (events into records), [`samples`], [`boundary`], [`lifetime`],
//!   [`pools_api`] (the Python pool hooks' C API);
//! - [`hooks`]: one file per family, every hook through one forwarding body;
//! - [`entry`]: every way a program reaches a driver function (exports, `dlsym`,
//!   `cuGetProcAddress`) becomes a call of a hook;
//! - [`fork`]: what a forked child forgets.
//!
//! Inside the target: never change a result, never hold a lock across a driver call,
//! never let a panic cross the FFI boundary, step aside (pass-through) on any internal
//! error, and `VRAMLEDGER_DISABLE=1` turns everything off.

// Every exported hook's safety contract is the C API it stands in for (documented by
// NVIDIA and NCCL); repeating it on each one would say nothing new.
#![allow(clippy::missing_safety_doc)]

pub mod attribution;
pub mod books;
pub mod boundary;
pub mod clock;
pub mod config;
pub mod devices;
pub mod entry;
pub mod ffi;
pub mod fork;
pub mod forksafe;
pub mod guard;
pub mod hooks;
pub mod journal;
pub mod lifetime;
pub mod nvml;
pub mod pools;
pub mod pools_api;
pub mod process;
pub mod real;
pub mod recorder;
pub mod rules_file;
pub mod samples;
pub mod stages;
pub mod thread;

/// Runs when the library is loaded, before the program's own code: connects the stdio
/// wrappers to the tap, reads the rule file (so a warning about it comes before any line the
/// program prints) and registers the fork handler. Reads no other setting and resolves
/// nothing with `VRAMLEDGER_DISABLE=1`.
extern "C" fn on_load() {
    let _ = std::panic::catch_unwind(|| {
        hooks::stdio::init_at_load();
        hooks::tap::init_at_load();
        fork::register();
    });
}

/// Runs at exit, after every `atexit` handler: the journal is sealed and cut to its size.
extern "C" fn on_unload() {
    let _ = std::panic::catch_unwind(|| {
        journal::close_at_exit();
        guard::debug(|| {
            let (unwound, learned) = attribution::unwind::walks();
            format!("walks past the runtime: {unwound} unwound, {learned} by learned frame sizes")
        });
    });
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

#[used]
#[link_section = ".fini_array"]
static ON_UNLOAD: extern "C" fn() = on_unload;
