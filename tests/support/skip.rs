//! A test that cannot run here says so and is counted as skipped, never as passed.
//!
//! libtest has no run-time skip, so a skipping test records itself: one line
//! `<test binary>::<test>\t<reason>` appended to `$VRAMLEDGER_SKIP_LOG` (scripts/test.sh sets it,
//! takes those tests out of the passed count and prints the reasons), and the reason on stderr.
//! Where the inputs must exist (CI: `VRAMLEDGER_NO_SKIP=1`, set by .ci/run) a skip is a failure.
//! (The engines crate's tests take this file too, by path.)

use std::io::Write;

/// Records that the calling test is skipped because of `reason`; the test then returns.
/// Panics instead when `VRAMLEDGER_NO_SKIP=1`.
pub fn skip(reason: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("?")
        .replace(['\t', '\n'], " ");
    assert!(
        std::env::var("VRAMLEDGER_NO_SKIP").map_or(true, |v| v != "1"),
        "{test} would be skipped, and VRAMLEDGER_NO_SKIP=1 makes a skip a failure: {reason}"
    );
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| {
            s.rsplit_once('-')
                .map_or(s.clone(), |(name, _hash)| name.to_string())
        })
        .unwrap_or_default();
    eprintln!("SKIPPED {binary}::{test}: {reason}");
    if let Some(log) = std::env::var_os("VRAMLEDGER_SKIP_LOG") {
        let line = format!("{binary}::{test}\t{}\n", reason.replace(['\t', '\n'], " "));
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            panic!("cannot record the skip in {}: {e}", log.to_string_lossy());
        }
    }
}
