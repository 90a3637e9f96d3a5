//! `vramledger check --baseline BASE CURRENT [--tolerance T]... [--budgets FILE]`: exit 1 when
//! an owner × stage × device figure moved further than the tolerance from the baseline, or a
//! budget is exceeded; 0 otherwise; 2 on bad input.
//!
//! A figure drifts when its absolute change exceeds the tolerance: bytes, or a percentage of
//! the baseline figure (a figure the baseline does not have counts as 0 there, so any
//! percentage of it is 0). Given several tolerances (one absolute, one percent), a figure
//! drifts only when it exceeds every one of them.

use std::fmt::Write;
use std::path::Path;

use crate::budgets::{self, Budget, Verdict};
use crate::cli::EXIT_BAD_INPUT;
use crate::diff::{self, Diff, Figure};
use crate::output::diff_text::{a_to_b, signed, size};
use crate::output::report_text::Units;
use crate::report_input::{self, Input};
use crate::size_arg::Tolerance;

/// Exit code when something drifted or a budget was exceeded.
pub const EXIT_DRIFT: i32 = 1;

/// The default tolerance: 64 MiB.
pub const DEFAULT_TOLERANCE: Tolerance = Tolerance::Bytes(64 << 20);

/// Whether a figure moved further than every tolerance allows.
pub fn drifts(f: &Figure, tolerances: &[Tolerance]) -> bool {
    let base = f.bytes.a.unwrap_or(0);
    let change = f.bytes.change();
    change != 0 && tolerances.iter().all(|t| !t.allows(base, change))
}

/// The figures that drifted, largest change first.
pub fn drifted<'d>(d: &'d Diff, tolerances: &[Tolerance]) -> Vec<&'d Figure> {
    d.figures.iter().filter(|f| drifts(f, tolerances)).collect()
}

fn tolerance_text(tolerances: &[Tolerance]) -> String {
    tolerances
        .iter()
        .map(Tolerance::to_string)
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The check's findings as text, and whether it failed.
pub fn render(
    diff: Option<&Diff>,
    tolerances: &[Tolerance],
    budgets: &[Budget],
    verdict: Option<&Verdict>,
    units: Units,
) -> (String, bool) {
    let mut out = String::new();
    let mut failed = false;
    if let Some(d) = diff {
        let drift = drifted(d, tolerances);
        let tol = tolerance_text(tolerances);
        if drift.is_empty() {
            let _ = writeln!(
                out,
                "ok: {} figures (owner × stage × device) within {tol} of the baseline {}",
                d.figures.len(),
                d.a.source
            );
        } else {
            failed = true;
            let _ = writeln!(
                out,
                "DRIFT: {} of {} figures (owner × stage × device) moved by more than {tol} from the baseline {}:",
                drift.len(),
                d.figures.len(),
                d.a.source
            );
            for f in drift {
                let base = f.bytes.a.unwrap_or(0);
                let pct = if base != 0 {
                    format!(
                        "{:+.1}%",
                        f.bytes.change() as f64 / base.unsigned_abs() as f64 * 100.0
                    )
                } else {
                    "new".to_string()
                };
                let allowed = tolerances
                    .iter()
                    .map(|t| t.limit_for(base))
                    .max()
                    .unwrap_or(0);
                let _ = writeln!(
                    out,
                    "  {:>12}  {} stage {} owner {}: {} ({pct}; allowed ±{})",
                    signed(f.bytes.change(), units),
                    d.device_label(f.device),
                    Diff::stage_label(&f.stage, f.occurrence),
                    f.owner.name(),
                    a_to_b(&f.bytes, units),
                    size(allowed as i64, units),
                );
            }
        }
    }
    if let Some(v) = verdict {
        if v.exceeded.is_empty() {
            let _ = writeln!(
                out,
                "ok: {} budgets met ({} figures)",
                budgets.len(),
                v.checked
            );
        } else {
            failed = true;
            let _ = writeln!(
                out,
                "BUDGET EXCEEDED: {} {} over budget:",
                v.exceeded.len(),
                if v.exceeded.len() == 1 {
                    "figure"
                } else {
                    "figures"
                }
            );
            for e in &v.exceeded {
                let b = &budgets[e.budget];
                let stage = e
                    .stage
                    .as_ref()
                    .map_or_else(String::new, |s| format!(" stage {s}"));
                let _ = writeln!(
                    out,
                    "  budget #{} {}: {} dev {}{stage}: {} is {} > max {} (over by {})",
                    b.number,
                    b.entry,
                    e.process,
                    e.device,
                    b.what(),
                    size(e.bytes, units),
                    size(b.max as i64, units),
                    size(e.bytes.saturating_sub(b.max as i64), units),
                );
            }
        }
        for &i in &v.unmatched {
            let b = &budgets[i];
            let _ = writeln!(
                out,
                "note: budget #{} {} matched nothing in this run",
                b.number, b.entry
            );
        }
    }
    (out, failed)
}

/// `vramledger check`: returns the exit code.
pub fn command(
    baseline: Option<&Path>,
    current: &Path,
    tolerances: &[Tolerance],
    budgets_file: Option<&Path>,
    bytes: bool,
) -> i32 {
    let fail = |e: String| {
        eprintln!("vramledger: {e}");
        EXIT_BAD_INPUT
    };
    if baseline.is_none() && budgets_file.is_none() {
        return fail("check needs --baseline BASE, --budgets FILE, or both".into());
    }
    let budgets = match budgets_file.map(budgets::load).transpose() {
        Ok(b) => b,
        Err(e) => return fail(e),
    };
    let base: Option<Input> = match baseline.map(report_input::load).transpose() {
        Ok(b) => b,
        Err(e) => return fail(e),
    };
    let cur = match report_input::load(current) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let default = [DEFAULT_TOLERANCE];
    let tolerances = if tolerances.is_empty() {
        &default[..]
    } else {
        tolerances
    };
    for input in base.iter().chain(std::iter::once(&cur)) {
        diff::warn(input);
    }
    let d = base.as_ref().map(|b| diff::compare(b, &cur));
    let budgets = budgets.unwrap_or_default();
    let verdict = budgets_file.map(|_| budgets::evaluate(&budgets, &cur.run));
    let units = if bytes { Units::Bytes } else { Units::Gib };
    let (text, failed) = render(d.as_ref(), tolerances, &budgets, verdict.as_ref(), units);
    let rc = report_input::emit(&text);
    if rc != 0 {
        return rc;
    }
    if base.iter().chain(std::iter::once(&cur)).any(|i| i.damaged) {
        return fail(
            "some input was corrupt or cut off (see above): the check cannot be trusted".into(),
        );
    }
    if failed {
        EXIT_DRIFT
    } else {
        0
    }
}
