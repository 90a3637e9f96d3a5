//! Worked examples for `tokens.rs`; every expected number is derived in the comment.

use super::*;
use crate::sizing::hybrid::{MambaInput, SwaInput};

const LLAMA8B_CELL: u64 = 131_072; // 8 kv heads * 256 * 32 layers * 2 B
const DEEPSEEK_CELL: u64 = 70_272; // (512 + 64) * 61 * 2 B
const GEMMA27B_CELL: u64 = 507_904; // 16 * 128 * 62 * 2 * 2 B (L1/L2 MHA cell)

fn size(i: &SizingInput) -> SizingResult {
    size_sglang(i).unwrap()
}

#[test]
fn l1_float_floordiv_llama_80gb() {
    // rest = 63.72 - 78.81 * (1 - 0.88) = 54.2628 GiB (CPython: 54.2628);
    // 54.2628 * 2^30 // 131072 = 444520.86 -> 444520 tokens (page 1).
    // max_num_reqs = min(max(int(444520 / 131072 * 512) = 1736, 2048), 4096) = 2048;
    // ReqToTokenPool(size=max_num_reqs + 1) = 2049 slots (0.4.6.post5);
    // max_running_requests = min(444520 // 2, 2049) = 2049.
    let mut i = SizingInput::new(Layout::V0_4_6, LLAMA8B_CELL, 0.88, 78.81, 63.72, 131_072);
    i.req_pool_extra_slot = true;
    let r = size(&i);
    assert_eq!(r.rest_gib, 54.2628);
    assert_eq!((r.profiled_tokens, r.tokens), (444_520, 444_520));
    assert_eq!((r.req_pool_size, r.max_running_requests), (2049, 2049));
    assert_eq!(r.error, None);
    // 0.4.7 and later: ReqToTokenPool(size=max_num_reqs).
    i.req_pool_extra_slot = false;
    assert_eq!(size(&i).max_running_requests, 2048);
}

#[test]
fn l1_negative_profile_cap_warning_and_error() {
    // rest = 10 - 100 * 0.15 = -5.000000000000002 GiB; -5.37e9 // 70272 = -76398.98 floored
    // -> -76399. The cap 131072 is "larger than the profiled value -76399", min() keeps -76399,
    // and `max_total_num_tokens <= 0` raises. Continuous bound: 1 - 10 / 100 = 0.9; one token
    // needs 70272 B = 6.5e-5 GiB more, so the smallest three-decimal fraction is 0.901.
    let mut i = SizingInput::new(Layout::V0_4_6, DEEPSEEK_CELL, 0.85, 100.0, 10.0, 163_840);
    i.max_total_tokens = Some(131_072);
    let r = size(&i);
    assert_eq!(r.profiled_tokens, -76_399);
    assert_eq!(
        r.cap_warning.as_deref(),
        Some(
            "max_total_tokens=131072 is larger than the profiled value -76399. \
             Use the profiled value instead."
        )
    );
    let e = r.error.unwrap();
    assert_eq!(e.check, FailedCheck::TokensNotPositive);
    assert_eq!(
        e.message,
        "Not enough memory. Please try to increase --mem-fraction-static."
    );
    assert!((e.minimum_fraction - 0.9).abs() < 1e-12);
    assert_eq!(e.smallest_working_fraction, Some(0.901));
}

#[test]
fn l2_messages_page_pp_and_swa() {
    // L2 wording carries the f-string's expression text.
    let i = SizingInput::new(Layout::V0_5_5, DEEPSEEK_CELL, 0.85, 100.0, 10.0, 8192);
    assert_eq!(
        size(&i).error.unwrap().message,
        "Not enough memory. Please try to increase --mem-fraction-static. \
         Current value: self.server_args.mem_fraction_static=0.85"
    );
    // rest = 20 - 80 * 0.1 = 12.000000000000002 GiB -> 12 * 8192 = 98304 tokens with the
    // Llama cell; page 64 keeps 98304 (1536 pages); the PP MIN with another stage's 90000
    // gives 90000 (L2 does not re-floor after the PP all-reduce).
    let mut i = SizingInput::new(Layout::V0_5_5, LLAMA8B_CELL, 0.9, 80.0, 20.0, 8192);
    i.page_size = 64;
    i.pp_min_tokens = Some(90_000);
    assert_eq!(size(&i).tokens, 90_000);
    // Hybrid SWA, F 10 / S 52, ratio 0.8: full = int(98304 * 62 / 51.6) = int(118117.2)
    // = 118117, swa = int(118117 * 0.8) = int(94493.6) = 94493.
    i.pp_min_tokens = None;
    i.page_size = 1;
    i.swa = Some(SwaInput {
        full_layers: 10,
        swa_layers: 52,
        ratio: 0.8,
        full_per_token: 0,
        swa_per_token: 0,
        sliding_window_size: None,
    });
    let r = size(&i);
    assert_eq!((r.tokens, r.swa_tokens), (118_117, Some(94_493)));
}

