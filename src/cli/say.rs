//! What every verb says and how: errors and warnings on stderr, one line each, prefixed
//! `vramledger:` (escaped for a terminal: they quote stage names, paths and log lines); the
//! answer on stdout, where a closed pipe is not an error.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use crate::exit;
use crate::journal::{self, Journal, Loaded};

/// Says `msg` on stderr as one line, its control and bidi characters escaped.
pub fn line(msg: impl std::fmt::Display) {
    crate::stderr::line("vramledger", msg);
}

/// Says `msg` on stderr; returns [`exit::BAD_INPUT`].
pub fn fail(msg: impl std::fmt::Display) -> i32 {
    line(msg);
    exit::BAD_INPUT
}

/// Warnings said for one journal (or other source) at the most: the rest are counted.
const WARNINGS_PER_SOURCE: usize = 20;

/// Says each warning on stderr: at most [`WARNINGS_PER_SOURCE`] of each source (the text
/// before a warning's first `": "`, a journal's path), then how many more it had (bytes that
/// are no journal, appended to one, can make a warning of every record).
pub fn warnings<'w>(warnings: impl IntoIterator<Item = &'w String>) {
    let mut said: HashMap<&str, usize> = HashMap::new();
    let mut order: Vec<&str> = Vec::new();
    for w in warnings {
        let source = w.split_once(": ").map_or("", |(s, _)| s);
        let n = said.entry(source).or_insert_with(|| {
            order.push(source);
            0
        });
        *n += 1;
        if *n <= WARNINGS_PER_SOURCE {
            line(format_args!("warning: {w}"));
        }
    }
    for source in order {
        let left = said[source].saturating_sub(WARNINGS_PER_SOURCE);
        if left > 0 {
            let of = if source.is_empty() {
                String::new()
            } else {
                format!("{source}: ")
            };
            line(format_args!(
                "warning: {of}{left} more warnings like the ones above were left out"
            ));
        }
    }
}

/// Writes `text` to stdout; a closed pipe is not an error. Returns the exit code.
pub fn emit(text: &str) -> i32 {
    match stdout(text) {
        Ok(()) => exit::OK,
        Err(e) => fail(format!("cannot write output: {e}")),
    }
}

/// Writes `text` to stdout; a closed pipe (the reader has what it wanted) is not an error.
pub fn stdout(text: &str) -> std::io::Result<()> {
    crate::fsout::stdout_usable()?;
    let mut out = std::io::stdout().lock();
    // Flushed here: an error at the implicit flush at exit would go unsaid.
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
}

/// A JSON document as the verbs print it: pretty, with a final newline.
pub fn json(v: &serde_json::Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// After an answer printed from partly damaged input (the damage was said above): says what
/// the answer covers (`covered`); returns [`exit::BAD_INPUT`].
pub fn partial(covered: &str) -> i32 {
    fail(format!(
        "some input was unreadable or corrupt (see above); {covered}"
    ))
}

/// What [`journal::load`] read from `path`, file by file in the order the files were found:
/// each journal, or the message saying why that file could not be read (so that what is said
/// on stderr follows the files).
pub fn in_file_order<'l>(path: &Path, loaded: &'l Loaded) -> Vec<Result<&'l Journal, &'l String>> {
    let by_path: HashMap<&Path, &Journal> = loaded
        .journals
        .iter()
        .map(|j| (j.path.as_path(), j))
        .collect();
    let mut unreadable = loaded.unreadable.iter();
    let files = journal::find(path).unwrap_or_default();
    files
        .iter()
        .filter_map(|f| match by_path.get(f.as_path()) {
            Some(j) => Some(Ok(*j)),
            None => unreadable.next().map(Err),
        })
        .collect()
}
