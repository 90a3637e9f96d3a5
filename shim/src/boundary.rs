//! A stage boundary: the stage record, then free memory through the real driver (and NVML)
//! and the live books, so the offline ledger can measure each stage's device delta.

use vramledger_format::{Api, Kind};

use crate::{recorder, samples, selftime, stages};

/// Enters stage `name` (said by `api`; `numbers` are the engine's own figures, e.g. the
/// logged avail/usage GiB, stored as f64 bits; `line` is the log line if any).
pub fn enter(name: &str, api: Api, numbers: [Option<f64>; 2], line: &[u8]) {
    let name = name.trim();
    if name.is_empty() || !recorder::ensure() {
        return;
    }
    let id = stages::intern(name);
    stages::set_current(id);
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
    samples::boundary();
    selftime::say(|| format!("stage {name}"));
}
