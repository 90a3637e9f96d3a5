//! `vramledger report --html -o FILE`: the books as one self-contained HTML page (no script,
//! no external asset, no network), readable offline: per process and device, a stacked
//! timeline of memory by owner (inline SVG: x = time, y = bytes held per owner, stages as
//! shaded bands with their names), the stage × owner table, and the reconciliation line.

use std::collections::BTreeMap;
use std::fmt::Write;

use vramledger_format::Owner;

use crate::ledger::process::{DeviceBooks, ProcessBooks};
use crate::ledger::{RunBooks, REPORT_OWNERS};
use crate::output::report_text::Units;
use crate::timeline::DeviceTimeline;

use super::html_parts::{colour, duration, esc, GIB};
use super::html_timeline::timeline_svg;

fn amount(v: i64, units: Units) -> String {
    match units {
        Units::Bytes => v.to_string(),
        Units::Gib => format!("{:.3}", v as f64 / GIB),
    }
}

fn opt(v: Option<u64>, units: Units) -> String {
    v.map_or_else(|| "?".to_string(), |v| amount(v as i64, units))
}

fn unit_name(units: Units) -> &'static str {
    match units {
        Units::Gib => "GiB",
        Units::Bytes => "bytes",
    }
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:20px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:18px;margin:26px 0 2px;border-bottom:1px solid #ccc;padding-bottom:3px}
h3{font-size:15px;margin:14px 0 6px}
.meta,.cmd{color:#555;font-size:13px;margin:2px 0}
.cmd{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:12px;word-break:break-all}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}
th,td{padding:2px 8px;border-bottom:1px solid #e3e3e3;text-align:right;white-space:nowrap}
th{background:#f5f5f5;font-weight:600}
td:first-child,th:first-child{text-align:left}
td{font-variant-numeric:tabular-nums}
td.zero{color:#bbb}
td.engine,th.engine{text-align:left;color:#555}
tr.live td{border-top:2px solid #999;font-weight:600}
.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px;border:1px solid #0003}
p.recon{font-size:13px;margin:4px 0}
.ok{color:#1a7f37;font-weight:600}.bad{color:#c62828;font-weight:600}
p.small{font-size:12px;color:#444;margin:3px 0}
svg{display:block;margin:4px 0}
.chart{overflow-x:auto;max-width:100%}
svg.timeline{width:100%;max-width:1200px;min-width:560px;height:auto}
.scroll{overflow-x:auto;max-width:100%}
@media (max-width:900px){body{margin:10px}h1{font-size:19px}h2{font-size:16px}th,td{padding:2px 5px}table{font-size:11.5px}}
svg text{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif}
footer{margin-top:30px;font-size:11px;color:#888}
";

fn cell(out: &mut String, v: i64, units: Units) {
    let class = if v == 0 { " class=\"zero\"" } else { "" };
    let _ = write!(out, "<td{class}>{}</td>", amount(v, units));
}

fn device_section(
    out: &mut String,
    p: &ProcessBooks,
    d: &DeviceBooks,
    tl: Option<&DeviceTimeline>,
    units: Units,
) {
    let who = p
        .rank
        .map_or_else(|| format!("pid {}", p.pid), |r| format!("rank {r}"));
    let _ = writeln!(out, "<div class=\"device\"><h3>device {}</h3>", d.device);
    if let Some(tl) = tl {
        out.push_str(&timeline_svg(
            tl,
            d.start_free,
            &format!("{who} device {}: memory held by owner over time", d.device),
        ));
    }
    stage_table(out, d, units);
    device_notes(out, d, units);
    out.push_str("</div>\n");
}

/// The stage × owner table of one device, with its live-at-end row.
fn stage_table(out: &mut String, d: &DeviceBooks, units: Units) {
    let u = unit_name(units);
    let _ = write!(
        out,
        "<div class=\"scroll\"><table class=\"stages\"><thead><tr><th>stage ({u})</th><th>duration</th><th title=\"free at stage start − free at stage end\">delta</th>"
    );
    for o in REPORT_OWNERS {
        let _ = write!(
            out,
            "<th><span class=\"sw\" style=\"background:{}\"></span>{}</th>",
            colour(o),
            o.name()
        );
    }
    let _ = writeln!(
        out,
        "<th>free at end</th><th class=\"engine\">engine</th></tr></thead><tbody>"
    );
    for s in &d.stages {
        let dur = if s.start_t_ns > 0 && s.end_t_ns >= s.start_t_ns {
            duration(s.end_t_ns - s.start_t_ns)
        } else {
            "?".to_string()
        };
        let _ = write!(out, "<tr><td>{}</td><td>{dur}</td>", esc(&s.name));
        cell(out, s.device_delta, units);
        for o in REPORT_OWNERS {
            cell(out, s.by_owner.get(o), units);
        }
        let engine = s.engine.mem_usage_gib.map_or_else(String::new, |g| {
            format!(
                "mem usage={g:.2} GB ({:+.3} GiB)",
                s.device_delta as f64 / GIB - g
            )
        });
        let title = s
            .engine
            .end_line
            .as_deref()
            .map_or_else(String::new, |l| format!(" title=\"{}\"", esc(l)));
        let _ = writeln!(
            out,
            "<td>{}</td><td class=\"engine\"{title}>{}</td></tr>",
            opt(s.end_free, units),
            esc(&engine)
        );
    }
    let mut live = d.live_at_end;
    live.set(Owner::Unattributed, 0);
    let _ = write!(
        out,
        "<tr class=\"live\"><td>live at end (hooked)</td><td></td>"
    );
    cell(out, live.hooked(), units);
    for o in REPORT_OWNERS {
        cell(out, live.get(o), units);
    }
    let _ = writeln!(out, "<td></td><td></td></tr></tbody></table></div>");
}

/// Under the table: the reconciliation line, the peaks and the top modules.
fn device_notes(out: &mut String, d: &DeviceBooks, units: Units) {
    let u = unit_name(units);
    let (class, word) = if d.balanced() {
        ("ok", "balanced")
    } else {
        ("bad", "NOT BALANCED")
    };
    let _ = writeln!(
        out,
        "<p class=\"recon\">reconciliation: start free {} = Σ stage deltas {} + end free {} {u} <span class=\"{class}\">[{word}]</span>; unattributed {} {u}</p>",
        opt(d.start_free, units),
        amount(d.sum_deltas(), units),
        opt(d.end_free, units),
        amount(d.unattributed(), units)
    );
    let peaks: Vec<String> = d
        .peak_by_owner
        .iter()
        .filter(|(_, p)| p.bytes > 0)
        .map(|(o, p)| {
            format!(
                "{} {} ({})",
                o.name(),
                amount(p.bytes, units),
                esc(&p.stage)
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "<p class=\"small\">peak (hooked + context): {} {u} in {}{}</p>",
        amount(d.peak_total.bytes, units),
        esc(&d.peak_total.stage),
        if peaks.is_empty() {
            String::new()
        } else {
            format!("; by owner: {}", peaks.join(", "))
        }
    );
    let mods: Vec<String> = d
        .modules
        .iter()
        .take(8)
        .map(|m| {
            format!(
                "{} [{}] live {} peak {}",
                esc(if m.module.is_empty() { "?" } else { &m.module }),
                m.owner.map_or("-", |o| o.name()),
                amount(m.live, units),
                amount(m.peak, units)
            )
        })
        .collect();
    if !mods.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"small\">top modules ({u}): {}</p>",
            mods.join("; ")
        );
    }
}

fn process_section(
    out: &mut String,
    p: &ProcessBooks,
    tls: Option<&Vec<DeviceTimeline>>,
    units: Units,
) {
    let rank = p.rank.map_or_else(String::new, |r| format!("rank {r} · "));
    let _ = writeln!(
        out,
        "<section id=\"p-{}\"><h2>{rank}process {} on {}</h2><p class=\"cmd\">{}</p>",
        p.pid,
        p.pid,
        esc(&p.host),
        esc(&p.cmdline)
    );
    if p.devices.is_empty() {
        out.push_str("<p class=\"meta\">no device memory recorded</p>\n");
    }
    for d in &p.devices {
        let tl = tls.and_then(|t| t.iter().find(|t| t.device == d.device));
        device_section(out, p, d, tl, units);
    }
    for (what, lp) in p.apart() {
        if lp.peak > 0 {
            let _ = writeln!(
                out,
                "<p class=\"small\">{what}: live {} peak {} {} (not VRAM)</p>",
                amount(lp.live, units),
                amount(lp.peak, units),
                unit_name(units)
            );
        }
    }
    out.push_str("</section>\n");
}

/// The whole page. `timelines` maps a journal path (as in [`ProcessBooks::path`]) to the
/// timelines of its devices.
pub fn render(
    run: &RunBooks,
    timelines: &BTreeMap<String, Vec<DeviceTimeline>>,
    units: Units,
) -> String {
    let mut out = String::with_capacity(1 << 16);
    let run_ids: Vec<&str> = {
        let mut ids: Vec<&str> = run
            .processes
            .iter()
            .map(|p| p.run_id.as_str())
            .filter(|s| !s.is_empty())
            .collect();
        ids.dedup();
        ids
    };
    let title = if run_ids.is_empty() {
        "vramledger report".to_string()
    } else {
        format!("vramledger report — {}", run_ids.join(", "))
    };
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{STYLE}</style></head><body>",
        esc(&title)
    );
    let _ = writeln!(out, "<h1>{}</h1>", esc(&title));
    let with_devices = run
        .processes
        .iter()
        .filter(|p| !p.devices.is_empty())
        .count();
    let _ = writeln!(
        out,
        "<p class=\"meta\">{} ({} with device memory) · figures in {} · per device: stage delta = free memory at the stage start − at its end, explained by owner; the rest is unattributed</p>",
        super::count(run.processes.len(), "process", "processes"),
        with_devices,
        unit_name(units)
    );
    // Processes with device memory first: they are what the page is for.
    let mut order: Vec<&ProcessBooks> = run.processes.iter().collect();
    order.sort_by_key(|p| p.devices.is_empty());
    for p in order {
        process_section(&mut out, p, timelines.get(&p.path), units);
    }
    if !run.cross_rank.is_empty() {
        let _ = writeln!(
            out,
            "<section><h2>across ranks</h2><p class=\"meta\">free memory at the end of each stage ({}); SGLang sizes every rank from the minimum and warns when it is below 90% of a rank's value</p><div class=\"scroll\"><table><thead><tr><th>stage</th><th>min free</th><th>ranks</th></tr></thead><tbody>",
            unit_name(units)
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
                        if r.unbalanced {
                            " <span class=\"bad\">UNBALANCED</span>"
                        } else {
                            ""
                        }
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td class=\"engine\">{}</td></tr>",
                esc(&s.name),
                amount(s.min_free as i64, units),
                ranks.join(", ")
            );
        }
        out.push_str("</tbody></table></div></section>\n");
    }
    if !run.warnings.is_empty() {
        out.push_str("<section><h2>warnings</h2><ul>\n");
        for w in &run.warnings {
            let _ = writeln!(out, "<li>{}</li>", esc(w));
        }
        out.push_str("</ul></section>\n");
    }
    let _ = writeln!(
        out,
        "<footer>vramledger {} · one self-contained file: no script, no external assets</footer></body></html>",
        env!("CARGO_PKG_VERSION")
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(esc("a\u{7}b"), "a b");
    }
}
