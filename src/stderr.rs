//! Lines on stderr, for every part of the CLI: one line each, `PREFIX: message`, escaped for
//! a terminal (messages quote stage names, paths and log lines). A stderr that cannot take
//! the line (closed, a full disk, a reader gone) loses it: `eprintln!` would panic there and
//! turn the verb's answer, or its exit code 2, into a crash with code 101.

use std::io::Write;

use crate::output::terminal_text::escaped;

/// Says `msg` on stderr as `prefix: msg`, its control and bidi characters escaped.
pub fn line(prefix: &str, msg: impl std::fmt::Display) {
    let text = format!("{prefix}: {}\n", escaped(&msg.to_string()));
    // One write of the whole line (stderr is unbuffered): never interleaved mid-line.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
