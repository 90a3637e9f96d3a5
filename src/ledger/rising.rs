//! The rising times of a stage, for [`super::Scan`]: where a stage placed by a printed
//! duration starts.

/// Records whose time is above every earlier one's since the last [`Rising::clear`], as
/// varint deltas: the time's step doubled, plus one when the index steps by more than one
/// record (its step follows then). Mostly 2 bytes a record: a stage of 10^7 records costs
/// ~20 MB, not 160.
///
/// [`Rising::bounded`] keeps only a stage's first [`BOUNDED`] bytes of them: the line that
/// looks back (vLLM's loading time) comes early in its stage, and a walk that keeps less
/// costs less. A lookup past what was kept says so ([`Found::Lost`]); the caller then
/// walks again keeping everything.
pub(super) struct Rising {
    bytes: Vec<u8>,
    pub(super) first: Option<(usize, u64)>,
    last: (usize, u64),
    /// Bytes kept at most; `full` once they were reached (nothing more is kept).
    cap: usize,
    full: bool,
}

/// Bytes a bounded [`Rising`] keeps of one stage (64k-128k records).
pub(super) const BOUNDED: usize = 128 << 10;

/// What [`Rising::first_at_or_after`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    At(usize, u64),
    /// No record kept is at or after the instant, and none was left out.
    None,
    /// The answer is among the records a bounded one left out.
    Lost,
}

impl Default for Rising {
    fn default() -> Rising {
        Rising {
            bytes: Vec::new(),
            first: None,
            last: (0, 0),
            cap: usize::MAX,
            full: false,
        }
    }
}

impl Rising {
    /// One that keeps only a stage's first [`BOUNDED`] bytes.
    pub(super) fn bounded() -> Rising {
        Rising {
            cap: BOUNDED,
            ..Rising::default()
        }
    }

    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        self.first = None;
        self.full = false;
    }

    /// Appends a record `di` after the last one, `dt` later.
    #[inline]
    fn put(&mut self, di: u64, dt: u64) {
        if di == 1 && dt < 1 << 13 {
            // The common case: the next record, less than 8 µs later (a head of 14 bits).
            let head = dt << 1;
            if head < 0x80 {
                self.bytes.push(head as u8);
            } else {
                self.bytes
                    .extend_from_slice(&[head as u8 | 0x80, (head >> 7) as u8]);
            }
        } else {
            self.put_varint((dt as u128) << 1 | (di != 1) as u128);
            if di != 1 {
                self.put_varint(di as u128);
            }
        }
        self.full = self.bytes.len() >= self.cap;
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
        if self.full {
            return;
        }
        match self.first {
            None => self.first = Some((i, t)),
            Some(_) if t > self.last.1 => self.put((i - self.last.0) as u64, t - self.last.1),
            Some(_) => return,
        }
        self.last = (i, t);
    }

    /// The first record kept whose time is at or after `target`: index and time.
    pub(super) fn first_at_or_after(&self, target: u64) -> Found {
        let Some((mut i, mut t)) = self.first else {
            return Found::None;
        };
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
                return if self.full { Found::Lost } else { Found::None };
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
        Found::At(i, t)
    }
}
