//! The live books inside the target: which memory exists now and who owns it (the same
//! `LiveBooks` the offline ledger replays, so the two agree by construction). They complete
//! records about existing memory (a free gets the size and owner of its allocation) and give
//! the `live` records written at stage boundaries and failed allocations. The lock is held for
//! a map update only; no driver call happens under it.

use vramledger_format::{Event, LiveBooks, MemKind, Owner};

use crate::forksafe::ForkSafeMutex;

static LIVE: ForkSafeMutex<LiveBooks> = ForkSafeMutex::new();

/// Completes `e` from the books (owner, size, device of the memory it is about) and applies
/// it to them (`LiveBooks::book`: one lookup for a free).
#[inline]
pub fn book(e: &mut Event) {
    LIVE.lock().book(e);
}

/// Bytes held now per (device, owner, memory kind).
pub fn totals() -> Vec<((i32, Owner, MemKind), u64)> {
    LIVE.lock().totals().collect()
}

/// In a forked child: the parent's memory is not the child's.
pub fn reset_in_child() {
    LIVE.reset_in_child();
}
