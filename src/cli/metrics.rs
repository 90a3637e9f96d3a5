//! `vramledger metrics RUN`: the ledger of a run, once, as Prometheus or OpenMetrics text.
//!
//! Read like `report` reads (every journal whole); what cannot be read is said on stderr and
//! makes the exit code 2 after the rest is printed. A folder without journals yet is a run
//! that has not started: its exposition has no process (exit 0).

use std::path::PathBuf;

use clap::Args;

use crate::journal;
use crate::metrics::exposition::{self, Clock, Format, ReaderState};

/// Arguments of `vramledger metrics`.
#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// A run folder (every *.vlj under it) or one journal.
    pub path: PathBuf,
    /// OpenMetrics 1.0.0 text instead of the Prometheus text format 0.0.4.
    #[arg(long)]
    pub openmetrics: bool,
    /// The `model_name` label of every process (default: from the launch command line).
    #[arg(long, value_name = "NAME")]
    pub model_name: Option<String>,
}

/// Runs `vramledger metrics`; returns the exit code.
pub fn main(args: MetricsArgs) -> i32 {
    let files = match journal::find(&args.path) {
        Ok(f) => f,
        Err(e) => return super::fail(e),
    };
    let mut journals = Vec::with_capacity(files.len());
    let mut bad = false;
    for f in &files {
        match journal::read(f) {
            Ok(j) => {
                for w in &j.warnings {
                    eprintln!("vramledger: warning: {w}");
                }
                bad |= j.corrupt;
                journals.push(j);
            }
            Err(e) => {
                eprintln!("vramledger: {e}");
                bad = true;
            }
        }
    }
    if files.is_empty() {
        eprintln!(
            "vramledger: note: no journals (*.vlj) in {} yet; the exposition lists no process",
            args.path.display()
        );
    }
    let (views, notes) = crate::metrics::views_of(&journals, args.model_name.as_deref());
    for n in notes {
        eprintln!("vramledger: note: {n}");
    }
    let reader = ReaderState {
        journals: journals.len(),
        unreadable: files.len() - journals.len(),
    };
    let format = if args.openmetrics {
        Format::OpenMetrics
    } else {
        Format::Prometheus
    };
    let text = exposition::render(&views, reader, &Clock::now(), format);
    let rc = super::emit(&text);
    if rc == 0 && bad {
        eprintln!("vramledger: some input was unreadable or corrupt (see above); the metrics cover what could be read");
        return super::EXIT_BAD_INPUT;
    }
    rc
}
