//! The state words every hook reads, gathered into one cache line.
//!
//! A real driver call (tens of microseconds of ioctls and page-table work) evicts the core's
//! caches, so each distinct line a hook touches after it is a miss; as separate statics these
//! words lay on nine lines. Read-mostly only: the journal's cursor, written by every record
//! of every thread, keeps a line of its own (here it would make every other core miss).
//! Each owner keeps its name for its word (`static X: &Atomic = &HOT.x`, folded at compile
//! time into the address itself).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};

/// The words; each is documented where its owner names it.
#[repr(C, align(64))]
pub struct Hot {
    pub start_mono: AtomicU64,
    pub pools_held: AtomicUsize,
    pub contexts: AtomicU64,
    pub named: AtomicU64,
    pub clock: AtomicI32,
    pub stage: AtomicU32,
    pub generation: AtomicU32,
    pub fd: AtomicI32,
    pub device_count: AtomicI32,
    pub captures_open: AtomicI32,
    pub broken: AtomicBool,
    pub disabled: AtomicU8,
    pub selftime: AtomicBool,
    pub journal_state: AtomicU8,
    pub rule_off: AtomicBool,
}

pub static HOT: Hot = Hot {
    start_mono: AtomicU64::new(0),
    pools_held: AtomicUsize::new(0),
    contexts: AtomicU64::new(0),
    named: AtomicU64::new(0),
    clock: AtomicI32::new(libc::CLOCK_MONOTONIC),
    stage: AtomicU32::new(0),
    generation: AtomicU32::new(0),
    fd: AtomicI32::new(-1),
    device_count: AtomicI32::new(0),
    captures_open: AtomicI32::new(0),
    broken: AtomicBool::new(false),
    disabled: AtomicU8::new(0),
    selftime: AtomicBool::new(false),
    journal_state: AtomicU8::new(0),
    rule_off: AtomicBool::new(false),
};

const _: () = assert!(std::mem::size_of::<Hot>() == 64);
