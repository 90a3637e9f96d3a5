//! Compact event records (format 2): an event without text in 16 to 64 bytes, 24 for an
//! allocation or a free.
//!
//! What changes little from one event to the next (kind, entry point, thread, device, stage,
//! module, owner, memory kind, result, flags) is a *template*, defined once by a
//! [`Kind::Template`](crate::Kind::Template) frame and named by a 24-bit id; a record carries
//! the template id, the time and the fields that are present:
//!
//! ```text
//! [0..8)    u64  t_rel << 8 | 0xFF     t_rel = t_ns − the header's start_mono_ns (56 bits);
//!                                      stored last: it commits the record
//! [8..11)   u24  template id
//! [11]      u8   mask: which of the words below follow
//! [12..16)  u32  size, low 32 bits
//! then one u64 each, in this order, when its bit is set:
//!   ADDR addr | SIZE_HI size >> 32 | HANDLE handle | ARG0 arg0 | ARG1 arg1 | ARG2 arg2
//! ARG0_IS_SIZE: arg0 equals size (no word)
//! ```
//!
//! A field that is zero and has no bit is zero. An event that does not fit (text, a time
//! before the journal's start or 2^56 ns after it) is written as a format-1 event frame.

use crate::record::Event;

/// Mask bits.
pub mod mask {
    /// `addr` follows.
    pub const ADDR: u8 = 1 << 0;
    /// The upper 32 bits of `size` follow (as a u64).
    pub const SIZE_HI: u8 = 1 << 1;
    /// `handle` follows.
    pub const HANDLE: u8 = 1 << 2;
    /// `arg0` follows.
    pub const ARG0: u8 = 1 << 3;
    /// `arg0` equals `size`.
    pub const ARG0_IS_SIZE: u8 = 1 << 4;
    /// `arg1` follows.
    pub const ARG1: u8 = 1 << 5;
    /// `arg2` follows.
    pub const ARG2: u8 = 1 << 6;
    /// Every bit a reader of this version knows.
    pub const KNOWN: u8 = 0x7f;
    /// Bits that add a word.
    pub const WORDS: u8 = ADDR | SIZE_HI | HANDLE | ARG0 | ARG1 | ARG2;
}

/// Bytes before the optional words.
pub const FIXED: usize = 16;
/// The largest compact record.
pub const MAX_LEN: usize = FIXED + 6 * 8;
/// Template ids are 24 bits; 0 is never used.
pub const MAX_TEMPLATE: u32 = (1 << 24) - 1;
/// Largest `t_rel` a compact record holds.
pub const MAX_T_REL: u64 = (1 << 56) - 1;
/// Length of a template frame's payload.
pub const TEMPLATE_LEN: usize = 40;

/// The fields of an event that a template holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Template {
    pub kind: u16,
    pub api: u16,
    pub tid: u32,
    pub device: i32,
    pub stage: u32,
    pub module: u32,
    pub owner: u8,
    pub mem: u8,
    pub result: i32,
    pub flags: u32,
}

impl Template {
    /// The template of `e`.
    #[inline]
    pub fn of(e: &Event) -> Template {
        Template {
            kind: e.kind,
            api: e.api,
            tid: e.tid,
            device: e.device,
            stage: e.stage,
            module: e.module,
            owner: e.owner,
            mem: e.mem,
            result: e.result,
            flags: e.flags,
        }
    }

    /// The template as four words (equal words, equal templates): cheap to keep and compare.
    #[inline]
    pub fn key(&self) -> [u64; 4] {
        [
            self.kind as u64 | (self.api as u64) << 16 | (self.tid as u64) << 32,
            self.device as u32 as u64 | (self.stage as u64) << 32,
            self.module as u64 | (self.owner as u64) << 32 | (self.mem as u64) << 40,
            self.result as u32 as u64 | (self.flags as u64) << 32,
        ]
    }

    /// The payload of the [`Kind::Template`](crate::Kind::Template) frame that defines `id`.
    pub fn encode(&self, id: u32) -> [u8; TEMPLATE_LEN] {
        let mut o = [0u8; TEMPLATE_LEN];
        o[0..4].copy_from_slice(&id.to_le_bytes());
        o[4..6].copy_from_slice(&self.kind.to_le_bytes());
        o[6..8].copy_from_slice(&self.api.to_le_bytes());
        o[8..12].copy_from_slice(&self.tid.to_le_bytes());
        o[12..16].copy_from_slice(&self.device.to_le_bytes());
        o[16..20].copy_from_slice(&self.stage.to_le_bytes());
        o[20..24].copy_from_slice(&self.module.to_le_bytes());
        o[24] = self.owner;
        o[25] = self.mem;
        o[28..32].copy_from_slice(&self.result.to_le_bytes());
        o[32..36].copy_from_slice(&self.flags.to_le_bytes());
        o
    }

