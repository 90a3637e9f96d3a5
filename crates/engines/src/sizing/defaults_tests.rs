//! Worked examples for `defaults.rs`, one per layout and term; the arithmetic is in each comment.

use super::*;

const H100: f64 = 81559.0; // MiB nvidia-smi reports for H100 80GB (research note §5.2)
const H200: f64 = 143771.0;
const L4_24G: f64 = 23034.0;
const RTX4090: f64 = 24564.0;
const MI355X: f64 = 294912.0; // 288 GiB

fn input(layout: Layout, gpu: f64, tp: u64) -> DefaultsInput {
    DefaultsInput::new(layout, Some(gpu), tp)
}

#[test]
fn l1_table_by_parallel_size() {
    // L4 24GB (23034 MiB <= 81920), tp 4 -> 0.85; chunked 2048 and max_bs 80 (gpu < 25000, tp >= 4).
    // This is the QwQ-32B log's `mem_fraction_static=0.85, chunked_prefill_size=2048`.
    let d = sglang_defaults(&input(Layout::V0_4_6, L4_24G, 4));
    assert_eq!(d.mem_fraction_static, 0.85);
    assert_eq!(
        (d.chunked_prefill_size, d.cuda_graph_max_bs),
        (2048, Some(80))
    );
    // H100 tp 1 -> 0.88, chunked 8192, max_bs left to the runner (the 80GB docs log: 0.88).
    let d = sglang_defaults(&input(Layout::V0_4_6, H100, 1));
    assert_eq!(d.mem_fraction_static, 0.88);
    assert_eq!((d.chunked_prefill_size, d.cuda_graph_max_bs), (8192, None));
    // tp 16 -> 0.79; tp 8 -> 0.81; tp 2 -> 0.87.
    for (tp, f) in [(16, 0.79), (8, 0.81), (2, 0.87)] {
        assert_eq!(
            sglang_defaults(&input(Layout::V0_4_6, H100, tp)).mem_fraction_static,
            f
        );
    }
    // RTX 4090, tp 1: 0.88 with chunked 2048, max_bs 8 (the Gemma-3 and 24GB Llama logs).
    let d = sglang_defaults(&input(Layout::V0_4_6, RTX4090, 1));
    assert_eq!(
        (d.mem_fraction_static, d.cuda_graph_max_bs),
        (0.88, Some(8))
    );
}

#[test]
fn l1_large_gpu_adjustment() {
    // H200 (143771 MiB > 96 GiB), tp 8: table gives 0.88 (gpu > 81920), then
    // min(0.88 + 49152 * 0.12 / 143771, (143771 - 18432) / 143771)
    // = min(0.88 + 0.0410250..., 0.8717961...) = 0.8717961202189594 (CPython).
    let d = sglang_defaults(&input(Layout::V0_4_6, H200, 8));
    assert_eq!(d.mem_fraction_static, 0.8717961202189594);
    assert_eq!(d.reserved_mb, None);
}

#[test]
fn l2_h100_reserved_formula() {
    // H100 tier (< 90 GiB): chunked 8192, max_bs 256 (tp < 4).
    // reserved = 512 + 8192 * 1.5 + 256 * 2 + 1 * 1 / 8 * 1024 = 512 + 12288 + 512 + 128 = 13440
    // (above the 10240 floor); round((81559 - 13440) / 81559, 3) = round(0.83521, 3) = 0.835.
    let d = sglang_defaults(&input(Layout::V0_5_5, H100, 1));
    assert_eq!(d.reserved_mb, Some(13440.0));
    assert_eq!(d.mem_fraction_static, 0.835);
    assert_eq!(
        (d.chunked_prefill_size, d.cuda_graph_max_bs),
        (8192, Some(256))
    );
}

