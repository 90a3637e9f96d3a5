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
use crate::timeline::{DeviceTimeline, STACK};

const GIB: f64 = (1u64 << 30) as f64;
const MIB: f64 = (1u64 << 20) as f64;

/// The colour of an owner (the same in the timeline, the legend and the table header).
pub fn colour(o: Owner) -> &'static str {
    match o {
        Owner::Context => "#9c755f",
        Owner::Torch => "#4e79a7",
        Owner::TorchGraphPool => "#f28e2b",
        Owner::Nccl => "#59a14f",
        Owner::Direct => "#e15759",
        Owner::Vmm => "#b07aa1",
        Owner::Unattributed => "#bab0ac",
        Owner::None => "#cccccc",
    }
}

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

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

/// Bytes for an axis or a legend: `8.86 GiB`, `512 MiB`.
fn axis_bytes(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if v.abs() >= GIB {
        let g = v / GIB;
        if (g - g.round()).abs() < 1e-9 {
            format!("{g:.0} GiB")
        } else {
            format!("{g:.2} GiB")
        }
    } else if v.abs() >= MIB {
        format!("{:.0} MiB", v / MIB)
    } else {
        format!("{:.0} KiB", v / 1024.0)
    }
}

/// A time axis label: `t` seconds, as precise as the step needs, in s, ms or µs (whichever
/// suits the whole duration `dur`).
fn time_label(t: f64, step: f64, dur: f64) -> String {
    let (scale, unit) = if dur >= 1.0 {
        (1.0, "s")
    } else if dur >= 1e-3 {
        (1e3, "ms")
    } else {
        (1e6, "µs")
    };
    let decimals = (-(step * scale).log10().floor()).clamp(0.0, 3.0) as usize;
    format!("{:.*} {unit}", decimals, t * scale)
}

