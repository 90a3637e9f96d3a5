//! `vramledger diff A B [--json] [--bytes]`: two runs compared figure by figure
//! ([`crate::diff::compare`]); exit 0, or 2 on bad or damaged input (printed after the diff).

use std::path::PathBuf;

use clap::Args;

use super::say;
use crate::output::report_text::Units;
use crate::output::{diff_json, diff_text};
use crate::{diff, exit, report_input};

/// Arguments of `vramledger diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// A run folder, a journal, or a report from `vramledger report --json`.
    pub a: PathBuf,
    /// The same kinds as A.
    pub b: PathBuf,
    /// JSON (schema vramledger.diff/1) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Show exact bytes instead of GiB/MiB.
    #[arg(long)]
    pub bytes: bool,
}

/// Runs `vramledger diff`; returns the exit code.
pub fn main(args: DiffArgs) -> i32 {
    // Both are read (at once, each on its own thread: each is read a part at a time, so
    // two cost little memory) before either error stops the verb: each bad input is said,
    // A's first.
    let (a, b) = std::thread::scope(|s| {
        let b = s.spawn(|| report_input::load(&args.b));
        let a = report_input::load(&args.a);
        let b = b.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        (a, b)
    });
    let (a, b) = (
        a.inspect_err(|e| say::line(e)),
        b.inspect_err(|e| say::line(e)),
    );
    let (Ok(a), Ok(b)) = (a, b) else {
        return exit::BAD_INPUT;
    };
    say::warnings(&a.warnings);
    say::warnings(&b.warnings);
    let d = diff::compare(&a, &b);
    let text = if args.json {
        say::json(&diff_json::render(&d))
    } else {
        let units = if args.bytes { Units::Bytes } else { Units::Gib };
        diff_text::render(&d, units)
    };
    let rc = say::emit(&text);
    if rc == exit::OK && (a.damaged || b.damaged) {
        return say::fail(
            "some input was corrupt or cut off (see above); the diff covers what could be read",
        );
    }
    rc
}
