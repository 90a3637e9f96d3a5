//! `libvramledger.so`: the part of vramledger that runs inside the target process.
//!
//! Small, boring and paranoid: it lives inside someone else's server.
//! - [`entry`]: every way a program reaches a driver function (exports, `dlsym`,
//!   `cuGetProcAddress`) becomes a call of a hook;
//! - [`hooks`]: one file per family; forward first, then describe what happened;
//! - [`attribution`]: who owns an allocation (calling module, capture window);
//! - [`pools`]: PyTorch's pool windows, told by the Python hook ([`pools_api`]);
//! - [`stages`]: the current stage and the samples taken at each boundary;
//! - [`recorder`] and [`journal`]: events into records, records into the file.
//!
//! Inside the target: never change a result, never hold a lock across a driver call,
//! never let a panic cross the FFI boundary, step aside (pass-through) on any internal
//! error, and `VRAMLEDGER_DISABLE=1` turns everything off.

// Every exported hook's safety contract is the C API it stands in for (documented by
// NVIDIA and NCCL); repeating it on each one would say nothing new.
#![allow(clippy::missing_safety_doc)]

pub mod attribution;
pub mod config;
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
pub mod recorder;
pub mod rules_file;
pub mod stages;

/// Runs when the library is loaded, before the program's own code: connects the stdio
/// wrappers to the tap and reads the rule file (so a warning about it comes before any line
/// the program prints). Neither reads nor resolves anything with `VRAMLEDGER_DISABLE=1`.
extern "C" fn on_load() {
    let _ = std::panic::catch_unwind(|| {
        hooks::stdio::init_at_load();
        hooks::tap::init_at_load();
    });
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