/// A duration for the table: `1.234 s`, `12.3 ms`, `45 µs`.
fn duration(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

/// A round step near `raw`: 1, 2 or 5 times a power of ten of `base`.
fn nice_step(raw: f64, base: f64) -> f64 {
    let x = (raw / base).max(1e-12);
    let p = 10f64.powf(x.log10().floor());
    let m = x / p;
    let n = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    n * p * base
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
svg text{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif}
footer{margin-top:30px;font-size:11px;color:#888}
";

/// Layout of a timeline chart.
const WIDTH: f64 = 1320.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 16.0;
const PLOT_H: f64 = 250.0;
const LANE_H: f64 = 14.0;
const MAX_LANES: usize = 5;

struct Scale {
    t0: u64,
    t1: u64,
    x0: f64,
    x1: f64,
    top: f64,
    ymax: f64,
}

impl Scale {
    fn x(&self, t: u64) -> f64 {
        let span = (self.t1 - self.t0).max(1) as f64;
        self.x0 + (t.saturating_sub(self.t0)) as f64 / span * (self.x1 - self.x0)
    }
    fn y(&self, bytes: f64) -> f64 {
        self.top + PLOT_H - (bytes.max(0.0) / self.ymax).min(1.0) * PLOT_H
    }
}

/// A step function as an SVG path: `upper` forward, then `lower` back (`xs` has one more
/// entry than the values: the end of the last step).
fn step_area(xs: &[f64], upper: &[f64], lower: &[f64]) -> String {
    let n = upper.len();
    let mut d = String::with_capacity(n * 24);
    let _ = write!(d, "M{:.1} {:.1}", xs[0], upper[0]);
    for i in 1..n {
        let _ = write!(d, "H{:.1}V{:.1}", xs[i], upper[i]);
    }
    let _ = write!(d, "H{:.1}V{:.1}", xs[n], lower[n - 1]);
    for i in (1..n).rev() {
        let _ = write!(d, "H{:.1}V{:.1}", xs[i], lower[i - 1]);
    }
    let _ = write!(d, "H{:.1}Z", xs[0]);
    d
}

/// Places each label in the first lane where it does not overlap the previous label.
fn lanes(starts: &[f64], widths: &[f64]) -> Vec<usize> {
    let mut ends: Vec<f64> = Vec::new();
    starts
        .iter()
        .zip(widths)
        .map(|(&x, &w)| {
            let lane = match ends.iter().position(|&e| e <= x) {
                Some(l) => l,
                None if ends.len() < MAX_LANES => {
                    ends.push(f64::MIN);
                    ends.len() - 1
                }
                None => (0..ends.len())
                    .min_by(|&a, &b| ends[a].total_cmp(&ends[b]))
                    .unwrap_or(0),
            };
            ends[lane] = x + w;
            lane
        })
        .collect()
}

/// The stacked timeline of one device as inline SVG.
pub fn timeline_svg(tl: &DeviceTimeline, start_free: Option<u64>, title: &str) -> String {
    let mut svg = String::new();
    // Stage labels above the plot, in lanes so that short stages stay readable.
    let scale0 = Scale {
        t0: tl.t0,
        t1: tl.t1,
        x0: LEFT,
        x1: WIDTH - RIGHT,
        top: 0.0,
        ymax: 1.0,
    };
    let starts: Vec<f64> = tl.bands.iter().map(|b| scale0.x(b.start_t_ns)).collect();
    let widths: Vec<f64> = tl
        .bands
        .iter()
        .map(|b| b.name.chars().count() as f64 * 6.4 + 10.0)
        .collect();
    let lane_of = lanes(&starts, &widths);
    let n_lanes = lane_of.iter().max().map_or(1, |m| m + 1);
    let top = 8.0 + n_lanes as f64 * LANE_H + 6.0;
    // Taken since the start according to the free-memory readings.
    let taken: Vec<(u64, f64)> = match start_free {
        Some(s) => tl
            .free
            .iter()
            .map(|r| (r.t_ns, s as f64 - r.free as f64))
            .collect(),
        None => Vec::new(),
    };
    let max_taken = taken.iter().map(|t| t.1).fold(0.0, f64::max);
    let ymax_raw = (tl.max_total() as f64).max(max_taken).max(MIB);
    let base = if ymax_raw >= GIB { GIB } else { MIB };
    let ystep = nice_step(ymax_raw / 5.0, base);
    let ymax = (ymax_raw / ystep).ceil() * ystep;
    let s = Scale {
        top,
        ymax,
        ..scale0
    };
    let bottom = top + PLOT_H;
    let legend_y = bottom + 44.0;
    let height = legend_y + 16.0;
    let _ = write!(
        svg,
        "<svg class=\"timeline\" width=\"{WIDTH}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH} {height:.0}\" role=\"img\" aria-label=\"{}\"><title>{}</title>",
        esc(title),
        esc(title)
    );
    // Stage bands and their labels.
    for (i, b) in tl.bands.iter().enumerate() {
        let (xa, xb) = (s.x(b.start_t_ns), s.x(b.end_t_ns));
        let fill = if i % 2 == 0 { "#f3f3f3" } else { "#e3e8ef" };
        let _ = write!(
            svg,
            "<rect class=\"band\" x=\"{xa:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{PLOT_H}\" fill=\"{fill}\"><title>{} ({})</title></rect>",
            (xb - xa).max(0.5),
            esc(&b.name),
            duration(b.end_t_ns.saturating_sub(b.start_t_ns))
        );
        let ly = 8.0 + lane_of[i] as f64 * LANE_H + 10.0;
        let _ = write!(
            svg,
            "<line x1=\"{xa:.1}\" y1=\"{:.1}\" x2=\"{xa:.1}\" y2=\"{bottom:.1}\" stroke=\"#8a8a8a\" stroke-width=\"0.7\" stroke-dasharray=\"2 2\"/><text x=\"{:.1}\" y=\"{ly:.1}\" font-size=\"11\" fill=\"#333\">{}</text>",
            ly - 9.0,
            xa + 2.0,
            esc(&b.name)
        );
    }
    // Axes: y in bytes, x in seconds.
    let mut v = 0.0;
    while v <= ymax + 1.0 {
        let y = s.y(v);
        let _ = write!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#0000001a\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\" fill=\"#444\">{}</text>",
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            axis_bytes(v)
        );
        v += ystep;
    }
    let dur = (tl.t1 - tl.t0) as f64 / 1e9;
    let xstep = nice_step((dur / 10.0).max(1e-6), 1.0);
    let mut t = 0.0;
    while t <= dur + 1e-9 {
        let x = s.x(tl.t0 + (t * 1e9) as u64);
        let label = time_label(t, xstep, dur);
        let _ = write!(
            svg,
            "<line x1=\"{x:.1}\" y1=\"{bottom:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#666\"/><text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#444\">{label}</text>",
            bottom + 4.0,
            bottom + 16.0
        );
        t += xstep;
    }
    // The stacked areas.
    let pts = &tl.points;
    let mut drawn: Vec<(Owner, i64)> = Vec::new();
    if !pts.is_empty() {
        let mut xs: Vec<f64> = pts.iter().map(|p| s.x(p.t_ns)).collect();
        xs.push(s.x(tl.t1));
        let mut lower = vec![0.0f64; pts.len()];
        for o in STACK {
            let peak = pts.iter().map(|p| p.held.get(o)).max().unwrap_or(0);
            if peak <= 0 {
                continue;
            }
            let upper: Vec<f64> = pts
                .iter()
                .zip(&lower)
                .map(|(p, l)| l + p.held.get(o).max(0) as f64)
                .collect();
            let up_y: Vec<f64> = upper.iter().map(|&b| s.y(b)).collect();
            let lo_y: Vec<f64> = lower.iter().map(|&b| s.y(b)).collect();
            let _ = write!(
                svg,
                "<path class=\"owner\" data-owner=\"{}\" d=\"{}\" fill=\"{}\" fill-opacity=\"0.88\" stroke=\"{}\" stroke-width=\"0.6\"><title>{} (peak {})</title></path>",
                o.name(),
                step_area(&xs, &up_y, &lo_y),
                colour(o),
                colour(o),
                o.name(),
                axis_bytes(peak as f64)
            );
            lower = upper;
            drawn.push((o, peak));
        }
    }
    // Device memory taken since the start, from the free-memory readings (the gap above the
    // stack is what no hook saw).
    if taken.len() >= 2 {
        let mut d = String::new();
        for (i, (t, b)) in taken.iter().enumerate() {
            let (x, y) = (s.x(*t), s.y(*b));
            if i == 0 {
                let _ = write!(d, "M{x:.1} {y:.1}");
            } else {
                let _ = write!(d, "H{x:.1}V{y:.1}");
            }
        }
        let _ = write!(d, "H{:.1}", s.x(tl.t1));
        let _ = write!(
            svg,
            "<path d=\"{d}\" fill=\"none\" stroke=\"#111\" stroke-width=\"1.3\" stroke-dasharray=\"5 3\"/>"
        );
    }
    let _ = write!(
        svg,
        "<rect x=\"{LEFT}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{PLOT_H}\" fill=\"none\" stroke=\"#999\"/>",
        WIDTH - RIGHT - LEFT
    );
    // Legend.
    let mut x = LEFT;
    let _ = write!(svg, "<g class=\"legend\" font-size=\"12\" fill=\"#222\">");
    for (o, peak) in &drawn {
        let text = format!("{} (peak {})", o.name(), axis_bytes(*peak as f64));
        let _ = write!(
            svg,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"11\" height=\"11\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{legend_y:.1}\">{}</text>",
            legend_y - 10.0,
            colour(*o),
            x + 15.0,
            esc(&text)
        );
        x += 15.0 + text.chars().count() as f64 * 6.3 + 16.0;
    }
    if taken.len() >= 2 {
        let _ = write!(
            svg,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#111\" stroke-width=\"1.3\" stroke-dasharray=\"5 3\"/><text x=\"{:.1}\" y=\"{legend_y:.1}\">taken since start (free-memory readings)</text>",
            legend_y - 4.0,
            x + 22.0,
            legend_y - 4.0,
            x + 27.0
        );
    }
    if drawn.is_empty() {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" fill=\"#777\">no device memory held</text>",
            LEFT + 10.0,
            top + 20.0
        );
    }
    svg.push_str("</g></svg>\n");
    svg
}

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
    let u = unit_name(units);
    let _ = write!(
        out,
        "<table class=\"stages\"><thead><tr><th>stage ({u})</th><th>duration</th><th title=\"free at stage start − free at stage end\">delta</th>"
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
    let _ = writeln!(out, "<td></td><td></td></tr></tbody></table>");
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
    out.push_str("</div>\n");
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
            "<section><h2>across ranks</h2><p class=\"meta\">free memory at the end of each stage ({}); SGLang sizes every rank from the minimum and warns when it is below 90% of a rank's value</p><table><thead><tr><th>stage</th><th>min free</th><th>ranks</th></tr></thead><tbody>",
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
        out.push_str("</tbody></table></section>\n");
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
    fn escaping_and_steps() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(nice_step(3.0 * GIB, GIB), 5.0 * GIB);
        assert_eq!(nice_step(0.15, 1.0), 0.2);
        assert_eq!(axis_bytes(8.0 * GIB), "8 GiB");
        assert_eq!(axis_bytes(512.0 * MIB), "512 MiB");
        assert_eq!(time_label(0.4, 0.2, 2.0), "0.4 s");
        assert_eq!(time_label(10.0, 5.0, 60.0), "10 s");
        assert_eq!(time_label(0.004, 0.002, 0.02), "4 ms");
        assert_eq!(time_label(4e-6, 2e-6, 2.3e-5), "4 µs");
        assert_eq!(duration(507_829_948), "507.8 ms");
        assert_eq!(duration(1_507_829_948), "1.508 s");
        assert_eq!(
            lanes(&[0.0, 5.0, 100.0, 101.0], &[50.0, 50.0, 20.0, 20.0]),
            [0, 1, 0, 1]
        );
    }

    #[test]
    fn step_area_walks_upper_then_lower() {
        let d = step_area(&[0.0, 10.0, 20.0], &[5.0, 3.0], &[9.0, 8.0]);
        assert_eq!(d, "M0.0 5.0H10.0V3.0H20.0V8.0H10.0V9.0H0.0Z");
    }
}
