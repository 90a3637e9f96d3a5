//! Events into records: compact (24 bytes for an allocation or a free) when the event has no
//! text and a template id can be had, else a frame of format 1 (88 bytes and the text).
//!
//! A release-type event is reserved before its driver call ([`reserve`]) and committed after
//! it ([`Reserved::commit`]), so that the journal's order is the driver's order even when
//! another thread reuses the address at once. Its template is chosen as for a call that
//! succeeds; a call that fails (it released nothing, so its place in the order does not
//! matter) turns the slot into padding and appends its record anew, result included.

use std::sync::atomic::Ordering;

use vramledger_format::compact::{self, Template};
use vramledger_format::frame::frame_len;
use vramledger_format::{Event, EVENT_FIXED_LEN};

use super::slots::{self, Slot};
use super::state::START_MONO;
use super::templates;
use crate::thread::Thread;

/// Text beyond this is cut (log lines, paths): a record must fit well inside a block.
pub const MAX_TEXT: usize = 8 * 1024;

/// How `e` will be written.
enum Plan {
    Compact {
        id: u32,
        mask: u8,
        len: usize,
        word0: u64,
    },
    Frame {
        len: usize,
    },
}

#[inline]
fn plan(th: Option<&Thread>, e: &Event, text: &[u8]) -> Plan {
    if text.is_empty() {
        if let Some(t_rel) = compact::t_rel(e, START_MONO.load(Ordering::Relaxed)) {
            if let Some(id) = templates::id(th, &Template::of(e)) {
                let (mask, len) = compact::layout(e);
                return Plan::Compact {
                    id,
                    mask,
                    len,
                    word0: compact::word0(t_rel),
                };
            }
        }
    }
    Plan::Frame {
        len: frame_len(EVENT_FIXED_LEN + text.len().min(MAX_TEXT)),
    }
}

/// Writes an event (after the call it describes).
#[inline]
pub fn append(th: Option<&Thread>, e: &Event, text: &[u8]) {
    match plan(th, e, text) {
        Plan::Compact {
            id,
            mask,
            len,
            word0,
        } => {
            if let Some(slot) = slots::reserve(len) {
                slot.commit_compact(word0, |out| compact::encode_body(e, id, mask, out));
            }
        }
        Plan::Frame { len } => {
            if let Some(slot) = slots::reserve(len) {
                commit_frame(slot, e, text);
            }
        }
    }
}

fn commit_frame(slot: Slot, e: &Event, text: &[u8]) {
    let text = &text[..text.len().min(MAX_TEXT)];
    let mut fixed = [0u8; EVENT_FIXED_LEN];
    e.encode_fixed(&mut fixed);
    slot.commit_frame(e.kind, &[&fixed, text]);
}

/// A release-type event's place, taken before its call.
pub struct Reserved {
    slot: Slot,
    word0: u64,
    compact: bool,
}

/// Reserves `e`'s record (its result still unknown: written as success).
#[inline]
pub fn reserve(th: Option<&Thread>, e: &Event) -> Option<Reserved> {
    match plan(th, e, b"") {
        Plan::Compact {
            id,
            mask,
            len,
            word0,
        } => {
            let mut slot = slots::reserve(len)?;
            // SAFETY: reserved just now by this thread and not committed: the bytes are ours
            // (a fork since would leave them to the parent's mapping, never the child's).
            compact::encode_body(e, id, mask, unsafe { slot.body() });
            Some(Reserved {
                slot,
                word0,
                compact: true,
            })
        }
        Plan::Frame { len } => Some(Reserved {
            slot: slots::reserve(len)?,
            word0: 0,
            compact: false,
        }),
    }
}

impl Reserved {
    /// Commits the record of `e` whose call returned `result` (a compact success reads
    /// nothing of `e`: its body was written before the call).
    #[inline]
    pub fn commit(self, th: Option<&Thread>, e: &mut Event, result: i32) {
        if self.compact && result == 0 {
            self.slot.commit_word(self.word0);
            return;
        }
        e.result = result;
        if !self.compact {
            commit_frame(self.slot, e, b"");
        } else {
            self.slot.cancel();
            append(th, e, b"");
        }
    }
}
