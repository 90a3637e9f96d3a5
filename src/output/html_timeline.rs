//! The HTML report's timeline of one device as inline SVG: x = time, y = bytes held per owner
//! (stacked step areas), the stages as shaded bands named above the plot, a dashed line for
//! what the free-memory readings say was taken, and a legend.
//!
//! It reflows: the SVG has a viewBox and scales to the width of the page (down to a minimum,
//! then its box scrolls sideways, not the page). Stage labels are never clipped and never
//! overlap: a label that would run past the right edge is moved left to end there, labels take
//! the first of up to five lanes where they fit, and a stage too short to label in any lane is
//! named in a line under the chart (every band keeps its name and duration as a tooltip).

use std::fmt::Write;

use vramledger_format::Owner;

use super::html_labels::{place_labels, Wanted};
use super::html_parts::{axis_bytes, colour, duration, esc, nice_step, time_label, GIB, MIB};
use crate::timeline::{DeviceTimeline, STACK};

/// Layout of a timeline chart (user units of the viewBox).
const WIDTH: f64 = 1200.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 16.0;
const PLOT_H: f64 = 250.0;
const LANE_H: f64 = 15.0;
/// Font sizes; a label's width is estimated from its length (wider than DejaVu Sans or
/// system-ui draw these names, so that a placed label never runs into the next).
const LABEL_FONT: f64 = 11.0;
const LABEL_CHAR_W: f64 = 6.9;
const LEGEND_FONT: f64 = 12.0;
const LEGEND_CHAR_W: f64 = 7.2;

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

/// Legend items in rows that fit the chart: `(x, row)` per item of `widths`.
fn legend_rows(widths: &[f64]) -> Vec<(f64, usize)> {
    let mut x = LEFT;
    let mut row = 0;
    widths
        .iter()
        .map(|&w| {
            if x > LEFT && x + w > WIDTH - RIGHT {
                x = LEFT;
                row += 1;
            }
            let at = (x, row);
            x += w + 16.0;
            at
        })
        .collect()
}

/// The stacked timeline of one device as inline SVG (and, when some stage is too short to
/// label, a line naming it).
pub fn timeline_svg(tl: &DeviceTimeline, start_free: Option<u64>, title: &str) -> String {
    let c = Chart::lay_out(tl, start_free);
    let s = &c.scale;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<div class=\"chart\"><svg class=\"timeline\" width=\"{WIDTH}\" height=\"{:.0}\" viewBox=\"0 0 {WIDTH} {:.0}\" role=\"img\" aria-label=\"{}\"><title>{}</title>",
        c.height,
        c.height,
        esc(title),
        esc(title)
    );
    let unlabelled = bands(&mut svg, tl, &c);
    axes(&mut svg, tl, &c);
    areas(&mut svg, tl, &c);
    if c.taken_item {
        // Device memory taken since the start, from the free-memory readings (the gap above the
        // stack is what no hook saw).
        let mut d = String::new();
        for (i, (t, b)) in c.taken.iter().enumerate() {
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
        "<rect x=\"{LEFT}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{PLOT_H}\" fill=\"none\" stroke=\"#999\"/>",
        s.top,
        WIDTH - RIGHT - LEFT
    );
    legend(&mut svg, &c);
    svg.push_str("</g></svg></div>\n");
    if !unlabelled.is_empty() {
        let _ = writeln!(
            svg,
            "<p class=\"small\">too short to name on the chart (hover a band, or see the table): {}</p>",
            esc(&unlabelled.join(", "))
        );
    }
    svg
}

/// Where everything of one chart goes.
struct Chart {
    scale: Scale,
    /// Each band's label: `(left, lane)`, `None` when it fits nowhere.
    placed: Vec<Option<(f64, usize)>>,
    bottom: f64,
    ystep: f64,
    /// Taken since the start according to the free-memory readings.
    taken: Vec<(u64, f64)>,
    taken_item: bool,
    /// The owners drawn, with their peaks.
    drawn: Vec<(Owner, i64)>,
    /// Legend items and where each goes: `(x, row)`.
    items: Vec<String>,
    rows: Vec<(f64, usize)>,
    legend_y: f64,
    height: f64,
}

impl Chart {
    fn lay_out(tl: &DeviceTimeline, start_free: Option<u64>) -> Chart {
        let scale0 = Scale {
            t0: tl.t0,
            t1: tl.t1,
            x0: LEFT,
            x1: WIDTH - RIGHT,
            top: 0.0,
            ymax: 1.0,
        };
        let wanted: Vec<Wanted> = tl
            .bands
            .iter()
            .map(|b| {
                let (xa, xb) = (scale0.x(b.start_t_ns), scale0.x(b.end_t_ns));
                let w = b.name.chars().count() as f64 * LABEL_CHAR_W + 6.0;
                Wanted {
                    x: xa + 2.0,
                    w,
                    until: xb - w,
                    priority: xb - xa,
                }
            })
            .collect();
        let placed = place_labels(&wanted, LEFT, WIDTH - RIGHT);
        let n_lanes = placed.iter().flatten().map(|p| p.1 + 1).max().unwrap_or(1);
        let top = 8.0 + n_lanes as f64 * LANE_H + 6.0;
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
        let scale = Scale {
            top,
            ymax,
            ..scale0
        };
        let bottom = top + PLOT_H;
        // Legend items: the owners drawn, then the free-memory line.
        let drawn: Vec<(Owner, i64)> = STACK
            .iter()
            .map(|&o| {
                (
                    o,
                    tl.points.iter().map(|p| p.held.get(o)).max().unwrap_or(0),
                )
            })
            .filter(|&(_, peak)| peak > 0)
            .collect();
        let mut items: Vec<String> = drawn
            .iter()
            .map(|(o, peak)| format!("{} (peak {})", o.name(), axis_bytes(*peak as f64)))
            .collect();
        let taken_item = taken.len() >= 2;
        if taken_item {
            items.push("taken since start (free-memory readings)".to_string());
        }
        let item_w: Vec<f64> = items
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mark = if taken_item && i == items.len() - 1 {
                    27.0
                } else {
                    15.0
                };
                mark + t.chars().count() as f64 * LEGEND_CHAR_W
            })
            .collect();
        let rows = legend_rows(&item_w);
        let legend_y = bottom + 44.0;
        let n_rows = rows.iter().map(|r| r.1 + 1).max().unwrap_or(1);
        let height = legend_y + (n_rows - 1) as f64 * 18.0 + 16.0;
        Chart {
            scale,
            placed,
            bottom,
            ystep,
            taken,
            taken_item,
            drawn,
            items,
            rows,
            legend_y,
            height,
        }
    }
}

