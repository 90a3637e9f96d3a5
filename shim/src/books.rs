//! The live books inside the target: which memory exists now and who owns it (the same
//! `LiveBooks` the offline ledger replays, so the two agree by construction). They complete
//! records about existing memory (a free gets the size and owner of its allocation) and give
//! the `live` records written at stage boundaries and failed allocations. The lock is held for
//! a map update only; no driver call happens under it.

use vramledger_format::{Event, Kind, LiveBooks, MemKind, Owner};

use crate::forksafe::ForkSafeMutex;

static LIVE: ForkSafeMutex<LiveBooks> = ForkSafeMutex::new();

/// Completes `e` from the books (owner, size, device of the memory it is about) and applies
/// it to them.
#[inline]
pub fn book(e: &mut Event) {
    let mut books = LIVE.lock();
    fill(&books, e);
    books.apply(e);
}

fn fill(books: &LiveBooks, e: &mut Event) {
    match e.kind() {
        Some(Kind::Free | Kind::HostFree) => {
            if let Some(b) = books.block_at(e.addr) {
                e.owner = b.owner as u8;
                e.size = b.size;
                e.device = b.device;
                e.module = b.module;
                e.mem = b.mem as u8;
            }
        }
        Some(Kind::VmmRelease | Kind::VmmRetain | Kind::VmmMap) if e.owner == 0 => {
            if let Some((owner, size, device)) = books.handle_info(e.handle) {
                e.owner = owner as u8;
                e.device = device;
                if e.size == 0 {
                    e.size = size;
                }
            }
        }
        Some(Kind::VmmUnmap) => {
            if let Some(h) = books.mapping_at(e.addr) {
                e.handle = h;
                if let Some((owner, _, device)) = books.handle_info(h) {
                    e.owner = owner as u8;
                    e.device = device;
                }
            }
        }
        _ => {}
    }
}

/// Bytes held now per (device, owner, memory kind).
pub fn totals() -> Vec<((i32, Owner, MemKind), u64)> {
    LIVE.lock().totals().collect()
}

/// In a forked child: the parent's memory is not the child's.
pub fn reset_in_child() {
    LIVE.reset_in_child();
}
