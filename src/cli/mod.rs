//! The command line: one file per verb. Each verb parses nothing beyond its clap arguments,
//! calls the library, prints through [`say`], and maps the result to an exit code
//! ([`crate::exit`]: 0 success, 1 a check found drift or sizing cannot fit, 2 bad input).
//! Nothing below this module imports it.

use clap::{Parser, Subcommand};

use crate::exit;

mod check;
mod diff;
mod dump;
mod export;
mod lib_path;
mod metrics;
mod report;
mod run;
mod say;
mod serve;
pub mod size;
mod snapshot;
mod top;

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
    Run(run::RunArgs),
    /// The books of a run: stage × owner per process and device, balanced against free memory.
    Report(report::ReportArgs),
    /// Compare two runs: owner × stage × device, live and peak, modules, stage durations.
    Diff(diff::DiffArgs),
    /// Exit 1 when CURRENT drifted from a baseline beyond a tolerance, or exceeds a budget.
    Check(check::CheckArgs),
    /// Every live allocation at one point in time: JSON, a memory_viz pickle or a Perfetto trace.
    Snapshot(snapshot::SnapshotArgs),
    /// Re-run SGLang's (or vLLM's) KV-cache sizing on measured memory: reproduce, explain, what-if.
    Size(Box<size::SizeArgs>),
    /// The live ledger as Prometheus / OpenMetrics text (docs/metrics.md).
    Metrics(metrics::MetricsArgs),
    /// Serve /metrics over HTTP, reading journals as they grow (loopback by default).
    Serve(serve::ServeArgs),
    /// Append runs to a SQLite database (docs/sqlite-schema.md).
    Export(export::ExportArgs),
    /// A live terminal view of devices × owners, stages, peaks and recent changes (q quits).
    Top(top::TopArgs),
    /// Print the path of the libvramledger.so that `run` preloads (for LD_PRELOAD by hand).
    LibPath(lib_path::LibPathArgs),
    /// Print every record of a journal as JSON lines.
    Dump(dump::DumpArgs),
}

/// Runs the CLI; returns the process exit code.
pub fn main() -> i32 {
    crate::fsout::note_stdout();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if e.use_stderr() => {
            let _ = e.print();
            return exit::BAD_INPUT;
        }
        // --help and --version: the answer on stdout, whose write errors count as a verb's.
        Err(e) => return say::emit(&e.render().to_string()),
    };
    match cli.command {
        Command::Run(args) => run::main(args),
        Command::Report(args) => report::main(args),
        Command::Diff(args) => diff::main(args),
        Command::Check(args) => check::main(args),
        Command::Snapshot(args) => snapshot::main(args),
        Command::Size(args) => size::main(&args),
        Command::Metrics(args) => metrics::main(args),
        Command::Serve(args) => serve::main(args),
        Command::Export(args) => export::main(args),
        Command::Top(args) => top::main(args),
        Command::LibPath(args) => lib_path::main(args),
        Command::Dump(args) => dump::main(args),
    }
}
