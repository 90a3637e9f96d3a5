//! Sizes and tolerances as people write them: `64MiB`, `1.5GiB`, `512KiB`, `100MB` (decimal
//! units), `12345` (bytes), and for tolerances also a percentage, `2%`.
//!
//! Units are case-insensitive: `B`; `KB` `MB` `GB` `TB` (powers of 1000); `KiB` `MiB` `GiB`
//! `TiB` (powers of 1024). A fraction needs a unit (`1.5GiB`; `1.5` bytes is refused). No
//! spaces, no signs: a size or tolerance is never negative.

use std::fmt;

/// The accepted forms of a size, for messages.
pub const SIZE_FORMS: &str = "64MiB, 1.5GiB, 512KiB, 100MB (decimal), 12345 (bytes)";

/// The accepted forms of a tolerance, for messages.
pub const TOLERANCE_FORMS: &str =
    "64MiB, 1.5GiB, 512KiB, 100MB (decimal), 12345 (bytes), or a percentage of the baseline figure such as 2%";

/// How far a figure may move before it counts as drift.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tolerance {
    /// At most this many bytes either way.
    Bytes(u64),
    /// At most this percentage of the baseline figure either way.
    Percent(f64),
}

impl Tolerance {
    /// Whether a figure that was `base` and moved by `change` stays within the tolerance.
    pub fn allows(&self, base: i64, change: i64) -> bool {
        let change = change.unsigned_abs();
        match *self {
            Tolerance::Bytes(b) => change <= b,
            Tolerance::Percent(p) => change as f64 <= p / 100.0 * base.unsigned_abs() as f64,
        }
    }

    /// The largest change `allows` accepts for a figure that was `base` (bytes).
    pub fn limit_for(&self, base: i64) -> u64 {
        match *self {
            Tolerance::Bytes(b) => b,
            Tolerance::Percent(p) => (p / 100.0 * base.unsigned_abs() as f64).floor() as u64,
        }
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Tolerance::Bytes(b) => f.write_str(&human_bytes(b as i64)),
            Tolerance::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// Why a size or tolerance could not be read (the value itself is quoted by the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeError {
    reason: String,
    forms: &'static str,
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; accepted forms: {}", self.reason, self.forms)
    }
}

impl std::error::Error for SizeError {}

fn err(reason: impl Into<String>, forms: &'static str) -> SizeError {
    SizeError {
        reason: reason.into(),
        forms,
    }
}

/// The multiplier of a unit (case-insensitive), if it is one.
fn unit(u: &str) -> Option<u128> {
    Some(match u.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return None,
    })
}

/// Splits `12.5GiB` into ("12", Some("5"), "GiB"); `None` when it does not start with digits
/// or a fraction point has no digits after it.
fn split_number(s: &str) -> Option<(&str, Option<&str>, &str)> {
    let int_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if int_end == 0 {
        return None;
    }
    let (int, rest) = s.split_at(int_end);
    if let Some(after_point) = rest.strip_prefix('.') {
        let frac_end = after_point
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after_point.len());
        if frac_end == 0 {
            return None;
        }
        let (frac, unit) = after_point.split_at(frac_end);
        Some((int, Some(frac), unit))
    } else {
        Some((int, None, rest))
    }
}

fn why_not_a_number(s: &str, forms: &'static str) -> SizeError {
    if s.is_empty() {
        err("empty value", forms)
    } else if s.starts_with('-') {
        err("negative values are not allowed", forms)
    } else if s.starts_with('+') {
        err("write the number without a sign", forms)
    } else if s.starts_with(|c: char| c.is_ascii_digit()) {
        err("a decimal point needs digits after it", forms)
    } else {
        err("it does not start with a number", forms)
    }
}

fn size_with(s: &str, forms: &'static str) -> Result<u64, SizeError> {
    let t = s.trim();
    let Some((int, frac, unit_text)) = split_number(t) else {
        return Err(why_not_a_number(t, forms));
    };
    let Some(mult) = unit(unit_text) else {
        let hint = if unit_text.contains(char::is_whitespace) {
            " (write the unit right after the number, without a space)"
        } else {
            ""
        };
        return Err(err(format!("unknown unit '{unit_text}'{hint}"), forms));
    };
    if frac.is_some() && mult == 1 {
        return Err(err(
            "a byte count must be a whole number (use a unit for fractions, e.g. 1.5GiB)",
            forms,
        ));
    }
    let too_large = || err("too large", forms);
    if int.len() > 30 {
        return Err(too_large());
    }
    let whole: u128 = int.parse().map_err(|_| too_large())?;
    let mut bytes = whole.checked_mul(mult).ok_or_else(too_large)?;
    if let Some(frac) = frac {
        // Exact decimal arithmetic: 1.5GiB is 1610612736 bytes, not a float's guess.
        let digits = &frac[..frac.len().min(18)];
        let num: u128 = digits.parse().unwrap_or(0);
        let den = 10u128.pow(digits.len() as u32);
        bytes += (num * mult + den / 2) / den;
    }
    if bytes > i64::MAX as u128 {
        return Err(too_large());
    }
    Ok(bytes as u64)
}

/// Reads a size in bytes (no percentages).
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    if s.trim().ends_with('%') {
        return Err(err("a percentage is not a size here", SIZE_FORMS));
    }
    size_with(s, SIZE_FORMS)
}