#[test]
fn l2_eagle_headroom_grows_the_target_pool() {
    // 98304 profiled tokens, context 8192: max_num_reqs = min(max(int(98304/8192*512) = 6144,
    // 2048), 4096) = 4096. EAGLE steps 3, topk 1, draft tokens 4:
    // 98304 + 4096*3*1 + 4096*4 + 100 = 98304 + 12288 + 16384 + 100 = 127076.
    let mut i = SizingInput::new(Layout::V0_5_5, LLAMA8B_CELL, 0.9, 80.0, 20.0, 8192);
    i.spec_headroom = Some(SpecHeadroom {
        num_steps: 3,
        eagle_topk: 1,
        num_draft_tokens: 4,
    });
    let r = size(&i);
    assert_eq!(
        (r.profiled_tokens, r.tokens, r.req_pool_size),
        (127_076, 127_076, 4096)
    );
    // max_running_requests = min(127076 // 2, 4096) = 4096; a user value 10000 is capped too,
    // and with DP attention 4 a user value 1000 becomes 1000 // 4 = 250.
    assert_eq!(r.max_running_requests, 4096);
    i.max_running_requests = Some(1000);
    i.attn_dp_size = 4;
    let r = size(&i);
    assert_eq!((r.req_pool_size, r.max_running_requests), (1000, 250));
}

#[test]
fn l2_mamba_carve_before_the_cell() {
    // rest 12.000000000000002 GiB; Mamba per request 64 MiB, r 0.9:
    // 12 * 0.9 / 1.9 * 2^30 // 67108864 = 90.9 -> K = 90; rest = 12 - 90 / 16 = 6.375 GiB;
    // tokens = 6.375 * 8192 = 52224 (only full-attention layers are in the cell).
    // max_num_reqs = min(2048 estimate, 90 // 1) = 90.
    let mut i = SizingInput::new(Layout::V0_5_5, LLAMA8B_CELL, 0.9, 80.0, 20.0, 8192);
    i.mamba = Some(MambaInput::new(64 << 20));
    let r = size(&i);
    assert_eq!(r.mamba_cache_size, Some(90));
    assert_eq!(r.tokens, 52_224);
    assert_eq!((r.req_pool_size, r.max_running_requests), (90, 90));
}

#[test]
fn l3_integer_budget_and_max_running_requests() {
    // rest 12.000000000000002 GiB -> int(rest * 2^30) = 12884901888 B (the 2e-15 is below one
    // byte); // 131072 = 98304 tokens. estimated = max(min(int(98304/8192*512), 4096), 2048)
    // = 4096; no user value: min(4096, 98304 // 2) = 4096; user 3000 with dp 2: min(1500, 4096).
    let mut i = SizingInput::new(Layout::V0_5_12, LLAMA8B_CELL, 0.9, 80.0, 20.0, 8192);
    let r = size(&i);
    assert_eq!(
        (r.budget_bytes, r.tokens, r.max_running_requests),
        (12_884_901_888, 98_304, 4096)
    );
    i.max_running_requests = Some(3000);
    i.attn_dp_size = 2;
    assert_eq!(size(&i).max_running_requests, 1500);
    // Cap 50000 with page 64: 50000 // 64 * 64 = 49984 after the re-floor.
    i.page_size = 64;
    i.max_total_tokens = Some(50_000);
    let r = size(&i);
    assert_eq!(
        (r.profiled_tokens, r.tokens, r.cap_warning),
        (98_304, 49_984, None)
    );
    // L3 wording: MemoryPoolConfig is built without mem_fraction_static, so no suffix.
    let bad = SizingInput::new(Layout::V0_5_12, LLAMA8B_CELL, 0.5, 80.0, 20.0, 8192);
    assert_eq!(
        size(&bad).error.unwrap().message,
        "Not enough memory. Please try to increase --mem-fraction-static."
    );
}

