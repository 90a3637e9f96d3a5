//! Free-memory readings of one device, and the free memory at any point of the journal.
//!
//! Readings come from vramledger's samples at stage boundaries, the program's own
//! `cuMemGetInfo` calls, NVML samples and the NVML readings around context creation (NVML's
//! device free equals the driver's on the machines measured). Between two readings the free
//! memory is derived from the nearest reading and the hooked bytes that moved since, so a
//! boundary without its own sample still gets a consistent value.

/// Where a free-memory figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Sampled by vramledger at this very point.
    Sample,
    /// Derived from another reading and the hooked bytes between them.
    Derived,
    /// No reading of this device at all.
    Unknown,
}

impl Source {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Source::Sample => "sample",
            Source::Derived => "derived",
            Source::Unknown => "unknown",
        }
    }
}

/// One reading: event index, free bytes, and the device's hooked bytes held at that point.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    pub index: usize,
    pub free: u64,
    pub hooked: i64,
}

/// The readings of one device in journal order.
#[derive(Debug, Default, Clone)]
pub struct Readings {
    pub list: Vec<Reading>,
}

impl Readings {
    /// Free memory at event index `at` given the device's hooked bytes `hooked_now` there:
    /// the reading at `at` itself if there is one (first of a sample block), else the last
    /// reading before it corrected by what the hooks saw move since, else the first after.
    pub fn free_at(&self, at: usize, hooked_now: i64) -> (Option<u64>, Source) {
        let i = self.list.partition_point(|r| r.index < at);
        if let Some(r) = self.list.get(i) {
            if r.index == at {
                return (Some(r.free), Source::Sample);
            }
        }
        let near = if i > 0 {
            self.list.get(i - 1)
        } else {
            self.list.get(i)
        };
        match near {
            Some(r) => {
                let free = r.free as i128 - (hooked_now as i128 - r.hooked as i128);
                (
                    Some(free.clamp(0, u64::MAX as i128) as u64),
                    Source::Derived,
                )
            }
            None => (None, Source::Unknown),
        }
    }
}
