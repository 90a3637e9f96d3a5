//! Peaks: the most bytes held, and the record that first reached it. One rule for every book:
//! a height counts from the first record that reaches it (a later record reaching it again is
//! not a new peak), and nothing held is no peak.

use std::ops::ControlFlow;

use super::replay::{Observer, Rec};

/// The highest value offered so far, and where.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeakAt {
    pub bytes: i64,
    /// The record that reached it, its span and its time.
    pub index: usize,
    pub span: usize,
    pub t_ns: u64,
}

impl PeakAt {
    /// Takes `bytes` held after record `r` when it is above the peak so far.
    pub fn offer(&mut self, bytes: i64, r: &Rec<'_>) {
        if bytes > self.bytes {
            *self = PeakAt {
                bytes,
                index: r.index,
                span: r.span,
                t_ns: r.e.t_ns,
            };
        }
    }

    /// Whether anything was ever held.
    pub fn reached(&self) -> bool {
        self.bytes > 0
    }
}

/// Per device, the peak of its hooked total (hooked bytes plus the measured context, the
/// report's `peak.total`); and the peak of the sum over devices.
#[derive(Debug, Default)]
pub struct Peaks {
    pub devices: Vec<(i32, PeakAt)>,
    pub process: PeakAt,
    total: i64,
}

impl Observer for Peaks {
    fn record(&mut self, r: &Rec<'_>) -> ControlFlow<()> {
        let (Some(m), Some(held)) = (r.moved, r.held()) else {
            return ControlFlow::Continue(());
        };
        let i = match self.devices.iter().position(|(d, _)| *d == m.device) {
            Some(i) => i,
            None => {
                self.devices.push((m.device, PeakAt::default()));
                self.devices.len() - 1
            }
        };
        self.devices[i].1.offer(held.hooked, r);
        self.total = self.total.saturating_add(m.bytes);
        self.process.offer(self.total, r);
        ControlFlow::Continue(())
    }
}
