//! vramledger, offline: journals in, books and reports out.
//!
//! - [`journal`]: reads the per-process journals written by `libvramledger.so`;
//! - [`output`]: each output format, a pure function of what was read;
//! - [`cli`]: argument parsing and exit codes only.

pub use vramledger_format as format;

pub mod cli;
pub mod journal;
pub mod output;
