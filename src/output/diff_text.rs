//! `vramledger diff`: the differences for humans, largest absolute change first (sizes with
//! their unit, or exact bytes with `--bytes`).

use std::fmt::Write;

use crate::diff::{Change, Diff, Presence, ProcPair};
use crate::output::report_text::Units;
use crate::output::terminal_text::escaped;
use crate::size_arg::human_bytes;

/// A size as shown (`1.500 GiB` / `12.0 MiB`, or bytes).
pub fn size(v: i64, units: Units) -> String {
    match units {
        Units::Gib => human_bytes(v),
        Units::Bytes => format!("{v} B"),
    }
}

/// A signed change as shown (`+12.0 MiB`).
pub fn signed(v: i64, units: Units) -> String {
    let s = size(v, units);
    if v > 0 {
        format!("+{s}")
    } else {
        s
    }
}

fn side(v: Option<i64>, units: Units) -> String {
    v.map_or_else(|| "—".to_string(), |v| size(v, units))
}

/// `A → B`, with `—` for an absent side.
pub fn a_to_b(c: &Change, units: Units) -> String {
    format!("{} → {}", side(c.a, units), side(c.b, units))
}

/// A device's label as shown: process labels come from command lines, escaped for a terminal.
pub fn device_text(d: &Diff, i: usize) -> String {
    escaped(&d.device_label(i)).into_owned()
}

/// A stage's label as shown, escaped for a terminal.
pub fn stage_text(stage: &str, occurrence: usize) -> String {
    escaped(&Diff::stage_label(stage, occurrence)).into_owned()
}

fn secs(ns: i64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

fn describe(p: &ProcPair) -> String {
    let pid = |r: &Option<crate::diff::ProcRef>| {
        r.as_ref().map_or("—".to_string(), |r| r.pid.to_string())
    };
    let label = escaped(&p.label);
    match p.matched_by {
        "rank" => format!("{label} (pid {} → {})", pid(&p.a), pid(&p.b)),
        "cmdline" => format!("{label} (same command line)"),
        "order" => format!("{label} (by order)"),
        _ => label.into_owned(),
    }
}

fn presence_note(p: Presence) -> &'static str {
    match p {
        Presence::Both => "",
        Presence::OnlyA => " (A only)",
        Presence::OnlyB => " (B only)",
    }
}

/// The whole diff.
pub fn render(d: &Diff, units: Units) -> String {
    let mut out = String::new();
    sides(&mut out, d);
    // Column widths from what is shown (escaped).
    let dw = (0..d.devices.len())
        .map(|i| device_text(d, i).chars().count())
        .max()
        .unwrap_or(0);
    let sw = d
        .stages
        .iter()
        .map(|s| stage_text(&s.stage, s.occurrence).chars().count())
        .max()
        .unwrap_or(0)
        .min(40);

    let cols = Columns { dw, sw };
    figures(&mut out, d, &cols, units);
    stages(&mut out, d, &cols, units);
    devices(&mut out, d, units);
    modules(&mut out, d, units);
    out
}

/// Widths of the device and stage columns, from what is shown.
struct Columns {
    dw: usize,
    sw: usize,
}

/// The two sides and how their processes were matched.
fn sides(out: &mut String, d: &Diff) {
    let _ = writeln!(
        out,
        "vramledger diff\n  A: {} ({}, {})\n  B: {} ({}, {})",
        escaped(&d.a.source),
        d.a.kind,
        super::count(d.a.processes, "process", "processes"),
        escaped(&d.b.source),
        d.b.kind,
        super::count(d.b.processes, "process", "processes")
    );
    let matched: Vec<String> = d
        .processes
        .iter()
        .filter(|p| p.a.is_some() && p.b.is_some())
        .map(describe)
        .collect();
    if !matched.is_empty() {
        let _ = writeln!(out, "  matched: {}", matched.join(", "));
    }
    for (which, pick) in [("A", Presence::OnlyA), ("B", Presence::OnlyB)] {
        let only: Vec<String> = d
            .processes
            .iter()
            .filter(|p| match pick {
                Presence::OnlyA => p.b.is_none(),
                _ => p.a.is_none(),
            })
            .map(|p| {
                let r = p.a.as_ref().or(p.b.as_ref()).expect("one side");
                format!("pid {} ({})", r.pid, truncate(&escaped(&r.cmdline), 60))
            })
            .collect();
        if !only.is_empty() {
            let _ = writeln!(out, "  only in {which}: {}", only.join(", "));
        }
    }
}

/// Owner × stage × device: every figure that changed, largest change first.
fn figures(out: &mut String, d: &Diff, cols: &Columns, units: Units) {
    let Columns { dw, sw } = *cols;
    let changed: Vec<_> = d.figures.iter().filter(|f| f.bytes.change() != 0).collect();
    let _ = writeln!(
        out,
        "\nstage × owner × device (B − A), largest change first:"
    );
    if changed.is_empty() {
        let _ = writeln!(out, "  no figure changed");
    }
    let w = if units == Units::Bytes { 16 } else { 12 };
    for f in &changed {
        let stage = stage_text(&f.stage, f.occurrence);
        let _ = writeln!(
            out,
            "  {:>w$}  {:<dw$}  {:<sw$}  {:<16}  {}",
            signed(f.bytes.change(), units),
            device_text(d, f.device),
            truncate(&stage, sw),
            f.owner.name(),
            a_to_b(&f.bytes, units),
        );
    }
    let unchanged = d.figures.len() - changed.len();
    if unchanged > 0 {
        let _ = writeln!(out, "  ({unchanged} figures unchanged)");
    }
}

