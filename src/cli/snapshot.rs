//! `vramledger snapshot`: read the journals, take the snapshot, write one file.
//!
//! Unlike `report`, a snapshot is all or nothing: an unreadable or corrupt journal is an
//! error (exit 2) and nothing is written, so a snapshot never silently misses allocations.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::say::{self, fail};
use crate::snapshot::{At, Detail};
use crate::{exit, fsout, output, run_replay};

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SnapshotFormat {
    /// JSON, schema vramledger.snapshot/1 (docs/snapshot-schema.md).
    Json,
    /// A pickle for pytorch.org/memory_viz.
    MemoryViz,
    /// Chrome trace-event JSON for ui.perfetto.dev.
    Perfetto,
}

impl SnapshotFormat {
    /// What the format shows beyond the live allocations (the rest is not kept).
    fn detail(self) -> Detail {
        Detail {
            history: self == SnapshotFormat::MemoryViz,
            timeline: self == SnapshotFormat::Perfetto,
        }
    }

    fn name(self) -> &'static str {
        match self {
            SnapshotFormat::Json => "json",
            SnapshotFormat::MemoryViz => "memory-viz",
            SnapshotFormat::Perfetto => "perfetto",
        }
    }
}

/// Arguments of `vramledger snapshot`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("point").multiple(false))]
pub struct SnapshotArgs {
    /// A run folder (every *.vlj under it) or one journal.
    pub path: PathBuf,
    /// At the end of the first span of this stage, in every process that has it.
    #[arg(long, value_name = "STAGE", group = "point")]
    pub at: Option<String>,
    /// At the end of each journal (the default).
    #[arg(long, group = "point")]
    pub at_end: bool,
    /// Per process and device, when the hooked total was highest.
    #[arg(long, group = "point")]
    pub at_peak: bool,
    /// At the first allocation that failed with out-of-memory.
    #[arg(long, group = "point")]
    pub at_oom: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    pub format: SnapshotFormat,
    /// The file to write (`-`: stdout).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Overwrite FILE if it exists.
    #[arg(long)]
    pub force: bool,
}

impl SnapshotArgs {
    fn point(&self) -> At {
        match (&self.at, self.at_peak, self.at_oom) {
            (Some(stage), _, _) => At::Stage(stage.clone()),
            (None, true, _) => At::Peak,
            (None, false, true) => At::Oom,
            _ => At::End,
        }
    }
}

/// Runs `vramledger snapshot`; returns the exit code.
pub fn main(args: SnapshotArgs) -> i32 {
    if let Err(e) = fsout::check(&args.output, args.force) {
        return fail(e);
    }
    // Every journal under the path, replayed one at a time; any unreadable or damaged one
    // is an error (the journal policy: a snapshot claims every live allocation, so it is
    // never taken from damaged input).
    let at = args.point();
    let read = match run_replay::snapshot(&args.path, &at, args.format.detail()) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    say::warnings(&read.warnings);
    let snap = match read.snapshot {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    for s in &snap.skipped {
        say::line(format_args!(
            "note: {} (pid {}) left out: {}",
            s.journal, s.pid, s.reason
        ));
    }
    let bytes = match args.format {
        SnapshotFormat::Json => match output::snapshot_json::render(&snap) {
            Ok(bytes) => bytes,
            Err(e) => return fail(e),
        },
        SnapshotFormat::MemoryViz => {
            let (bytes, notes) = output::memory_viz::render(&snap);
            for n in notes {
                say::line(format_args!("note: {n}"));
            }
            bytes
        }
        SnapshotFormat::Perfetto => output::perfetto::render(&snap),
    };
    let to = match fsout::write(&args.output, &bytes, args.force) {
        Ok(fsout::Written::File) => args.output.display().to_string(),
        Ok(fsout::Written::Stdout) => "stdout".to_string(),
        Err(e) => return fail(e),
    };
    let devices: usize = snap.processes.iter().map(|p| p.devices.len()).sum();
    say::line(format_args!(
        "wrote a {} snapshot {} ({}, {}) to {}",
        args.format.name(),
        at.describe(),
        output::count(snap.processes.len(), "process", "processes"),
        output::count(devices, "device", "devices"),
        to
    ));
    exit::OK
}