#[test]
fn l4_rest_error_wording_and_smallest_fraction() {
    // Gemma-3-27B-like: available 3.64, pre 22.46, f 0.8: rest = 3.64 - 4.492 = -0.852 <= 0.
    // minimum = 1 - 3.64 / 22.46 = 0.8379341...; suggested = ceil(837.93) / 1000 = 0.838.
    // At 0.838: rest = 3.64 - 22.46 * 0.162 = 0.00148 GiB = 1589137 B -> 3 tokens: works;
    // at 0.837 rest = -0.02098 fails, so the smallest working fraction is 0.838.
    for layout in [Layout::V0_5_18, Layout::V0_5_23] {
        let i = SizingInput::new(layout, GEMMA27B_CELL, 0.8, 22.46, 3.64, 4096);
        let e = size(&i).error.unwrap();
        assert_eq!(e.check, FailedCheck::RestNotPositive);
        assert_eq!(
            e.message,
            "Loaded weights leave no GPU memory for the KV cache under \
             --mem-fraction-static=0.8. Raise --mem-fraction-static above 0.838 \
             (minimum viable = 1 - available/pre = 0.8379). If using speculative decoding, \
             draft weights are now counted."
        );
        assert_eq!(e.smallest_working_fraction, Some(0.838));
    }
}

#[test]
fn l4_mm_reservation_overhead_and_post_capture_cap() {
    // rest = 20 - 80 * 0.1 - 2 (multimodal) = 10.000000000000002 GiB -> 81920 tokens.
    let mut i = SizingInput::new(Layout::V0_5_23, LLAMA8B_CELL, 0.9, 80.0, 20.0, 8192);
    i.mm_reservation_gib = 2.0;
    assert_eq!(size(&i).tokens, 81_920);
    // 0.5.23 subtracts a fixed overhead of 1 GiB from the budget: 9 GiB -> 73728.
    i.fixed_overhead_bytes = 1 << 30;
    assert_eq!(size(&i).tokens, 73_728);
    // A post-capture cap below the profile wins.
    i.cap_tokens = Some(70_000);
    assert_eq!(size(&i).tokens, 70_000);
    // Before 0.5.18 the multimodal reservation does not exist: 12 GiB -> 98304.
    i.layout = Layout::V0_5_12;
    i.fixed_overhead_bytes = 0;
    i.cap_tokens = None;
    assert_eq!(size(&i).tokens, 98_304);
}

#[test]
fn l4_user_requests_are_floored_at_one() {
    // 0.5.23: min(max(1, 3 // 4), 98304 // 2) = 1; 0.5.18 keeps 3 // 4 = 0.
    let mut i = SizingInput::new(Layout::V0_5_23, LLAMA8B_CELL, 0.9, 80.0, 20.0, 8192);
    i.max_running_requests = Some(3);
    i.attn_dp_size = 4;
    assert_eq!(size(&i).max_running_requests, 1);
    i.layout = Layout::V0_5_18;
    assert_eq!(size(&i).max_running_requests, 0);
}

#[test]
fn l4_swa_pool_too_small() {
    // Budget 12 GiB, SWA cell 81920 + 0.8 * 8192 * 52 = 422707.2 B -> int(12884901888 //
    // 422707.2) = 30481 full tokens, swa = int(30481 * 0.8) = 24384. A 32768-token window
    // does not fit: 32768 + 1 >= 24384.
    let mut i = SizingInput::new(Layout::V0_5_23, 0, 0.9, 80.0, 20.0, 8192);
    i.swa = Some(SwaInput {
        full_layers: 10,
        swa_layers: 52,
        ratio: 0.8,
        full_per_token: 8192,
        swa_per_token: 8192,
        sliding_window_size: Some(32_768),
    });
    let r = size(&i);
    assert_eq!((r.tokens, r.swa_tokens), (30_481, Some(24_384)));
    let e = r.error.unwrap();
    assert_eq!(e.check, FailedCheck::SwaPoolTooSmall);
    assert!(e
        .message
        .starts_with("SWA pool (24384 tokens) cannot hold even one request"));
    // The Gemma window of 1024 fits.
    i.swa.as_mut().unwrap().sliding_window_size = Some(1024);
    assert_eq!(size(&i).error, None);
}

