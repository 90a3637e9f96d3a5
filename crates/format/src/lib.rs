//! The journal format: the one contract between `libvramledger.so` (writer) and the
//! `vramledger` CLI (reader).
//!
//! A journal is one file per process:
//!
//! ```text
//! preamble   8 bytes magic "VRAMLJNL" | u32 format version | u32 reserved (0)
//! frames     repeated, each 8-byte aligned:
//!            u32 head = FRAME_MAGIC << 16 | kind   (written last: a zero head = not committed)
//!            u32 payload length
//!            payload
//!            u32 crc32 of (kind, length, payload)
//!            zero padding to the next multiple of 8
//! ```
//!
//! A frame is committed by storing its head word after everything else, so a reader of a
//! file whose writer was killed sees each record whole or not at all. Files may end with
//! zero bytes (the writer grows them in chunks); a reader stops at the first zero head
//! that is not followed by a committed frame.
//!
//! Record kinds keep their numeric tag forever; new fields are appended to a payload and
//! old readers ignore the bytes they do not know. [`FORMAT_VERSION`] only changes for an
//! incompatible change.
//!
//! This crate must stay free of dependencies: it is compiled into every CUDA process the
//! shim enters.

pub mod api;
pub mod crc;
pub mod frame;
pub mod header;
pub mod live;
pub mod record;

pub use api::Api;
pub use frame::{decode_frame, encode_frame, FrameError, FRAME_MAGIC, PADDING_KIND};
pub use header::Header;
pub use live::LiveBooks;
pub use record::{Event, Kind, MemKind, Owner, PoolScope, EVENT_FIXED_LEN, POOL_UNKNOWN};

/// The magic bytes that open every journal.
pub const MAGIC: &[u8; 8] = b"VRAMLJNL";
/// Bumped only for changes an old reader cannot skip.
pub const FORMAT_VERSION: u32 = 1;
/// Length of the preamble (magic, version, reserved).
pub const PREAMBLE_LEN: usize = 16;
/// File name suffix of journals.
pub const JOURNAL_SUFFIX: &str = ".vlj";

/// The preamble bytes for a new journal.
pub fn preamble() -> [u8; PREAMBLE_LEN] {
    let mut p = [0u8; PREAMBLE_LEN];
    p[..8].copy_from_slice(MAGIC);
    p[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    p
}

/// What a preamble says about a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreambleCheck {
    /// A journal this reader understands.
    Ok,
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
    PreambleCheck::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preamble_round_trip() {
        assert_eq!(check_preamble(&preamble()), PreambleCheck::Ok);
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
