//! `vramledger run [--out DIR] [--json] [--lib PATH] -- CMD ARGS...`: the command under the
//! preload ([`crate::launch`]), then the report of its journals; the exit code is the command's.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;

use super::report::{self, Format};
use super::say;
use crate::journal;
use crate::launch::{self, RunSpec};
use crate::output::report_text::Units;

/// Arguments of `vramledger run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Folder for the journals.
    #[arg(long, default_value = "vramledger-out")]
    pub out: PathBuf,
    /// Print the report as JSON instead of text (the command's stdout then goes to stderr,
    /// so that stdout is the JSON alone).
    #[arg(long)]
    pub json: bool,
    /// The preload library to use [default: VRAMLEDGER_LIB, else libvramledger.so beside
    /// this binary, else the copy this binary carries].
    #[arg(long, value_name = "PATH")]
    pub lib: Option<PathBuf>,
    /// The command and its arguments (after `--`; any bytes, as the kernel passes them).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_parser = clap::value_parser!(OsString)
    )]
    pub command: Vec<OsString>,
}

/// Runs `vramledger run`; returns the command's exit code.
pub fn main(args: RunArgs) -> i32 {
    let spec = RunSpec {
        out: args.out,
        command: args.command,
        lib: args.lib,
        stdout_to_stderr: args.json,
    };
    let outcome = match launch::run(&spec) {
        Ok(o) => o,
        Err(e) => return say::fail(e),
    };
    // Journals are named `<run id>.<host>.<pid>.<start>.vlj` (shim/src/journal.rs): earlier
    // runs' journals in the same folder are not this run's.
    let prefix = format!("{}.", outcome.run_id);
    let ours = |f: &PathBuf| {
        f.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&prefix))
    };
    let has_journals = journal::find(&outcome.out).is_ok_and(|f| f.iter().any(ours));
    if has_journals {
        say::line(format_args!(
            "journals of run {} are in {}; report again with `vramledger report {}`",
            outcome.run_id,
            outcome.out.display(),
            outcome.out.display()
        ));
        let format = if args.json {
            Format::Json
        } else {
            Format::Text
        };
        let _ = report::to_stdout(&outcome.out, format, Units::Gib, Some(&outcome.run_id));
    } else {
        say::line(format_args!(
            "the command wrote no journal in {} (it made no CUDA call and printed no stage line under the preload)",
            outcome.out.display()
        ));
    }
    outcome.exit_code
}
