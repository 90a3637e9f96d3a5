//! Worked examples for `cell.rs`.

use super::*;

fn mha(kv: u64, hd: u64) -> Attention {
    Attention::Mha {
        total_kv_heads: kv,
        head_dim: hd,
        v_head_dim: hd,
    }
}

#[test]
fn llama8b_bf16_tp1_every_layout() {
    // 8 kv heads * (128 + 128) * 32 layers * 2 bytes = 131072 bytes (research note §7).
    for layout in Layout::ALL {
        let c = CellInput::new(layout, mha(8, 128), 32, KvDtype::Bf16, 1);
        assert_eq!(cell_bytes(&c), Ok(131_072), "{layout}");
    }
}

#[test]
fn gqa_sharding_and_replication() {
    // QwQ-32B at tp 4: 8 kv heads / 4 = 2 per rank; 2 * 128 * 64 layers * 2 * 2 B = 65536.
    let c = CellInput::new(Layout::V0_4_6, mha(8, 128), 64, KvDtype::Bf16, 4);
    assert_eq!(cell_bytes(&c), Ok(65_536));
    // More ranks than kv heads: max(1, 8 // 16) = 1 head per rank (replicated).
    assert_eq!(kv_heads_per_rank(8, 16, 1), 1);
    // DCP 2 at attn tp 8: 8 // (8 // 2) = 2.
    assert_eq!(kv_heads_per_rank(8, 8, 2), 2);
}

#[test]
fn v_head_dim_counts_from_0_5_12() {
    // A model with head_dim 192 and v_head_dim 128 (1 kv head, 10 layers, bf16):
    // L1/L2: 1 * 192 * 10 * 2 * 2 = 7680; L3+: 1 * (192 + 128) * 10 * 2 = 6400.
    let a = Attention::Mha {
        total_kv_heads: 1,
        head_dim: 192,
        v_head_dim: 128,
    };
    let old = CellInput::new(Layout::V0_5_5, a, 10, KvDtype::Bf16, 1);
    let new = CellInput::new(Layout::V0_5_12, a, 10, KvDtype::Bf16, 1);
    assert_eq!(cell_bytes(&old), Ok(7680));
    assert_eq!(cell_bytes(&new), Ok(6400));
}

#[test]
fn mla_fp8_fp4() {
    let a = Attention::Mla {
        kv_lora_rank: 512,
        qk_rope_head_dim: 64,
    };
    // DeepSeek-R1 bf16: (512 + 64) * 61 * 2 = 70272, independent of TP.
    let c = CellInput::new(Layout::V0_4_6, a, 61, KvDtype::Bf16, 8);
    assert_eq!(cell_bytes(&c), Ok(70_272));
    // FP8: (512 + 64) * 61 * 1 = 35136.
    let c = CellInput::new(Layout::V0_5_23, a, 61, KvDtype::Fp8E4m3, 8);
    assert_eq!(cell_bytes(&c), Ok(35_136));
    // FP4 (0.5.5+): 35136 // 2 + (576 // 16) * 61 * 1 = 17568 + 2196 = 19764.
    let c = CellInput::new(Layout::V0_5_5, a, 61, KvDtype::Fp4E2m1, 8);
    assert_eq!(cell_bytes(&c), Ok(19_764));
    let c = CellInput::new(Layout::V0_4_6, a, 61, KvDtype::Fp4E2m1, 8);
    assert!(matches!(cell_bytes(&c), Err(CellError::Unsupported(_))));
}

#[test]
fn fp4_and_mxfp8_mha() {
    // 0.5.12 FP4: cell = 8*(128+128)*32*1 = 65536; 65536//2 + (8*128*32*2*1)//16 = 32768 + 4096.
    let c = CellInput::new(Layout::V0_5_12, mha(8, 128), 32, KvDtype::Fp4E2m1, 1);
    assert_eq!(cell_bytes(&c), Ok(36_864));
    // 0.5.23 MXFP8: 65536 + 8*256*32 // 32 = 65536 + 2048.
    let c = CellInput::new(Layout::V0_5_23, mha(8, 128), 32, KvDtype::Mxfp8, 1);
    assert_eq!(cell_bytes(&c), Ok(67_584));
    let c = CellInput::new(Layout::V0_5_23, mha(8, 128), 32, KvDtype::Fp4E2m1, 1);
    assert!(cell_bytes(&c).is_err());
    let c = CellInput::new(Layout::V0_5_5, mha(8, 128), 32, KvDtype::Fp4E2m1, 1);
    assert!(cell_bytes(&c).is_err());
}

