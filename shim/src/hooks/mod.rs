//! One file per family of hooked entry points. Every hook forwards first, with the caller's
//! exact arguments, through the one forwarding body ([`forward`]), returns the real result
//! unchanged, and only then describes what happened (inside [`crate::guard::record_on`]).
//! Release-type calls reserve their record before forwarding ([`forward::ticket`]).

pub mod capture;
pub mod context;
pub mod forward;
pub mod host;
pub mod meminfo;
pub mod memory;
pub mod nccl;
pub mod pools;
pub mod signals;
pub mod stdio;
pub mod tap;
pub mod tap_filter;
pub mod vmm;