/// Reads a tolerance: a size, or a percentage of the baseline figure.
pub fn parse_tolerance(s: &str) -> Result<Tolerance, SizeError> {
    let t = s.trim();
    if let Some(num) = t.strip_suffix('%') {
        let Some((int, frac, rest)) = split_number(num) else {
            return Err(why_not_a_number(num, TOLERANCE_FORMS));
        };
        if !rest.is_empty() {
            return Err(err(
                format!("'{rest}' before the % sign is not part of a number"),
                TOLERANCE_FORMS,
            ));
        }
        let text = match frac {
            Some(f) => format!("{int}.{f}"),
            None => int.to_string(),
        };
        let p: f64 = text
            .parse()
            .map_err(|_| err("not a number", TOLERANCE_FORMS))?;
        if !p.is_finite() {
            return Err(err("not a finite percentage", TOLERANCE_FORMS));
        }
        return Ok(Tolerance::Percent(p));
    }
    size_with(t, TOLERANCE_FORMS).map(Tolerance::Bytes)
}

/// Bytes for humans, with the unit: `1.500 GiB`, `12.0 MiB`, `4.0 KiB`, `512 B`.
pub fn human_bytes(v: i64) -> String {
    let a = v.unsigned_abs() as f64;
    let sign = if v < 0 { "-" } else { "" };
    if a >= (1u64 << 30) as f64 {
        format!("{sign}{:.3} GiB", a / (1u64 << 30) as f64)
    } else if a >= (1u64 << 20) as f64 {
        format!("{sign}{:.1} MiB", a / (1u64 << 20) as f64)
    } else if a >= 1024.0 {
        format!("{sign}{:.1} KiB", a / 1024.0)
    } else {
        format!("{sign}{a} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    #[test]
    fn sizes_in_every_accepted_form() {
        assert_eq!(parse_size("64MiB"), Ok(64 * MIB));
        assert_eq!(parse_size("1.5GiB"), Ok(3 * GIB / 2));
        assert_eq!(parse_size("512KiB"), Ok(512 * 1024));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("12345"), Ok(12345));
        assert_eq!(parse_size("12345B"), Ok(12345));
        assert_eq!(parse_size("2TiB"), Ok(2 << 40));
        assert_eq!(parse_size("1.5kb"), Ok(1500));
        assert_eq!(parse_size("64mib"), Ok(64 * MIB));
        assert_eq!(parse_size(" 64MiB "), Ok(64 * MIB));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("0.1GiB"), Ok(107_374_182)); // rounded to the nearest byte
    }

    #[test]
    fn tolerances_are_sizes_or_percentages() {
        assert_eq!(parse_tolerance("64MiB"), Ok(Tolerance::Bytes(64 * MIB)));
        assert_eq!(parse_tolerance("2%"), Ok(Tolerance::Percent(2.0)));
        assert_eq!(parse_tolerance("0.5%"), Ok(Tolerance::Percent(0.5)));
        assert_eq!(parse_tolerance("12345"), Ok(Tolerance::Bytes(12345)));
    }

    #[test]
    fn bad_values_say_why_and_list_the_forms() {
        for (bad, why) in [
            ("64 MB?", "unknown unit ' MB?'"),
            ("64 MB", "without a space"),
            ("-5%", "negative"),
            ("-64MiB", "negative"),
            ("+5%", "without a sign"),
            ("", "empty"),
            ("MiB", "does not start with a number"),
            ("5x", "unknown unit 'x'"),
            ("1.5", "whole number"),
            ("1.GiB", "digits after it"),
            ("5 %", "before the % sign"),
            ("99999999999999999999GiB", "too large"),
            ("1e3", "unknown unit 'e3'"),
        ] {
            let e = parse_tolerance(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
            assert!(e.contains("64MiB, 1.5GiB, 512KiB, 100MB (decimal), 12345 (bytes)"));
            assert!(e.contains("2%"), "{e}");
        }
        let e = parse_size("2%").unwrap_err().to_string();
        assert!(e.contains("percentage is not a size"), "{e}");
        assert!(!e.contains("2%"), "{e}");
    }

    #[test]
    fn what_a_tolerance_allows() {
        let t = Tolerance::Bytes(64 * MIB);
        assert!(t.allows(0, (64 * MIB) as i64));
        assert!(t.allows(GIB as i64, -((64 * MIB) as i64)));
        assert!(!t.allows(0, (64 * MIB + 1) as i64));
        let p = Tolerance::Percent(2.0);
        assert!(p.allows(100 * MIB as i64, (2 * MIB) as i64));
        assert!(!p.allows(100 * MIB as i64, (2 * MIB + 1) as i64));
        assert!(p.allows(-(100 * MIB as i64), -((2 * MIB) as i64)));
        assert!(!p.allows(0, 1), "2% of nothing is nothing");
        assert_eq!(p.limit_for(100), 2);
        assert_eq!(t.to_string(), "64.0 MiB");
        assert_eq!(p.to_string(), "2%");
    }

    #[test]
    fn human_bytes_shows_the_unit() {
        assert_eq!(human_bytes(3 * GIB as i64 / 2), "1.500 GiB");
        assert_eq!(human_bytes(-(12 * MIB as i64)), "-12.0 MiB");
        assert_eq!(human_bytes(4096), "4.0 KiB");
        assert_eq!(human_bytes(512), "512 B");
    }
}
