//! `vramledger check --baseline BASE CURRENT [--tolerance T]... [--budgets FILE]`: exit 1 when
//! an owner × stage × device figure drifted beyond the tolerance ([`crate::check`]) or a budget
//! is exceeded ([`crate::budgets`]); 0 otherwise; 2 on bad input.

use std::path::PathBuf;

use clap::Args;

use super::say;
use crate::check::DEFAULT_TOLERANCE;
use crate::output::{check_text, report_text::Units};
use crate::report_input::{self, Input};
use crate::size_arg::{parse_tolerance, Tolerance};
use crate::{budgets, diff, exit};

/// Arguments of `vramledger check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The baseline: a run folder, a journal, or a report from `vramledger report --json`
    /// (optional when --budgets is given).
    #[arg(long, value_name = "BASE")]
    pub baseline: Option<PathBuf>,
    /// The run to check (same kinds as BASE).
    pub current: PathBuf,
    /// How far a figure may move: 64MiB, 1.5GiB, 512KiB, 100MB (decimal), 12345 (bytes),
    /// or 2% of the baseline figure [default: 64MiB]. Given twice (bytes and percent), a
    /// figure drifts only when it exceeds both.
    #[arg(
        long,
        value_name = "SIZE|PERCENT",
        value_parser = parse_tolerance,
        allow_hyphen_values = true
    )]
    pub tolerance: Vec<Tolerance>,
    /// A JSON file of memory budgets (docs/budgets.md).
    #[arg(long, value_name = "FILE")]
    pub budgets: Option<PathBuf>,
    /// Show exact bytes instead of GiB/MiB.
    #[arg(long)]
    pub bytes: bool,
}

/// Runs `vramledger check`; returns the exit code.
pub fn main(args: CheckArgs) -> i32 {
    if args.baseline.is_none() && args.budgets.is_none() {
        return say::fail("check needs --baseline BASE, --budgets FILE, or both");
    }
    let budgets = match args.budgets.as_deref().map(budgets::load).transpose() {
        Ok(b) => b,
        Err(e) => return say::fail(e),
    };
    let base: Option<Input> = match args.baseline.as_deref().map(report_input::load).transpose() {
        Ok(b) => b,
        Err(e) => return say::fail(e),
    };
    let cur = match report_input::load(&args.current) {
        Ok(c) => c,
        Err(e) => return say::fail(e),
    };
    let default = [DEFAULT_TOLERANCE];
    let tolerances = if args.tolerance.is_empty() {
        &default[..]
    } else {
        &args.tolerance
    };
    let inputs = || base.iter().chain(std::iter::once(&cur));
    for input in inputs() {
        say::warnings(&input.warnings);
    }
    let d = base.as_ref().map(|b| diff::compare(b, &cur));
    let verdict = budgets.as_ref().map(|b| budgets::evaluate(b, &cur.run));
    let budgets = budgets.unwrap_or_default();
    let units = if args.bytes { Units::Bytes } else { Units::Gib };
    let (text, failed) =
        check_text::render(d.as_ref(), tolerances, &budgets, verdict.as_ref(), units);
    let rc = say::emit(&text);
    if rc != exit::OK {
        return rc;
    }
    if inputs().any(|i| i.damaged) {
        return say::fail(
            "some input was corrupt or cut off (see above): the check cannot be trusted",
        );
    }
    if failed {
        exit::DRIFT
    } else {
        exit::OK
    }
}
