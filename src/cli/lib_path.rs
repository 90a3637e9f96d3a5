//! `vramledger lib-path [--lib PATH]`: the path of the libvramledger.so that `run` preloads
//! ([`crate::launch::libpath`]), for LD_PRELOAD by hand.

use std::path::PathBuf;

use clap::Args;

use super::say;
use crate::launch::libpath;

/// Arguments of `vramledger lib-path`.
#[derive(Debug, Args)]
pub struct LibPathArgs {
    /// Check this file instead of searching [default: VRAMLEDGER_LIB, else beside this
    /// binary, else the carried copy, written out on first use].
    #[arg(long, value_name = "PATH")]
    pub lib: Option<PathBuf>,
}

/// Runs `vramledger lib-path`; returns the exit code.
pub fn main(args: LibPathArgs) -> i32 {
    match libpath::for_this_cli(args.lib.as_deref()) {
        Ok(p) => say::emit(&format!("{}\n", p.display())),
        Err(e) => say::fail(e),
    }
}
