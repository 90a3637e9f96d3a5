//! A journal of format 2 written into memory by one thread: for tests, benchmarks and
//! synthetic journals. It lays records out as the shim's writer does (templates before their
//! first use, padding at a block's end, a seal per block, a final seal when closed), without
//! the shim's concurrency (so no padding ever spills into the next block).

use std::collections::HashMap;

use crate::block::{placeholder, Seal, BLOCK, SEAL_FINAL, SEAL_LEN};
use crate::compact::{self, Template};
use crate::frame::{encode_frame, frame_len, head_word, PADDING_KIND};
use crate::record::{Event, Kind};
use crate::{preamble_of, Header};

/// A journal being written in memory.
pub struct MemJournal {
    bytes: Vec<u8>,
    base: u64,
    templates: HashMap<Template, u32>,
}

impl MemJournal {
    /// A journal whose first record is `header` (its `start_mono_ns` is the time base of
    /// compact records; 0 without one).
    pub fn new(header: &Header) -> MemJournal {
        let mut j = MemJournal {
            bytes: preamble_of(2).to_vec(),
            base: header
                .get("start_mono_ns")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            templates: HashMap::new(),
        };
        j.frame(Kind::Header as u16, &header.encode());
        j
    }

    /// Room for `len` more bytes in the current block: pads and seals it first if needed.
    fn room(&mut self, len: usize) {
        let at = self.bytes.len();
        let start = at - at % BLOCK;
        let data_end = start + BLOCK - SEAL_LEN;
        if at + len <= data_end {
            return;
        }
        if at < data_end {
            let pad = data_end - at;
            self.bytes.extend(head_word(PADDING_KIND).to_le_bytes());
            self.bytes.extend(((pad - 8) as u32).to_le_bytes());
            self.bytes.resize(data_end, 0);
        }
        let seal = Seal::of(&self.bytes[start..data_end], 0);
        self.bytes.extend(seal);
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True before anything but the preamble is written (never: the header comes first).
    pub fn is_empty(&self) -> bool {
        self.bytes.len() <= crate::PREAMBLE_LEN
    }

    /// Appends raw record bytes (a multiple of 8 long).
    pub fn raw(&mut self, rec: &[u8]) {
        assert!(rec.len().is_multiple_of(8) && rec.len() <= crate::block::MAX_RECORD);
        self.room(rec.len());
        self.bytes.extend_from_slice(rec);
    }

    /// Appends a frame of format 1.
    pub fn frame(&mut self, kind: u16, payload: &[u8]) {
        let mut f = vec![0u8; frame_len(payload.len())];
        encode_frame(kind, payload, &mut f);
        self.raw(&f);
    }

    /// Appends an event: compact when it can be, else as an event frame.
    pub fn event(&mut self, e: &Event) {
        let Some(t_rel) = compact::t_rel(e, self.base) else {
            self.frame(e.kind, &e.encode());
            return;
        };
        let t = Template::of(e);
        let next = self.templates.len() as u32 + 1;
        let id = match self.templates.get(&t) {
            Some(&id) => id,
            None => {
                self.templates.insert(t, next);
                self.frame(Kind::Template as u16, &t.encode(next));
                next
            }
        };
        let rec = compact::encode(e, id, t_rel);
        self.raw(&rec);
    }

    /// Appends padding, `len` bytes (a multiple of 8, at least 8): what a writer leaves before a
    /// block's seal, here anywhere (tests place records across a seal with it).
    pub fn pad(&mut self, len: usize) {
        let mut rec = vec![0u8; len];
        rec[..4].copy_from_slice(&head_word(PADDING_KIND).to_le_bytes());
        rec[4..8].copy_from_slice(&((len - 8) as u32).to_le_bytes());
        self.raw(&rec);
    }

    /// Appends a slot that was reserved and never committed (`len` bytes).
    pub fn hole(&mut self, len: usize) {
        let mut rec = vec![0u8; len];
        rec[..8].copy_from_slice(&placeholder(len).to_le_bytes());
        self.raw(&rec);
    }

    /// The bytes so far; with `close`, ended as the shim ends a journal at exit (a final
    /// seal after the last record).
    pub fn finish(mut self, close: bool) -> Vec<u8> {
        if close {
            self.room(SEAL_LEN);
            let at = self.bytes.len();
            let start = at - at % BLOCK;
            if at != start {
                let seal = Seal::of(&self.bytes[start..at], SEAL_FINAL);
                self.bytes.extend(seal);
            }
        }
        self.bytes
    }
}