/// Stage bands, their start lines and their labels; returns the stages left unlabelled.
fn bands<'t>(svg: &mut String, tl: &'t DeviceTimeline, c: &Chart) -> Vec<&'t str> {
    let (s, top, bottom) = (&c.scale, c.scale.top, c.bottom);
    let mut unlabelled = Vec::new();
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
        let Some((left, lane)) = c.placed[i] else {
            unlabelled.push(b.name.as_str());
            let _ = write!(
                svg,
                "<line x1=\"{xa:.1}\" y1=\"{top:.1}\" x2=\"{xa:.1}\" y2=\"{bottom:.1}\" stroke=\"#8a8a8a\" stroke-width=\"0.7\" stroke-dasharray=\"2 2\"/>"
            );
            continue;
        };
        let ly = 8.0 + lane as f64 * LANE_H + 10.0;
        let _ = write!(
            svg,
            "<line x1=\"{xa:.1}\" y1=\"{:.1}\" x2=\"{xa:.1}\" y2=\"{bottom:.1}\" stroke=\"#8a8a8a\" stroke-width=\"0.7\" stroke-dasharray=\"2 2\"/><text class=\"stage\" x=\"{left:.1}\" y=\"{ly:.1}\" font-size=\"{LABEL_FONT}\" fill=\"#333\">{}</text>",
            ly - 9.0,
            esc(&b.name)
        );
    }
    unlabelled
}

/// Axes: y in bytes, x in seconds.
fn axes(svg: &mut String, tl: &DeviceTimeline, c: &Chart) {
    let (s, bottom) = (&c.scale, c.bottom);
    let mut v = 0.0;
    while v <= s.ymax + 1.0 {
        let y = s.y(v);
        let _ = write!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#0000001a\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\" fill=\"#444\">{}</text>",
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            axis_bytes(v)
        );
        v += c.ystep;
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
}

/// The stacked areas, one per owner drawn.
fn areas(svg: &mut String, tl: &DeviceTimeline, c: &Chart) {
    let (s, pts) = (&c.scale, &tl.points);
    if pts.is_empty() {
        return;
    }
    let mut xs: Vec<f64> = pts.iter().map(|p| s.x(p.t_ns)).collect();
    xs.push(s.x(tl.t1));
    let mut lower = vec![0.0f64; pts.len()];
    for &(o, peak) in &c.drawn {
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
    }
}

/// The legend, in as many rows as it needs (the closing `</g>` is the caller's).
fn legend(svg: &mut String, c: &Chart) {
    let _ = write!(
        svg,
        "<g class=\"legend\" font-size=\"{LEGEND_FONT}\" fill=\"#222\">"
    );
    for (i, text) in c.items.iter().enumerate() {
        let (x, row) = c.rows[i];
        let y = c.legend_y + row as f64 * 18.0;
        if let Some((o, _)) = c.drawn.get(i) {
            let _ = write!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"11\" height=\"11\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{y:.1}\">{}</text>",
                y - 10.0,
                colour(*o),
                x + 15.0,
                esc(text)
            );
        } else {
            let _ = write!(
                svg,
                "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#111\" stroke-width=\"1.3\" stroke-dasharray=\"5 3\"/><text x=\"{:.1}\" y=\"{y:.1}\">{}</text>",
                y - 4.0,
                x + 22.0,
                y - 4.0,
                x + 27.0,
                esc(text)
            );
        }
    }
    if c.drawn.is_empty() {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" fill=\"#777\">no device memory held</text>",
            LEFT + 10.0,
            c.scale.top + 20.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_legend_wraps_inside_the_chart() {
        let rows = legend_rows(&[500.0, 500.0, 500.0]);
        assert_eq!(rows, [(LEFT, 0), (LEFT + 516.0, 0), (LEFT, 1)]);
        for (w, (x, _)) in [500.0, 500.0, 500.0].iter().zip(&rows) {
            assert!(x + w <= WIDTH - RIGHT);
        }
    }

    #[test]
    fn step_area_walks_upper_then_lower() {
        let d = step_area(&[0.0, 10.0, 20.0], &[5.0, 3.0], &[9.0, 8.0]);
        assert_eq!(d, "M0.0 5.0H10.0V3.0H20.0V8.0H10.0V9.0H0.0Z");
    }
}
