//! `vramledger snapshot --format perfetto`: Chrome trace-event JSON that ui.perfetto.dev and
//! chrome://tracing open (see /work/shared/docs/interception.md §7 and
//! docs/snapshot-schema.md).
//!
//! Per process (named `vramledger pid N rank R` by a `process_name` metadata event):
//! - counter `vram cuda:D` (tid 0, `cat` `memory`): bytes held per owner (the five hooked
//!   owners and the context), one event per distinct timestamp at which they changed, up to
//!   the point;
//! - counter `free cuda:D` (tid 0, `cat` `memory`): every free-memory reading;
//! - complete events (`X`, tid 1, named `stages`, `cat` `stage`): one per stage, clipped to
//!   the point;
//! - instant events (`i`, `cat` `oom`): out-of-memory failures.
//!
//! Every event has a `cat` (viewers name a track `cat.name`: without it, `undefined.name`).
//! Timestamps are whole wall-clock µs since the epoch (each journal's start plus its monotonic time
//! since, on its clock made non-decreasing in journal order), so processes of a run line up
//! and a viewer shows the real time of day.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::snapshot_json::owners;
use crate::snapshot::{ProcessSnapshot, Snapshot};

/// The tid of the counters.
pub const COUNTER_TID: u32 = 0;
/// The tid of the stage spans.
pub const STAGE_TID: u32 = 1;

/// Trace events written one by one into a JSON array (no tree of the whole trace).
struct Events {
    out: Vec<u8>,
    n: usize,
}

impl Events {
    fn push(&mut self, e: Value) {
        if self.n > 0 {
            self.out.push(b',');
        }
        self.n += 1;
        // Serializing a Value into memory cannot fail.
        let _ = serde_json::to_writer(&mut self.out, &e);
    }
}

/// The trace, as JSON bytes.
pub fn render(s: &Snapshot) -> Vec<u8> {
    let run_start = s
        .processes
        .iter()
        .map(|p| (p.start_unix_ns as i128).min(p.wall_ns(p.first_t_ns)))
        .min()
        .unwrap_or(0);
    let mut events = Events {
        out: b"{\"traceEvents\":[".to_vec(),
        n: 0,
    };
    let mut pids = BTreeSet::new();
    let max_pid = s.processes.iter().map(|p| p.pid).max().unwrap_or(0);
    let mut next_pid = max_pid + 1;
    for p in &s.processes {
        // Processes of several hosts can share a pid: each gets its own track.
        let pid = if pids.insert(p.pid) {
            p.pid
        } else {
            next_pid += 1;
            pids.insert(next_pid - 1);
            next_pid - 1
        };
        process(p, pid, &mut events);
    }
    let stage = match &s.at {
        crate::snapshot::At::Stage(name) => name.clone(),
        _ => String::new(),
    };
    let tail = json!({
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": "vramledger snapshot",
            "at": s.at.mode(),
            "stage": stage,
            "origin_unix_ns": "0",
            "run_start_unix_ns": run_start.to_string(),
        },
    });
    let mut out = events.out;
    out.extend_from_slice(b"],");
    // `tail` is an object: splice its members after the array.
    let tail = tail.to_string();
    out.extend_from_slice(&tail.as_bytes()[1..]);
    out.push(b'\n');
    out
}

fn process(p: &ProcessSnapshot, pid: u32, out: &mut Events) {
    let ts = |clock_ns: u64| us(p.wall_ns(clock_ns).max(0));
    let name = match p.rank {
        Some(r) => format!("vramledger pid {} rank {r}", p.pid),
        None => format!("vramledger pid {}", p.pid),
    };
    out.push(
        json!({"ph": "M", "cat": "__metadata", "name": "process_name", "pid": pid,
        "tid": COUNTER_TID, "ts": 0, "args": {"name": name}}),
    );
    out.push(
        json!({"ph": "M", "cat": "__metadata", "name": "thread_name", "pid": pid,
        "tid": COUNTER_TID, "ts": 0, "args": {"name": "memory"}}),
    );
    out.push(
        json!({"ph": "M", "cat": "__metadata", "name": "thread_name", "pid": pid,
        "tid": STAGE_TID, "ts": 0, "args": {"name": "stages"}}),
    );
    for s in &p.stages {
        out.push(json!({
            "name": s.name, "cat": "stage", "ph": "X", "pid": pid, "tid": STAGE_TID,
            // From whole-µs boundaries: a stage ends exactly where the next begins (a
            // rounded `dur` could overlap the next one, and importers drop such slices).
            "ts": ts(s.start_ns), "dur": ts(s.end_ns).saturating_sub(ts(s.start_ns)),
            "args": {"stage": s.name},
        }));
    }
    for d in &p.devices {
        // At most one event per distinct timestamp: the last value at that time.
        let vram = format!("vram cuda:{}", d.device);
        let mut samples = d.timeline.iter().peekable();
        while let Some(sample) = samples.next() {
            let t = ts(sample.t_ns);
            if samples.peek().is_some_and(|next| ts(next.t_ns) == t) {
                continue;
            }
            out.push(json!({"name": vram, "cat": "memory", "ph": "C", "pid": pid,
                "tid": COUNTER_TID, "ts": t, "args": owners(&sample.by_owner)}));
        }
        let free = format!("free cuda:{}", d.device);
        let mut readings = d.free_readings.iter().peekable();
        while let Some(r) = readings.next() {
            let t = ts(r.t_ns);
            if readings.peek().is_some_and(|next| ts(next.t_ns) == t) {
                continue;
            }
            out.push(json!({"name": free, "cat": "memory", "ph": "C", "pid": pid,
                "tid": COUNTER_TID, "ts": t, "args": {"free": r.free_bytes}}));
        }
        for f in &d.failures {
            out.push(json!({
                "name": format!("out of memory cuda:{}", d.device), "cat": "oom",
                "ph": "i", "s": "p", "pid": pid, "tid": COUNTER_TID, "ts": ts(f.clock_ns),
                "args": {
                    "requested_bytes": f.requested_bytes, "free_bytes": f.free_bytes,
                    "owner": f.owner.name(), "module": f.module, "stage": f.stage,
                },
            }));
        }
    }
}

/// Nanoseconds as whole µs (wall-clock µs since the epoch are ~2^50: a float with a fraction
/// would be rounded to a quarter µs, unevenly).
fn us(ns: i128) -> u64 {
    (ns / 1000).max(0) as u64
}
