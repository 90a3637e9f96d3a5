//! The rising times of a stage, for [`super::Scan`]: where a stage placed by a printed
//! duration starts.

/// Records whose time is above every earlier one's since the last [`Rising::clear`], as
/// varint deltas: the time's step doubled, plus one when the index steps by more than one
/// record (its step follows then). Mostly 2 bytes a record: a stage of 10^7 records costs
/// ~20 MB, not 160.
#[derive(Default)]
pub(super) struct Rising {
    bytes: Vec<u8>,
    pub(super) first: Option<(usize, u64)>,
    last: (usize, u64),
}

impl Rising {
    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        self.first = None;
    }

    /// Appends a record `di` after the last one, `dt` later.
    #[inline]
    fn put(&mut self, di: u64, dt: u64) {
        let head = (dt as u128) << 1 | (di != 1) as u128;
        if head < 1 << 14 && di == 1 {
            // The common case: the next record, less than 8 µs later.
            if head < 0x80 {
                self.bytes.push(head as u8);
            } else {
                self.bytes
                    .extend_from_slice(&[head as u8 | 0x80, (head >> 7) as u8]);
            }
            return;
        }
        self.put_varint(head);
        if di != 1 {
            self.put_varint(di as u128);
        }
    }

    #[cold]
    fn put_varint(&mut self, mut v: u128) {
        while v >= 0x80 {
            self.bytes.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.bytes.push(v as u8);
    }

    #[inline(always)]
    pub(super) fn offer(&mut self, i: usize, t: u64) {
        match self.first {
            None => self.first = Some((i, t)),
            Some(_) if t > self.last.1 => self.put((i - self.last.0) as u64, t - self.last.1),
            Some(_) => return,
        }
        self.last = (i, t);
    }

    /// The first record kept whose time is at or after `target`: index and time.
    pub(super) fn first_at_or_after(&self, target: u64) -> Option<(usize, u64)> {
        let (mut i, mut t) = self.first?;
        let mut at = 0;
        let get = |at: &mut usize| {
            let mut v = 0u128;
            let mut shift = 0;
            while let Some(&b) = self.bytes.get(*at) {
                *at += 1;
                if shift < 128 {
                    v |= ((b & 0x7f) as u128) << shift;
                }
                shift += 7;
                if b < 0x80 {
                    break;
                }
            }
            v
        };
        while t < target {
            if at >= self.bytes.len() {
                return None;
            }
            let head = get(&mut at);
            let di = if head & 1 == 1 {
                get(&mut at) as usize
            } else {
                1
            };
            i += di;
            t += (head >> 1) as u64;
        }
        Some((i, t))
    }
}