#[test]
fn l2_small_gpu_floor_and_speculative() {
    // RTX 4090 (< 35 GiB): chunked 2048, max_bs 24; reserved = 512 + 3072 + 48 + 128 = 3760,
    // no floor (<= 60 GiB); round(20804 / 24564, 3) = round(0.84693, 3) = 0.847.
    let d = sglang_defaults(&input(Layout::V0_5_5, RTX4090, 1));
    assert_eq!(
        (d.reserved_mb, d.mem_fraction_static),
        (Some(3760.0), 0.847)
    );
    // EAGLE adds 2048 after the floor: 13440 + 2048 = 15488 -> round(66071 / 81559, 3) = 0.810.
    let mut i = input(Layout::V0_5_5, H100, 1);
    i.speculative = Speculative::Eagle;
    assert_eq!(sglang_defaults(&i).mem_fraction_static, 0.81);
    // STANDALONE adds 6144: 19584 -> round(61975 / 81559, 3) = 0.760. NGRAM adds nothing.
    i.speculative = Speculative::Standalone;
    assert_eq!(sglang_defaults(&i).reserved_mb, Some(19584.0));
    i.speculative = Speculative::Ngram;
    assert_eq!(sglang_defaults(&i).reserved_mb, Some(13440.0));
}

#[test]
fn l2_floor_applies_above_60_gib() {
    // H100 with user chunked 2048 and max_bs 8: 512 + 3072 + 16 + 128 = 3728 < 10240,
    // floored to 10240 -> round(71319 / 81559, 3) = 0.874.
    let mut i = input(Layout::V0_5_5, H100, 1);
    i.chunked_prefill_size = Some(2048);
    i.cuda_graph_max_bs = Some(8);
    let d = sglang_defaults(&i);
    assert_eq!(
        (d.reserved_mb, d.mem_fraction_static),
        (Some(10240.0), 0.874)
    );
}

#[test]
fn l2_dp_attention_terms() {
    // H200 tp 8 dp 8 with DP attention: tier 8192 / 512 (tp >= 4).
    // 512 + 12288 + 1024 + 1024 + 512 * 8 * 3 + (512 > 300) 512 * 8 * 1.5
    // = 14848 + 12288 + 6144 = 33280 -> round(110491 / 143771, 3) = 0.769.
    let mut i = input(Layout::V0_5_5, H200, 8);
    i.dp_size = 8;
    i.enable_dp_attention = true;
    let d = sglang_defaults(&i);
    assert_eq!(
        (d.reserved_mb, d.mem_fraction_static),
        (Some(33280.0), 0.769)
    );
}

#[test]
fn l2_kimi_k25_vlm_default_is_bit_exact() {
    // MI355X (288 GiB = 294912 MiB), tp 8: tier 16384 / 512.
    // reserved = 512 + 16384 * 1.5 + 512 * 2 + 8 / 8 * 1024 = 512 + 24576 + 1024 + 1024 = 27136;
    // round((294912 - 27136) / 294912, 3) = round(0.907986, 3) = 0.908.
    // MoonViT: 27 layers, hidden 1152: ratio = 27 * 1152^2 / (24 * 1024^2) = 1.423828125;
    // dynamic = 1 - 0.1 * 0.423828125 = 0.9576171875; factor = 0.95 * dynamic;
    // 0.908 * factor = 0.8260405859375, exactly the `mem_fraction_static=0.8260405859375` the
    // Kimi-K2.5 ROCm log prints (v0.5.8.post1 -> L2).
    let mut i = input(Layout::V0_5_5, MI355X, 8);
    i.multimodal = true;
    i.vision = Some(VisionDims {
        num_hidden_layers: 27,
        hidden_size: 1152,
    });
    let d = sglang_defaults(&i);
    assert_eq!(d.base_fraction, 0.908);
    assert_eq!(d.mem_fraction_static, 0.8260405859375);
    assert_eq!(
        (d.chunked_prefill_size, d.cuda_graph_max_bs),
        (16384, Some(512))
    );
    // Without a vision_config the fraction is unchanged.
    i.vision = None;
    assert_eq!(sglang_defaults(&i).mem_fraction_static, 0.908);
}

