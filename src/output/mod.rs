//! Outputs: each turns journals or books into bytes; none touches files.

pub mod check_text;
pub mod diff_json;
pub mod diff_text;
pub mod dump;
pub mod html;
mod html_labels;
pub mod html_parts;
pub mod html_timeline;
pub mod memory_viz;
pub mod perfetto;
pub mod pickle;
pub mod pools_report;
pub mod report_json;
pub mod report_text;
pub mod size_json;
pub mod size_text;
pub mod size_vllm;
pub mod snapshot_json;
/// Shared with the shim, whose own warnings print paths from its environment.
pub use vramledger_engines::terminal_text;

/// `1 process`, `2 processes`: a count and its noun.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
