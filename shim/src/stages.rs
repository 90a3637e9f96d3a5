//! The current stage, and what happens at a stage boundary.
//!
//! Stage names are interned to small ids (0 = `startup`). At every boundary the shim
//! writes the stage record, samples free memory through the real driver (and NVML), and
//! writes the live books, so the offline ledger can measure each stage's device delta.

use std::sync::atomic::{AtomicU32, Ordering};

use vramledger_format::{Api, Kind};

use crate::forksafe::ForkSafeMutex;
use crate::recorder;

/// The stage before any marker.
pub const STARTUP: &str = "startup";

static CURRENT: AtomicU32 = AtomicU32::new(0);
static NAMES: ForkSafeMutex<Vec<String>> = ForkSafeMutex::new();

/// The current stage id.
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

fn intern(name: &str) -> u32 {
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

/// Enters stage `name` (said by `api`; `numbers` are the engine's own figures, e.g. the
/// logged avail/usage GiB, stored as f64 bits; `line` is the log line if any).
pub fn enter(name: &str, api: Api, numbers: [Option<f64>; 2], line: &[u8]) {
    let name = name.trim();
    if name.is_empty() || !recorder::ensure() {
        return;
    }
    let id = intern(name);
    CURRENT.store(id, Ordering::Relaxed);
    let mut e = recorder::event(Kind::Stage, api);
    e.stage = id;
    e.arg0 = numbers[0].map_or(u64::MAX, f64::to_bits);
    e.arg1 = numbers[1].map_or(u64::MAX, f64::to_bits);
    let mut text = name.as_bytes().to_vec();
    if !line.is_empty() {
        text.push(b'\n');
        text.extend_from_slice(line);
    }
    recorder::emit(&e, &text);
    boundary_samples();
}

/// Free memory, NVML and the live books, as of now.
pub fn boundary_samples() {
    recorder::sample_meminfo();
    recorder::sample_nvml();
    recorder::write_live_books();
}

/// In a forked child: the names are kept by value, the lock is replaced.
pub fn reset_in_child() {
    NAMES.reset_in_child();
    CURRENT.store(0, Ordering::Relaxed);
}
