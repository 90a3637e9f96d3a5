//! Engine-specific knowledge (SGLang, vLLM): log-line grammar and KV sizing arithmetic; and
//! what text loses before it is written or shown: secrets (`redact`), characters that act on
//! a terminal (`terminal_text`).
//!
//! Dependency-free on purpose: the shim (inside the target process) recognises stage
//! boundaries with the same grammar the offline parser uses, so the two can never drift.

pub mod log;
pub mod redact;
pub mod sizing;
pub mod terminal_text;
