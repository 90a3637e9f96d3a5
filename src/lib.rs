//! vramledger, offline: journals in, books and reports out.
//!
//! - [`journal`]: reads the per-process journals written by `libvramledger.so`;
//! - [`ledger`]: journals replayed into owner × stage books, balanced against free memory;
//! - [`output`]: each output format, a pure function of the books;
//! - [`cli`]: argument parsing and exit codes only.

pub use vramledger_format as format;

pub mod cli;
pub mod journal;
pub mod ledger;
pub mod output;
pub mod run;
