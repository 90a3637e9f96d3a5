//! The CUDA context's bytes in the books: what NVML measured around a context's creation, and
//! what came back when one was destroyed or its last reference released.
//!
//! The books end where the process's memory last stood whole: before the last context of a
//! device goes away (the runtime's teardown at exit also frees what the program never freed,
//! which nothing recorded). So a release or destroy gives the context's bytes back only when a
//! context is made on that device again later (a tool that opens the device per job, a test
//! harness): the index marks the one that ends each device's last context
//! ([`super::index::Index::context_ends`]), and that one moves nothing.

use vramledger_format::{Api, Event, Kind};

/// The bytes a context record says a context took (its creation, measured by NVML).
pub fn made(e: &Event) -> Option<u64> {
    (e.kind() == Some(Kind::Context) && e.device >= 0 && e.result == 0 && !ends(e) && e.size > 0)
        .then_some(e.size)
}

/// The bytes that came back across a destroy or release (free memory after minus before),
/// when both readings were taken and some did.
pub fn given_back(e: &Event) -> Option<u64> {
    if e.kind() != Some(Kind::Context) || e.device < 0 || e.result != 0 || !ends(e) {
        return None;
    }
    let known = e.arg0 != u64::MAX && e.arg1 != u64::MAX;
    let back = if known {
        e.arg1.saturating_sub(e.arg0)
    } else {
        0
    };
    (back > 0).then_some(back)
}

/// Whether the record is a call that can end a context.
fn ends(e: &Event) -> bool {
    matches!(
        e.api(),
        Some(Api::cuDevicePrimaryCtxRelease_v2 | Api::cuCtxDestroy_v2)
    )
}

/// The context records of one journal as the index walks them: per device, the record that
/// gave back its last context, if no context was made there after it.
#[derive(Debug, Clone, Default)]
pub struct Ends(Vec<(i32, usize)>);

impl Ends {
    /// Record `i`, a context record.
    pub fn take(&mut self, i: usize, e: &Event) {
        if made(e).is_some() {
            self.0.retain(|(d, _)| *d != e.device);
        } else if given_back(e).is_some() {
            self.0.retain(|(d, _)| *d != e.device);
            self.0.push((e.device, i));
        }
    }

    /// Whether record `i` on `device` ends that device's last context.
    pub fn is_last(&self, device: i32, i: usize) -> bool {
        self.0.contains(&(device, i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(api: Api, device: i32, size: u64, before: u64, after: u64) -> Event {
        Event {
            kind: Kind::Context as u16,
            api: api as u16,
            device,
            size,
            arg0: before,
            arg1: after,
            ..Event::default()
        }
    }

    #[test]
    fn creations_take_their_measured_bytes_and_ends_give_back_what_came_back() {
        let create = ctx(Api::cuCtxCreate_v2, 0, 300, 1000, 700);
        assert_eq!(made(&create), Some(300));
        assert_eq!(given_back(&create), None);
        let destroy = ctx(Api::cuCtxDestroy_v2, 0, 0, 700, 1000);
        assert_eq!((made(&destroy), given_back(&destroy)), (None, Some(300)));
        let release = ctx(Api::cuDevicePrimaryCtxRelease_v2, 1, 0, 500, 900);
        assert_eq!(given_back(&release), Some(400));
        // A release that dropped nothing (another reference holds it), a reading missing, a
        // failed call, no device: nothing.
        for e in [
            ctx(Api::cuDevicePrimaryCtxRelease_v2, 1, 0, 900, 900),
            ctx(Api::cuCtxDestroy_v2, 0, 0, u64::MAX, 1000),
            ctx(Api::cuCtxDestroy_v2, 0, 0, 700, u64::MAX),
            Event {
                result: 201,
                ..destroy.clone()
            },
            ctx(Api::cuCtxDestroy_v2, -1, 0, 700, 1000),
        ] {
            assert_eq!(given_back(&e), None, "{e:?}");
        }
        // A retain of a context that exists already measures nothing.
        assert_eq!(
            made(&ctx(Api::cuDevicePrimaryCtxRetain, 0, 0, 700, 700)),
            None
        );
    }

    #[test]
    fn only_an_end_no_creation_follows_on_its_device_is_the_last() {
        let make = |d| ctx(Api::cuCtxCreate_v2, d, 300, 1000, 700);
        let end = |d| ctx(Api::cuCtxDestroy_v2, d, 0, 700, 1000);
        let mut ends = Ends::default();
        for (i, e) in [make(0), end(0), make(1), make(0), end(0), end(1), make(1)]
            .iter()
            .enumerate()
        {
            ends.take(i, e);
        }
        // Device 0: the end at 4 (none made after); its end at 1 was followed by a creation.
        assert!(ends.is_last(0, 4) && !ends.is_last(0, 1));
        // Device 1 was made again after its end: no end is its last.
        assert!(!ends.is_last(1, 5));
    }
}
