//! The KV cell of a model under one SGLang configuration (bytes per token on one rank): the KV
//! dtype SGLang resolves, the attention TP size, the last PP stage's layers, MHA/GQA, MLA,
//! hybrid sliding-window pools and 0.5.18+ EAGLE draft layers, with the arithmetic in words.
//! [`super::cell`] holds the per-layout formulas this puts together.

use super::cell::{cell_bytes, kv_heads_per_rank, Attention, CellInput, KvDtype};
use super::defaults_input::Speculative;
use super::hybrid::SwaInput;
use super::model::ModelGeometry;
use super::Layout;

/// The settings the cell depends on.
#[derive(Debug, Clone, PartialEq)]
pub struct CellSettings {
    /// Pipeline-parallel size.
    pub pp: u64,
    /// Data-parallel size, and whether attention is data-parallel (`--enable-dp-attention`).
    pub dp: u64,
    pub dp_attention: bool,
    /// `--disable-hybrid-swa-memory` and `--swa-full-tokens-ratio`.
    pub disable_hybrid_swa_memory: bool,
    pub swa_full_tokens_ratio: f64,
    pub speculative: Speculative,
    /// 0.5.18+ EAGLE draft KV layers (`--speculative-num-draft-layers`).
    pub speculative_num_draft_layers: Option<u64>,
}

/// A model's cell: its bytes per token, the sliding-window split if the model has one, and
/// how it was computed.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCell {
    pub bytes: u64,
    pub swa: Option<SwaInput>,
    pub words: String,
}

/// The KV dtype SGLang resolves `name` to for this model and layout.
pub fn kv_dtype(layout: Layout, name: &str, model: &ModelGeometry) -> Result<KvDtype, String> {
    let model_dtype = model
        .torch_dtype
        .as_deref()
        .and_then(KvDtype::from_model_dtype)
        .unwrap_or(KvDtype::Bf16);
    KvDtype::resolve(layout, name, model_dtype, model.checkpoint_kv_fp8).ok_or_else(|| {
        format!(
            "kv_cache_dtype '{name}' is not one SGLang {layout} accepts (auto, fp8_e4m3, \
             fp8_e5m2{})",
            if layout >= Layout::V0_5_5 {
                ", bf16"
            } else {
                ""
            }
        )
    })
}

/// The TP size attention runs at: `tp`, divided by the DP size under DP attention.
pub fn attn_tp(settings: &CellSettings, tp: u64) -> u64 {
    if settings.dp_attention {
        (tp / settings.dp.max(1)).max(1)
    } else {
        tp.max(1)
    }
}

/// Layers of the last PP stage (SGLang's `get_pp_indices` for `pp_rank = pp - 1`, the stage
/// with the most layers): up to 0.5.5 the last stage gets `L // pp` plus the whole remainder;
/// from 0.5.12 the remainder is spread over the last stages (`ceil(L / pp)`).
pub fn last_stage_layers(layout: Layout, layers: u64, pp: u64) -> u64 {
    let pp = pp.max(1);
    if layout <= Layout::V0_5_5 {
        layers - (pp - 1) * (layers / pp)
    } else {
        layers.div_ceil(pp)
    }
}

/// The cell (bytes per token), the SWA pools if any, and the arithmetic in words.
pub fn model_cell(
    model: &ModelGeometry,
    settings: &CellSettings,
    layout: Layout,
    tp: u64,
    kv: KvDtype,
) -> Result<ModelCell, String> {
    if model.is_mambaish() {
        return Err(
            "hybrid Mamba / linear-attention models need the per-request state size \
             (mamba_cache_per_req), which config.json does not give: not modelled by size"
                .into(),
        );
    }
    let layers = last_stage_layers(layout, model.num_hidden_layers, settings.pp);
    let atp = attn_tp(settings, tp);
    let isz = kv.itemsize();
    if model.is_hybrid_swa() && !settings.disable_hybrid_swa_memory && layout >= Layout::V0_5_5 {
        if model.mla.is_some() {
            return Err("hybrid sliding-window MLA pools are not modelled".into());
        }
        let n = kv_heads_per_rank(model.num_key_value_heads, atp, 1);
        let per = n * (model.head_dim + model.v_head_dim) * isz;
        let (full, swa_layers) = (model.full_attention_layers(), model.sliding_layers());
        let swa = SwaInput {
            full_layers: full,
            swa_layers,
            ratio: settings.swa_full_tokens_ratio,
            full_per_token: per,
            swa_per_token: per,
            sliding_window_size: model.sliding_window,
        };
        if layout == Layout::V0_5_5 {
            let c = n * model.head_dim * layers * 2 * isz;
            let text = format!(
                "{n} KV heads × {} × {layers} layers × 2 (K, V) × {isz} B, then split into full \
                 ({full} layers) and sliding-window ({swa_layers} layers) pools at ratio {}",
                model.head_dim, settings.swa_full_tokens_ratio
            );
            return Ok(ModelCell {
                bytes: c,
                swa: Some(swa),
                words: text,
            });
        }
        let text = format!(
            "hybrid SWA: {per} B × {full} full layers + {} × {per} B × {swa_layers} sliding \
             layers = {:.1} B per full-pool token",
            settings.swa_full_tokens_ratio,
            swa.cell()
        );
        return Ok(ModelCell {
            bytes: per * full,
            swa: Some(swa),
            words: text,
        });
    }
    let attention = match model.mla {
        Some(d) => Attention::Mla {
            kv_lora_rank: d.kv_lora_rank,
            qk_rope_head_dim: d.qk_rope_head_dim,
        },
        None => Attention::Mha {
            total_kv_heads: model.num_key_value_heads,
            head_dim: model.head_dim,
            v_head_dim: model.v_head_dim,
        },
    };
    let mut input = CellInput::new(layout, attention, layers, kv, atp);
    if layout >= Layout::V0_5_18
        && matches!(
            settings.speculative,
            Speculative::Eagle | Speculative::Standalone
        )
    {
        input.draft_layers = settings
            .speculative_num_draft_layers
            .or(model.num_nextn_predict_layers)
            .unwrap_or(0);
    }
    let c = cell_bytes(&input).map_err(|e| e.to_string())?;
    let text = match model.mla {
        Some(d) => format!(
            "MLA latent ({} + {}) × {layers} layers × {isz} B",
            d.kv_lora_rank, d.qk_rope_head_dim
        ),
        None => {
            let n = kv_heads_per_rank(model.num_key_value_heads, atp, 1);
            let heads = if atp > 1 {
                format!(
                    "{} KV heads / attn tp {atp} = {n}",
                    model.num_key_value_heads
                )
            } else {
                format!("{n} KV heads")
            };
            if layout <= Layout::V0_5_5 {
                format!(
                    "{heads} × head_dim {} × {layers} layers × 2 (K, V) × {isz} B",
                    model.head_dim
                )
            } else {
                format!(
                    "{heads} × ({} + {}) × {layers} layers × {isz} B",
                    model.head_dim, model.v_head_dim
                )
            }
        }
    };
    let text = if input.draft_layers > 0 {
        format!("{text} + {} draft layer(s)", input.draft_layers)
    } else {
        text
    };
    Ok(ModelCell {
        bytes: c,
        swa: None,
        words: text,
    })
}
