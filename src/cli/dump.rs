//! `vramledger dump JOURNAL [--text]`: every record of one journal, as JSON lines or one
//! readable line each. The journal is read by the reader [`crate::journal::load`] is built on
//! ([`journal::read`]: one file, never a folder) under the same policy: damage is said on
//! stderr, what could be read is printed, and the exit code is 2.

use std::path::PathBuf;

use clap::Args;

use super::say;
use crate::{exit, journal, output};

/// Arguments of `vramledger dump`.
#[derive(Debug, Args)]
pub struct DumpArgs {
    /// A journal file (*.vlj).
    pub journal: PathBuf,
    /// One readable line per record instead of JSON.
    #[arg(long)]
    pub text: bool,
}

/// Runs `vramledger dump`; returns the exit code.
pub fn main(args: DumpArgs) -> i32 {
    let j = match journal::read(&args.journal) {
        Ok(j) => j,
        Err(e) => return say::fail(e),
    };
    say::warnings(&j.warnings);
    let text = if args.text {
        output::dump::render_text(&j)
    } else {
        output::dump::render(&j)
    };
    let rc = say::emit(&text);
    if rc == exit::OK && j.corrupt {
        exit::BAD_INPUT
    } else {
        rc
    }
}