    /// Decodes a template frame's payload: `(id, template)`. Longer payloads (a newer
    /// writer's) keep their known part.
    pub fn decode(p: &[u8]) -> Option<(u32, Template)> {
        let p: &[u8; 36] = p.get(..36)?.try_into().ok()?;
        let u32_at = |i: usize| u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        let u16_at = |i: usize| u16::from_le_bytes([p[i], p[i + 1]]);
        let id = u32_at(0);
        (id != 0 && id <= MAX_TEMPLATE).then_some((
            id,
            Template {
                kind: u16_at(4),
                api: u16_at(6),
                tid: u32_at(8),
                device: u32_at(12) as i32,
                stage: u32_at(16),
                module: u32_at(20),
                owner: p[24],
                mem: p[25],
                result: u32_at(28) as i32,
                flags: u32_at(32),
            },
        ))
    }
}

/// The mask and length of `e`'s compact record.
#[inline]
pub fn layout(e: &Event) -> (u8, usize) {
    let mut m = 0u8;
    if e.addr != 0 {
        m |= mask::ADDR;
    }
    if e.size >> 32 != 0 {
        m |= mask::SIZE_HI;
    }
    if e.handle != 0 {
        m |= mask::HANDLE;
    }
    if e.arg0 != 0 {
        m |= if e.arg0 == e.size {
            mask::ARG0_IS_SIZE
        } else {
            mask::ARG0
        };
    }
    if e.arg1 != 0 {
        m |= mask::ARG1;
    }
    if e.arg2 != 0 {
        m |= mask::ARG2;
    }
    (m, len_of(m))
}

/// Length of a compact record with mask `m`.
#[inline]
pub const fn len_of(m: u8) -> usize {
    FIXED + 8 * (m & mask::WORDS).count_ones() as usize
}

const _: () = assert!(mask::KNOWN == 0x7f, "LEN_OF holds the known masks");

/// [`len_of`] of every mask below 128, looked up (a reader's loop: `count_ones` is not one
/// instruction on every x86-64).
const LEN_OF: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut m = 0;
    while m < 128 {
        t[m] = len_of(m as u8) as u8;
        m += 1;
    }
    t
};

/// `t_rel` of `e` against `base`, when a compact record can hold `e` at all.
#[inline]
pub fn t_rel(e: &Event, base: u64) -> Option<u64> {
    let t = e.t_ns.checked_sub(base)?;
    (e.text.is_empty() && t <= MAX_T_REL).then_some(t)
}

/// The committing first word of a record at `t_rel`.
#[inline]
pub const fn word0(t_rel: u64) -> u64 {
    t_rel << 8 | crate::block::COMPACT_MARK as u64
}

/// Writes everything but the first word of `e`'s record (mask `m`, length `out.len()` as
/// [`layout`] said) into `out[8..]`.
#[inline]
pub fn encode_body(e: &Event, template: u32, m: u8, out: &mut [u8]) {
    let head = (template & MAX_TEMPLATE) | (m as u32) << 24;
    out[8..12].copy_from_slice(&head.to_le_bytes());
    out[12..16].copy_from_slice(&(e.size as u32).to_le_bytes());
    let mut at = FIXED;
    let mut put = |present: bool, v: u64| {
        if present {
            out[at..at + 8].copy_from_slice(&v.to_le_bytes());
            at += 8;
        }
    };
    put(m & mask::ADDR != 0, e.addr);
    put(m & mask::SIZE_HI != 0, e.size >> 32);
    put(m & mask::HANDLE != 0, e.handle);
    put(m & mask::ARG0 != 0, e.arg0);
    put(m & mask::ARG1 != 0, e.arg1);
    put(m & mask::ARG2 != 0, e.arg2);
}

/// A whole compact record of `e` (tests and in-memory writers).
pub fn encode(e: &Event, template: u32, t_rel: u64) -> Vec<u8> {
    let (m, len) = layout(e);
    let mut out = vec![0u8; len];
    encode_body(e, template, m, &mut out);
    out[..8].copy_from_slice(&word0(t_rel).to_le_bytes());
    out
}

/// A compact record's own fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fields {
    pub t_rel: u64,
    pub template: u32,
    pub addr: u64,
    pub size: u64,
    pub handle: u64,
    pub arg0: u64,
    pub arg1: u64,
    pub arg2: u64,
}

/// Decodes the compact record at `bytes[at..]`: its fields and length. `None` when the
/// bytes end first or the mask has bits this reader does not know.
#[inline]
pub fn decode(bytes: &[u8], at: usize) -> Option<(Fields, usize)> {
    let r = Raw::at(bytes, at)?;
    Some((r.fields(), r.len()))
}

/// Where a field's value sits in [`Raw::fields`]'s eight words: an enum, so that indexing
/// them by it needs no bounds check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Slot {
    W0,
    W1,
    W2,
    W3,
    W4,
    W5,
    /// The field has no word: a zero.
    Zero,
    /// `size` (`arg0` under [`mask::ARG0_IS_SIZE`]).
    Size,
}

