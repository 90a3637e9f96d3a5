//! `vramledger report`: the books as readable tables (GiB with the unit shown, or bytes).

use std::fmt::Write;

use vramledger_format::Owner;

use crate::ledger::boundaries::SetBy;
use crate::ledger::process::{DeviceBooks, ProcessBooks, StageRow};
use crate::ledger::{RunBooks, REPORT_OWNERS};
use crate::output::terminal_text::escaped;

/// How numbers are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    Gib,
    Bytes,
}

fn amount(v: i64, units: Units) -> String {
    match units {
        Units::Bytes => v.to_string(),
        Units::Gib => format!("{:.3}", v as f64 / (1u64 << 30) as f64),
    }
}

fn opt(v: Option<u64>, units: Units) -> String {
    v.map_or_else(|| "?".to_string(), |v| amount(v as i64, units))
}

/// An owner's column: its full name (as in JSON, HTML and budgets), at least `w` wide.
fn col(o: Owner, w: usize) -> usize {
    w.max(o.name().len())
}

fn device_table(out: &mut String, d: &DeviceBooks, units: Units) {
    let unit = if units == Units::Gib { "GiB" } else { "bytes" };
    let w = if units == Units::Gib { 10 } else { 14 };
    let _ = writeln!(
        out,
        "  device {} ({unit}; delta = free at stage start − free at stage end)",
        d.device
    );
    let mut head = format!("  {:<26} {:>w$}", "stage", "delta");
    for o in REPORT_OWNERS {
        head.push_str(&format!(" {:>cw$}", o.name(), cw = col(o, w)));
    }
    head.push_str(&format!(" {:>w$}  {:<6}  engine", "free@end", "set by"));
    let _ = writeln!(out, "{head}");
    for s in &d.stages {
        let mut row = format!(
            "  {:<26} {:>w$}",
            truncate(&escaped(&s.name), 26),
            amount(s.device_delta, units)
        );
        for o in REPORT_OWNERS {
            let cw = col(o, w);
            row.push_str(&format!(" {:>cw$}", amount(s.by_owner.get(o), units)));
        }
        row.push_str(&format!(
            " {:>w$}  {:<6}",
            opt(s.end_free, units),
            set_by(s.start_set_by)
        ));
        if let Some(u) = s.engine.mem_usage_gib {
            let diff = s.device_delta as f64 / (1u64 << 30) as f64 - u;
            row.push_str(&format!("  mem usage={u:.2} GB ({diff:+.3} GiB)"));
        }
        let _ = writeln!(out, "{}", row.trim_end());
    }
    placed_boundaries(out, &d.stages);
    let mut live = d.live_at_end;
    live.set(Owner::Unattributed, 0);
    let mut row = format!(
        "  {:<26} {:>w$}",
        "live at end (hooked)",
        amount(live.hooked(), units)
    );
    for o in REPORT_OWNERS {
        let cw = col(o, w);
        row.push_str(&format!(" {:>cw$}", amount(live.get(o), units)));
    }
    let _ = writeln!(out, "{row}");
    let balanced = if d.balanced() {
        "balanced"
    } else {
        "NOT BALANCED"
    };
    let _ = writeln!(
        out,
        "  reconciliation: start free {} = Σ stage deltas {} + end free {}  [{balanced}]; unattributed {}",
        opt(d.start_free, units),
        amount(d.sum_deltas(), units),
        opt(d.end_free, units),
        amount(d.unattributed(), units),
    );
    let _ = writeln!(
        out,
        "  peak (hooked): {} in {}",
        amount(d.peak_total.bytes, units),
        escaped(&d.peak_total.stage)
    );
    let peaks: Vec<String> = d
        .peak_by_owner
        .iter()
        .filter(|(_, p)| p.bytes > 0)
        .map(|(o, p)| {
            let stage = escaped(&p.stage);
            format!("{} {} ({stage})", o.name(), amount(p.bytes, units))
        })
        .collect();
    if !peaks.is_empty() {
        let _ = writeln!(out, "  peak by owner: {}", peaks.join(", "));
    }
    let mods: Vec<String> = d
        .modules
        .iter()
        .take(8)
        .map(|m| {
            format!(
                "{} [{}] live {} peak {}",
                if m.module.is_empty() {
                    "?".into()
                } else {
                    escaped(&m.module)
                },
                m.owner.map_or("-", |o| o.name()),
                amount(m.live, units),
                amount(m.peak, units)
            )
        })
        .collect();
    if !mods.is_empty() {
        let _ = writeln!(out, "  top modules: {}", mods.join("; "));
    }
}