#[test]
fn l4_mamba_slack_floor_and_empty_cache() {
    // Post-capture Mamba: slack = max(80 * 0.02 = 1.6, 10 GiB) = 10 -> rest 20 - 10 = 10;
    // carve: 10 * 0.9 / 1.9 GiB = 4.7368 GiB = 75.79 slots of 64 MiB;
    // K = int((budget - 64 MiB) // 64 MiB) = int(74.79) = 74, and K + 1 = 75 slots are taken:
    // rest = 10 - 75 / 16 = 5.3125 GiB -> 5.3125 * 8192 = 43520 tokens.
    let mut i = SizingInput::new(Layout::V0_5_23, LLAMA8B_CELL, 0.98, 80.0, 20.0, 8192);
    i.mamba = Some(MambaInput::new(64 << 20));
    i.mamba_min_slack_gib = Some(10.0);
    let r = size(&i);
    assert_eq!((r.mamba_cache_size, r.tokens), (Some(74), 43_520));
    // A per-request state larger than the budget: K <= 0.
    i.mamba = Some(MambaInput::new(20 << 30));
    let e = size(&i).error.unwrap();
    assert_eq!(e.check, FailedCheck::MambaCacheEmpty);
    assert!(e
        .message
        .starts_with("Not enough GPU memory for hybrid (mamba/linear-attention) state cache."));
}

#[test]
fn input_errors() {
    let mut i = SizingInput::new(Layout::V0_5_5, 0, 0.9, 80.0, 20.0, 8192);
    assert_eq!(size_sglang(&i), Err(SizingInputError::ZeroCell));
    i.cell_bytes = 1;
    i.page_size = 0;
    assert_eq!(size_sglang(&i), Err(SizingInputError::ZeroPage));
    i.page_size = 1;
    i.pre_gib = 0.0;
    assert_eq!(size_sglang(&i), Err(SizingInputError::PreNotPositive));
    let mut l1 = SizingInput::new(Layout::V0_4_6, 1, 0.9, 80.0, 20.0, 8192);
    l1.mamba = Some(MambaInput::new(1));
    assert!(matches!(
        size_sglang(&l1),
        Err(SizingInputError::Unsupported(_))
    ));
}

#[test]
fn distributed_min_is_float32() {
    // Two ranks: 80 GiB + 4097 B and 81 GiB. MIN = 85899349889 B; float32 has 24 bits, so at
    // 2^36..2^37 B the spacing is 8192 B and the value rounds to 80 GiB + 8192 B.
    let a = 80u64 * (1 << 30) + 4097;
    let b = 81u64 * (1 << 30);
    assert_eq!(distributed_min_gib(&[a, b]), (80.0 * GIB + 8192.0) / GIB);
    // One rank: no all-reduce, exact.
    assert_eq!(distributed_min_gib(&[a]), a as f64 / GIB);
}

#[test]
fn bounds_bracket_the_rounding() {
    // Llama 80 GB (L1) with ±0.005 on both inputs: rest moves by ±(0.005 + 0.005 * 0.12)
    // = ±0.0056 GiB = ±45.9 tokens around 444520.86: [444474, 444566].
    let i = SizingInput::new(Layout::V0_4_6, LLAMA8B_CELL, 0.88, 78.81, 63.72, 131_072);
    let (lo, hi) = sizing_bounds(&i, 0.005, 0.005).unwrap();
    assert_eq!((lo.tokens, hi.tokens), (444_474, 444_566));
}

#[test]
fn implied_fraction_inverts_the_formula() {
    // 444520 tokens of 131072 B = 54.2626953125 GiB (54.2628173828125 with one more token);
    // f = 1 - (63.72 - rest) / 78.81 spans [0.8799984, 0.8800000): the width is one token,
    // 1.22e-4 GiB / 78.81 = 1.55e-6, and the L1 example's 0.88 (rest 54.2628) lies inside.
    let (lo, hi) = implied_fraction_range(444_520, LLAMA8B_CELL, 1, 78.81, 63.72, 0.0);
    assert!(lo <= 0.88 && 0.88 < hi, "{lo} {hi}");
    assert!(hi - lo < 1.6e-6 && hi - lo > 1.5e-6);
    // Negative counts work too: -76399 tokens of 70272 B over pre 100 / available 10.
    let (lo, hi) = implied_fraction_range(-76_399, DEEPSEEK_CELL, 1, 100.0, 10.0, 0.0);
    assert!(lo <= 0.85 && 0.85 < hi, "{lo} {hi}");
}
