//! `vramledger metrics RUN`: the ledger of a run, once, as Prometheus or OpenMetrics text.
//!
//! Read like `report` reads (every journal whole, under the journal policy of
//! [`crate::journal::load`]); what cannot be read is said on stderr and makes the exit code 2
//! after the rest is printed. A folder without journals yet is a run that has not started: its
//! exposition has no process (exit 0).

use std::path::PathBuf;

use clap::Args;

use super::say;
use crate::exit;
use crate::journal::{self, Loaded};
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
    let loaded = match journal::load(&args.path) {
        Ok(l) => l,
        // A folder without journals yet: the run has not started.
        Err(_) if journal::find(&args.path).is_ok_and(|f| f.is_empty()) => {
            say::line(format_args!(
                "note: no journals (*.vlj) in {} yet; the exposition lists no process",
                args.path.display()
            ));
            Loaded::default()
        }
        Err(e) => return say::fail(e),
    };
    for file in say::in_file_order(&args.path, &loaded) {
        match file {
            Ok(j) => say::warnings(&j.warnings),
            Err(e) => say::line(e),
        }
    }
    let (views, notes) = crate::metrics::views_of(&loaded.journals, args.model_name.as_deref());
    for n in notes {
        say::line(format_args!("note: {n}"));
    }
    let reader = ReaderState {
        journals: loaded.journals.len(),
        unreadable: loaded.unreadable.len(),
    };
    let format = if args.openmetrics {
        Format::OpenMetrics
    } else {
        Format::Prometheus
    };
    let text = exposition::render(&views, reader, &Clock::now(), format);
    let rc = say::emit(&text);
    if rc == exit::OK && loaded.damaged() {
        return say::partial("the metrics cover what could be read");
    }
    rc
}
