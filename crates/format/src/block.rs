//! Format 2's blocks: the file is cut into 64 KiB blocks, each closed by a seal that carries
//! one CRC-32 of everything before it in the block (instead of one checksum per record).
//!
//! ```text
//! block k    file offsets [k·64 KiB, (k+1)·64 KiB); block 0 starts with the 16-byte preamble
//!   records  8-byte aligned, each wholly inside the block's data area (the first 64 KiB − 16)
//!   seal     the block's last 16 bytes: u32 "VLSL" (written last) | u32 data length
//!            (= 64 KiB − 16) | u32 CRC-32 of the block's bytes before the seal | u32 flags
//! ```
//!
//! A record starts with two u32 words `A`, `B`:
//! - `A == 0`: not committed. `B` is the payload length of the frame the slot would hold
//!   (the writer stores it at once after reserving), so the slot is `frame_len(B)` bytes and a
//!   reader steps over it; `B == 0` means nothing was ever stored there (the end of the data,
//!   or a slot whose writer stopped before its first store).
//! - `A & 0xFF == 0xFF`: a compact event record (`crate::compact`).
//! - `A >> 16 == 0x564C`: a frame of format 1 (kind in the low half, with its own CRC),
//!   kind 0 being padding. Generic records (header, module, stage, warning, template, ...)
//!   keep this shape; a kind whose low byte is 0xFF is never used.
//!
//! A record that would cross the data area's end is turned into padding by its writer (up to
//! the seal; what it reserved past the block becomes a padding frame at the next block's
//! start) and written again further on. The writer that completes a block's data area writes
//! its seal. A journal closed normally ends with a *final seal*: the same 16 bytes written
//! right after the last record of the last (short) block, flag [`SEAL_FINAL`], the file
//! truncated after it.
//!
//! What a reader may find:
//! - a sealed block whose CRC matches: every record in it is whole;
//! - a sealed block whose CRC does not match: torn or damaged; its records are not used;
//! - a block without a seal: it was still being written when the process stopped (a kill,
//!   `_exit`, or a record still in flight at exit). Its committed records are read as they
//!   are (a record is committed by its first word, stored last, so each is whole or absent);
//!   an uncommitted slot is a record lost in flight, stepped over by its length.

use crate::frame::{frame_len, FRAME_MAGIC};
use crate::PREAMBLE_LEN;

/// Bytes per block.
pub const BLOCK: usize = 64 << 10;
/// Bytes of a seal.
pub const SEAL_LEN: usize = 16;
/// The seal's first word.
pub const SEAL_MAGIC: u32 = u32::from_le_bytes(*b"VLSL");
/// Seal flag: the journal was closed here (the file ends after this seal).
pub const SEAL_FINAL: u32 = 1;
/// The largest record a writer may put in a block (block 0 holds the preamble too).
pub const MAX_RECORD: usize = BLOCK - SEAL_LEN - PREAMBLE_LEN;
/// Low byte of the first word of a compact record.
pub const COMPACT_MARK: u8 = 0xFF;

/// The block holding file offset `at`.
#[inline]
pub const fn block_of(at: u64) -> u64 {
    at / BLOCK as u64
}

/// Where block `k` starts.
#[inline]
pub const fn block_start(k: u64) -> u64 {
    k * BLOCK as u64
}

/// The end of block `k`'s data area (where its seal goes).
#[inline]
pub const fn data_end(k: u64) -> u64 {
    block_start(k) + (BLOCK - SEAL_LEN) as u64
}

/// The first word pair of a reserved, not yet committed slot of `slot_len` bytes (a multiple
/// of 8, at least 16): `A = 0`, `B` = the payload length of a frame that long.
#[inline]
pub const fn placeholder(slot_len: usize) -> u64 {
    ((slot_len - 12) as u64) << 32
}

/// The two first words of a record.
#[inline]
pub fn words(bytes: &[u8], at: usize) -> Option<(u32, u32)> {
    let w = bytes.get(at..at + 8)?;
    Some((
        u32::from_le_bytes([w[0], w[1], w[2], w[3]]),
        u32::from_le_bytes([w[4], w[5], w[6], w[7]]),
    ))
}

/// What the first word of a record says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// Nothing committed; `B` as stored (0: nothing stored at all).
    Uncommitted(u32),
    /// A compact event record.
    Compact,
    /// A format-1 frame of this kind.
    Frame(u16),
    /// An in-line seal (the final seal of a journal).
    Seal,
    /// None of these: damage.
    Unknown,
}

