//! vramledger, offline: journals in, books and reports out.
//!
//! - [`journal`]: reads the per-process journals written by `libvramledger.so`;
//! - [`ledger`]: journals replayed into owner × stage books, balanced against free memory;
//! - [`run_replay`]: a run folder replayed journal by journal, each decoded as it is walked;
//! - [`output`]: each output format, a pure function of the books;
//! - [`snapshot`]: the live allocations at one point in time, and the history up to it;
//! - [`diff`], [`check`], [`budgets`]: two runs compared, drift and budgets for CI;
//! - [`timeline`]: memory per owner over time (the HTML report's chart);
//! - [`metrics`]: Prometheus exposition, `serve`, `top` and the SQLite history;
//! - [`cli`]: argument parsing and exit codes only.

pub use vramledger_format as format;

pub mod budgets;
pub mod check;
pub mod cli;
pub mod diff;
pub mod exit;
pub mod fsout;
pub mod infile;
pub mod journal;
pub mod launch;
pub mod ledger;
pub mod metrics;
pub mod output;
pub mod report_input;
pub mod run_replay;
pub mod size_arg;
pub mod sizing;
pub mod snapshot;
pub mod stderr;
pub mod timeline;
