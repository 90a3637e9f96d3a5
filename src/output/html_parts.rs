//! What the HTML page and its timeline share: escaping, the owners' colours, and the numbers of
//! axes, legends and tables: bytes (`8 GiB`, `512 MiB`), times (`0.4 s`, `4 ms`), durations,
//! and round axis steps.

use vramledger_format::Owner;

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

pub const GIB: f64 = (1u64 << 30) as f64;
pub const MIB: f64 = (1u64 << 20) as f64;

/// Bytes for an axis or a legend: `8.86 GiB`, `512 MiB`.
pub fn axis_bytes(v: f64) -> String {
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
pub fn time_label(t: f64, step: f64, dur: f64) -> String {
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
pub fn duration(ns: u64) -> String {
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
pub fn nice_step(raw: f64, base: f64) -> f64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_and_labels() {
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
    }
}