/// The "set by" column: what opened the stage.
fn set_by(s: SetBy) -> &'static str {
    match s {
        SetBy::Implicit | SetBy::EndOfJournal => "-",
        SetBy::EngineLine => "line",
        SetBy::ApiEvent => "api",
        SetBy::ExplicitMark => "mark",
        SetBy::RuleFile => "rule",
    }
}

/// One line naming the boundaries no stage record opened (API events, a printed duration).
fn placed_boundaries(out: &mut String, stages: &[StageRow]) {
    let placed: Vec<String> = stages
        .iter()
        .filter(|s| !s.start_recorded && s.start_set_by != SetBy::Implicit)
        .map(|s| {
            let detail = truncate(&escaped(&s.start_detail), 140);
            format!("{} at {detail}", escaped(&s.name))
        })
        .collect();
    if !placed.is_empty() {
        let _ = writeln!(out, "  boundaries no line marked: {}", placed.join("; "));
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

fn process(out: &mut String, p: &ProcessBooks, units: Units) {
    let rank = p.rank.map_or_else(String::new, |r| format!(" rank {r}"));
    let _ = writeln!(
        out,
        "process {} on {}{rank}: {}",
        p.pid,
        escaped(&p.host),
        truncate(&escaped(&p.cmdline), 100)
    );
    if p.devices.is_empty() {
        let _ = writeln!(out, "  (no device memory recorded)");
    }
    for d in &p.devices {
        device_table(out, d, units);
    }
    super::pools_report::text(out, &p.torch_pools, &|v| amount(v, units));
    for (what, lp) in p.apart() {
        if lp.peak > 0 {
            let _ = writeln!(
                out,
                "  {what}: live {} peak {} (not VRAM)",
                amount(lp.live, units),
                amount(lp.peak, units)
            );
        }
    }
    let _ = writeln!(out);
}

/// The whole report.
pub fn render(run: &RunBooks, units: Units) -> String {
    let mut out = String::new();
    let (idle, used): (Vec<&ProcessBooks>, Vec<&ProcessBooks>) =
        run.processes.iter().partition(|p| p.never_touched_gpu());
    for p in used {
        process(&mut out, p, units);
    }
    if !idle.is_empty() {
        let who: Vec<String> = idle
            .iter()
            .map(|p| format!("{} {}", p.pid, truncate(&escaped(&p.cmdline), 60)))
            .collect();
        let _ = writeln!(
            out,
            "{} never touched the GPU (no device or pinned memory): {}",
            if idle.len() == 1 {
                "1 process".to_string()
            } else {
                format!("{} processes", idle.len())
            },
            who.join("; ")
        );
        let _ = writeln!(out);
    }
    if !run.cross_rank.is_empty() {
        let _ = writeln!(
            out,
            "across ranks (free memory at the end of each stage; SGLang sizes from the minimum)"
        );
        for s in &run.cross_rank {
            let ranks: Vec<String> = s
                .ranks
                .iter()
                .map(|r| {
                    format!(
                        "rank {} {}{}",
                        r.rank,
                        amount(r.free as i64, units),
                        if r.unbalanced { " UNBALANCED" } else { "" }
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "  {:<26} min {}  [{}]",
                escaped(&s.name),
                amount(s.min_free as i64, units),
                ranks.join(", ")
            );
        }
    }
    out
}
