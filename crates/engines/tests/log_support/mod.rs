//! Shared assertions for the log-grammar tests (`tests/log_*.rs`).
#![allow(dead_code)]

pub mod real;
#[path = "../../../../tests/support/skip.rs"]
pub mod skip;

use vramledger_engines::log::{classify, Boundary, LineKind, LineNumbers};

/// Asserts that `numbers` holds exactly the listed fields (no other field is present) with
/// these values (exact: every value is a short decimal parsed the same way on both sides).
pub fn assert_numbers(line: &str, numbers: &LineNumbers, want: &[(&str, f64)]) {
    for (name, value) in want {
        assert!(
            LineNumbers::FIELD_NAMES.contains(name),
            "test bug: no field `{name}`"
        );
        assert_eq!(
            numbers.get(name),
            Some(*value),
            "field `{name}` of {line:?}"
        );
    }
    numbers.for_each_present(|name, value| {
        assert!(
            want.iter().any(|(n, _)| *n == name),
            "unexpected field `{name}`={value} in {line:?}"
        );
    });
}

/// Classifies `line` and checks kind, stage, event and the exact set of numbers.
pub fn check<'a>(
    line: &'a str,
    kind: LineKind,
    stage: &str,
    event: &str,
    want: &[(&str, f64)],
) -> Boundary<'a> {
    let b = classify(line).unwrap_or_else(|| panic!("not recognised: {line:?}"));
    assert_eq!(
        (b.kind, b.stage, b.event),
        (kind, stage, event),
        "kind/stage/event of {line:?}"
    );
    assert_numbers(line, &b.numbers, want);
    b
}

/// Asserts that `line` is not recognised.
pub fn reject(line: &str) {
    if let Some(b) = classify(line) {
        panic!(
            "should not be recognised: {line:?} -> {} {}",
            b.stage, b.event
        );
    }
}
