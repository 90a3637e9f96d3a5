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
//! - [`lifecycle`]: what happens at the library's load, a fork (what a child forgets) and
//!   exit.
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
pub mod forksafe;
pub mod guard;
pub mod hooks;
pub mod hot;
pub mod journal;
pub mod lifecycle;
pub mod lifetime;
pub mod nvml;
pub mod pools;
pub mod pools_api;
pub mod process;
pub mod real;
pub mod recorder;
pub mod rules_file;
pub mod samples;
pub mod selftime;
pub mod stages;
pub mod thread;