/// Each known mask's slots of `addr`, `size >> 32`, `handle`, `arg0`, `arg1`, `arg2`: the
/// count of word bits below the field's bit, or [`Slot::Zero`] when its bit is clear
/// ([`Slot::Size`] for `arg0` under [`mask::ARG0_IS_SIZE`], whatever its own bit says).
const SLOTS: [[Slot; 6]; 128] = {
    const ORDER: [u8; 6] = [
        mask::ADDR,
        mask::SIZE_HI,
        mask::HANDLE,
        mask::ARG0,
        mask::ARG1,
        mask::ARG2,
    ];
    const BY_COUNT: [Slot; 6] = [Slot::W0, Slot::W1, Slot::W2, Slot::W3, Slot::W4, Slot::W5];
    let mut t = [[Slot::Zero; 6]; 128];
    let mut m = 0;
    while m < 128 {
        let (mut k, mut n) = (0, 0);
        while k < 6 {
            if m as u8 & ORDER[k] != 0 {
                t[m][k] = BY_COUNT[n];
                n += 1;
            }
            k += 1;
        }
        if m as u8 & mask::ARG0_IS_SIZE != 0 {
            t[m][3] = Slot::Size;
        }
        m += 1;
    }
    t
};

/// A compact record found but not yet decoded: its template and time read, the rest of it
/// lent. A reader that needs only the template and the time reads no more of it.
#[derive(Debug, Clone, Copy)]
pub struct Raw<'a> {
    pub t_rel: u64,
    pub template: u32,
    mask: u8,
    len: u8,
    /// The bytes from the record's start to the end of the bytes walked: [`Raw::fields`]
    /// reads a largest record's length of them when there are that many.
    rec: &'a [u8],
}

impl<'a> Raw<'a> {
    /// The compact record at `bytes[at..]`, when it is whole there and its mask is known.
    #[inline(always)]
    pub fn at(bytes: &'a [u8], at: usize) -> Option<Raw<'a>> {
        let rec = bytes.get(at..)?;
        let fixed: &[u8; FIXED] = rec.get(..FIXED)?.try_into().ok()?;
        let w0 = u64::from_le_bytes(fixed[0..8].try_into().ok()?);
        let head = u32::from_le_bytes(fixed[8..12].try_into().ok()?);
        let m = (head >> 24) as u8;
        let len = *LEN_OF.get(m as usize)?;
        (rec.len() >= len as usize).then_some(Raw {
            t_rel: w0 >> 8,
            template: head & MAX_TEMPLATE,
            mask: m,
            len,
            rec,
        })
    }

    /// The record's length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Never true: a record has at least its fixed part (for the lint that pairs `len`).
    #[inline]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Every field.
    #[inline]
    pub fn fields(&self) -> Fields {
        // A largest record's length of bytes (this record's, then the next's), read whole
        // whatever the mask; near the end of the bytes, the record's own, zero-padded.
        let padded;
        let w: &[u8; MAX_LEN] = match self.rec.first_chunk() {
            Some(w) => w,
            None => {
                padded = pad(self.rec.get(..self.len()).unwrap_or_default());
                &padded
            }
        };
        // Every word read, each field's then taken by its slot: no branch on the mask.
        let mut v = [0u64; 8];
        for (k, c) in w[FIXED..].chunks_exact(8).enumerate() {
            v[k] = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        }
        let s = &SLOTS[(self.mask & mask::KNOWN) as usize];
        let size_lo = u32::from_le_bytes(w[12..16].try_into().unwrap_or([0; 4]));
        let size = size_lo as u64 | v[s[1] as usize] << 32;
        v[Slot::Size as usize] = size;
        Fields {
            t_rel: self.t_rel,
            template: self.template,
            addr: v[s[0] as usize],
            size,
            handle: v[s[2] as usize],
            arg0: v[s[3] as usize],
            arg1: v[s[4] as usize],
            arg2: v[s[5] as usize],
        }
    }
}

/// A record near the end of the bytes (cut to its length), zero-padded.
#[cold]
#[inline(never)]
fn pad(rec: &[u8]) -> [u8; MAX_LEN] {
    let mut w = [0u8; MAX_LEN];
    let n = rec.len().min(MAX_LEN);
    w[..n].copy_from_slice(&rec[..n]);
    w
}

/// The event a compact record stands for.
#[inline]
pub fn event(f: &Fields, t: &Template, base: u64) -> Event {
    Event {
        kind: t.kind,
        t_ns: base.wrapping_add(f.t_rel),
        tid: t.tid,
        device: t.device,
        stage: t.stage,
        module: t.module,
        owner: t.owner,
        mem: t.mem,
        api: t.api,
        result: t.result,
        flags: t.flags,
        addr: f.addr,
        size: f.size,
        handle: f.handle,
        arg0: f.arg0,
        arg1: f.arg1,
        arg2: f.arg2,
        text: String::new(),
    }
}

#[cfg(test)]
#[path = "compact_tests.rs"]
mod tests;
