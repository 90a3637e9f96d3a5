//! `vramledger dump`: every record of a journal as one JSON object per line (NDJSON).
//!
//! The first line is `{"kind":"header","pairs":{...}}`; then one object per record with
//! `kind`, `t_ns`, `tid`, `device`, `stage` (name), `module` (file name), `owner`, `mem`,
//! `api`, `result`, `flags`, `addr`, `size`, `handle`, `arg0`..`arg2` and `text`.

use serde_json::{json, Map, Value};
use vramledger_format::{Kind, MemKind, Owner};

use crate::journal::Journal;
use crate::output::terminal_text::escaped;

/// The memory kind a record is about (address-space records are virtual whatever they say).
fn mem_name(e: &vramledger_format::Event) -> &'static str {
    match e.kind() {
        Some(Kind::VaReserve | Kind::VaFree) => MemKind::Virtual.name(),
        _ => MemKind::from_repr(e.mem).map_or("device", MemKind::name),
    }
}

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
    let kind = e
        .kind()
        .map(Kind::name)
        .map(str::to_string)
        .unwrap_or_else(|| format!("unknown_{}", e.kind));
    json!({
        "kind": kind,
        "t_ns": e.t_ns,
        "tid": e.tid,
        "device": e.device,
        "stage": j.stage_name(e.stage),
        "module": if e.kind() == Some(Kind::Module) { e.text.rsplit('/').next().unwrap_or("") } else { j.module_name(e.module) },
        "owner": Owner::from_repr(e.owner).map_or("none", Owner::name),
        "mem": mem_name(e),
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

/// Bytes as MiB with two decimals, for humans.
fn mib(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// One record as a line for humans: time, kind, entry point, device, bytes, owner, module.
/// The journal's text in it (module path, stage name, warning) is escaped for a terminal.
pub fn text_line(j: &Journal, e: &vramledger_format::Event, t0: u64) -> String {
    let kind = e.kind().map_or("unknown", Kind::name);
    let secs = e.t_ns.saturating_sub(t0) as f64 / 1e9;
    let owner = Owner::from_repr(e.owner).map_or("none", Owner::name);
    let what = match e.kind() {
        Some(Kind::Module) => e.text.clone(),
        Some(Kind::Stage) => format!("-> {}", e.text.lines().next().unwrap_or("")),
        Some(Kind::MemInfo) => format!("free {} of {}", mib(e.arg0), mib(e.arg1)),
        Some(Kind::NvmlSample) => format!("nvml free {} of {}", mib(e.arg0), mib(e.arg1)),
        Some(Kind::PoolSample) => format!("pool reserved {} used {}", mib(e.arg0), mib(e.arg1)),
        Some(Kind::Warning) => e.text.clone(),
        Some(Kind::PoolBegin | Kind::PoolEnd | Kind::TorchSegment | Kind::PoolHooks) => {
            super::pools_report::dump_text(e)
        }
        _ => format!(
            "{} {} {} {}{}",
            mib(e.size),
            mem_name(e),
            owner,
            j.module_name(e.module),
            super::pools_report::pool_suffix(e)
        ),
    };
    let rc = if e.result != 0 {
        format!(" rc={}", e.result)
    } else {
        String::new()
    };
    format!(
        "{secs:>10.6}s {:>6} {kind:<13} {:<30} dev {:>2}  {}{rc}  [{}]",
        e.tid,
        e.api().map_or("-", |a| a.name()),
        e.device,
        escaped(&what),
        escaped(j.stage_name(e.stage))
    )
}

/// The whole journal as lines for humans.
pub fn render_text(j: &Journal) -> String {
    let t0 = j
        .header
        .get("start_mono_ns")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut out = String::new();
    for (k, v) in &j.header.pairs {
        let v = v.replace('\0', " ");
        out.push_str(&format!("# {} = {}\n", escaped(k), escaped(&v)));
    }
    for e in &j.events {
        out.push_str(&text_line(j, e, t0));
        out.push('\n');
    }
    out
}
