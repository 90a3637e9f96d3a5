//! `vramledger diff --json`: schema `vramledger.diff/1` (documented in docs/diff-schema.md).
//! Fields may be added; none is removed or renamed without a new schema version.

use serde_json::{json, Value};

use crate::diff::{Change, Diff, PeakDiff, ProcRef};
use crate::report_input::PeakFig;

/// The schema name and version.
pub const SCHEMA: &str = "vramledger.diff/1";

fn change(c: &Change) -> Value {
    json!({ "a": c.a, "b": c.b, "change": c.change() })
}

fn peak_fig(p: &Option<PeakFig>) -> Value {
    p.as_ref().map_or(
        Value::Null,
        |p| json!({ "bytes": p.bytes, "stage": p.stage }),
    )
}

fn peak(p: &PeakDiff) -> Value {
    json!({ "a": peak_fig(&p.a), "b": peak_fig(&p.b), "change": p.bytes().change() })
}

fn proc_ref(r: &Option<ProcRef>) -> Value {
    r.as_ref().map_or(
        Value::Null,
        |r| json!({ "pid": r.pid, "rank": r.rank, "host": r.host, "cmdline": r.cmdline }),
    )
}

/// The whole diff.
pub fn render(d: &Diff) -> Value {
    let label = |i: usize| d.processes[i].label.clone();
    let ordinal = |i: usize| {
        let dev = &d.devices[i];
        dev.a_device.or(dev.b_device)
    };
    json!({
        "schema": SCHEMA,
        "a": { "source": d.a.source, "kind": d.a.kind, "processes": d.a.processes },
        "b": { "source": d.b.source, "kind": d.b.kind, "processes": d.b.processes },
        "processes": d.processes.iter().map(|p| json!({
            "label": p.label,
            "matched_by": p.matched_by,
            "a": proc_ref(&p.a),
            "b": proc_ref(&p.b),
        })).collect::<Vec<_>>(),
        "figures": d.figures.iter().filter(|f| f.bytes.change() != 0).map(|f| json!({
            "process": label(f.process),
            "device": ordinal(f.device),
            "stage": f.stage,
            "occurrence": f.occurrence,
            "owner": f.owner.name(),
            "a_bytes": f.bytes.a,
            "b_bytes": f.bytes.b,
            "change_bytes": f.bytes.change(),
        })).collect::<Vec<_>>(),
        "unchanged_figures": d.figures.iter().filter(|f| f.bytes.change() == 0).count(),
        "stages": d.stages.iter().map(|s| json!({
            "process": label(s.process),
            "device": ordinal(s.device),
            "stage": s.stage,
            "occurrence": s.occurrence,
            "in": s.presence.name(),
            "device_delta_bytes": change(&s.device_delta),
            "duration_ns": change(&s.duration_ns),
        })).collect::<Vec<_>>(),
        "devices": d.devices.iter().map(|dev| json!({
            "process": label(dev.process),
            "device": dev.a_device.or(dev.b_device),
            "a_device": dev.a_device,
            "b_device": dev.b_device,
            "in": dev.presence.name(),
            "live_at_end": {
                "by_owner": dev.live.iter()
                    .map(|(o, c)| (o.name().to_string(), change(c)))
                    .collect::<serde_json::Map<_, _>>(),
                "total_bytes": change(&dev.live_total),
            },
            "peak": {
                "total": peak(&dev.peak_total),
                "by_owner": dev.peak_by_owner.iter()
                    .map(|(o, p)| (o.name().to_string(), peak(p)))
                    .collect::<serde_json::Map<_, _>>(),
            },
            "start_free_bytes": change(&dev.start_free),
            "end_free_bytes": change(&dev.end_free),
            "modules": dev.modules.iter().map(|m| json!({
                "module": m.module,
                "owner": m.owner,
                "in": m.presence.name(),
                "live_bytes": change(&m.live),
                "peak_bytes": change(&m.peak),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
