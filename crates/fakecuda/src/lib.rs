//! fakecuda: a fake `libcuda.so.1` (and `libnvidia-ml.so.1`) for GPU-free tests of the interposer.
//!
//! It exports the real driver's versioned ABI names with the real signatures and error codes, and
//! keeps a small, deterministic model of the devices: free memory, address reuse, contexts,
//! stream-ordered pools, VMM refcounts and the stream-capture rule. Configuration comes from the
//! environment (see `config.rs`). Every export catches panics (`state::ffi`).
#![allow(non_snake_case)] // the driver's own ABI names (cuMemAlloc_v2, nvmlInit_v2, ...)
#![allow(clippy::missing_safety_doc)] // every export's contract is the one documented in cuda.h / nvml.h

mod capture;
mod config;
mod context;
mod errors;
mod ipc;
mod memory;
mod nvml;
mod pools;
mod procaddr;
mod state;
mod types;
mod va;
mod vmm;
