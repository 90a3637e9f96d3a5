//! Outputs: each turns journals or books into bytes; none touches files.

pub mod dump;
