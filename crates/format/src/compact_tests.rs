//! Tests of `compact.rs`.
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

/// The decoding before [`SLOTS`]: word by word, a branch on each mask bit.
fn decode_word_by_word(bytes: &[u8], at: usize) -> Option<(Fields, usize)> {
    let rec = bytes.get(at..)?;
    let w = |i: usize| Some(u64::from_le_bytes(rec.get(i..i + 8)?.try_into().ok()?));
    let head = u32::from_le_bytes(rec.get(8..12)?.try_into().ok()?);
    let m = (head >> 24) as u8;
    if m & !mask::KNOWN != 0 || rec.len() < len_of(m) {
        return None;
    }
    let mut i = FIXED;
    let mut next = |bit: u8| {
        if m & bit == 0 {
            return Some(0);
        }
        i += 8;
        w(i - 8)
    };
    let addr = next(mask::ADDR)?;
    let size = u32::from_le_bytes(rec[12..16].try_into().ok()?) as u64 | next(mask::SIZE_HI)? << 32;
    let handle = next(mask::HANDLE)?;
    let arg0 = next(mask::ARG0)?;
    let f = Fields {
        t_rel: w(0)? >> 8,
        template: head & MAX_TEMPLATE,
        addr,
        size,
        handle,
        arg0: if m & mask::ARG0_IS_SIZE != 0 {
            size
        } else {
            arg0
        },
        arg1: next(mask::ARG1)?,
        arg2: next(mask::ARG2)?,
    };
    Some((f, len_of(m)))
}

#[test]
fn every_mask_reads_as_word_by_word_at_every_distance_from_the_end() {
    // Distinct bytes everywhere, so a word read from the wrong place shows; then every
    // cut of the bytes, so that each record is read through both paths and cut short.
    let bytes: Vec<u8> = (0..MAX_LEN * 3)
        .map(|k| (k as u8).wrapping_mul(151) ^ 0x3c)
        .collect();
    for m in 0..=255u8 {
        for at in [0, 8, 40] {
            let mut b = bytes.clone();
            b[at + 11] = m;
            for end in at..=b.len() {
                let want = decode_word_by_word(&b[..end], at);
                assert_eq!(decode(&b[..end], at), want, "mask {m:#x} at {at} end {end}");
            }
        }
    }
}