#[test]
fn vlm_factor_clamps() {
    // Qwen2-VL-style ViT, 32 layers x 1280: ratio = 52428800 / 25165824 = 2.0833...;
    // dynamic = 1 - 0.10833 = 0.891666...; 0.835 * 0.95 * 0.891666 = 0.7073145833333332.
    let v = VisionDims {
        num_hidden_layers: 32,
        hidden_size: 1280,
    };
    assert_eq!(vlm_adjusted_fraction(0.835, v), 0.7073145833333332);
    // A huge ViT clamps dynamic at 0.8: 0.9 * 0.95 * 0.8 = 0.684; a tiny one at 1.05.
    let huge = VisionDims {
        num_hidden_layers: 48,
        hidden_size: 4096,
    };
    assert!((vlm_adjusted_fraction(0.9, huge) - 0.684).abs() < 1e-15);
    let tiny = VisionDims {
        num_hidden_layers: 1,
        hidden_size: 64,
    };
    assert!((vlm_adjusted_fraction(0.9, tiny) - 0.9 * 0.95 * 1.05).abs() < 1e-15);
}

#[test]
fn l3_piecewise_and_eagle_terms() {
    // H100 tp 1 with 42 piecewise token sizes (non-MLA): 13440 + 42 * 8 = 13776
    // -> round(67783 / 81559, 3) = 0.831. MLA reserves 1536 instead: 14976 -> 0.816.
    let mut i = input(Layout::V0_5_12, H100, 1);
    i.piecewise_tokens_len = Some(42);
    assert_eq!(sglang_defaults(&i).mem_fraction_static, 0.831);
    i.speculative = Speculative::Eagle; // 0.5.12: +4096 -> 17872 -> round(63687 / 81559, 3) = 0.781
    assert_eq!(sglang_defaults(&i).mem_fraction_static, 0.781);
    i.speculative = Speculative::None;
    i.mla = true;
    assert_eq!(sglang_defaults(&i).reserved_mb, Some(14976.0));
}

#[test]
fn l4_activation_and_graph_reserve() {
    // Research note §5.5 example, H100 tp 1 non-MLA, chunked 8192, decode max_bs 256, breakable
    // prefill graph with 58 batch sizes (generator up to 8192):
    // 512 + 12288 + 128 + (256 * 2 + 58 * 8) = 13904 -> round(67655 / 81559, 3) = 0.830.
    for layout in [Layout::V0_5_18, Layout::V0_5_23] {
        let d = sglang_defaults(&input(layout, H100, 1));
        assert_eq!(d.prefill_graph_bs_len, Some(58), "{layout}");
        assert_eq!(d.reserved_mb, Some(13904.0), "{layout}");
        assert_eq!(d.mem_fraction_static, 0.83, "{layout}");
    }
    assert_eq!(prefill_graph_batch_sizes(8192).len(), 58);
    assert_eq!(prefill_graph_batch_sizes(4096).len(), 50);
    assert_eq!(prefill_graph_batch_sizes(2048).len(), 42);
    assert_eq!(prefill_graph_batch_sizes(20).len(), 5); // 4, 8, 12, 16, 20
}

#[test]
fn l4_mla_deepep() {
    // DeepSeek-style MLA on H200 tp 8 with DeepEP: chunked 8192, decode max_bs 512.
    // 512 + 12288 + 1024 + graph(512 * 2 + MLA 1536 + breakable DeepEP 1024 = 3584) = 17408,
    // above the floor, + DeepEP a2a 2048 = 19456 -> round(124315 / 143771, 3) = 0.865.
    let mut i = input(Layout::V0_5_23, H200, 8);
    i.mla = true;
    i.deepep = true;
    let d = sglang_defaults(&i);
    assert_eq!(
        (d.reserved_mb, d.mem_fraction_static),
        (Some(19456.0), 0.865)
    );
}

