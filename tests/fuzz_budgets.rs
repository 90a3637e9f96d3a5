//! Fuzzing the budgets reader (`check --budgets`): budgets files edited as JSON (unknown and
//! renamed keys, wrong types, absurd sizes, devices and ranks, long lists) and as text
//! (numbers past 64 bits), seeded with the budgets files in tests/data; every accepted file
//! is held against the recorded H200 run and the verdict rendered as `check` prints it.
//!
//! See tests/fuzz_support for the method, the counts and how to replay an input.

mod fuzz_support;

use fuzz_support::{count, files, json_mutate, manifest_dir, run_sharded};
use vramledger::output::check_text;
use vramledger::output::report_text::Units;
use vramledger::{budgets, report_input};

#[global_allocator]
static GUARD: fuzz_support::Guard = fuzz_support::Guard;

const KEYS: &[&str] = &[
    "budgets", "owner", "stage", "device", "rank", "peak", "live", "max", "note",
];

const WORDS: &[&str] = &[
    "nccl",
    "torch",
    "torch_graph_pool",
    "direct",
    "vmm",
    "context",
    "unattributed",
    "graph_capture",
    "weight_load",
    "kv_pool",
    "1.5GiB",
    "512MiB",
    "100MB",
    "12345",
    "0",
    "8000000TiB",
    "1.5 GiB",
    "5%",
    "-1GiB",
    "99999999999999999999GiB",
    "1.99999999999999999999999GiB",
    "",
];

#[test]
fn budgets_reader() {
    let seeds: Vec<Vec<u8>> = files(&manifest_dir().join("tests/data/fuzz-seeds/budgets"))
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    assert!(seeds.len() >= 2);
    let run = report_input::load(&manifest_dir().join("tests/data/h200-sglang-shape"))
        .expect("the recorded run reads")
        .run;
    let stats = run_sharded(
        "budgets_reader",
        count(60_000),
        |rng| {
            let seed = rng.pick(&seeds).clone();
            json_mutate(rng, &seed, KEYS, WORDS)
        },
        |bytes| {
            let Ok(text) = std::str::from_utf8(bytes) else {
                return false;
            };
            match budgets::parse("fuzz.json", text) {
                Ok(list) => {
                    let verdict = budgets::evaluate(&list, &run);
                    let _ = check_text::render(None, &[], &list, Some(&verdict), Units::Gib);
                    let _ = check_text::render(None, &[], &list, Some(&verdict), Units::Bytes);
                    true
                }
                Err(e) => {
                    assert!(e.starts_with("fuzz.json"), "{e}");
                    false
                }
            }
        },
    );
    assert!(stats.inputs >= count(60_000));
    assert!(stats.accepted > stats.inputs / 20, "{stats:?}");
}
