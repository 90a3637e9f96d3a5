//! `vramledger report PATH -o FILE [--html | --json] [--force]`: the report written to a
//! file (text, JSON, or one self-contained HTML page) instead of stdout, through
//! [`crate::fsout`]: an existing file is never replaced without `--force`, and nothing but a
//! regular file ever is; `-o -` is stdout.

use std::path::Path;

use crate::cli::EXIT_BAD_INPUT;
use crate::output::report_text::Units;
use crate::{fsout, output, run_replay};

/// Points per device in the HTML timeline (the SVG stays small; peaks are kept).
pub const TIMELINE_POINTS: usize = 2000;

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Html,
}

/// Renders the report of `path` in `format` into `out`; returns the exit code.
pub fn command(path: &Path, format: Format, bytes: bool, out: &Path, force: bool) -> i32 {
    let fail = |e: String| {
        eprintln!("vramledger: {e}");
        EXIT_BAD_INPUT
    };
    // Said before the journals are read: they can be large.
    if let Err(e) = fsout::check(out, force) {
        return fail(e);
    }
    // Every journal under `path`, replayed one at a time under the journal policy:
    // unreadable ones are reported and skipped (the exit code says so).
    let want = run_replay::Want {
        run_id: None,
        timeline_points: (format == Format::Html).then_some(TIMELINE_POINTS),
    };
    let read = match run_replay::books(path, want) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    for e in &read.unreadable {
        eprintln!("vramledger: {e}");
    }
    let bad = read.damaged();
    let books = read.books;
    for w in &books.warnings {
        eprintln!("vramledger: warning: {w}");
    }
    let units = if bytes { Units::Bytes } else { Units::Gib };
    let text = match format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&output::report_json::render(&books))
                .unwrap_or_default();
            s.push('\n');
            s
        }
        Format::Text => output::report_text::render(&books, units),
        Format::Html => output::html::render(&books, &read.timelines, units),
    };
    match fsout::write(out, text.as_bytes(), force) {
        Ok(fsout::Written::File) => eprintln!("vramledger: wrote {}", out.display()),
        Ok(fsout::Written::Stdout) => {}
        Err(e) => return fail(e),
    }
    if bad {
        eprintln!("vramledger: some input was unreadable or corrupt (see above); the report covers what could be read");
        return EXIT_BAD_INPUT;
    }
    0
}
