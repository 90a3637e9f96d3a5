//! `vramledger report PATH [--json | --html -o FILE] [--bytes] [-o FILE [--force]]`: the books
//! of a run as text, JSON or one self-contained HTML page, on stdout or written to a file
//! through [`crate::fsout`] (an existing file is never replaced without `--force`, and nothing
//! but a regular file ever is; `-o -` is stdout).
//!
//! Journals are read under the journal policy ([`crate::journal::load`]'s, each journal
//! replayed as it is decoded by [`crate::run_replay`]): an unreadable or damaged journal is
//! said on stderr, the report covers the rest, and the exit code is 2. When no journal could
//! be read there is no report: each file's reason, and exit 2.

use std::path::{Path, PathBuf};

use clap::Args;

use super::say;
use crate::output::report_text::Units;
use crate::{exit, fsout, output, run_replay};

/// Points per device in the HTML timeline (the SVG stays small; peaks are kept).
pub const TIMELINE_POINTS: usize = 2000;

/// Arguments of `vramledger report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run folder (every *.vlj under it) or one journal.
    pub path: PathBuf,
    /// JSON (schema vramledger.report/1) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Show bytes instead of GiB.
    #[arg(long)]
    pub bytes: bool,
    /// One self-contained HTML page (tables, timeline SVG); needs -o.
    #[arg(long, requires = "output", conflicts_with = "json")]
    pub html: bool,
    /// Write the report to FILE instead of stdout (never over an existing file without --force).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace FILE if it exists.
    #[arg(long, requires = "output")]
    pub force: bool,
}

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Html,
}

/// Runs `vramledger report`; returns the exit code.
pub fn main(args: ReportArgs) -> i32 {
    let format = match (args.html, args.json) {
        (true, _) => Format::Html,
        (_, true) => Format::Json,
        _ => Format::Text,
    };
    let units = if args.bytes { Units::Bytes } else { Units::Gib };
    match &args.output {
        Some(out) => to_file(&args.path, format, units, out, args.force),
        None => to_stdout(&args.path, format, units, None),
    }
}

/// The report of `path` (only of run `run_id`'s journals when given) on stdout; returns the
/// exit code. `vramledger run` prints its report through here.
pub fn to_stdout(path: &Path, format: Format, units: Units, run_id: Option<&str>) -> i32 {
    let (read, damaged) = match load(path, format, run_id) {
        Ok(x) => x,
        Err(e) => return say::fail(e),
    };
    let rc = say::emit(&render(&read, format, units));
    if rc == exit::OK && damaged {
        return say::partial("the report covers what could be read");
    }
    rc
}

fn to_file(path: &Path, format: Format, units: Units, out: &Path, force: bool) -> i32 {
    // Said before the journals are read: they can be large.
    if let Err(e) = fsout::check(out, force) {
        return say::fail(e);
    }
    let (read, damaged) = match load(path, format, None) {
        Ok(x) => x,
        Err(e) => return say::fail(e),
    };
    let text = render(&read, format, units);
    match fsout::write(out, text.as_bytes(), force) {
        Ok(fsout::Written::File) => say::line(format_args!("wrote {}", out.display())),
        Ok(fsout::Written::Stdout) => {}
        Err(e) => return say::fail(e),
    }
    if damaged {
        return say::partial("the report covers what could be read");
    }
    exit::OK
}

/// Every journal under `path` (only those of `run_id` when given) replayed one at a time as
/// it is decoded (no journal's events are held), under the journal policy: unreadable files
/// are said and skipped; the flag says whether any input was damaged. The HTML page's
/// timelines are kept in the same replay.
fn load(
    path: &Path,
    format: Format,
    run_id: Option<&str>,
) -> Result<(run_replay::RunRead, bool), String> {
    let want = run_replay::Want {
        run_id,
        timeline_points: (format == Format::Html).then_some(TIMELINE_POINTS),
    };
    let read = run_replay::books(path, want)?;
    // Nothing could be read: the reasons are the answer. An empty report (or HTML page)
    // would read as a run that did nothing.
    if read.loaded.journals.is_empty() {
        if let Some((last, rest)) = read.loaded.unreadable.split_last() {
            for e in rest {
                say::line(e);
            }
            return Err(last.clone());
        }
    }
    for e in &read.loaded.unreadable {
        say::line(e);
    }
    let damaged = read.loaded.damaged();
    Ok((read, damaged))
}

/// The books read in `format` (their warnings said on stderr).
fn render(read: &run_replay::RunRead, format: Format, units: Units) -> String {
    let books = &read.books;
    say::warnings(&books.warnings);
    match format {
        Format::Json => say::json(&output::report_json::render(books)),
        Format::Text => output::report_text::render(books, units),
        Format::Html => output::html::render(books, &read.timelines, units),
    }
}
