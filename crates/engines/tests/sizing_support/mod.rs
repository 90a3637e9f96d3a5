//! Helpers for the sizing tests on real logs: find `shared/`, read a log or a model config, and
//! pull numbers out of log lines by their literal markers. Deliberately independent of the
//! `log` module (the parser under test elsewhere): a marker and a number, nothing more.

#![allow(dead_code)]

#[path = "../../../../tests/support/skip.rs"]
mod skip_support;

use std::path::PathBuf;
use vramledger_engines::sizing::model::ModelGeometry;

/// `shared/logs`, or `None` when this checkout has no `shared/` (the test is then skipped:
/// counted and explained by scripts/test.sh, a failure in CI).
pub fn logs_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/logs");
    if dir.is_dir() {
        Some(dir)
    } else {
        skip_support::skip(&format!("{} is absent (real logs)", dir.display()));
        None
    }
}

/// The text of `shared/logs/<name>`, or `None` (skipped) when it cannot be read.
pub fn log(name: &str) -> Option<String> {
    let path = logs_dir()?.join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) => {
            skip_support::skip(&format!("cannot read {}: {e}", path.display()));
            None
        }
    }
}

/// The geometry of `shared/logs/configs/<name>.json`, or `None` (skipped) when it cannot be
/// read (panics if present but not a config).
pub fn config(name: &str) -> Option<ModelGeometry> {
    let path = logs_dir()?.join("configs").join(format!("{name}.json"));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            skip_support::skip(&format!("cannot read {}: {e}", path.display()));
            return None;
        }
    };
    Some(ModelGeometry::from_config_json(&text).expect("config.json parses"))
}

/// The number right after `marker` (digits, sign, '.', ','), on every log line (not the `# `
/// header) containing both `context` and `marker`, in order. Thousands separators are dropped.
pub fn numbers_after(text: &str, context: &str, marker: &str) -> Vec<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains(context))
        .filter_map(|l| {
            let start = l.find(marker)? + marker.len();
            let num: String = l[start..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || matches!(c, '-' | '.' | ','))
                .filter(|c| *c != ',')
                .collect();
            num.trim_end_matches('.').parse().ok()
        })
        .collect()
}

/// The minimum of [`numbers_after`] (SGLang's MIN over ranks).
pub fn min_after(text: &str, context: &str, marker: &str) -> Option<f64> {
    numbers_after(text, context, marker)
        .into_iter()
        .reduce(f64::min)
}

/// The single value a log states (all occurrences must agree).
pub fn the_value(text: &str, context: &str, marker: &str) -> Option<f64> {
    let all = numbers_after(text, context, marker);
    let first = *all.first()?;
    assert!(
        all.iter().all(|v| *v == first),
        "{marker} differs between lines: {all:?}"
    );
    Some(first)
}

/// `f"{x:.2f}"`.
pub fn two(x: f64) -> String {
    format!("{x:.2}")
}

/// Half of the last printed digit for `:.2f` numbers.
pub const HALF_CENTI_GIB: f64 = 0.005;
