//! The command line: parse, call the library, map results to exit codes.
//!
//! Exit codes: 0 success, 1 a check found drift (or sizing cannot fit), 2 bad input.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use crate::journal;
use crate::output::report_text::Units;
use crate::{output, run, run_replay};

mod export;
mod metrics;
mod serve;
mod snapshot;
mod top;

/// Exit code for bad input.
pub const EXIT_BAD_INPUT: i32 = 2;

#[derive(Parser)]
#[command(
    name = "vramledger",
    version,
    about = "Where every byte of GPU memory went: who holds it, and when it was taken",
    after_help = "Workflow:\n  vramledger run -- python -m sglang.launch_server ...   (or LD_PRELOAD=libvramledger.so CMD)\n  vramledger report vramledger-out/            (text; --json; --html -o page.html)\n  vramledger size vramledger-out/ --model-config config.json   (why this many KV tokens)\n  vramledger diff base/ current/;  vramledger check --baseline base/ current/ --tolerance 2%\n  vramledger snapshot vramledger-out/ --at-peak --format memory-viz -o peak.pickle\n  vramledger serve vramledger-out/ (Prometheus /metrics; metrics: once);  vramledger top vramledger-out/\n  vramledger export --sqlite history.db vramledger-out/   (runs into SQL)\n\nExit codes: 0 success, 1 drift found / does not fit, 2 bad input."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a command under libvramledger.so and print the report when it ends.
    Run {
        /// Folder for the journals.
        #[arg(long, default_value = "vramledger-out")]
        out: PathBuf,
        /// Print the report as JSON instead of text (the command's stdout then goes to stderr,
        /// so that stdout is the JSON alone).
        #[arg(long)]
        json: bool,
        /// The preload library to use [default: VRAMLEDGER_LIB, else libvramledger.so beside
        /// this binary, else the copy this binary carries].
        #[arg(long, value_name = "PATH")]
        lib: Option<PathBuf>,
        /// The command and its arguments (after `--`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// The books of a run: stage × owner per process and device, balanced against free memory.
    Report {
        /// A run folder (every *.vlj under it) or one journal.
        path: PathBuf,
        /// JSON (schema vramledger.report/1) instead of text.
        #[arg(long)]
        json: bool,
        /// Show bytes instead of GiB.
        #[arg(long)]
        bytes: bool,
        /// One self-contained HTML page (tables, timeline SVG); needs -o.
        #[arg(long, requires = "output", conflicts_with = "json")]
        html: bool,
        /// Write the report to FILE instead of stdout (never over an existing file without --force).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        /// Replace FILE if it exists.
        #[arg(long, requires = "output")]
        force: bool,
    },
    /// Compare two runs: owner × stage × device, live and peak, modules, stage durations.
    Diff {
        /// A run folder, a journal, or a report from `vramledger report --json`.
        a: PathBuf,
        /// The same kinds as A.
        b: PathBuf,
        /// JSON (schema vramledger.diff/1) instead of text.
        #[arg(long)]
        json: bool,
        /// Show exact bytes instead of GiB/MiB.
        #[arg(long)]
        bytes: bool,
    },
    /// Exit 1 when CURRENT drifted from a baseline beyond a tolerance, or exceeds a budget.
    Check {
        /// The baseline: a run folder, a journal, or a report from `vramledger report --json`
        /// (optional when --budgets is given).
        #[arg(long, value_name = "BASE")]
        baseline: Option<PathBuf>,
        /// The run to check (same kinds as BASE).
        current: PathBuf,
        /// How far a figure may move: 64MiB, 1.5GiB, 512KiB, 100MB (decimal), 12345 (bytes),
        /// or 2% of the baseline figure [default: 64MiB]. Given twice (bytes and percent), a
        /// figure drifts only when it exceeds both.
        #[arg(
            long,
            value_name = "SIZE|PERCENT",
            value_parser = crate::size_arg::parse_tolerance,
            allow_hyphen_values = true
        )]
        tolerance: Vec<crate::size_arg::Tolerance>,
        /// A JSON file of memory budgets (docs/budgets.md).
        #[arg(long, value_name = "FILE")]
        budgets: Option<PathBuf>,
        /// Show exact bytes instead of GiB/MiB.
        #[arg(long)]
        bytes: bool,
    },
    /// Every live allocation at one point in time: JSON, a memory_viz pickle or a Perfetto trace.
    Snapshot(snapshot::SnapshotArgs),
    /// Re-run SGLang's (or vLLM's) KV-cache sizing on measured memory: reproduce, explain, what-if.
    Size(Box<crate::sizing_cli::SizeArgs>),
    /// The live ledger as Prometheus / OpenMetrics text (docs/metrics.md).
    Metrics(metrics::MetricsArgs),
    /// Serve /metrics over HTTP, reading journals as they grow (loopback by default).
    Serve(serve::ServeArgs),
    /// Append runs to a SQLite database (docs/sqlite-schema.md).
    Export(export::ExportArgs),
    /// A live terminal view of devices × owners, stages, peaks and recent changes (q quits).
    Top(top::TopArgs),
    /// Print the path of the libvramledger.so that `run` preloads (for LD_PRELOAD by hand).
    LibPath {
        /// Check this file instead of searching [default: VRAMLEDGER_LIB, else beside this
        /// binary, else the carried copy, written out on first use].
        #[arg(long, value_name = "PATH")]
        lib: Option<PathBuf>,
    },
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
        Command::Size(args) => crate::sizing_cli::main(&args),
        Command::Report {
            path,
            json,
            bytes,
            html,
            output: Some(out),
            force,
        } => {
            use crate::report_file::{command, Format};
            let format = match (html, json) {
                (true, _) => Format::Html,
                (_, true) => Format::Json,
                _ => Format::Text,
            };
            command(&path, format, bytes, &out, force)
        }
        Command::Report {
            path, json, bytes, ..
        } => report(&path, json, bytes, None),
        Command::Diff { a, b, json, bytes } => crate::diff::command(&a, &b, json, bytes),
        Command::Check {
            baseline,
            current,
            tolerance,
            budgets,
            bytes,
        } => crate::check::command(
            baseline.as_deref(),
            &current,
            &tolerance,
            budgets.as_deref(),
            bytes,
        ),
        Command::Run {
            out,
            json,
            lib,
            command,
        } => run_command(out, json, lib, command),
        Command::LibPath { lib } => match crate::libpath::for_this_cli(lib.as_deref()) {
            Ok(p) => emit(&format!("{}\n", p.display())),
            Err(e) => fail(e),
        },
        Command::Snapshot(args) => snapshot::main(args),
        Command::Metrics(args) => metrics::main(args),
        Command::Serve(args) => serve::main(args),
        Command::Export(args) => export::main(args),
        Command::Top(args) => top::main(args),
    }
}

