//! Free-memory readings of one device, and the free memory at any point of the journal.
//!
//! Readings come from vramledger's samples at stage boundaries, the program's own
//! `cuMemGetInfo` calls, NVML samples and the NVML readings around context creation (NVML's
//! device free equals the driver's on the machines measured). Between two readings the free
//! memory is derived from the nearest reading and the hooked bytes that moved since
//! ([`derived_free`]), so a boundary without its own sample still gets a consistent value.
//! Every book derives free memory through this one rule.

use vramledger_format::{Event, Kind};

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

/// A free-memory reading carried by `e` (the driver's or NVML's): device and free bytes.
pub fn reading(e: &Event) -> Option<(i32, u64)> {
    reading_of(e, e.kind())
}

/// [`reading`] of a record whose kind the caller has read.
#[inline]
pub fn reading_of(e: &Event, kind: Option<Kind>) -> Option<(i32, u64)> {
    match kind? {
        Kind::MemInfo | Kind::NvmlSample if e.device >= 0 => Some((e.device, e.arg0)),
        _ => None,
    }
}

/// Free memory `free` read when the device's hooked total was `hooked_then`, carried to a
/// point where it is `hooked_now`: what the hooks saw taken since is no longer free.
pub fn derived_free(free: u64, hooked_then: i64, hooked_now: i64) -> u64 {
    let free = free as i128 - (hooked_now as i128 - hooked_then as i128);
    free.clamp(0, u64::MAX as i128) as u64
}

/// One reading: record index, free bytes, and the device's hooked total at that point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub index: usize,
    pub free: u64,
    pub hooked: i64,
}

impl Reading {
    /// Free memory at record `at`, where the hooked total is `hooked_now`: this reading's own
    /// when it was taken there, else derived from it.
    pub fn at(&self, at: usize, hooked_now: i64) -> (Option<u64>, Source) {
        if self.index == at {
            (Some(self.free), Source::Sample)
        } else {
            (
                Some(derived_free(self.free, self.hooked, hooked_now)),
                Source::Derived,
            )
        }
    }
}

/// The readings a device's books need, kept as they stream past: per stage span the reading
/// nearest before (or at) its first record, and the first and last readings. Free memory at a
/// span's start is that reading's (or, with none before, the first reading after it),
/// corrected by what the hooks saw move in between.
#[derive(Debug, Default, Clone)]
pub struct SpanReadings {
    /// Per span: the last reading at or before its first record.
    at_start: Vec<Option<Reading>>,
    first: Option<Reading>,
    last: Option<Reading>,
}

impl SpanReadings {
    /// Room for `spans` spans.
    pub fn new(spans: usize) -> SpanReadings {
        SpanReadings {
            at_start: vec![None; spans],
            ..SpanReadings::default()
        }
    }

    /// Span `span` begins (before its first record is taken).
    pub fn span_begins(&mut self, span: usize) {
        if let Some(slot) = self.at_start.get_mut(span) {
            *slot = self.last;
        }
    }

    /// A reading; `boundary`: the span whose first record carries it.
    pub fn read(&mut self, r: Reading, boundary: Option<usize>) {
        if let Some(slot) = boundary.and_then(|s| self.at_start.get_mut(s)) {
            *slot = Some(r);
        }
        self.first.get_or_insert(r);
        self.last = Some(r);
    }

    /// Free memory at the start of span `span` (first record `at`), where the device's hooked
    /// total was `hooked_now`.
    pub fn at_span(&self, span: usize, at: usize, hooked_now: i64) -> (Option<u64>, Source) {
        match self.at_start.get(span).copied().flatten().or(self.first) {
            Some(r) => r.at(at, hooked_now),
            None => (None, Source::Unknown),
        }
    }

    /// Free memory after the last record, where the hooked total is `hooked_now`.
    pub fn at_end(&self, hooked_now: i64) -> (Option<u64>, Source) {
        match self.last {
            Some(r) => r.at(usize::MAX, hooked_now),
            None => (None, Source::Unknown),
        }
    }

    /// The last reading so far.
    pub fn last(&self) -> Option<Reading> {
        self.last
    }
}
