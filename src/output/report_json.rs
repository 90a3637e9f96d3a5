//! `vramledger report --json`: the books as JSON, schema `vramledger.report/1`
//! (documented in docs/report-schema.md). Fields may be added; none is removed or renamed
//! without a new schema version.

use serde_json::{json, Map, Value};
use vramledger_format::Owner;

use crate::ledger::process::{DeviceBooks, LivePeak, Peak, ProcessBooks, StageRow};
use crate::ledger::{OwnerBytes, RunBooks};

/// The schema name and version.
pub const SCHEMA: &str = "vramledger.report/1";

fn owners(b: &OwnerBytes) -> Value {
    let m: Map<String, Value> = b
        .iter()
        .map(|(o, v)| (o.name().to_string(), json!(v)))
        .collect();
    Value::Object(m)
}

fn peak(p: &Peak) -> Value {
    json!({ "bytes": p.bytes, "stage": p.stage, "t_ns": p.t_ns })
}

fn live_peak(lp: &LivePeak) -> Value {
    json!({ "live_bytes": lp.live, "peak_bytes": lp.peak })
}

fn stage(s: &StageRow) -> Value {
    json!({
        "name": s.name,
        "start_t_ns": s.start_t_ns,
        "end_t_ns": s.end_t_ns,
        "start_free_bytes": s.start_free,
        "start_free_source": s.start_source.name(),
        "end_free_bytes": s.end_free,
        "end_free_source": s.end_source.name(),
        "device_delta_bytes": s.device_delta,
        "by_owner": owners(&s.by_owner),
        "unattributed_bytes": s.by_owner.get(Owner::Unattributed),
        "engine": {
            "event": s.engine.event,
            "avail_mem_gib": s.engine.avail_mem_gib_at_start,
            "mem_usage_gib": s.engine.mem_usage_gib,
            "line": s.engine.end_line,
            "start_line": s.engine.start_line,
        },
        "start_set_by": s.start_set_by.name(),
        "start_set_by_detail": s.start_detail,
        "start_recorded": s.start_recorded,
        "end_set_by": s.end_set_by.name(),
        "end_set_by_detail": s.end_detail,
    })
}

fn device(d: &DeviceBooks) -> Value {
    let mut live = d.live_at_end;
    live.set(Owner::Unattributed, 0);
    let by_owner_peaks: Map<String, Value> = d
        .peak_by_owner
        .iter()
        .map(|(o, p)| (o.name().to_string(), peak(p)))
        .collect();
    json!({
        "device": d.device,
        "stages": d.stages.iter().map(stage).collect::<Vec<_>>(),
        "live_at_end": { "by_owner": owners(&live), "total_bytes": live.hooked() },
        "peak": { "total": peak(&d.peak_total), "by_owner": by_owner_peaks },
        "reconciliation": {
            "start_free_bytes": d.start_free,
            "end_free_bytes": d.end_free,
            "sum_stage_deltas_bytes": d.sum_deltas(),
            "unattributed_bytes": d.unattributed(),
            "balanced": d.balanced(),
        },
        "modules": d.modules.iter().map(|m| json!({
            "module": m.module,
            "owner": m.owner.map(|o| o.name()),
            "live_bytes": m.live,
            "peak_bytes": m.peak,
            "allocated_bytes": m.allocated,
        })).collect::<Vec<_>>(),
    })
}

fn process(p: &ProcessBooks) -> Value {
    json!({
        "journal": p.path,
        "host": p.host,
        "pid": p.pid,
        "ppid": p.ppid,
        "run_id": p.run_id,
        "cmdline": p.cmdline,
        "rank": p.rank,
        "rank_tag": p.rank_tag.map(|r| json!({"tp": r.tp, "pp": r.pp, "dp": r.dp, "ep": r.ep})),
        "events": p.events,
        "devices": p.devices.iter().map(device).collect::<Vec<_>>(),
        "host_pinned": live_peak(&p.host_pinned),
        "managed": live_peak(&p.managed),
        "virtual_reserved": live_peak(&p.virtual_reserved),
        "peer_imported": live_peak(&p.peer_imported),
        "touched_gpu": !p.never_touched_gpu(),
        "torch_pools": super::pools_report::json(&p.torch_pools),
    })
}

/// The whole report.
pub fn render(run: &RunBooks) -> Value {
    let idle: Vec<&ProcessBooks> = run
        .processes
        .iter()
        .filter(|p| p.never_touched_gpu())
        .collect();
    json!({
        "schema": SCHEMA,
        "processes": run.processes.iter().map(process).collect::<Vec<_>>(),
        "processes_without_gpu": {
            "count": idle.len(),
            "pids": idle.iter().map(|p| p.pid).collect::<Vec<_>>(),
        },
        "cross_rank": {
            "stages": run.cross_rank.iter().map(|s| json!({
                "name": s.name,
                "min_free_bytes": s.min_free,
                "ranks": s.ranks.iter().map(|r| json!({
                    "host": r.host, "pid": r.pid, "rank": r.rank, "device": r.device,
                    "free_bytes": r.free, "unbalanced": r.unbalanced,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        },
        "warnings": run.warnings,
    })
}
