//! The journal format: the one contract between `libvramledger.so` (writer) and the
//! `vramledger` CLI (reader).
//!
//! A journal is one file per process:
//!
//! ```text
//! preamble   8 bytes magic "VRAMLJNL" | u32 format version | u32 reserved (0)
//! format 1   frames, repeated, each 8-byte aligned:
//!            u32 head = FRAME_MAGIC << 16 | kind   (written last: a zero head = not committed)
//!            u32 payload length
//!            payload
//!            u32 crc32 of (kind, length, payload)
//!            zero padding to the next multiple of 8
//! format 2   64 KiB blocks, each ending in a seal with one CRC-32 of the block
//!            ([`block`]); inside, the frames of format 1 for records with text and
//!            compact records of 16 to 64 bytes for the rest ([`compact`])
//! ```
//!
//! A record is committed by storing its first word after everything else, so a reader of a
//! file whose writer was killed sees each record whole or not at all. Files may end with
//! zero bytes (the writer grows them in chunks).
//!
//! Record kinds keep their numeric tag forever; new fields are appended to a payload and
//! old readers ignore the bytes they do not know. The format version changes only for a
//! change old readers cannot skip (format 2's blocks); readers read every older version.
//!
//! Compiled into every CUDA process the shim enters, so it depends on one small crate only
//! (`crc32fast`, for the block checksums).

pub mod addr_hash;
pub mod addr_table;
pub mod api;
pub mod block;
pub mod compact;
pub mod crc;
pub mod frame;
pub mod header;
pub mod live;
pub mod memwriter;
pub mod record;
pub mod walk;

pub use api::Api;
pub use frame::{decode_frame, encode_frame, FrameError, FRAME_MAGIC, PADDING_KIND};
pub use header::Header;
pub use live::LiveBooks;
pub use record::{Event, Kind, MemKind, Owner, PoolScope, EVENT_FIXED_LEN, POOL_UNKNOWN};

/// The magic bytes that open every journal.
pub const MAGIC: &[u8; 8] = b"VRAMLJNL";
/// The newest format this crate reads and the shim writes (bumped only for changes an old
/// reader cannot skip).
pub const FORMAT_VERSION: u32 = 2;
/// Length of the preamble (magic, version, reserved).
pub const PREAMBLE_LEN: usize = 16;
/// File name suffix of journals.
pub const JOURNAL_SUFFIX: &str = ".vlj";

/// The preamble of a journal of format `version`.
pub fn preamble_of(version: u32) -> [u8; PREAMBLE_LEN] {
    let mut p = [0u8; PREAMBLE_LEN];
    p[..8].copy_from_slice(MAGIC);
    p[8..12].copy_from_slice(&version.to_le_bytes());
    p
}

/// The preamble of a journal of format 1, which tests and tools build frame by frame
/// ([`frame::encode_frame`]); the shim writes format 2 ([`preamble_of`]).
pub fn preamble() -> [u8; PREAMBLE_LEN] {
    preamble_of(1)
}

/// What a preamble says about a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreambleCheck {
    /// A journal this reader understands, of this format version.
    Ok(u32),
    /// Not a vramledger journal at all.
    NotAJournal,
    /// A journal written by a newer format this reader cannot read.
    NewerVersion(u32),
    /// Shorter than a preamble.
    Truncated,
}

/// Checks the first bytes of a file.
pub fn check_preamble(bytes: &[u8]) -> PreambleCheck {
    if bytes.len() < PREAMBLE_LEN {
        if bytes.len() >= MAGIC.len() && &bytes[..8] != MAGIC {
            return PreambleCheck::NotAJournal;
        }
        return PreambleCheck::Truncated;
    }
    if &bytes[..8] != MAGIC {
        return PreambleCheck::NotAJournal;
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version > FORMAT_VERSION || version == 0 {
        return PreambleCheck::NewerVersion(version);
    }
    PreambleCheck::Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preamble_round_trip() {
        assert_eq!(check_preamble(&preamble()), PreambleCheck::Ok(1));
        assert_eq!(check_preamble(&preamble_of(2)), PreambleCheck::Ok(2));
        let mut newer = preamble();
        newer[8] = 9;
        assert_eq!(check_preamble(&newer), PreambleCheck::NewerVersion(9));
        assert_eq!(
            check_preamble(b"#!/bin/sh\necho hello\n"),
            PreambleCheck::NotAJournal
        );
        assert_eq!(check_preamble(b"VRAML"), PreambleCheck::Truncated);
    }
}