/// Stages: presence, device delta and duration.
fn stages(out: &mut String, d: &Diff, cols: &Columns, units: Units) {
    let Columns { dw, sw } = *cols;
    let mut stages: Vec<_> = d
        .stages
        .iter()
        .filter(|s| s.presence != Presence::Both || s.duration_ns.changed())
        .collect();
    stages.sort_by_key(|s| std::cmp::Reverse(s.duration_ns.change().unsigned_abs()));
    if !stages.is_empty() {
        let _ = writeln!(out, "\nstage durations (B − A), largest change first:");
        for s in stages {
            let dur = |v: Option<i64>| v.map_or_else(|| "—".to_string(), secs);
            let change = s.duration_ns.change();
            let _ = writeln!(
                out,
                "  {:>10}  {:<dw$}  {:<sw$}  {} → {}   delta {}{}",
                if s.duration_ns.a.is_some() && s.duration_ns.b.is_some() {
                    format!("{}{}", if change > 0 { "+" } else { "" }, secs(change))
                } else {
                    String::new()
                },
                device_text(d, s.device),
                truncate(&stage_text(&s.stage, s.occurrence), sw),
                dur(s.duration_ns.a),
                dur(s.duration_ns.b),
                a_to_b(&s.device_delta, units),
                presence_note(s.presence),
            );
        }
    }
}

/// Live at end, peaks, free memory, per device.
fn devices(out: &mut String, d: &Diff, units: Units) {
    let mut lines = Vec::new();
    for (di, dev) in d.devices.iter().enumerate() {
        let one_sided =
            d.processes[dev.process].a.is_none() || d.processes[dev.process].b.is_none();
        let head = format!(
            "{}{}",
            device_text(d, di),
            if one_sided {
                ""
            } else {
                presence_note(dev.presence)
            }
        );
        let mut parts = Vec::new();
        if dev.live_total.changed() {
            let owners: Vec<String> = dev
                .live
                .iter()
                .filter(|(_, c)| c.change() != 0)
                .map(|(o, c)| format!("{} {}", o.name(), signed(c.change(), units)))
                .collect();
            parts.push(format!(
                "live at end {} ({}){}",
                a_to_b(&dev.live_total, units),
                signed(dev.live_total.change(), units),
                if owners.is_empty() {
                    String::new()
                } else {
                    format!(": {}", owners.join(", "))
                }
            ));
        }
        let peak_line = |what: &str, p: &crate::diff::PeakDiff| {
            let b = p.bytes();
            let stage = |x: &Option<crate::report_input::PeakFig>| {
                x.as_ref().map_or_else(String::new, |p| {
                    if p.stage.is_empty() {
                        String::new()
                    } else {
                        format!(" in {}", escaped(&p.stage))
                    }
                })
            };
            format!(
                "{what} {}{} → {}{} ({})",
                side(b.a, units),
                stage(&p.a),
                side(b.b, units),
                stage(&p.b),
                signed(b.change(), units)
            )
        };
        if dev.peak_total.bytes().changed() {
            parts.push(peak_line("peak", &dev.peak_total));
        }
        for (o, p) in &dev.peak_by_owner {
            if p.bytes().changed() {
                parts.push(peak_line(&format!("peak {}", o.name()), p));
            }
        }
        if dev.end_free.changed() {
            parts.push(format!(
                "free at end {} ({})",
                a_to_b(&dev.end_free, units),
                signed(dev.end_free.change(), units)
            ));
        }
        if !parts.is_empty() {
            lines.push(format!("  {head}:\n    {}", parts.join("\n    ")));
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(out, "\nlive at end, peaks, free memory (B − A):");
        for l in lines {
            let _ = writeln!(out, "{l}");
        }
    }
}

/// Modules that appeared, vanished or changed.
fn modules(out: &mut String, d: &Diff, units: Units) {
    let mut mods = Vec::new();
    for (di, dev) in d.devices.iter().enumerate() {
        for m in &dev.modules {
            let name = if m.module.is_empty() {
                "?".into()
            } else {
                escaped(&m.module)
            };
            let owner = escaped(&m.owner);
            let what = match m.presence {
                Presence::OnlyB => {
                    format!("appeared  {name} [{owner}] peak {}", side(m.peak.b, units))
                }
                Presence::OnlyA => {
                    format!("vanished  {name} [{owner}] peak {}", side(m.peak.a, units))
                }
                Presence::Both => format!(
                    "changed   {name} [{owner}] peak {} ({}), live {}",
                    a_to_b(&m.peak, units),
                    signed(m.peak.change(), units),
                    a_to_b(&m.live, units)
                ),
            };
            mods.push(format!("  {}: {what}", device_text(d, di)));
        }
    }
    if !mods.is_empty() {
        let _ = writeln!(out, "\nmodules:");
        for m in mods {
            let _ = writeln!(out, "{m}");
        }
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}
