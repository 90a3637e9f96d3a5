//! vLLM 0.26 on the H200 (tests/data/h200-vllm-explore): the journal's exact bytes and the
//! printed lines give vLLM's own `Available KV cache memory: 52.95 GiB`, 27111 blocks,
//! `GPU KV cache size: 433,776 tokens`, `105.90x` and both `--kv-cache-memory=` integers.

use super::*;

const TOTAL: i64 = 150_109_880_320; // init snapshot cuMemGetInfo total
const INIT_FREE: i64 = 149_557_477_376; // init snapshot free
const NON_TORCH: i64 = 241_172_480; // (free drop − torch reserved growth) to after profiling
const GRAPHS: i64 = 243_269_632; // capture_model's free drop

fn layout() -> Layout {
    // Llama-3.1-8B bf16, block 16: 2 × 16 × 8 kv heads × 128 × 2 B per layer.
    Layout {
        page_size_bytes: 65_536,
        num_layers: 32,
        block_size: 16,
        max_model_len: 4096,
    }
}

fn inputs() -> Inputs {
    Inputs {
        total: Bytes::exact(TOTAL),
        init_free: Bytes::exact(INIT_FREE),
        gpu_memory_utilization: Some(0.5),
        weights: Bytes::printed_gib(15.0),
        activation: Bytes::printed_gib(1.72),
        non_torch: Bytes::exact(NON_TORCH),
        cudagraph_estimate: Bytes::ZERO,
        cudagraph: Some(Bytes::exact(GRAPHS)),
        kv_cache_memory: None,
    }
}

#[test]
fn the_suggestion_integer_makes_the_h200_budget_exact() {
    let printed = Printed {
        available_gib: Some(52.95),
        suggestion_bytes: Some(56_456_781_312),
        suggestion_full_bytes: Some(130_959_318_528),
    };
    let b = budget(&inputs(), &printed, &layout());
    assert_eq!(b.requested, Bytes::exact(75_054_940_160)); // ceil(total × 0.5)
    assert_eq!(b.non_kv, Bytes::exact(18_197_602_816));
    assert_eq!(b.available, Bytes::exact(56_857_337_344)); // 52.9529 GiB: "52.95"
    assert_eq!(b.blocks, (27_111, 27_111));
    assert_eq!(b.tokens, (433_776, 433_776));
    assert_eq!(b.concurrency, (105.90234375, 105.90234375));
    assert_eq!(b.suggestion, Some(Bytes::exact(56_456_781_312)));
    assert_eq!(b.suggestion_full, Some(Bytes::exact(130_959_318_528)));
    assert!(b.conflicts.is_empty() && b.error.is_none());
    // weights + activation = non_kv − non_torch, so the activation is within the print.
    let a = Bytes::printed_gib(1.72);
    assert!(a.lo <= b.activation.lo && b.activation.hi <= a.hi);
}

#[test]
fn without_the_summary_line_the_printed_budget_leaves_six_blocks() {
    // The journal alone: 'Model loading took 15.0 GiB', 'Available KV cache memory: 52.95 GiB';
    // the activation is not printed there (only in the after-capture summary).
    let mut i = inputs();
    i.activation = Bytes { lo: 0, hi: 1 << 40 };
    let printed = Printed {
        available_gib: Some(52.95),
        ..Printed::default()
    };
    let b = budget(&i, &printed, &layout());
    assert_eq!(b.available, Bytes::printed_gib(52.95));
    // [52.945, 52.955] GiB over 2 MiB blocks.
    assert_eq!(b.blocks, (27_107, 27_112));
    assert!(b.blocks.0 <= 27_111 && 27_111 <= b.blocks.1);
    // The activation the constraint leaves: requested − available − weights − non-torch.
    assert!(b.activation.lo > (1 << 30) && b.activation.hi < (2 << 30));
}

#[test]
fn the_checks_and_the_smallest_utilization() {
    let l = layout();
    assert!(check(0, &l)
        .unwrap()
        .starts_with("No available memory for the cache blocks."));
    // 4096 tokens need 256 blocks × 2 MiB = 0.5 GiB.
    let e = check(400 << 20, &l).unwrap();
    assert!(e.contains("(0.5 GiB KV cache is needed"), "{e}");
    assert!(e.contains("available KV cache memory (0.39 GiB)"), "{e}");
    assert!(e.contains("estimated maximum model length is 3200."), "{e}");
    assert_eq!(check(512 << 20, &l), None);
    // 139.8 GiB × u − 16.95 GiB ≥ 0.5 GiB: u ≥ 0.1248 → 0.13.
    let mut i = inputs();
    i.gpu_memory_utilization = Some(0.1);
    let printed = Printed::default();
    let b = budget(&i, &printed, &l);
    assert!(b.error.is_some());
    assert_eq!(smallest_utilization(&i, &printed, &l), Some(0.13));
}

#[test]
fn a_given_kv_cache_memory_is_the_budget() {
    let mut i = inputs();
    i.kv_cache_memory = Some(10 << 30);
    let b = budget(&i, &Printed::default(), &layout());
    assert_eq!(b.available, Bytes::exact(10 << 30));
    assert_eq!(b.blocks, (5120, 5120));
}

#[test]
fn intervals() {
    let g = Bytes::printed_gib(15.0);
    assert_eq!(g.hi - g.lo, 10_737_418);
    assert!(g.meet(Bytes::exact(16 << 30)).is_none());
    assert_eq!(
        Bytes::exact(5) - Bytes { lo: 1, hi: 2 },
        Bytes { lo: 3, hi: 4 }
    );
    assert_eq!(capacity(27_111, &layout()).0, 433_776);
    // max_model_len not a multiple of the block size: tokens ≠ blocks × 16.
    let l = Layout {
        max_model_len: 4001,
        ..layout()
    };
    assert_eq!(capacity(1000, &l), (15_940, 1000.0 / 251.0));
}

#[test]
fn an_unknown_utilization_leaves_the_printed_budget() {
    let mut i = inputs();
    i.gpu_memory_utilization = None;
    let printed = Printed {
        available_gib: Some(52.95),
        ..Printed::default()
    };
    let b = budget(&i, &printed, &layout());
    assert_eq!(b.available, Bytes::printed_gib(52.95));
    assert_eq!(b.blocks, (27_107, 27_112));
    // requested = weights + activation + non-torch + available, within the printed terms.
    let w = Bytes::printed_gib(15.0);
    let a = Bytes::printed_gib(1.72);
    let p = Bytes::printed_gib(52.95);
    assert_eq!(b.requested.lo, w.lo + a.lo + NON_TORCH + p.lo);
}
