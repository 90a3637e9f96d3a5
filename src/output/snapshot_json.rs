//! `vramledger snapshot --format json`: schema `vramledger.snapshot/1` (documented in
//! docs/snapshot-schema.md). Fields may be added; none is removed or renamed without a new
//! schema version.

use serde_json::{json, Map, Value};

use crate::ledger::OwnerBytes;
use crate::snapshot::{
    ContextHeld, DeviceSnapshot, Failure, Item, Point, ProcessSnapshot, Reservation, Snapshot,
    SNAPSHOT_OWNERS,
};

/// The schema name and version.
pub const SCHEMA: &str = "vramledger.snapshot/1";

/// The snapshot as JSON.
pub fn render(s: &Snapshot) -> Value {
    let stage = match &s.at {
        crate::snapshot::At::Stage(name) => Value::from(name.as_str()),
        _ => Value::Null,
    };
    json!({
        "schema": SCHEMA,
        "at": { "mode": s.at.mode(), "stage": stage },
        "processes": s.processes.iter().map(process).collect::<Vec<_>>(),
        "skipped": s.skipped.iter().map(|k| json!({
            "journal": k.journal, "pid": k.pid, "reason": k.reason,
        })).collect::<Vec<_>>(),
        "warnings": s.warnings,
    })
}

/// Bytes per snapshot owner (the six keys, always all of them).
pub fn owners(b: &OwnerBytes) -> Value {
    let m: Map<String, Value> = SNAPSHOT_OWNERS
        .iter()
        .map(|&o| (o.name().to_string(), json!(b.get(o))))
        .collect();
    Value::Object(m)
}

fn point(p: &Point) -> Value {
    json!({ "events": p.events, "t_ns": p.t_ns, "stage": p.stage })
}

fn item(it: &Item) -> Value {
    json!({
        "kind": it.kind.name(),
        "address": it.address,
        "handle": it.handle,
        "device": it.device,
        "bytes": it.bytes,
        "owner": it.owner.name(),
        "mem": it.mem.name(),
        "module": it.module,
        "stage": it.stage,
        "t_ns": it.t_ns,
        "mappings": it.mappings.iter().map(|m| json!({
            "address": m.address, "bytes": m.bytes, "offset": m.offset,
        })).collect::<Vec<_>>(),
    })
}

fn items(list: &[Item]) -> Value {
    json!({
        "total_bytes": list.iter().fold(0u64, |a, i| a.saturating_add(i.bytes)),
        "allocations": list.iter().map(item).collect::<Vec<_>>(),
    })
}

fn reservation(r: &Reservation) -> Value {
    json!({
        "address": r.address,
        "bytes": r.bytes,
        "device": r.device,
        "owner": r.owner.name(),
        "module": r.module,
        "stage": r.stage,
        "t_ns": r.t_ns,
    })
}

fn context(c: &Option<ContextHeld>) -> Value {
    match c {
        Some(c) => json!({ "bytes": c.bytes, "stage": c.stage, "t_ns": c.t_ns }),
        None => Value::Null,
    }
}

/// A failed allocation.
pub fn failure(f: &Failure) -> Value {
    json!({
        "device": f.device,
        "requested_bytes": f.requested_bytes,
        "owner": f.owner.name(),
        "module": f.module,
        "api": f.api,
        "result": f.result,
        "stage": f.stage,
        "t_ns": f.t_ns,
        "free_bytes": f.free_bytes,
    })
}

fn device(d: &DeviceSnapshot) -> Value {
    json!({
        "device": d.device,
        "point": point(&d.point),
        "peak_bytes": d.peak_bytes,
        "total_bytes": d.total_bytes(),
        "by_owner": owners(&d.by_owner),
        "by_stage": d.by_stage.iter().map(|s| json!({
            "stage": s.stage,
            "total_bytes": s.by_owner.hooked(),
            "by_owner": owners(&s.by_owner),
        })).collect::<Vec<_>>(),
        "context": context(&d.context),
        "free_bytes": d.free_bytes,
        "allocations": d.allocations.iter().map(item).collect::<Vec<_>>(),
    })
}

fn process(p: &ProcessSnapshot) -> Value {
    json!({
        "journal": p.journal,
        "host": p.host,
        "pid": p.pid,
        "run_id": p.run_id,
        "rank": p.rank,
        "point": point(&p.point),
        "oom": p.oom.as_ref().map(failure),
        "devices": p.devices.iter().map(device).collect::<Vec<_>>(),
        "host_pinned": items(&p.host_pinned),
        "managed": items(&p.managed),
        "peer": items(&p.peer),
        "virtual_reserved": {
            "total_bytes": p.reservations.iter().fold(0u64, |a, r| a.saturating_add(r.bytes)),
            "reservations": p.reservations.iter().map(reservation).collect::<Vec<_>>(),
        },
    })
}
