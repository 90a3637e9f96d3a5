//! The current stage: names interned to small ids (0 = `startup`). What happens at a stage
//! boundary (the stage record, free memory, the live books) is `crate::boundary`'s.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::forksafe::ForkSafeMutex;

/// The stage before any marker.
pub const STARTUP: &str = "startup";

static CURRENT: &AtomicU32 = &crate::hot::HOT.stage;
static NAMES: ForkSafeMutex<Vec<String>> = ForkSafeMutex::new();

/// The current stage id.
#[inline]
pub fn current_id() -> u32 {
    CURRENT.load(Ordering::Relaxed)
}

/// The current stage id and name.
pub fn current() -> (u32, String) {
    let id = current_id();
    (id, name_of(id))
}

fn name_of(id: u32) -> String {
    if id == 0 {
        return STARTUP.to_string();
    }
    NAMES
        .lock()
        .get(id as usize - 1)
        .cloned()
        .unwrap_or_else(|| STARTUP.to_string())
}

/// The id of stage `name` (a new one for a name not seen before).
pub fn intern(name: &str) -> u32 {
    if name == STARTUP {
        return 0;
    }
    let mut names = NAMES.lock();
    if let Some(i) = names.iter().position(|n| n == name) {
        return i as u32 + 1;
    }
    names.push(name.to_string());
    names.len() as u32
}

/// Makes `id` the current stage.
pub fn set_current(id: u32) {
    CURRENT.store(id, Ordering::Relaxed);
}

/// In a forked child: the names are kept by value, the lock is replaced.
pub fn reset_in_child() {
    NAMES.reset_in_child();
    CURRENT.store(0, Ordering::Relaxed);
}
