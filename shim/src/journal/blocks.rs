//! The 64 KiB blocks of the journal (`vramledger_format::block`): who writes a block's seal,
//! and the final seal at exit.
//!
//! Every byte of a block's data area belongs to exactly one reservation (records, padding,
//! and the preamble in block 0). Each writer adds the bytes it finished to its block's
//! counter; the one who completes the data area computes the block's CRC-32 and writes the
//! seal, magic last, then counts the whole block done for its chunk (which unmaps the chunk
//! once all 64 of its blocks are sealed). So the CRC is computed once per 64 KiB, by one
//! writer, after every record in the block is committed, never per record.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use vramledger_format::block::{Seal, BLOCK, SEAL_FINAL, SEAL_LEN, SEAL_MAGIC};
use vramledger_format::frame::head_word;
use vramledger_format::frame::PADDING_KIND;

use super::chunks::{self, CHUNK, MAX_CHUNKS};

const BLOCKS_PER_CHUNK: usize = (CHUNK as usize) / BLOCK;
/// Blocks of a journal at its 16 GiB cap.
const MAX_BLOCKS: usize = MAX_CHUNKS * BLOCKS_PER_CHUNK;
/// Bytes of a block's data area.
const DATA: u32 = (BLOCK - SEAL_LEN) as u32;

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU32 = AtomicU32::new(0);
/// Bytes finished per block (1 MiB in all, untouched pages cost nothing).
static DONE: [AtomicU32; MAX_BLOCKS] = [ZERO; MAX_BLOCKS];

/// Where file offset `at` is mapped (its chunk grown if need be).
#[inline]
pub fn ptr_at(fd: i32, at: u64) -> Result<*mut u8, chunks::Failure> {
    let base = chunks::chunk_ptr(fd, (at / CHUNK) as usize)?;
    // SAFETY: `at % CHUNK` is inside the 4 MiB mapping of its chunk.
    Ok(unsafe { base.add((at % CHUNK) as usize) })
}

/// `n` more bytes of block `k`'s data area are written for good; the writer who completes
/// it seals the block.
#[inline]
pub fn done(fd: i32, k: u64, n: u32) {
    let Some(d) = DONE.get(k as usize) else {
        return;
    };
    let before = d.fetch_add(n, Ordering::AcqRel);
    if before + n == DATA {
        seal(fd, k, 0);
    }
}

/// Writes block `k`'s seal over its whole data area and counts the block done for its chunk.
#[cold]
fn seal(fd: i32, k: u64, flags: u32) {
    let start = k * BLOCK as u64;
    let Ok(p) = ptr_at(fd, start) else { return };
    // SAFETY: the block's data area is inside its chunk's mapping, which stays mapped until
    // this block is counted done below; every byte of it is written (the counter says so).
    let covered = unsafe { std::slice::from_raw_parts(p, DATA as usize) };
    // SAFETY: the seal's 16 bytes follow the data area in the same mapping, and belong to
    // whoever completes the block: this writer.
    unsafe { write_seal(p.add(DATA as usize), covered, flags) };
    chunks::done(start / CHUNK, BLOCK as u64);
}

/// Writes a seal of `covered` at `at`, its magic word last.
///
/// # Safety
/// `at` is 8-byte aligned, mapped and writable for 16 bytes that nobody else writes.
unsafe fn write_seal(at: *mut u8, covered: &[u8], flags: u32) {
    let seal = Seal::of(covered, flags);
    // SAFETY (caller): 16 writable bytes at `at`; the magic word is stored last, atomically,
    // so a reader sees either no seal or the whole of it.
    unsafe {
        std::ptr::copy_nonoverlapping(seal[4..].as_ptr(), at.add(4), SEAL_LEN - 4);
        (*(at as *const AtomicU32)).store(SEAL_MAGIC, Ordering::Release);
    }
}

/// Writes a padding frame of `len` bytes (a multiple of 8, at least 8) at `at`.
///
/// # Safety
/// The 8 bytes at `at` are mapped, 8-byte aligned and reserved by the caller.
pub unsafe fn write_padding(at: *mut u8, len: u64) {
    let word = head_word(PADDING_KIND) as u64 | (len - 8) << 32;
    // SAFETY (caller): reserved, aligned and mapped; one store commits the whole frame.
    unsafe { (*(at as *const AtomicU64)).store(word, Ordering::Release) };
}

/// Closes the journal after its last record: the final seal when every record of the last
/// block is committed (else that block is left unsealed and reads as after a kill). `off` is
/// where the 16 bytes reserved for the final seal start. Returns the file's used size.
pub fn close(fd: i32, off: u64) -> u64 {
    let k = off / BLOCK as u64;
    let start = k * BLOCK as u64;
    let data_end = start + DATA as u64;
    if off == start {
        return off; // the last block is empty: the file ends with the block before
    }
    if off >= data_end {
        // The data area is all reserved: the block is (or will be) sealed at its end.
        return start + BLOCK as u64;
    }
    let done = DONE
        .get(k as usize)
        .map_or(0, |d| d.load(Ordering::Acquire)) as u64;
    if done != off - start {
        return off; // a record still in flight: no seal, the block reads as unsealed
    }
    let Ok(p) = ptr_at(fd, start) else { return off };
    // SAFETY: [start, off) is written (the counter says so) and mapped in one chunk; the
    // 16 bytes at `off` were reserved for this seal by the caller, inside the same block.
    unsafe {
        let covered = std::slice::from_raw_parts(p, (off - start) as usize);
        write_seal(p.add((off - start) as usize), covered, SEAL_FINAL);
    }
    off + SEAL_LEN as u64
}

/// In a forked child: forget the counters of the parent's blocks (`used`: the parent's
/// cursor; a reservation may have spilled into the block after it).
pub fn reset_in_child(used: u64) {
    let blocks = (used / BLOCK as u64 + 2).min(MAX_BLOCKS as u64) as usize;
    for d in &DONE[..blocks] {
        d.store(0, Ordering::Relaxed);
    }
}
