//! `vramledger snapshot --format memory-viz`: a pickle that pytorch.org/memory_viz (and
//! `python -m torch.cuda._memory_viz`) opens, in the shape of PyTorch's
//! `torch.cuda.memory._snapshot()` (see /work/shared/docs/interception.md §5 and
//! docs/snapshot-schema.md).
//!
//! - `segments`: one per physical allocation live at the point: a `cuMemAlloc`-family
//!   allocation at its address, or a VMM handle at each of its mappings (`is_expandable`
//!   true); each holds exactly one `active_allocated` block of its own size, so blocks tile
//!   their segment.
//!   `segment_pool_id` is PyTorch's: the id the journal records (the Python hooks tell the
//!   shim each private pool), else `(0, 0)` for the default pool and `(k, 0)` for graph-pool
//!   memory taken inside the k-th stream capture of the process (without the hooks, captures
//!   that share one pool in the program get one id each: the journal cannot tell).
//! - `device_traces[d]`: the history up to the point: `segment_alloc` + `alloc` for an
//!   allocation or a VMM mapping, `free_requested` + `free_completed` + `segment_free` for
//!   its free or unmap (a free is synchronous for the driver: the viewer folds the pair into
//!   one `free`; `free_completed` alone would draw the block red, "waiting due to
//!   record_stream"), `oom` for out-of-memory failures. Mappings are `segment_alloc`, not
//!   `segment_map`: each is a segment of its own here, and the cached-segment timeline colours
//!   only `segment_alloc` by category. `time_us` is wall-clock µs since the epoch (the
//!   journal's start plus monotonic time since), as PyTorch records it. `category` is the
//!   owner, `user_metadata` the stage, `frames` the module and owner.
//! - Every device trace with anything in it ends with one `snapshot` entry of category
//!   `unknown`: the viewer crashes when categories are used and none is `unknown` (a typo in
//!   its fallback), and a `snapshot` entry is drawn by no view (a zero-size `alloc` at an
//!   address outside every segment would make its segment view throw).
//!
//! Not shown (no address): stream-ordered pools, the context, VMM handles not mapped now,
//! memory of unknown devices. Devices of different processes with the same ordinal get
//! their own `device_traces` slot after the highest ordinal (see [`render`]'s notes).

use std::collections::BTreeMap;

use vramledger_format::Owner;

use super::pickle::Pickler;
use crate::snapshot::{Action, DeviceSnapshot, Failure, ItemKind, ProcessSnapshot, Snapshot};

fn frames(p: &mut Pickler, module: &str, owner: Owner) {
    let filename = if module.is_empty() { "?" } else { module };
    p.list(|l| {
        l.item(|p| {
            p.dict(|d| {
                d.entry("filename", |p| p.str(filename));
                d.entry("line", |p| p.int(0));
                d.entry("name", |p| p.str(owner.name()));
            })
        })
    });
}

struct Entry<'a> {
    action: &'a str,
    addr: u64,
    size: u64,
    time_us: i64,
    owner: Owner,
    module: &'a str,
    stage: &'a str,
}

fn trace_entry(p: &mut Pickler, e: &Entry) {
    p.dict(|d| {
        d.entry("action", |p| p.str(e.action));
        d.entry("addr", |p| p.int(e.addr));
        d.entry("size", |p| p.int(e.size));
        d.entry("stream", |p| p.int(0));
        d.entry("time_us", |p| p.int(e.time_us.max(0) as u64));
        d.entry("frames", |p| frames(p, e.module, e.owner));
        d.entry("category", |p| p.str(e.owner.name()));
        d.entry("user_metadata", |p| p.str(e.stage));
    });
}

/// Wall-clock µs since the epoch of a monotonic time of process `ps`.
fn wall_us(ps: &ProcessSnapshot, t_ns: u64) -> i64 {
    (ps.wall_ns(t_ns) / 1000) as i64
}

fn oom_entry(p: &mut Pickler, ps: &ProcessSnapshot, f: &Failure) {
    p.dict(|d| {
        d.entry("action", |p| p.str("oom"));
        d.entry("addr", |p| p.int(0));
        d.entry("size", |p| p.int(f.requested_bytes));
        d.entry("device_free", |p| p.int(f.free_bytes.unwrap_or(0)));
        d.entry("stream", |p| p.int(0));
        d.entry("time_us", |p| p.int(wall_us(ps, f.t_ns).max(0) as u64));
        d.entry("frames", |p| frames(p, &f.module, f.owner));
        d.entry("category", |p| p.str(f.owner.name()));
        d.entry("user_metadata", |p| p.str(&f.stage));
    });
}

