//! Helpers for the real-log tests: find the shared logs, classify them, compare sequences.

use std::path::PathBuf;

use super::assert_numbers;
use vramledger_engines::log::{classify, Engine, LineKind, StageTracker};

/// One expected recognised line.
pub struct Exp {
    /// (dp, tp, gpu_id) from the prefix.
    pub rank: (Option<u32>, Option<u32>, Option<u32>),
    pub kind: LineKind,
    pub stage: &'static str,
    pub event: &'static str,
    pub nums: &'static [(&'static str, f64)],
}

/// Expected line on a rank-less prefix (or none).
pub const fn any(
    kind: LineKind,
    stage: &'static str,
    event: &'static str,
    nums: &'static [(&'static str, f64)],
) -> Exp {
    Exp {
        rank: (None, None, None),
        kind,
        stage,
        event,
        nums,
    }
}

/// Expected line on `TPn`.
pub const fn tp(
    n: u32,
    kind: LineKind,
    stage: &'static str,
    event: &'static str,
    nums: &'static [(&'static str, f64)],
) -> Exp {
    Exp {
        rank: (None, Some(n), None),
        kind,
        stage,
        event,
        nums,
    }
}

/// `../shared/logs` beside the checkout (or beside the folder of worktrees holding it), or
/// `None` when there is none (the test is then skipped: counted and explained by
/// scripts/test.sh, a failure in CI).
pub fn logs_dir() -> Option<PathBuf> {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let candidates = [
        here.join("../../../shared/logs"),
        here.join("../../../../shared/logs"),
    ];
    let found = candidates.iter().find(|d| d.is_dir()).cloned();
    if found.is_none() {
        super::skip::skip(&format!(
            "{} is absent (real logs)",
            candidates[0].display()
        ));
    }
    found
}

/// Lines of a log without its header.
pub fn log_lines(name: &str) -> Option<Vec<String>> {
    let path = logs_dir()?.join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = String::from_utf8(bytes).expect("logs are UTF-8");
    Some(
        text.split('\n')
            .filter(|l| !l.starts_with("# ") && !l.starts_with("#EDITOR-NOTE"))
            .map(str::to_string)
            .collect(),
    )
}

/// Classifies every line of `name` and compares with `want`, in order. Returns the lines.
pub fn run(name: &str, engine: Engine, want: &[Exp]) -> Option<Vec<String>> {
    let lines = log_lines(name)?;
    let got: Vec<_> = lines.iter().filter_map(|l| classify(l)).collect();
    for (i, (b, e)) in got.iter().zip(want).enumerate() {
        let ctx = format!("{name}: recognised line #{i}: {:?}", b.text);
        assert_eq!(b.engine, engine, "{ctx}");
        assert_eq!((b.rank.dp, b.rank.tp, b.rank.gpu_id), e.rank, "{ctx}");
        assert_eq!(
            (b.kind, b.stage, b.event),
            (e.kind, e.stage, e.event),
            "{ctx}"
        );
        assert_numbers(&ctx, &b.numbers, e.nums);
    }
    if got.len() != want.len() {
        let extra: Vec<_> = got.iter().skip(want.len()).map(|b| b.text).collect();
        panic!(
            "{name}: recognised {} lines, expected {}; extra: {extra:?}",
            got.len(),
            want.len()
        );
    }
    Some(lines)
}

/// Stage transitions of one rank through the whole log (rank named by its tp, or none).
pub fn transitions(lines: &[String], tp_rank: Option<u32>) -> Vec<&'static str> {
    let mut tracker = StageTracker::new();
    lines
        .iter()
        .filter_map(|l| classify(l))
        .filter(|b| b.rank.tp == tp_rank)
        .filter_map(|b| tracker.observe(&b))
        .map(|t| t.to)
        .collect()
}
