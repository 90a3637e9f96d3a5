//! `vramledger report PATH -o FILE [--html | --json] [--force]`: the report written to a
//! file (text, JSON, or one self-contained HTML page) instead of stdout. An existing file is
//! never replaced without `--force`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use crate::cli::EXIT_BAD_INPUT;
use crate::journal::{self, Journal};
use crate::output::report_text::Units;
use crate::{ledger, output, timeline};

/// Points per device in the HTML timeline (the SVG stays small; peaks are kept).
pub const TIMELINE_POINTS: usize = 2000;

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Html,
}

/// Reads every journal under `path`; unreadable ones are reported and skipped (the flag
/// says so), as `vramledger report` does.
fn load(path: &Path) -> Result<(Vec<Journal>, bool), String> {
    let files = journal::find(path).map_err(|e| e.to_string())?;
    let mut bad = false;
    let mut out = Vec::new();
    for f in files {
        match journal::read(&f) {
            Ok(j) => {
                bad |= j.corrupt;
                out.push(j);
            }
            Err(e) => {
                eprintln!("vramledger: {e}");
                bad = true;
            }
        }
    }
    if out.is_empty() && !bad {
        return Err(format!("no journals (*.vlj) found in {}", path.display()));
    }
    Ok((out, bad))
}

/// Writes `bytes` to `out`; refuses to replace an existing file unless `force`.
pub fn write_new(out: &Path, bytes: &[u8], force: bool) -> Result<(), String> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true);
    if force {
        opts.create(true).truncate(true);
    } else {
        opts.create_new(true);
    }
    let mut f = opts.open(out).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            format!(
                "{} already exists; pass --force to overwrite it",
                out.display()
            )
        } else {
            format!("cannot write {}: {e}", out.display())
        }
    })?;
    f.write_all(bytes)
        .map_err(|e| format!("cannot write {}: {e}", out.display()))
}

/// Renders the report of `path` in `format` into `out`; returns the exit code.
pub fn command(path: &Path, format: Format, bytes: bool, out: &Path, force: bool) -> i32 {
    let fail = |e: String| {
        eprintln!("vramledger: {e}");
        EXIT_BAD_INPUT
    };
    if !force && out.exists() {
        // Said before the journals are read: they can be large.
        return fail(format!(
            "{} already exists; pass --force to overwrite it",
            out.display()
        ));
    }
    let (journals, bad) = match load(path) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    let books = ledger::build(&journals);
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
        Format::Html => {
            let timelines: BTreeMap<String, Vec<timeline::DeviceTimeline>> = journals
                .iter()
                .map(|j| {
                    (
                        j.path.display().to_string(),
                        timeline::replay(j, TIMELINE_POINTS),
                    )
                })
                .collect();
            output::html::render(&books, &timelines, units)
        }
    };
    if let Err(e) = write_new(out, text.as_bytes(), force) {
        return fail(e);
    }
    eprintln!("vramledger: wrote {}", out.display());
    if bad {
        eprintln!("vramledger: some input was unreadable or corrupt (see above); the report covers what could be read");
        return EXIT_BAD_INPUT;
    }
    0
}