fn snapshot_marker(p: &mut Pickler, ps: &ProcessSnapshot, d: &DeviceSnapshot) {
    p.dict(|e| {
        e.entry("action", |p| p.str("snapshot"));
        e.entry("addr", |p| p.int(0));
        e.entry("size", |p| p.int(0));
        e.entry("stream", |p| p.int(0));
        e.entry("time_us", |p| {
            p.int(wall_us(ps, d.point.t_ns).max(0) as u64)
        });
        e.entry("frames", |p| p.list(|_| {}));
        e.entry("category", |p| p.str("unknown"));
        e.entry("user_metadata", |p| p.str(&d.point.stage));
    });
}

/// The trace of one device up to its point, ending with the snapshot marker when it has
/// anything.
fn trace(p: &mut Pickler, d: Option<(&ProcessSnapshot, &DeviceSnapshot)>) {
    p.list(|l| {
        let Some((ps, d)) = d else {
            return;
        };
        let mut failures = d.failures.iter().peekable();
        for h in &d.history {
            while let Some(f) = failures.next_if(|f| f.index < h.index) {
                l.item(|p| oom_entry(p, ps, f));
            }
            let actions: &[&str] = match h.action {
                Action::Alloc | Action::Map => &["segment_alloc", "alloc"],
                Action::Free | Action::Unmap => {
                    &["free_requested", "free_completed", "segment_free"]
                }
            };
            for &action in actions {
                let e = Entry {
                    action,
                    addr: h.addr,
                    size: h.bytes,
                    time_us: wall_us(ps, h.t_ns),
                    owner: h.owner,
                    module: &h.module,
                    stage: &h.stage,
                };
                l.item(|p| trace_entry(p, &e));
            }
        }
        for f in failures {
            l.item(|p| oom_entry(p, ps, f));
        }
        if !d.history.is_empty() || !d.failures.is_empty() || segments(d).next().is_some() {
            l.item(|p| snapshot_marker(p, ps, d));
        }
    });
}

/// One physical allocation live at the point.
struct Segment<'a> {
    addr: u64,
    size: u64,
    expandable: bool,
    owner: Owner,
    module: &'a str,
    /// PyTorch's `segment_pool_id`, when the journal records it.
    recorded_pool: Option<(u64, u64)>,
    /// The one written (see [`pool_id`]).
    pool: (u64, u64),
}

/// The pool id of a segment: the one the journal records (PyTorch's own, from the Python
/// hooks), else for graph-pool memory `(k, 0)` for the k-th capture window it was taken in,
/// else `(0, 0)`.
fn pool_id(
    ps: &ProcessSnapshot,
    d: &DeviceSnapshot,
    made_at: &BTreeMap<u64, usize>,
    s: &Segment,
) -> (u64, u64) {
    if let Some(p) = s.recorded_pool {
        return p;
    }
    if s.owner != Owner::TorchGraphPool {
        return (0, 0);
    }
    made_at
        .get(&s.addr)
        .and_then(|&i| ps.capture_at(d.device, i))
        .map_or((0, 0), |k| (k as u64, 0))
}

/// The record index that made each address live at the point (allocation or mapping).
fn made_at(d: &DeviceSnapshot) -> BTreeMap<u64, usize> {
    let mut out = BTreeMap::new();
    for h in &d.history {
        match h.action {
            Action::Alloc | Action::Map => {
                out.insert(h.addr, h.index);
            }
            Action::Free | Action::Unmap => {
                out.remove(&h.addr);
            }
        }
    }
    out
}

/// Segments of one device at its point: allocations at their address, VMM handles at each
/// of their mappings.
fn segments(d: &DeviceSnapshot) -> impl Iterator<Item = Segment<'_>> + '_ {
    d.allocations.iter().flat_map(|it| {
        let one = match it.kind {
            ItemKind::Alloc => Some(Segment {
                addr: it.address.unwrap_or(0),
                size: it.bytes,
                expandable: false,
                owner: it.owner,
                module: &it.module,
                recorded_pool: it.pool,
                pool: (0, 0),
            }),
            _ => None,
        };
        let mapped = it
            .mappings
            .iter()
            .filter(move |_| it.kind == ItemKind::Vmm)
            .map(move |m| Segment {
                addr: m.address,
                size: m.bytes,
                expandable: true,
                owner: it.owner,
                module: &it.module,
                recorded_pool: it.pool,
                pool: (0, 0),
            });
        one.into_iter().chain(mapped)
    })
}