#[test]
fn l4_post_capture_and_fallbacks() {
    // Post-capture: 1536 + 1 / 8 * 1024 = 1664 -> round(79895 / 81559, 3) = 0.98.
    let mut i = input(Layout::V0_5_23, H100, 1);
    i.post_capture_kv_sizing = true;
    assert_eq!(sglang_defaults(&i).mem_fraction_static, 0.98);
    // 0.5.23 VLM with post-capture: 0.98 - 8 * 1024 / 81559 = 0.8795573756421732.
    i.multimodal = true;
    assert_eq!(sglang_defaults(&i).mem_fraction_static, 0.8795573756421732);
    // Unknown capacity: 0.95 in 0.5.23, 0.88 before.
    let none = DefaultsInput::new(Layout::V0_5_23, None, 1);
    assert_eq!(sglang_defaults(&none).mem_fraction_static, 0.95);
    let none = DefaultsInput::new(Layout::V0_5_18, None, 1);
    assert_eq!(sglang_defaults(&none).mem_fraction_static, 0.88);
}

#[test]
fn l4_small_gpu_tier_changed_in_0_5_23() {
    // RTX 4090 in 0.5.23: chunked 4096, max_bs 48. Prefill sizes up to 4096: 50.
    // 512 + 6144 + 128 + (48 * 2 + 50 * 8) = 7280 -> round(17284 / 24564, 3) = 0.704.
    let d = sglang_defaults(&input(Layout::V0_5_23, RTX4090, 1));
    assert_eq!(
        (d.chunked_prefill_size, d.cuda_graph_max_bs),
        (4096, Some(48))
    );
    assert_eq!(d.mem_fraction_static, 0.704);
    // 0.5.18 keeps 2048 / 24: 512 + 3072 + 128 + (48 + 42 * 8) = 4096 -> round(20468/24564, 3).
    let d = sglang_defaults(&input(Layout::V0_5_18, RTX4090, 1));
    assert_eq!(
        (d.reserved_mb, d.mem_fraction_static),
        (Some(4096.0), 0.833)
    );
    // 0.5.23: max_running_requests 16 below the default max_bs 48 lowers it to 16:
    // 512 + 6144 + 128 + (16 * 2 + 400) = 7216 -> round(17348 / 24564, 3) = 0.706.
    let mut i = input(Layout::V0_5_23, RTX4090, 1);
    i.max_running_requests = Some(16);
    let d = sglang_defaults(&i);
    assert_eq!(
        (d.cuda_graph_max_bs, d.mem_fraction_static),
        (Some(16), 0.706)
    );
}

#[test]
fn l4_decode_disaggregation_activation_tokens() {
    // Decode worker: activation tokens = max(max_bs 256 * draft 4, 2048) = 2048; no prefill
    // graph reserve: 512 + 3072 + 128 + 512 = 4224 -> floored to 10240 on H100 -> 0.874.
    let mut i = input(Layout::V0_5_18, H100, 1);
    i.disaggregation = Disaggregation::Decode;
    i.speculative_num_draft_tokens = Some(4);
    let d = sglang_defaults(&i);
    assert_eq!(
        (d.reserved_mb, d.mem_fraction_static),
        (Some(10240.0), 0.874)
    );
    // With 1024 running requests: max(4096, 2048) * 1.5 = 6144 -> 512+6144+128+512 = 7296 -> floor.
    i.max_running_requests = Some(1024);
    assert_eq!(sglang_defaults(&i).reserved_mb, Some(10240.0));
}

