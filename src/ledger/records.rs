//! Where a replay reads records from: any journal that can be walked in order, as often as
//! the replay needs (twice: [`super::index`], then [`super::replay`]). A decoded
//! [`Journal`] is one; a reader that decodes the file as it walks it is another (then no
//! record is ever held beyond the one being replayed).

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::Path;

use vramledger_format::{Event, Header};

use crate::journal::Journal;

/// A record as [`Records::walk_brief`] offers it.
#[derive(Debug)]
pub enum Offer<'e> {
    /// A compact record (format 2), before its event is made: its kind and time. Never a
    /// module or stage record.
    Brief { kind: u16, t_ns: u64 },
    /// A record's event.
    Whole(&'e Event),
}

/// A journal's records, in file order.
pub trait Records {
    /// Where it was read from (for reports).
    fn path(&self) -> &Path;
    /// Process facts.
    fn header(&self) -> &Header;
    /// Calls `f` with every record (header excluded) in file order, until `f` breaks.
    fn walk<F: FnMut(&Event) -> ControlFlow<()>>(&self, f: F);
    /// [`Records::walk`] for a walk that needs only the kind and time of most records: `f`
    /// may be offered a record briefly first ([`Offer::Brief`]; returning `None` asks for
    /// its event, offered next as [`Offer::Whole`]). Breaking ends the walk.
    fn walk_brief<F: FnMut(Offer<'_>) -> Option<ControlFlow<()>>>(&self, mut f: F) {
        self.walk(|e| f(Offer::Whole(e)).unwrap_or(ControlFlow::Continue(())));
    }
    /// Module id → path, when the source already knows them all (else the index gathers
    /// them from the module records).
    fn modules(&self) -> Option<&BTreeMap<u32, String>> {
        None
    }
}

impl Records for Journal {
    fn path(&self) -> &Path {
        &self.path
    }

    fn header(&self) -> &Header {
        &self.header
    }

    fn modules(&self) -> Option<&BTreeMap<u32, String>> {
        Some(&self.modules)
    }

    fn walk<F: FnMut(&Event) -> ControlFlow<()>>(&self, mut f: F) {
        for e in &self.events {
            if f(e).is_break() {
                return;
            }
        }
    }
}
