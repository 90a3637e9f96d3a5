//! The command line: parse, call the library, map results to exit codes.
//!
//! Exit codes: 0 success, 1 a check found drift (or sizing cannot fit), 2 bad input.

use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::journal;
use crate::output;

/// Exit code for bad input.
pub const EXIT_BAD_INPUT: i32 = 2;

#[derive(Parser)]
#[command(
    name = "vramledger",
    version,
    about = "Where every byte of GPU memory went: who holds it, and when it was taken",
    after_help = "Workflow: `vramledger run -- <cmd>` (or LD_PRELOAD=libvramledger.so <cmd>), then read the journals.\nExit codes: 0 success, 1 drift found / does not fit, 2 bad input."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every record of a journal as JSON lines.
    Dump {
        /// A journal file (*.vlj).
        journal: PathBuf,
        /// One readable line per record instead of JSON.
        #[arg(long)]
        text: bool,
    },
}

/// Runs the CLI; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_BAD_INPUT } else { 0 };
        }
    };
    match cli.command {
        Command::Dump { journal, text } => dump(&journal, text),
    }
}

fn dump(path: &std::path::Path, as_text: bool) -> i32 {
    let j = match journal::read(path) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("vramledger: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    for w in &j.warnings {
        eprintln!("vramledger: warning: {w}");
    }
    let text = if as_text {
        output::dump::render_text(&j)
    } else {
        output::dump::render(&j)
    };
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("vramledger: cannot write output: {e}");
            return EXIT_BAD_INPUT;
        }
    }
    0
}