fn fail(msg: impl std::fmt::Display) -> i32 {
    eprintln!("vramledger: {msg}");
    EXIT_BAD_INPUT
}

fn emit(text: &str) -> i32 {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            fail(format!("cannot write output: {e}"))
        }
        _ => 0,
    }
}

fn dump(path: &Path, as_text: bool) -> i32 {
    let j = match journal::read(path) {
        Ok(j) => j,
        Err(e) => return fail(e),
    };
    for w in &j.warnings {
        eprintln!("vramledger: warning: {w}");
    }
    let text = if as_text {
        output::dump::render_text(&j)
    } else {
        output::dump::render(&j)
    };
    let rc = emit(&text);
    if rc == 0 && j.corrupt {
        EXIT_BAD_INPUT
    } else {
        rc
    }
}

fn report(path: &Path, json: bool, bytes: bool, run_id: Option<&str>) -> i32 {
    // Every journal under `path` (only those of `run_id` when given), replayed one at a time
    // under the journal policy: unreadable files are reported and skipped.
    let want = run_replay::Want {
        run_id,
        timeline_points: None,
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
    let text = if json {
        let mut s =
            serde_json::to_string_pretty(&output::report_json::render(&books)).unwrap_or_default();
        s.push('\n');
        s
    } else {
        output::report_text::render(&books, if bytes { Units::Bytes } else { Units::Gib })
    };
    let rc = emit(&text);
    if rc == 0 && bad {
        eprintln!("vramledger: some input was unreadable or corrupt (see above); the report covers what could be read");
        return EXIT_BAD_INPUT;
    }
    rc
}

fn run_command(out: PathBuf, json: bool, lib: Option<PathBuf>, command: Vec<String>) -> i32 {
    let spec = run::RunSpec {
        out,
        command,
        lib,
        stdout_to_stderr: json,
    };
    let outcome = match run::run(&spec) {
        Ok(o) => o,
        Err(e) => return fail(e),
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
        eprintln!(
            "vramledger: journals of run {} are in {}; report again with `vramledger report {}`",
            outcome.run_id,
            outcome.out.display(),
            outcome.out.display()
        );
        let _ = report(&outcome.out, json, false, Some(&outcome.run_id));
    } else {
        eprintln!(
            "vramledger: the command wrote no journal in {} (it made no CUDA call and printed no stage line under the preload)",
            outcome.out.display()
        );
    }
    outcome.exit_code
}