/// Classifies a record by its first two words.
#[inline]
pub fn head(a: u32, b: u32) -> Head {
    if a == 0 {
        Head::Uncommitted(b)
    } else if a as u8 == COMPACT_MARK {
        Head::Compact
    } else if a >> 16 == FRAME_MAGIC {
        Head::Frame((a & 0xffff) as u16)
    } else if a == SEAL_MAGIC {
        Head::Seal
    } else {
        Head::Unknown
    }
}

/// Slot length of an uncommitted record whose second word is `b`, if it is plausible.
#[inline]
pub fn uncommitted_len(b: u32) -> Option<usize> {
    let len = frame_len(b as usize);
    (b != 0 && len <= MAX_RECORD).then_some(len)
}

/// A seal, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seal {
    /// Bytes of the block before the seal.
    pub len: u32,
    /// CRC-32 of those bytes.
    pub crc: u32,
    /// [`SEAL_FINAL`] and future flags.
    pub flags: u32,
}

impl Seal {
    /// The seal of `covered` (a block's bytes before its seal), as 16 bytes.
    pub fn of(covered: &[u8], flags: u32) -> [u8; SEAL_LEN] {
        Seal {
            len: covered.len() as u32,
            crc: crate::crc::update(0, covered),
            flags,
        }
        .encode()
    }

    /// The 16 bytes (magic first; a concurrent writer stores it last).
    pub fn encode(&self) -> [u8; SEAL_LEN] {
        let mut out = [0u8; SEAL_LEN];
        out[..4].copy_from_slice(&SEAL_MAGIC.to_le_bytes());
        out[4..8].copy_from_slice(&self.len.to_le_bytes());
        out[8..12].copy_from_slice(&self.crc.to_le_bytes());
        out[12..16].copy_from_slice(&self.flags.to_le_bytes());
        out
    }

    /// The seal at `bytes[at..at + 16]`, if one is there.
    pub fn read(bytes: &[u8], at: usize) -> Option<Seal> {
        let s = bytes.get(at..at + SEAL_LEN)?;
        let u = |i: usize| u32::from_le_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]);
        (u(0) == SEAL_MAGIC).then(|| Seal {
            len: u(4),
            crc: u(8),
            flags: u(12),
        })
    }

    /// True when this seal, at offset `at` of a block starting at `start`, covers exactly
    /// the bytes before it and their CRC matches.
    pub fn verifies(&self, bytes: &[u8], start: usize, at: usize) -> bool {
        at >= start
            && self.len as usize == at - start
            && bytes
                .get(start..at)
                .is_some_and(|c| crate::crc::update(0, c) == self.crc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_told_apart() {
        assert_eq!(head(0, 0), Head::Uncommitted(0));
        assert_eq!(head(0, 12), Head::Uncommitted(12));
        assert_eq!(head(0x1234_56FF, 0), Head::Compact);
        assert_eq!(head(crate::frame::head_word(3), 5), Head::Frame(3));
        assert_eq!(head(crate::frame::head_word(0), 8), Head::Frame(0));
        assert_eq!(head(SEAL_MAGIC, 0), Head::Seal);
        assert_eq!(head(0x1234_5678, 0), Head::Unknown);
        // A placeholder reads back as the slot it reserved.
        for len in [16usize, 24, 32, 64, 104, 4096] {
            let p = placeholder(len);
            let (a, b) = (p as u32, (p >> 32) as u32);
            assert_eq!(head(a, b), Head::Uncommitted(b));
            assert_eq!(uncommitted_len(b), Some(len));
        }
    }

    #[test]
    fn seals_verify_only_what_they_cover() {
        let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let mut bytes = data.clone();
        bytes.extend(Seal::of(&data[100..], SEAL_FINAL));
        let s = Seal::read(&bytes, 1000).unwrap();
        assert_eq!(s.flags, SEAL_FINAL);
        assert!(s.verifies(&bytes, 100, 1000));
        assert!(!s.verifies(&bytes, 0, 1000));
        bytes[500] ^= 1;
        assert!(!s.verifies(&bytes, 100, 1000));
        assert_eq!(Seal::read(&bytes, 999), None);
    }

    #[test]
    fn geometry() {
        assert_eq!(block_of(0), 0);
        assert_eq!(block_of(BLOCK as u64), 1);
        assert_eq!(data_end(1), 2 * BLOCK as u64 - 16);
        assert_eq!(MAX_RECORD % 8, 0);
    }
}
