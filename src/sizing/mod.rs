//! The sizing pass behind `vramledger size`: re-run the engine's KV-cache sizing on measured
//! numbers, explain the token count it chose, and answer "what if". A [`SizeRequest`] in, a
//! [`SizeReport`] out ([`build`]); the engines' own arithmetic and log grammar are
//! `vramledger_engines`'s, what is here is gathering the inputs and putting the answer together.
//!
//! # Brief overview
//!
//! - `build`: the pass step by step (check, read, pick the engine, resolve, size, choose);
//! - [`facts`]: what engine lines (a log, or a run's recorded lines and settings records) and
//!   journals say; `after_pool`: the run-time memory after the pool, from the books;
//! - [`inputs`]: the numbers and settings, each with its source (flag, log, run, rule):
//!   exact free bytes from a run's journals, printed GiB from a log, the `server_args` line;
//! - `model` and [`model_config`]: the model's `config.json` (given, in the logged model folder,
//!   the HF cache, the run folder) and its geometry; [`limits`]: the bounds on every number;
//! - [`layouts`]: which SGLang layout sizes (never one that contradicts what the log reports;
//!   ambiguity said);
//! - [`evaluate`]: one sizing pass (`cell`: the bytes per token); [`explain`]: the reproduction
//!   check, the breakdown and the run-time need after the pool;
//! - [`whatif`]: another fraction, page size, KV dtype, context length, GPU or TP size; the
//!   recommended `mem_fraction_static`; `capture`: post-capture sizing emulated;
//! - [`vllm`]: vLLM's `gpu_memory_utilization` budget from a log or a run;
//! - [`report`]: the answer as plain data.
//!
//! Outputs live in `crate::output::{size_text, size_json, size_vllm}`; the verb and its exit
//! codes in `crate::cli`.

mod after_pool;
mod build;
mod capture;
mod cell;
pub mod evaluate;
pub mod explain;
pub mod facts;
pub mod inputs;
pub mod layouts;
pub mod limits;
mod model;
pub mod model_config;
pub mod report;
pub mod request;
pub mod vllm;
pub mod whatif;

pub use build::build;
pub use report::{
    DefaultsOnly, DefaultsReport, ModelSource, PostCaptureEmulation, PostCaptureResize,
    Recommendation, Runtime, SglangReport, SizeReport, WhatIf,
};
pub use request::{SizeRequest, DEFAULT_MARGIN_GIB};
