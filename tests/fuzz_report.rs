//! Fuzzing the baseline / report-JSON reader (`diff`, `check --baseline`): reports of the
//! recorded H200 runs in tests/data (as `vramledger report --json` writes them) edited as
//! JSON (figures at and past their bounds, wrong types, missing and renamed fields, long
//! lists, deep nesting) and as text; every accepted report is diffed against the recorded run
//! and itself, checked with tolerances, held to budgets, and rendered as text and JSON.
//!
//! See tests/fuzz_support for the method, the counts and how to replay an input.

mod fuzz_support;

use std::path::Path;

use fuzz_support::{count, json_mutate, manifest_dir, run_sharded};
use vramledger::output::report_text::Units;
use vramledger::output::{check_text, diff_json, diff_text};
use vramledger::size_arg::Tolerance;
use vramledger::{budgets, check, diff, journal, ledger, output, report_input};

#[global_allocator]
static GUARD: fuzz_support::Guard = fuzz_support::Guard;

const KEYS: &[&str] = &[
    "schema",
    "processes",
    "devices",
    "device",
    "stages",
    "name",
    "start_t_ns",
    "end_t_ns",
    "device_delta_bytes",
    "by_owner",
    "torch",
    "nccl",
    "unattributed",
    "peak",
    "total",
    "bytes",
    "stage",
    "live_at_end",
    "reconciliation",
    "start_free_bytes",
    "end_free_bytes",
    "balanced",
    "modules",
    "module",
    "owner",
    "live_bytes",
    "peak_bytes",
    "pid",
    "rank",
    "host",
    "cmdline",
];

const WORDS: &[&str] = &[
    "vramledger.report/1",
    "vramledger.report/2",
    "vramledger.diff/1",
    "graph_capture",
    "kv_pool",
    "torch",
    "nccl",
    "libcublas.so.13",
    "",
];

/// The reports of the recorded runs, whole and per journal (smaller seeds, faster inputs).
fn seed_reports() -> Vec<Vec<u8>> {
    let data = manifest_dir().join("tests/data");
    let mut out = Vec::new();
    for run in [
        "h200-sglang-shape",
        "h200-sglang-uncapped",
        "h200-graph-bs/a",
        "h200-graph-bs/b",
    ] {
        let loaded = journal::load(&data.join(run)).expect("recorded run");
        assert!(!loaded.damaged());
        let whole = ledger::build(&loaded.journals);
        out.push(serde_json::to_vec(&output::report_json::render(&whole)).unwrap());
        for j in loaded.journals {
            let one = ledger::build(std::slice::from_ref(&j));
            out.push(serde_json::to_vec(&output::report_json::render(&one)).unwrap());
        }
    }
    out
}

#[test]
fn report_reader() {
    let seeds = seed_reports();
    let recorded = report_input::load(&manifest_dir().join("tests/data/h200-sglang-shape"))
        .expect("the recorded run reads");
    let limits = budgets::parse(
        "b.json",
        r#"{"budgets": [{"owner": "nccl", "max": "1GiB"}, {"stage": "graph_capture", "max": "2GiB"},
            {"live": true, "max": "100GiB"}, {"peak": true, "owner": "torch", "max": 1}]}"#,
    )
    .unwrap();
    let tolerances = [Tolerance::Bytes(64 << 20), Tolerance::Percent(2.0)];
    let stats = run_sharded(
        "report_reader",
        count(10_000),
        |rng| {
            let seed = rng.pick(&seeds).clone();
            json_mutate(rng, &seed, KEYS, WORDS)
        },
        |bytes| {
            let input = match report_input::from_bytes(Path::new("fuzz.json"), "fuzz".into(), bytes)
            {
                Ok(i) => i,
                Err(e) => {
                    assert!(e.contains("fuzz.json"), "{e}");
                    return false;
                }
            };
            for d in [
                diff::compare(&recorded, &input),
                diff::compare(&input, &recorded),
                diff::compare(&input, &input),
            ] {
                let _ = diff_text::render(&d, Units::Gib);
                let _ = diff_json::render(&d);
                let _ = check::drifted(&d, &tolerances);
                let verdict = budgets::evaluate(&limits, &input.run);
                let _ = check_text::render(
                    Some(&d),
                    &tolerances,
                    &limits,
                    Some(&verdict),
                    Units::Bytes,
                );
            }
            input.kind == "report"
        },
    );
    assert!(stats.inputs >= count(10_000));
    assert!(stats.accepted > stats.inputs / 20, "{stats:?}");
}
