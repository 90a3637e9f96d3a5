//! Reading format 2 (`crate::block`): which blocks are sealed, and the records of a block.
//!
//! The policy (what becomes an event, what a warning says) is the reader's; this module only
//! says what the bytes are. [`block`] tells a block's state and data area, [`Records`] walks
//! one data area, [`walk`] does both for a whole file.

use std::ops::Range;

use crate::block::{self, head, uncommitted_len, Head, Seal, BLOCK, SEAL_LEN};
use crate::compact::{self, Fields};
use crate::frame::{decode_frame, FrameError, PADDING_KIND};
use crate::PREAMBLE_LEN;

/// What a block's seal says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockState {
    /// Sealed, and the CRC matches: every record in the data area is whole.
    Sealed,
    /// Sealed, and the CRC does not match (or the seal is malformed): torn or damaged.
    Corrupt,
    /// No seal yet: still being written when the file was read, or its writer stopped.
    Open,
}

/// One block of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockView {
    /// File offset of the block.
    pub start: usize,
    /// Its data area: where records may be (for a corrupt block, the whole block).
    pub data: Range<usize>,
    /// What its seal says.
    pub state: BlockState,
    /// The journal was closed in this block (a final seal).
    pub last: bool,
}

/// Block `k` of `bytes` (a whole file), or `None` past its end.
pub fn block(bytes: &[u8], k: usize) -> Option<BlockView> {
    block_in(bytes, k, true)
}

/// Block `k` of `bytes`, a part of a file that starts at a block's start (`file_start`: the
/// file's first block, which holds the preamble). Offsets are indices into `bytes`.
pub fn block_in(bytes: &[u8], k: usize, file_start: bool) -> Option<BlockView> {
    let start = k.checked_mul(BLOCK)?;
    let first = file_start && k == 0;
    if start >= bytes.len() || (first && bytes.len() <= PREAMBLE_LEN) {
        return None;
    }
    let data_start = if first { PREAMBLE_LEN } else { start };
    let fixed = start + BLOCK - SEAL_LEN;
    if let Some(seal) = Seal::read(bytes, fixed) {
        let state = if seal.verifies(bytes, start, fixed) {
            BlockState::Sealed
        } else {
            BlockState::Corrupt
        };
        let data = if state == BlockState::Sealed {
            data_start..fixed
        } else {
            data_start..fixed + SEAL_LEN
        };
        return Some(BlockView {
            start,
            data,
            state,
            last: seal.flags & block::SEAL_FINAL != 0,
        });
    }
    // No seal at the block's end: look for a final seal after its last record.
    let end = bytes.len().min(start + BLOCK);
    for item in Records::new(bytes, data_start..end) {
        if let Item::Seal { at, seal } = item {
            let ok = seal.verifies(bytes, start, at);
            return Some(BlockView {
                start,
                data: if ok { data_start..at } else { data_start..end },
                state: if ok {
                    BlockState::Sealed
                } else {
                    BlockState::Corrupt
                },
                last: true,
            });
        }
    }
    Some(BlockView {
        start,
        data: data_start..end,
        state: BlockState::Open,
        last: false,
    })
}

/// One thing in a data area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    /// A format-1 frame (not padding): its kind and payload, CRC checked.
    Frame {
        at: usize,
        kind: u16,
        payload: &'a [u8],
    },
    /// A compact event record.
    Compact { at: usize, fields: Fields },
    /// A slot that was reserved and never committed: a record lost in flight (`len` bytes).
    Lost { at: usize, len: usize },
    /// Nothing was stored where a record starts, yet data follows in the area: a record
    /// lost before its length was stored. The rest of the area cannot be told apart.
    LostRest { at: usize, end: usize },
    /// Bytes that are no record: the rest of the area is skipped.
    Damaged { at: usize, end: usize },
    /// A record that runs past the end of the file.
    Cut { at: usize },
    /// A final seal (see [`block`]: it ends the block).
    Seal { at: usize, seal: Seal },
}

