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

/// A compact record found but not yet decoded: its fixed part read, its optional words
/// lent. A reader that needs only the template and the time reads no more of it.
#[derive(Debug, Clone, Copy)]
pub struct Raw<'a> {
    pub t_rel: u64,
    pub template: u32,
    mask: u8,
    size_lo: u32,
    words: &'a [u8],
}

impl<'a> Raw<'a> {
    /// The compact record at `bytes[at..]`, when it is whole there and its mask is known.
    #[inline(always)]
    pub fn at(bytes: &'a [u8], at: usize) -> Option<Raw<'a>> {
        // One bounds check for nearly every record (those a largest record's length or more
        // before the end); the ones near the end take the same steps on a shorter slice.
        // (Past usize::MAX the range wraps below `at`, and `get` says no.)
        match bytes.get(at..at.wrapping_add(MAX_LEN)) {
            Some(whole) => Raw::within(whole),
            None => Raw::within(bytes.get(at..)?),
        }
    }

    #[inline(always)]
    fn within(rec: &'a [u8]) -> Option<Raw<'a>> {
        let fixed: &[u8; FIXED] = rec.get(..FIXED)?.try_into().ok()?;
        let w0 = u64::from_le_bytes(fixed[0..8].try_into().ok()?);
        let head = u32::from_le_bytes(fixed[8..12].try_into().ok()?);
        let m = (head >> 24) as u8;
        let len = *LEN_OF.get(m as usize)? as usize;
        Some(Raw {
            t_rel: w0 >> 8,
            template: head & MAX_TEMPLATE,
            mask: m,
            size_lo: u32::from_le_bytes(fixed[12..16].try_into().ok()?),
            words: rec.get(FIXED..len)?,
        })
    }

    /// The record's length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        FIXED + self.words.len()
    }

    /// Never true: a record has at least its fixed part (for the lint that pairs `len`).
    #[inline]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Every field.
    #[inline]
    pub fn fields(&self) -> Fields {
        let m = self.mask;
        let words = self.words;
        let mut i = 0;
        let mut next = |present: bool| {
            if !present {
                return 0;
            }
            let v = u64::from_le_bytes(words[i..i + 8].try_into().unwrap_or([0; 8]));
            i += 8;
            v
        };
        let addr = next(m & mask::ADDR != 0);
        let size_hi = next(m & mask::SIZE_HI != 0);
        let handle = next(m & mask::HANDLE != 0);
        let arg0 = next(m & mask::ARG0 != 0);
        let arg1 = next(m & mask::ARG1 != 0);
        let arg2 = next(m & mask::ARG2 != 0);
        let size = self.size_lo as u64 | size_hi << 32;
        Fields {
            t_rel: self.t_rel,
            template: self.template,
            addr,
            size,
            handle,
            arg0: if m & mask::ARG0_IS_SIZE != 0 {
                size
            } else {
                arg0
            },
            arg1,
            arg2,
        }
    }
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
mod tests {
    use super::*;
    use crate::{Api, Kind, Owner};

    fn alloc() -> Event {
        Event {
            kind: Kind::Alloc as u16,
            t_ns: 1_000_123,
            tid: 77,
            device: 1,
            stage: 2,
            module: 3,
            owner: Owner::Torch as u8,
            api: Api::cuMemAlloc_v2 as u16,
            addr: 0x7f00_0020_0000,
            size: 2 << 20,
            arg0: 2 << 20,
            ..Event::default()
        }
    }

    #[test]
    fn an_allocation_and_a_free_take_24_bytes() {
        let e = alloc();
        assert_eq!(layout(&e).1, 24);
        let free = Event {
            kind: Kind::Free as u16,
            arg0: 0,
            ..alloc()
        };
        assert_eq!(layout(&free).1, 24);
    }

    #[test]
    fn every_field_round_trips() {
        let base = 1_000_000;
        let mut cases = vec![alloc(), Event::default()];
        let mut big = alloc();
        big.size = 80 << 30;
        big.arg0 = 3;
        big.handle = u64::MAX;
        big.arg1 = 9;
        big.arg2 = u64::MAX - 1;
        big.addr = 0;
        cases.push(big);
        let mut mixed = alloc();
        mixed.arg0 = mixed.size;
        mixed.result = -7;
        mixed.flags = 0x7f;
        cases.push(mixed);
        for mut e in cases {
            e.t_ns = e.t_ns.max(base);
            let t = Template::of(&e);
            let (id, back_t) = Template::decode(&t.encode(5)).unwrap();
            assert_eq!((id, back_t), (5, t));
            let rec = encode(&e, 5, t_rel(&e, base).unwrap());
            assert_eq!(rec.len(), layout(&e).1);
            assert_eq!(rec.len() % 8, 0);
            let (f, len) = decode(&rec, 0).unwrap();
            assert_eq!(len, rec.len());
            assert_eq!(f.template, 5);
            assert_eq!(event(&f, &back_t, base), e);
        }
    }

    #[test]
    fn what_does_not_fit_is_refused() {
        let mut e = alloc();
        e.text = "x".into();
        assert_eq!(t_rel(&e, 0), None);
        let e = alloc();
        assert_eq!(t_rel(&e, e.t_ns + 1), None);
        let mut late = alloc();
        late.t_ns = u64::MAX;
        assert_eq!(t_rel(&late, 0), None);
        // A mask bit this reader does not know, and bytes that end early.
        let mut rec = encode(&alloc(), 1, 0);
        assert!(decode(&rec, 0).is_some());
        assert_eq!(decode(&rec[..20], 0), None);
        rec[11] |= 0x80;
        assert_eq!(decode(&rec, 0), None);
        assert_eq!(Template::decode(&Template::default().encode(0)), None);
    }

    #[test]
    fn a_record_reads_the_same_at_a_block_end_as_before_more_bytes() {
        // Every mask this reader knows: records a largest record's length before the end take
        // one path, those nearer the end another; both must read the same, and a record cut
        // short by a byte must read as nothing.
        for m in 0..=mask::KNOWN {
            let len = len_of(m);
            let mut rec = vec![0u8; len];
            rec[0..8].copy_from_slice(&(0x1234_5678u64 << 8 | 0xff).to_le_bytes());
            rec[8..12].copy_from_slice(&(7u32 | (m as u32) << 24).to_le_bytes());
            rec[12..16].copy_from_slice(&0xdead_beefu32.to_le_bytes());
            for (k, b) in rec[FIXED..].iter_mut().enumerate() {
                *b = k as u8 ^ 0x5a;
            }
            let at_end = decode(&rec, 0).expect("a whole record at the end");
            let mut padded = rec.clone();
            padded.extend_from_slice(&[0xee; MAX_LEN]);
            assert_eq!(decode(&padded, 0), Some(at_end), "mask {m:#x}");
            assert_eq!(at_end.1, len);
            let mut shifted = vec![0u8; 24];
            shifted.extend_from_slice(&rec);
            assert_eq!(decode(&shifted, 24), Some(at_end), "mask {m:#x} at 24");
            assert_eq!(decode(&rec[..len - 1], 0), None, "mask {m:#x} cut");
        }
        assert_eq!(decode(&[0u8; 8], usize::MAX - 4), None);
    }
}
