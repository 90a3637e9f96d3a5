//! Exit codes, defined once for every verb (and said in `vramledger --help`): 0 success, 1 a
//! check found drift or a configuration cannot fit, 2 bad input. A verb whose input was
//! partly damaged prints what it could and still exits [`BAD_INPUT`].

/// Success.
pub const OK: i32 = 0;
/// `check`: a figure drifted beyond the tolerance, or a budget was exceeded.
pub const DRIFT: i32 = 1;
/// `size`: the configuration cannot fit (the report is still printed).
pub const DOES_NOT_FIT: i32 = 1;
/// Bad input: a flag, a file that cannot be read, damaged journals, output that cannot be
/// written.
pub const BAD_INPUT: i32 = 2;