fn segment(p: &mut Pickler, slot: usize, s: &Segment) {
    p.dict(|d| {
        d.entry("device", |p| p.int(slot as u64));
        d.entry("address", |p| p.int(s.addr));
        d.entry("total_size", |p| p.int(s.size));
        d.entry("allocated_size", |p| p.int(s.size));
        d.entry("active_size", |p| p.int(s.size));
        d.entry("requested_size", |p| p.int(s.size));
        d.entry("stream", |p| p.int(0));
        d.entry("segment_type", |p| p.str("large"));
        d.entry("segment_pool_id", |p| {
            p.tuple2(|p| p.int(s.pool.0), |p| p.int(s.pool.1))
        });
        d.entry("is_expandable", |p| p.bool(s.expandable));
        d.entry("frames", |p| frames(p, s.module, s.owner));
        d.entry("blocks", |p| {
            p.list(|l| {
                l.item(|p| {
                    p.dict(|b| {
                        b.entry("address", |p| p.int(s.addr));
                        b.entry("size", |p| p.int(s.size));
                        b.entry("requested_size", |p| p.int(s.size));
                        b.entry("state", |p| p.str("active_allocated"));
                        b.entry("frames", |p| frames(p, s.module, s.owner));
                    })
                })
            })
        });
    });
}

/// Which `device_traces` slot each (process, device) gets: its ordinal, unless an earlier
/// process already took it; then the next slot after the highest ordinal.
fn slots(processes: &[ProcessSnapshot]) -> (BTreeMap<(usize, i32), usize>, Vec<String>) {
    let max = processes
        .iter()
        .flat_map(|p| p.devices.iter().map(|d| d.device))
        .max()
        .unwrap_or(-1);
    let mut next = max.saturating_add(1).max(0) as usize;
    let mut taken = std::collections::BTreeSet::new();
    let mut out = BTreeMap::new();
    let mut notes = Vec::new();
    for (pi, p) in processes.iter().enumerate() {
        for d in p.devices.iter().filter(|d| d.device >= 0) {
            let mut slot = d.device as usize;
            if !taken.insert(slot) {
                slot = next;
                next += 1;
                taken.insert(slot);
                notes.push(format!(
                    "pid {} cuda:{} is device {slot} in the memory_viz file (another process used device {} too)",
                    p.pid, d.device, d.device
                ));
            }
            out.insert((pi, d.device), slot);
        }
    }
    (out, notes)
}

/// The pickled snapshot, and notes for humans (slots given to devices whose ordinal another
/// process already used).
pub fn render(s: &Snapshot) -> (Vec<u8>, Vec<String>) {
    let (slot_of, notes) = slots(&s.processes);
    let n_slots = slot_of.values().max().map_or(0, |m| m + 1);
    let mut by_slot: Vec<Option<(&ProcessSnapshot, &DeviceSnapshot)>> = vec![None; n_slots];
    for (pi, p) in s.processes.iter().enumerate() {
        for d in &p.devices {
            if let Some(&slot) = slot_of.get(&(pi, d.device)) {
                by_slot[slot] = Some((p, d));
            }
        }
    }
    let mut segs: Vec<(usize, Segment)> = Vec::new();
    for (slot, (ps, d)) in by_slot
        .iter()
        .enumerate()
        .filter_map(|(slot, x)| x.map(|x| (slot, x)))
    {
        let made = made_at(d);
        segs.extend(segments(d).map(|mut sg| {
            sg.pool = pool_id(ps, d, &made, &sg);
            (slot, sg)
        }));
    }
    segs.sort_by_key(|(slot, sg)| (*slot, sg.addr));
    let mut p = Pickler::new();
    p.dict(|root| {
        root.entry("segments", |p| {
            p.list(|l| {
                for (slot, sg) in &segs {
                    l.item(|p| segment(p, *slot, sg));
                }
            })
        });
        root.entry("device_traces", |p| {
            p.list(|l| {
                for d in &by_slot {
                    l.item(|p| trace(p, *d));
                }
            })
        });
        root.entry("allocator_settings", |p| p.dict(|_| {}));
    });
    (p.finish(), notes)
}
