//! `vramledger snapshot --format json`: schema `vramledger.snapshot/1` (documented in
//! docs/snapshot-schema.md). Fields may be added; none is removed or renamed without a new
//! schema version.
//!
//! Written straight from the snapshot, with no `serde_json::Value` tree in between: a snapshot
//! at the peak of a long run holds ~10^5 allocations, and a tree of them took more time and
//! memory than the replay that found them. Every object's keys are in byte order, as
//! `serde_json`'s `Map` writes them, so the output is what rendering a tree gave.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Value};

use crate::ledger::OwnerBytes;
use crate::snapshot::{
    ContextHeld, DeviceSnapshot, Failure, Item, Mapping, Point, ProcessSnapshot, Reservation,
    Skipped, Snapshot, StageTotal, SNAPSHOT_OWNERS,
};

/// The schema name and version.
pub const SCHEMA: &str = "vramledger.snapshot/1";

/// The snapshot as pretty-printed JSON, with a final newline. Writing into memory fails only
/// for a value JSON cannot hold (none here can); the error says so rather than half a file.
pub fn render(s: &Snapshot) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::pretty(&mut out);
    Json(s)
        .serialize(&mut ser)
        .map_err(|e| format!("the snapshot could not be written as JSON: {e}"))?;
    out.push(b'\n');
    Ok(out)
}

/// Bytes per snapshot owner (the six keys, always all of them), as a tree (for the Perfetto
/// trace, which builds one): what [`Owners`] writes.
pub fn owners(b: &OwnerBytes) -> Value {
    // Six integers under string keys: nothing in them can fail to be a JSON value.
    serde_json::to_value(Owners(b)).unwrap_or(Value::Null)
}

/// One value written as JSON.
struct Json<'a, T>(&'a T);

/// A list written as a JSON array, each element as `Json` writes it.
struct List<'a, T>(&'a [T]);

impl<'a, T> Serialize for List<'a, T>
where
    Json<'a, T>: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(Json))
    }
}

/// `{ "k": v, ... }` with the keys as given (each call lists them in byte order).
macro_rules! object {
    ($s:expr, { $($k:literal : $v:expr),* $(,)? }) => {{
        let mut m = $s.serialize_map(None)?;
        $( m.serialize_entry($k, &$v)?; )*
        m.end()
    }};
}

fn total<T>(list: &[T], bytes: fn(&T) -> u64) -> u64 {
    list.iter().fold(0u64, |a, x| a.saturating_add(bytes(x)))
}

impl Serialize for Json<'_, Snapshot> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let snap = self.0;
        let stage = match &snap.at {
            crate::snapshot::At::Stage(name) => Some(name.as_str()),
            _ => None,
        };
        object!(s, {
            "at": json!({ "mode": snap.at.mode(), "stage": stage }),
            "processes": List(&snap.processes),
            "schema": SCHEMA,
            "skipped": List(&snap.skipped),
            "warnings": snap.warnings,
        })
    }
}

impl Serialize for Json<'_, Skipped> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let k = self.0;
        object!(s, { "journal": k.journal, "pid": k.pid, "reason": k.reason })
    }
}

/// Bytes per snapshot owner: the six keys, in byte order.
struct Owners<'a>(&'a OwnerBytes);

impl Serialize for Owners<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut names = SNAPSHOT_OWNERS;
        names.sort_unstable_by_key(|o| o.name());
        let mut m = s.serialize_map(Some(names.len()))?;
        for o in names {
            m.serialize_entry(o.name(), &self.0.get(o))?;
        }
        m.end()
    }
}

impl Serialize for Json<'_, Point> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.0;
        object!(s, { "events": p.events, "stage": p.stage, "t_ns": p.t_ns })
    }
}

impl Serialize for Json<'_, Item> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let it = self.0;
        object!(s, {
            "address": it.address,
            "bytes": it.bytes,
            "device": it.device,
            "handle": it.handle,
            "kind": it.kind.name(),
            "mappings": List(&it.mappings),
            "mem": it.mem.name(),
            "module": it.module,
            "owner": it.owner.name(),
            "stage": it.stage,
            "t_ns": it.t_ns,
        })
    }
}

impl Serialize for Json<'_, Mapping> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        object!(s, { "address": m.address, "bytes": m.bytes, "offset": m.offset })
    }
}

/// A process's list of one kind of memory under `key`, with its sum (`key` sorts before
/// `total_bytes`).
struct Summed<'a, T> {
    key: &'static str,
    list: &'a [T],
    bytes: fn(&T) -> u64,
}

impl<'a, T> Serialize for Summed<'a, T>
where
    Json<'a, T>: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry(self.key, &List(self.list))?;
        m.serialize_entry("total_bytes", &total(self.list, self.bytes))?;
        m.end()
    }
}

fn items(list: &[Item]) -> Summed<'_, Item> {
    Summed {
        key: "allocations",
        list,
        bytes: |i| i.bytes,
    }
}

impl Serialize for Json<'_, Reservation> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.0;
        object!(s, {
            "address": r.address,
            "bytes": r.bytes,
            "device": r.device,
            "module": r.module,
            "owner": r.owner.name(),
            "stage": r.stage,
            "t_ns": r.t_ns,
        })
    }
}

impl Serialize for Json<'_, ContextHeld> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        object!(s, { "bytes": c.bytes, "stage": c.stage, "t_ns": c.t_ns })
    }
}

impl Serialize for Json<'_, Failure> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = self.0;
        object!(s, {
            "api": f.api,
            "device": f.device,
            "free_bytes": f.free_bytes,
            "module": f.module,
            "owner": f.owner.name(),
            "requested_bytes": f.requested_bytes,
            "result": f.result,
            "stage": f.stage,
            "t_ns": f.t_ns,
        })
    }
}

impl Serialize for Json<'_, StageTotal> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        object!(s, {
            "by_owner": Owners(&t.by_owner),
            "stage": t.stage,
            "total_bytes": t.by_owner.hooked(),
        })
    }
}

impl Serialize for Json<'_, DeviceSnapshot> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let d = self.0;
        object!(s, {
            "allocations": List(&d.allocations),
            "by_owner": Owners(&d.by_owner),
            "by_stage": List(&d.by_stage),
            "context": d.context.as_ref().map(Json),
            "device": d.device,
            "free_bytes": d.free_bytes,
            "peak_bytes": d.peak_bytes,
            "point": Json(&d.point),
            "total_bytes": d.total_bytes(),
        })
    }
}

impl Serialize for Json<'_, ProcessSnapshot> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.0;
        object!(s, {
            "devices": List(&p.devices),
            "host": p.host,
            "host_pinned": items(&p.host_pinned),
            "journal": p.journal,
            "managed": items(&p.managed),
            "oom": p.oom.as_ref().map(Json),
            "peer": items(&p.peer),
            "pid": p.pid,
            "point": Json(&p.point),
            "rank": p.rank,
            "run_id": p.run_id,
            "virtual_reserved": Summed {
                key: "reservations",
                list: &p.reservations,
                bytes: |r| r.bytes,
            },
        })
    }
}
