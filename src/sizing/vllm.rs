//! vLLM's KV budget re-run: from a log ([`log`]: one startup; a log may hold several, read by
//! `vramledger_engines::log::vllm_startups`, and the last is sized unless `--attempt N` picks
//! another) or from a run's journals ([`run`] reads every worker's inputs, [`plan`] sizes them;
//! `command` is the `size RUN` entry). [`report`] is the answer as plain data.

mod command;
mod labels;
pub mod log;
pub mod plan;
pub mod report;
pub mod run;
pub mod worker;

pub use command::size_run_command;
pub use log::{size, VllmAsk};
pub use report::VllmReport;
