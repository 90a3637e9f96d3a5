//! Outputs: each turns journals or books into bytes; none touches files.

pub mod dump;
pub mod report_json;
pub mod report_text;