#[test]
fn activation_reserve_and_l1_runner() {
    // 512 + 8192 * 1.5 + 8 / 8 * 1024 = 13824 on H200 (above the floor); 8GB card: no floor.
    assert_eq!(
        pre_capture_activation_reserve_mb(Some(H200), 8192, 8, 1),
        13824.0
    );
    assert_eq!(
        pre_capture_activation_reserve_mb(Some(8192.0), 2048, 1, 1),
        3712.0
    );
    assert_eq!(
        pre_capture_activation_reserve_mb(Some(H100), 2048, 1, 1),
        10240.0
    );
    // 0.4.x runner: 0.88 * 0.90 = 0.792 for a multimodal model; then * 0.85 for aiter.
    assert_eq!(l1_runner_fraction(0.88, true, false), 0.88 * 0.90);
    assert_eq!(l1_runner_fraction(0.95, false, true), 0.95 * 0.85);
    assert_eq!(l1_runner_fraction(0.88, false, false), 0.88);
}

#[test]
fn l3_piecewise_graph_is_on_by_default() {
    // SGLang 0.5.12's dataclass default runs piecewise graphs; their token sizes up to the
    // chunk size are reserved (reference table row: 24576 MiB, tp 1, Llama: 0.833).
    // 512 + 2048 * 1.5 + 24 * 2 + 128 + 42 * 8 = 4096 -> round(20480 / 24576, 3) = 0.833.
    let i = input(Layout::V0_5_12, 24576.0, 1);
    assert_eq!(sglang_defaults(&i).reserved_mb, Some(4096.0));
    assert_eq!(sglang_defaults(&i).mem_fraction_static, 0.833);
    let mut off = i.clone();
    off.piecewise_graph = Some(false);
    assert_eq!(sglang_defaults(&off).mem_fraction_static, 0.847);
}

#[test]
fn l4a_prefill_graph_not_capped_for_pp() {
    // 0.5.18 has no PP cap on the prefill graph max_bs (0.5.23 caps breakable at 8192):
    // 196608 MiB, tp 1, pp 2: chunked 16384 -> 74 sizes in 0.5.18, 58 in 0.5.23.
    let mut i = input(Layout::V0_5_18, 196608.0, 1);
    i.pp_size = 2;
    assert_eq!(sglang_defaults(&i).prefill_graph_bs_len, Some(74));
    assert_eq!(sglang_defaults(&i).mem_fraction_static, 0.863);
    // 0.5.23 turns breakable prefill graphs off for PP > 1 unless they are asked for; asked
    // for, their max_bs is capped at 8192: 58 sizes.
    i.layout = Layout::V0_5_23;
    assert_eq!(
        sglang_defaults(&i).prefill_graph,
        Some(PrefillGraph::Disabled)
    );
    i.prefill_graph = Some(PrefillGraph::Breakable);
    assert_eq!(sglang_defaults(&i).prefill_graph_bs_len, Some(58));
}

#[test]
fn npu_tiers_and_presets() {
    // 0.5.5: Ascend tiers inside the memory defaults, below 32 GiB and below 64 GiB.
    let mut i = input(Layout::V0_5_5, 24576.0, 1);
    i.platform = Platform::Npu;
    let d = sglang_defaults(&i);
    assert_eq!(
        (d.chunked_prefill_size, d.cuda_graph_max_bs),
        (32768, Some(16))
    );
    // 0.5.12+: set_default_server_args first, up to 32 GiB and up to 64 GiB (inclusive).
    for (layout, mib, tp, want) in [
        (Layout::V0_5_12, 32768.0, 1, (4096, 16)),
        (Layout::V0_5_18, 65536.0, 8, (8192, 256)),
        (Layout::V0_5_23, 65536.0, 1, (8192, 64)),
        (Layout::V0_5_23, 98304.0, 1, (8192, 256)),
    ] {
        let mut i = input(layout, mib, tp);
        i.platform = Platform::Npu;
        let d = sglang_defaults(&i);
        assert_eq!(
            (d.chunked_prefill_size, d.cuda_graph_max_bs),
            (want.0, Some(want.1)),
            "{layout} {mib}"
        );
        assert_eq!(d.prefill_graph, Some(PrefillGraph::Disabled));
    }
}