/// The records of one data area, in file order. Stops after a seal, damage or a loss of the
/// rest, and at zeros that run to the area's end (the end of the data).
pub struct Records<'a> {
    bytes: &'a [u8],
    /// `bytes[..end]` until the walk is done, then empty: [`Records::next_compact`] checks
    /// neither `end` nor `done` per record.
    area: &'a [u8],
    at: usize,
    end: usize,
    done: bool,
    /// The file ends where `bytes` end (else `bytes` are a part of it, whole blocks).
    file_ends: bool,
}

impl<'a> Records<'a> {
    /// Walks `bytes[area]` (offsets are file offsets).
    pub fn new(bytes: &'a [u8], area: Range<usize>) -> Records<'a> {
        Records::in_part(bytes, area, true)
    }

    /// Walks `bytes[area]`, where `bytes` are a part of a file made of whole blocks (offsets
    /// are indices into it) that ends the file when `file_ends`: a record that runs past
    /// the end of `bytes` is then cut off, else damage, as in the whole file.
    pub fn in_part(bytes: &'a [u8], area: Range<usize>, file_ends: bool) -> Records<'a> {
        let end = area.end.min(bytes.len());
        Records {
            bytes,
            area: &bytes[..end],
            at: area.start,
            end,
            done: false,
            file_ends,
        }
    }

    /// The area runs to the end of the file.
    #[inline]
    fn at_file_end(&self) -> bool {
        self.file_ends && self.end == self.bytes.len()
    }

    /// Where the walk stands: the offset of the next record (or where it stopped).
    pub fn offset(&self) -> usize {
        self.at
    }

    /// The next record when it is a whole compact record of a known mask (nearly every
    /// record: small enough to inline into a reader's loop, and its words not decoded until
    /// asked for); `None` for anything else, which [`Iterator::next`] then reads, as it
    /// reads every record.
    #[inline(always)]
    pub fn next_compact(&mut self) -> Option<(usize, compact::Raw<'a>)> {
        let at = self.at;
        if *self.area.get(at)? != block::COMPACT_MARK {
            return None;
        }
        let r = compact::Raw::at(self.area, at)?;
        self.at += r.len();
        Some((at, r))
    }

    /// The walk is over, for both lanes.
    fn finish(&mut self) {
        self.done = true;
        self.area = &[];
    }

    #[cold]
    fn stop(&mut self, item: Item<'a>) -> Option<Item<'a>> {
        self.finish();
        Some(item)
    }

    #[cold]
    fn damaged(&mut self) -> Option<Item<'a>> {
        let (at, end) = (self.at, self.end);
        self.stop(Item::Damaged { at, end })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Item<'a>;

    // Inline into the reader's loop: the item then stays in registers (returned through
    // memory, field by field, it stalled every record's first read of it).
    #[inline]
    fn next(&mut self) -> Option<Item<'a>> {
        loop {
            if self.done {
                return None;
            }
            let at = self.at;
            let Some((a, b)) = block::words(&self.bytes[..self.end], at) else {
                self.finish();
                let tail = &self.bytes[at.min(self.end)..self.end];
                return if tail.iter().all(|&x| x == 0) {
                    None
                } else if self.at_file_end() {
                    self.stop(Item::Cut { at })
                } else {
                    self.damaged()
                };
            };
            match head(a, b) {
                Head::Uncommitted(0) => {
                    let end = self.end;
                    if self.bytes[at..end].iter().all(|&x| x == 0) {
                        self.finish();
                        return None;
                    }
                    return self.stop(Item::LostRest { at, end });
                }
                Head::Uncommitted(b) => match uncommitted_len(b) {
                    Some(len) if at + len <= self.end => {
                        self.at += len;
                        return Some(Item::Lost { at, len });
                    }
                    Some(_) if self.at_file_end() => {
                        return self.stop(Item::Cut { at });
                    }
                    _ => return self.damaged(),
                },
                Head::Compact => match compact::decode(&self.bytes[..self.end], at) {
                    Some((fields, len)) => {
                        self.at += len;
                        return Some(Item::Compact { at, fields });
                    }
                    None if self.at_file_end() && self.bytes.len() < at + compact::MAX_LEN => {
                        return self.stop(Item::Cut { at });
                    }
                    None => return self.damaged(),
                },
                Head::Frame(_) => match decode_frame(&self.bytes[at..self.end]) {
                    Ok((PADDING_KIND, _, used)) if at + used <= self.end => self.at += used,
                    Ok((PADDING_KIND, _, _)) => return self.damaged(),
                    Ok((kind, payload, used)) => {
                        self.at += used;
                        return Some(Item::Frame { at, kind, payload });
                    }
                    Err(FrameError::Truncated) if self.at_file_end() => {
                        return self.stop(Item::Cut { at })
                    }
                    Err(_) => return self.damaged(),
                },
                Head::Seal => match Seal::read(self.bytes, at) {
                    Some(seal) => return self.stop(Item::Seal { at, seal }),
                    None => return self.stop(Item::Cut { at }),
                },
                Head::Unknown => return self.damaged(),
            }
        }
    }
}

/// A step of [`walk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<'a> {
    /// A block begins.
    Block(BlockView),
    /// A record of the block's data area.
    Item(Item<'a>),
}

/// Everything in a file of format 2, block by block: each block first, then each record of
/// its data area (none for a corrupt block).
pub fn walk<'a>(bytes: &'a [u8], mut f: impl FnMut(Step<'a>)) {
    let mut k = 0;
    while let Some(b) = block(bytes, k) {
        let (area, skip, last) = (b.data.clone(), b.state == BlockState::Corrupt, b.last);
        f(Step::Block(b));
        if !skip {
            for item in Records::new(bytes, area) {
                if !matches!(item, Item::Seal { .. }) {
                    f(Step::Item(item));
                }
            }
        }
        if last {
            break;
        }
        k += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::placeholder;
    use crate::frame::{encode_frame, frame_len, head_word};
    use crate::memwriter::MemJournal;
    use crate::{Event, Header, Kind};

    fn header() -> Header {
        let mut h = Header::default();
        h.push("pid", "7");
        h.push("start_mono_ns", "1000");
        h
    }

    fn alloc(i: u64) -> Event {
        Event {
            kind: Kind::Alloc as u16,
            t_ns: 1000 + i,
            addr: 0x1000 * (i + 1),
            size: 4096,
            arg0: 4096,
            ..Event::default()
        }
    }

    fn items(bytes: &[u8]) -> (Vec<BlockState>, Vec<String>) {
        let mut states = Vec::new();
        let mut out = Vec::new();
        walk(bytes, |step| match step {
            Step::Block(b) => states.push(b.state),
            Step::Item(i) => out.push(match i {
                Item::Frame { kind, .. } => format!("frame {kind}"),
                Item::Compact { fields, .. } => format!("compact {:#x}", fields.addr),
                Item::Lost { len, .. } => format!("lost {len}"),
                Item::LostRest { .. } => "lost rest".into(),
                Item::Damaged { .. } => "damaged".into(),
                Item::Cut { .. } => "cut".into(),
                Item::Seal { .. } => "seal".into(),
            }),
        });
        (states, out)
    }

    #[test]
    fn a_closed_journal_has_only_sealed_blocks() {
        let mut w = MemJournal::new(&header());
        for i in 0..6000 {
            w.event(&alloc(i));
        }
        let bytes = w.finish(true);
        let (states, out) = items(&bytes);
        assert!(states.len() >= 3, "{states:?}");
        assert!(
            states.iter().all(|s| *s == BlockState::Sealed),
            "{states:?}"
        );
        let compact = out.iter().filter(|s| s.starts_with("compact")).count();
        assert_eq!(compact, 6000);
        assert_eq!(
            out.iter().filter(|s| *s == "frame 4").count(),
            1,
            "one template"
        );
        // 24 bytes per event, overheads included.
        assert!(bytes.len() < 6000 * 25, "{} bytes", bytes.len());
    }

    #[test]
    fn a_flipped_byte_spoils_its_block_only() {
        let mut w = MemJournal::new(&header());
        for i in 0..6000 {
            w.event(&alloc(i));
        }
        let mut bytes = w.finish(true);
        bytes[BLOCK + 100] ^= 0x10;
        let (states, out) = items(&bytes);
        assert_eq!(states[1], BlockState::Corrupt);
        assert!(states.iter().filter(|s| **s == BlockState::Sealed).count() >= 2);
        let compact = out.iter().filter(|s| s.starts_with("compact")).count();
        assert!(
            compact < 6000 && compact > 6000 - BLOCK / 24 - 1,
            "{compact}"
        );
    }

    #[test]
    fn an_open_block_reads_to_its_last_committed_record() {
        let mut w = MemJournal::new(&header());
        for i in 0..10 {
            w.event(&alloc(i));
        }
        w.hole(24);
        w.event(&alloc(10));
        let mut bytes = w.finish(false);
        bytes.resize(4 << 20, 0); // the zero tail of a killed writer
        let (states, out) = items(&bytes);
        assert_eq!(states[0], BlockState::Open);
        assert_eq!(out.iter().filter(|s| s.starts_with("compact")).count(), 11);
        assert!(out.contains(&"lost 24".to_string()), "{out:?}");
        assert!(!out.iter().any(|s| s == "damaged" || s == "lost rest"));
    }

    #[test]
    fn zeros_before_data_lose_the_rest_of_the_block_only() {
        let mut w = MemJournal::new(&header());
        for i in 0..10 {
            w.event(&alloc(i));
        }
        let mut bytes = w.finish(false);
        let hole = bytes.len();
        bytes.extend([0u8; 24]); // reserved, nothing stored: not even the placeholder
        bytes.extend(crate::compact::encode(&alloc(11), 1, 11));
        let (_, out) = items(&bytes);
        assert_eq!(out.last().map(String::as_str), Some("lost rest"));
        assert_eq!(out.iter().filter(|s| s.starts_with("compact")).count(), 10);
        // With its placeholder stored, the slot is stepped over.
        bytes[hole..hole + 8].copy_from_slice(&placeholder(24).to_le_bytes());
        let (_, out) = items(&bytes);
        assert_eq!(out.iter().filter(|s| s.starts_with("compact")).count(), 11);
    }

    #[test]
    fn damage_and_cuts_are_named() {
        let mut w = MemJournal::new(&header());
        for i in 0..10 {
            w.event(&alloc(i));
        }
        let bytes = w.finish(false);
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n - 24..n - 20].copy_from_slice(&0x1234_5678u32.to_le_bytes());
        assert_eq!(items(&bad).1.last().map(String::as_str), Some("damaged"));
        let cut = &bytes[..bytes.len() - 4];
        assert_eq!(items(cut).1.last().map(String::as_str), Some("cut"));
        // A format-1 frame in a block, and padding, read as in format 1.
        let mut framed = bytes.clone();
        let mut f = vec![0u8; frame_len(3)];
        encode_frame(100, b"abc", &mut f);
        framed.extend(&f);
        framed.extend(head_word(PADDING_KIND).to_le_bytes());
        framed.extend(8u32.to_le_bytes());
        framed.extend([0u8; 8]);
        framed.extend(crate::compact::encode(&alloc(12), 1, 12));
        let (_, out) = items(&framed);
        assert_eq!(&out[out.len() - 2..], ["frame 100", "compact 0xd000"]);
    }

    #[test]
    fn a_final_seal_ends_the_file_and_is_checked() {
        let mut w = MemJournal::new(&header());
        for i in 0..10 {
            w.event(&alloc(i));
        }
        let bytes = w.finish(true);
        let b = block(&bytes, 0).unwrap();
        assert_eq!((b.state, b.last), (BlockState::Sealed, true));
        assert_eq!(b.data.end, bytes.len() - SEAL_LEN);
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n - SEAL_LEN - 4] ^= 1; // the last record's address
        assert_eq!(block(&bad, 0).unwrap().state, BlockState::Corrupt);
        // Killed after the final seal, before the truncation: the zeros after it are nothing.
        let mut long = bytes.clone();
        long.resize(4 << 20, 0);
        let (states, out) = items(&long);
        assert_eq!(states, vec![BlockState::Sealed]);
        assert_eq!(out.len(), 12, "{out:?}");
    }
}
