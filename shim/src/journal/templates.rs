//! Template ids for compact records (`vramledger_format::compact`): one per distinct
//! (kind, entry point, thread, device, stage, module, owner, memory kind, result, flags).
//!
//! A thread remembers the few it used last (no lock on the hook path); a new one is defined
//! under the table's lock, its template frame *reserved* before the id is published, so the
//! definition precedes every use of the id in the file whatever thread uses it. At most
//! [`MAX`] per journal (memory stays flat): past that, events are written as full frames.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use vramledger_format::compact::Template;
use vramledger_format::frame::frame_len;
use vramledger_format::Kind;

use super::slots;
use super::state::GENERATION;
use crate::forksafe::ForkSafeMutex;
use crate::thread::Thread;

/// Templates per journal at most.
pub const MAX: usize = 1 << 16;

#[derive(Default)]
struct Table {
    generation: u32,
    ids: HashMap<Template, u32>,
}

static TABLE: ForkSafeMutex<Table> = ForkSafeMutex::new();

/// The id of template `t` in the open journal, defining it if needed.
#[inline]
pub fn id(th: Option<&Thread>, t: &Template) -> Option<u32> {
    let generation = GENERATION.load(Ordering::Acquire);
    if let Some(id) = th.and_then(|th| th.template(generation, t)) {
        return Some(id);
    }
    let id = define(generation, t)?;
    if let Some(th) = th {
        th.remember(generation, t, id);
    }
    Some(id)
}

#[cold]
fn define(generation: u32, t: &Template) -> Option<u32> {
    let mut table = TABLE.lock();
    if table.generation != generation {
        table.ids.clear();
        table.generation = generation;
    }
    if let Some(&id) = table.ids.get(t) {
        return Some(id);
    }
    if table.ids.len() >= MAX {
        return None;
    }
    let id = table.ids.len() as u32 + 1;
    let payload = t.encode(id);
    // Reserved under the lock (no driver call: at most a chunk grown), committed after it.
    let slot = slots::reserve(frame_len(payload.len()))?;
    table.ids.insert(*t, id);
    drop(table);
    slot.commit_frame(Kind::Template as u16, &[&payload]);
    Some(id)
}

/// In a forked child: the parent's table (its lock may be held by a thread that is gone).
pub fn reset_in_child() {
    TABLE.reset_in_child();
}