#[test]
fn eagle_draft_layers_from_0_5_18() {
    // Llama-8B target (131072 B over 32 layers) + 1 draft layer:
    // int(131072 * 1 / 32) * 1 = 4096 -> 135168. Before 0.5.18 the draft is not in the cell.
    let mut c = CellInput::new(Layout::V0_5_18, mha(8, 128), 32, KvDtype::Bf16, 1);
    c.draft_layers = 1;
    assert_eq!(cell_bytes(&c), Ok(135_168));
    c.layout = Layout::V0_5_12;
    assert_eq!(cell_bytes(&c), Ok(131_072));
    c.layers = 0;
    assert_eq!(cell_bytes(&c), Err(CellError::ZeroLayers));
}

#[test]
fn dtype_resolution() {
    use KvDtype::*;
    let r = KvDtype::resolve;
    assert_eq!(r(Layout::V0_4_6, "auto", Bf16, true), Some(Bf16));
    assert_eq!(r(Layout::V0_5_5, "auto", Bf16, true), Some(Fp8E4m3));
    assert_eq!(r(Layout::V0_5_5, "auto", F16, false), Some(F16));
    assert_eq!(r(Layout::V0_5_5, "fp4_e2m1", Bf16, false), Some(Fp4E2m1));
    assert_eq!(r(Layout::V0_5_23, "fp4_e2m1", Bf16, false), None);
    assert_eq!(r(Layout::V0_5_23, "nvfp4", Bf16, false), Some(Fp4E2m1));
    assert_eq!(r(Layout::V0_5_12, "mxfp8", Bf16, false), None);
    assert_eq!(KvDtype::from_model_dtype("torch.bfloat16"), Some(Bf16));
    assert_eq!(Fp8E4m3.torch_name(), "torch.float8_e4m3fn");
}

#[test]
fn gemma3_swa_cell() {
    // Gemma 3 27B at tp 1, bf16: per = 16 * (128 + 128) * 2 = 8192 B per layer-token.
    // cell = 8192 * 10 full + 0.8 * 8192 * 52 swa = 81920 + 340787.2 = 422707.2.
    let s = swa_cell(16, 128, 128, KvDtype::Bf16, 10, 52, 0.8);
    assert_eq!(s.full_per_token, 8192);
    assert_eq!(s.cell, 81920.0 + 0.8 * 8192.0 * 52.0);
    // 10 GiB budget: int(10737418240 // 422707.2) = 25401.
    assert_eq!(tokens_for_float_cell(10 << 30, s.cell), 25_401);
}

#[test]
fn logged_sizes_match_real_lines() {
    // QwQ-32B tp4 (0.4.3 log): 46611 tokens -> (46611 + 1) * 2 * 128 * 64 * 2 / 2^30 = 1.4225
    // GiB each, printed "K size: 1.42 GB, V size: 1.42 GB".
    let c = CellInput::new(Layout::V0_4_6, mha(8, 128), 64, KvDtype::Bf16, 4);
    let KvSizes::KV { k_gib, v_gib } = logged_kv_sizes(&c, 46_611, 1) else {
        panic!("MHA")
    };
    assert_eq!(
        (format!("{k_gib:.2}"), format!("{v_gib:.2}")),
        ("1.42".into(), "1.42".into())
    );
    // Kimi K2.5 tp8 MLA: (2454421 + 1) * 576 * 61 * 2 / 2^30 = 160.63 GiB.
    let a = Attention::Mla {
        kv_lora_rank: 512,
        qk_rope_head_dim: 64,
    };
    let c = CellInput::new(Layout::V0_5_5, a, 61, KvDtype::Bf16, 8);
    let KvSizes::Latent { kv_gib } = logged_kv_sizes(&c, 2_454_421, 1) else {
        panic!("MLA")
    };
    assert_eq!(format!("{kv_gib:.2}"), "160.63");
}
