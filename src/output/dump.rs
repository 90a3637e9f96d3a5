//! `vramledger dump`: every record of a journal as one JSON object per line (NDJSON).
//!
//! The first line is `{"kind":"header","pairs":{...}}`; then one object per record with
//! `kind`, `t_ns`, `tid`, `device`, `stage` (name), `module` (file name), `owner`, `mem`,
//! `api`, `result`, `flags`, `addr`, `size`, `handle`, `arg0`..`arg2` and `text`.

use serde_json::{json, Map, Value};
use vramledger_format::{Kind, MemKind, Owner};

use crate::journal::Journal;

/// The header line.
pub fn header_line(j: &Journal) -> Value {
    let pairs: Map<String, Value> = j
        .header
        .pairs
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    json!({ "kind": "header", "pairs": pairs })
}

/// One record as JSON.
pub fn record_line(j: &Journal, e: &vramledger_format::Event) -> Value {
    let kind = e.kind().map(Kind::name).map(str::to_string).unwrap_or_else(|| format!("unknown_{}", e.kind));
    json!({
        "kind": kind,
        "t_ns": e.t_ns,
        "tid": e.tid,
        "device": e.device,
        "stage": j.stage_name(e.stage),
        "module": if e.kind() == Some(Kind::Module) { e.text.rsplit('/').next().unwrap_or("") } else { j.module_name(e.module) },
        "owner": Owner::from_repr(e.owner).map_or("none", Owner::name),
        "mem": MemKind::from_repr(e.mem).map_or("device", MemKind::name),
        "api": e.api().map_or("-", |a| a.name()),
        "result": e.result,
        "flags": e.flags,
        "addr": e.addr,
        "size": e.size,
        "handle": e.handle,
        "arg0": e.arg0,
        "arg1": e.arg1,
        "arg2": e.arg2,
        "text": e.text,
    })
}

/// The whole dump as text.
pub fn render(j: &Journal) -> String {
    let mut out = String::new();
    out.push_str(&header_line(j).to_string());
    out.push('\n');
    for e in &j.events {
        out.push_str(&record_line(j, e).to_string());
        out.push('\n');
    }
    out
}
