//! The books: journals replayed into physical owner × stage, per process, device and rank,
//! balanced against device free memory.
//!
//! - [`process`]: one journal → stages × owners per device, peaks, modules, reconciliation;
//! - [`boundaries`]: where each stage starts, and what set it (line, API event, mark, rule);
//! - [`samples`]: free memory at any point, from readings and hooked movement between them;
//! - [`cross_rank`]: the minimum free memory per stage across ranks and SGLang's imbalance rule;
//! - [`owners`]: bytes per owner;
//! - [`pools`]: PyTorch's pools by id, checked against torch's own snapshot.
//!
//! Pure data in, pure data out: no file is read here (see [`crate::journal`]).

pub mod books;
pub mod boundaries;
pub mod context;
pub mod cross_rank;
pub mod device;
pub mod index;
pub mod owners;
pub mod peaks;
pub mod points;
pub mod pools;
pub mod process;
pub mod rank;
pub mod records;
pub mod replay;
pub mod samples;
#[cfg(test)]
mod test_records;

use crate::journal::Journal;

pub use owners::{OwnerBytes, REPORT_OWNERS};
pub use process::{DeviceBooks, ProcessBooks, StageRow};

/// Every process of a run.
#[derive(Debug, Clone, Default)]
pub struct RunBooks {
    pub processes: Vec<ProcessBooks>,
    pub cross_rank: Vec<cross_rank::CrossRankStage>,
    pub warnings: Vec<String>,
}

/// Replays every journal.
pub fn build(journals: &[Journal]) -> RunBooks {
    let processes = journals.iter().map(process::replay).collect();
    let warnings = journals
        .iter()
        .flat_map(|j| j.warnings.iter().cloned())
        .collect();
    build_processes(processes, warnings)
}

/// The run of these processes' books, ordered by [`process::run_order`].
pub fn build_processes(mut processes: Vec<ProcessBooks>, warnings: Vec<String>) -> RunBooks {
    processes.sort_by(|a, b| {
        process::run_order(&a.host, a.rank, a.start_unix_ns, a.pid).cmp(&process::run_order(
            &b.host,
            b.rank,
            b.start_unix_ns,
            b.pid,
        ))
    });
    let cross_rank = cross_rank::build(&processes);
    RunBooks {
        processes,
        cross_rank,
        warnings,
    }
}
