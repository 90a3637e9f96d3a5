//! Framing: how one record sits in a journal (see the crate docs for the layout).

use crate::crc;

/// Upper half of a frame's head word.
pub const FRAME_MAGIC: u32 = 0x564C; // "VL"
/// Bytes before the payload: head word and length.
pub const FRAME_HEAD_LEN: usize = 8;
/// Kind 0 marks padding: the length field counts the bytes after the 8-byte head, and
/// there is no checksum. Writers pad the end of a file chunk with it.
pub const PADDING_KIND: u16 = 0;
/// Largest payload a writer may produce (keeps one record inside one file chunk).
pub const MAX_PAYLOAD: usize = 64 * 1024;

/// Total bytes a frame with `payload_len` bytes of payload occupies, padding included.
pub const fn frame_len(payload_len: usize) -> usize {
    (FRAME_HEAD_LEN + payload_len + 4 + 7) & !7
}

/// The head word that commits a frame of `kind`.
pub const fn head_word(kind: u16) -> u32 {
    (FRAME_MAGIC << 16) | kind as u32
}

fn frame_crc(kind: u16, payload: &[u8]) -> u32 {
    frame_crc_parts(kind, &[payload])
}

fn frame_crc_parts(kind: u16, parts: &[&[u8]]) -> u32 {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let mut c = crc::update(0, &kind.to_le_bytes());
    c = crc::update(c, &(len as u32).to_le_bytes());
    for p in parts {
        c = crc::update(c, p);
    }
    c
}

/// Writes a whole frame into `out` (which must be `frame_len(payload.len())` long).
/// The head word is written too; writers that need commit ordering write
/// `out[4..]` first and the head word last (see [`encode_frame_body`]).
pub fn encode_frame(kind: u16, payload: &[u8], out: &mut [u8]) {
    encode_frame_body(kind, payload, out);
    out[..4].copy_from_slice(&head_word(kind).to_le_bytes());
}

/// Writes everything of a frame except its head word (bytes 0..4 are left zero).
pub fn encode_frame_body(kind: u16, payload: &[u8], out: &mut [u8]) {
    encode_frame_body_parts(kind, &[payload], out);
}

/// Like [`encode_frame_body`], with the payload given in pieces (no copy to join them).
pub fn encode_frame_body_parts(kind: u16, parts: &[&[u8]], out: &mut [u8]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let total = frame_len(len);
    debug_assert_eq!(out.len(), total);
    out[..4].fill(0);
    out[4..8].copy_from_slice(&(len as u32).to_le_bytes());
    let mut at = 8;
    for p in parts {
        out[at..at + p.len()].copy_from_slice(p);
        at += p.len();
    }
    out[at..at + 4].copy_from_slice(&frame_crc_parts(kind, parts).to_le_bytes());
    out[at + 4..total].fill(0);
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The head word is zero: nothing committed here (end of data, or a record in flight).
    Empty,
    /// The bytes end before the frame does.
    Truncated,
    /// The head word does not carry the frame magic.
    BadMagic,
    /// The checksum does not match: a torn or corrupt record.
    BadChecksum,
    /// The length field is larger than any writer produces.
    BadLength,
}

/// Decodes the frame at the start of `bytes`: `(kind, payload, bytes consumed)`.
pub fn decode_frame(bytes: &[u8]) -> Result<(u16, &[u8], usize), FrameError> {
    if bytes.len() < FRAME_HEAD_LEN {
        if bytes.iter().all(|&b| b == 0) {
            return Err(FrameError::Empty);
        }
        return Err(FrameError::Truncated);
    }
    let head = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if head == 0 {
        return Err(FrameError::Empty);
    }
    if head >> 16 != FRAME_MAGIC {
        return Err(FrameError::BadMagic);
    }
    let kind = (head & 0xffff) as u16;
    let len = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    if kind == PADDING_KIND {
        if !len.is_multiple_of(8) || len > 64 << 20 {
            return Err(FrameError::BadLength);
        }
        return Ok((PADDING_KIND, &[], FRAME_HEAD_LEN + len));
    }
    if len > MAX_PAYLOAD {
        return Err(FrameError::BadLength);
    }
    let total = frame_len(len);
    if bytes.len() < total {
        return Err(FrameError::Truncated);
    }
    let payload = &bytes[8..8 + len];
    let crc_at = 8 + len;
    let stored = u32::from_le_bytes([
        bytes[crc_at],
        bytes[crc_at + 1],
        bytes[crc_at + 2],
        bytes[crc_at + 3],
    ]);
    if stored != frame_crc(kind, payload) {
        return Err(FrameError::BadChecksum);
    }
    Ok((kind, payload, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_alignment() {
        for n in [0usize, 1, 3, 4, 5, 80, 81, 1000] {
            let payload: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let mut buf = vec![0xAAu8; frame_len(n)];
            assert_eq!(buf.len() % 8, 0);
            encode_frame(7, &payload, &mut buf);
            let (kind, got, used) = decode_frame(&buf).unwrap();
            assert_eq!((kind, got, used), (7, &payload[..], buf.len()));
        }
    }

    #[test]
    fn uncommitted_and_torn_frames_are_rejected() {
        let payload = [1u8, 2, 3, 4, 5];
        let mut buf = vec![0u8; frame_len(5)];
        encode_frame_body(3, &payload, &mut buf);
        assert_eq!(decode_frame(&buf), Err(FrameError::Empty));
        encode_frame(3, &payload, &mut buf);
        buf[9] ^= 0x40;
        assert_eq!(decode_frame(&buf), Err(FrameError::BadChecksum));
        encode_frame(3, &payload, &mut buf);
        assert_eq!(decode_frame(&buf[..10]), Err(FrameError::Truncated));
        let mut bad = buf.clone();
        bad[3] = 0x12;
        assert_eq!(decode_frame(&bad), Err(FrameError::BadMagic));
    }

    #[test]
    fn padding_is_stepped_over() {
        let mut buf = vec![0u8; 32];
        buf[..4].copy_from_slice(&head_word(PADDING_KIND).to_le_bytes());
        buf[4..8].copy_from_slice(&24u32.to_le_bytes());
        assert_eq!(decode_frame(&buf), Ok((PADDING_KIND, &[][..], 32)));
    }
}
