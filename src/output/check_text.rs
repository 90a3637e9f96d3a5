//! `vramledger check`'s findings as text: what drifted beyond the tolerance, which budgets
//! were exceeded, and budgets that matched nothing.

use std::fmt::Write;

use crate::budgets::{Budget, Verdict};
use crate::check::drifted;
use crate::diff::Diff;
use crate::output::diff_text::{a_to_b, device_text, signed, size, stage_text};
use crate::output::report_text::Units;
use crate::output::terminal_text::escaped;
use crate::size_arg::Tolerance;

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
        failed |= drift_text(&mut out, d, tolerances, units);
    }
    if let Some(v) = verdict {
        failed |= budget_text(&mut out, budgets, v, units);
    }
    (out, failed)
}

/// The drift against the baseline; whether anything drifted.
fn drift_text(out: &mut String, d: &Diff, tolerances: &[Tolerance], units: Units) -> bool {
    let drift = drifted(d, tolerances);
    let tol = tolerance_text(tolerances);
    if drift.is_empty() {
        let _ = writeln!(
            out,
            "ok: {} figures (owner × stage × device) within {tol} of the baseline {}",
            d.figures.len(),
            escaped(&d.a.source)
        );
        return false;
    }
    let _ = writeln!(
        out,
        "DRIFT: {} of {} figures (owner × stage × device) moved by more than {tol} from the baseline {}:",
        drift.len(),
        d.figures.len(),
        escaped(&d.a.source)
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
            device_text(d, f.device),
            stage_text(&f.stage, f.occurrence),
            f.owner.name(),
            a_to_b(&f.bytes, units),
            size(allowed as i64, units),
        );
    }
    true
}

/// `n` and `noun`, plural unless one.
fn counted(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// The budgets' verdict; whether a budget was exceeded.
fn budget_text(out: &mut String, budgets: &[Budget], v: &Verdict, units: Units) -> bool {
    let exceeded = !v.exceeded.is_empty();
    if !exceeded {
        let _ = writeln!(
            out,
            "ok: {} met ({})",
            counted(budgets.len(), "budget"),
            counted(v.checked, "figure")
        );
    } else {
        let _ = writeln!(
            out,
            "BUDGET EXCEEDED: {} over budget:",
            counted(v.exceeded.len(), "figure")
        );
        for e in &v.exceeded {
            let b = &budgets[e.budget];
            let stage = e
                .stage
                .as_ref()
                .map_or_else(String::new, |s| format!(" stage {}", escaped(s)));
            let _ = writeln!(
                out,
                "  budget #{} {}: {} dev {}{stage}: {} is {} > max {} (over by {})",
                b.number,
                escaped(&b.entry),
                escaped(&e.process),
                e.device,
                escaped(&b.what()),
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
            b.number,
            escaped(&b.entry)
        );
    }
    exceeded
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_budget_is_singular() {
        assert_eq!(super::counted(1, "budget"), "1 budget");
        assert_eq!(super::counted(0, "figure"), "0 figures");
        assert_eq!(super::counted(5, "budget"), "5 budgets");
    }
}
