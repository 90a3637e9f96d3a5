//! Reserving room for a record and committing it.
//!
//! A writer reserves its bytes with one atomic add on the cursor and stores, at once, a
//! placeholder that gives the slot's length (a reader steps over a slot that is never
//! committed); it then copies its record and commits it by storing the record's first word
//! last. A record never crosses a block's data area: the writer whose reservation would,
//! turns what lies in the block into padding (up to the seal) and what lies in the next block
//! into a padding frame there, and reserves again.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use vramledger_format::block::{placeholder, BLOCK, MAX_RECORD, SEAL_LEN};
use vramledger_format::frame::{encode_frame_body_parts, frame_len, head_word};

use super::blocks;
use super::state::{self, CURSOR, FD, GENERATION};

/// A reserved place for one record. It must be committed: one never committed reads as a
/// record lost in flight and keeps its block unsealed (no `Drop` on purpose: a drop flag
/// would cost every release hook a copy of its ticket).
// Kept small (24 bytes): a ticket carrying one is moved through every release hook.
pub struct Slot {
    ptr: *mut u8,
    len: u32,
    block: u32,
    generation: u32,
}

/// Reserves `len` bytes (a multiple of 8, at most `MAX_RECORD`), also while the journal is
/// being opened. `None` when the journal cannot grow (it has failed for good then).
#[inline]
pub fn reserve(len: usize) -> Option<Slot> {
    debug_assert!(len.is_multiple_of(8) && (16..=MAX_RECORD).contains(&len));
    let len = len as u64;
    let fd = FD.load(Ordering::Acquire);
    loop {
        let generation = GENERATION.load(Ordering::Acquire);
        let off = CURSOR.fetch_add(len, Ordering::AcqRel);
        let k = off / BLOCK as u64;
        let data_end = k * BLOCK as u64 + (BLOCK - SEAL_LEN) as u64;
        if off + len > data_end {
            spill(fd, off, len)?;
            continue;
        }
        let ptr = match blocks::ptr_at(fd, off) {
            Ok(p) => p,
            Err(f) => {
                state::fail(&f.describe());
                return None;
            }
        };
        // SAFETY: the 8 bytes at `ptr` start our reservation (8-byte aligned: every record
        // is a multiple of 8 from offset 0) inside a live mapping.
        unsafe { (*(ptr as *const AtomicU64)).store(placeholder(len as usize), Ordering::Relaxed) };
        return Some(Slot {
            ptr,
            len: len as u32,
            block: k as u32,
            generation,
        });
    }
}

/// A reservation `[off, off + len)` that crosses its block's data end: padding in this block
/// (up to the seal) and in the next one (what was reserved there).
#[cold]
fn spill(fd: i32, off: u64, len: u64) -> Option<()> {
    let k = off / BLOCK as u64;
    let data_end = k * BLOCK as u64 + (BLOCK - SEAL_LEN) as u64;
    let next = (k + 1) * BLOCK as u64;
    let pad = |at: u64, n: u64, block: u64| -> Option<()> {
        match blocks::ptr_at(fd, at) {
            Ok(p) => {
                // SAFETY: [at, at + n) is ours (reserved above), mapped and 8-byte aligned.
                unsafe { blocks::write_padding(p, n) };
                blocks::done(fd, block, n as u32);
                Some(())
            }
            Err(f) => {
                state::fail(&f.describe());
                None
            }
        }
    };
    if off < data_end {
        pad(off, data_end - off, k)?;
    }
    if off + len > next {
        pad(next, off + len - next, k + 1)?;
    }
    Some(())
}

impl Slot {
    /// Bytes reserved.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True for an empty slot (never: every record has a first word).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when the journal was replaced (a fork) since the reservation: writing would
    /// touch the child's journal.
    #[inline]
    fn stale(&self) -> bool {
        self.generation != GENERATION.load(Ordering::Acquire)
    }

    /// The slot's bytes after its first word, for the record's body.
    ///
    /// # Safety
    /// The slot is not stale and not committed yet.
    #[inline]
    pub unsafe fn body(&mut self) -> &mut [u8] {
        // SAFETY (caller): our own reserved bytes inside a live mapping.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len as usize) }
    }

    /// Commits a record whose body is written: stores its first word, counts it done.
    #[inline]
    pub fn commit_word(self, word0: u64) {
        if self.stale() {
            return;
        }
        // SAFETY: the slot's first 8 bytes are ours, aligned and mapped; storing them commits.
        unsafe { (*(self.ptr as *const AtomicU64)).store(word0, Ordering::Release) };
        blocks::done(FD.load(Ordering::Relaxed), self.block as u64, self.len);
    }

    /// Writes a compact record (`encode` fills the body) and commits it with `word0`.
    #[inline]
    pub fn commit_compact(mut self, word0: u64, encode: impl FnOnce(&mut [u8])) {
        if self.stale() {
            return;
        }
        // SAFETY: not stale, not committed.
        encode(unsafe { self.body() });
        self.commit_word(word0);
    }

    /// Writes a frame of format 1 (`kind`, payload in pieces) and commits it (head last).
    pub fn commit_frame(mut self, kind: u16, parts: &[&[u8]]) {
        if self.stale() {
            return;
        }
        // SAFETY: not stale, not committed.
        let buf = unsafe { self.body() };
        encode_frame_body_parts(kind, parts, buf);
        // SAFETY: the slot is 8-byte aligned and mapped; the head word is stored last.
        unsafe { (*(self.ptr as *const AtomicU32)).store(head_word(kind), Ordering::Release) };
        blocks::done(FD.load(Ordering::Relaxed), self.block as u64, self.len);
    }

    /// Turns the slot into padding (a release whose call failed: its record is written anew).
    pub fn cancel(self) {
        if self.stale() {
            return;
        }
        // SAFETY: our own reserved slot, aligned and mapped.
        unsafe { blocks::write_padding(self.ptr, self.len as u64) };
        blocks::done(FD.load(Ordering::Relaxed), self.block as u64, self.len);
    }
}

/// Appends one frame of format 1 (reserve + commit).
pub fn append_frame(kind: u16, parts: &[&[u8]]) -> bool {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let total = frame_len(len);
    if total > MAX_RECORD {
        return false;
    }
    match reserve(total) {
        Some(slot) => {
            slot.commit_frame(kind, parts);
            true
        }
        None => false,
    }
}
