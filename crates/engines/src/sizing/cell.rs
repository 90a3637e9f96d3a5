//! Bytes of KV cache per token ("cell size") for each SGLang layout.
//!
//! The cell is what SGLang divides the KV budget by: the sum over this rank's KV layers of the
//! K and V (or MLA latent) bytes one token occupies. This module owns the KV storage dtype
//! ([`KvDtype`]), the cell formulas per layout ([`cell_bytes`]), the hybrid-SWA per-token sizes
//! ([`swa_cell`]) and the K/V sizes the "KV Cache is allocated" line prints ([`logged_kv_sizes`]).
//! Formulas whose terms the research note did not transcribe return [`CellError::Unsupported`]
//! instead of a guess.

use super::layout::Layout;
use super::pyfloat::{py_floordiv, py_int, GIB};
use std::fmt;

/// The KV cache element type as SGLang stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvDtype {
    F32,
    F16,
    Bf16,
    /// `fp8_e4m3` (stored as `torch.uint8`).
    Fp8E4m3,
    /// `fp8_e5m2` (stored as `torch.uint8`).
    Fp8E5m2,
    /// `fp4_e2m1` / `nvfp4` / `fp4_mx_block16`: `float4_e2m1fn_x2`, two values per byte.
    Fp4E2m1,
    /// `mxfp8` (0.5.23): FP8 data plus one scale byte per 32 values.
    Mxfp8,
}

impl KvDtype {
    /// `torch._utils._element_size(dtype)` of the KV dtype (FP8 and FP4 are one byte).
    pub fn itemsize(self) -> u64 {
        match self {
            KvDtype::F32 => 4,
            KvDtype::F16 | KvDtype::Bf16 => 2,
            KvDtype::Fp8E4m3 | KvDtype::Fp8E5m2 | KvDtype::Fp4E2m1 | KvDtype::Mxfp8 => 1,
        }
    }

    /// A model dtype name (`"bfloat16"`, `"torch.float16"`, `"float32"`, `"half"`).
    pub fn from_model_dtype(name: &str) -> Option<KvDtype> {
        match name.trim().trim_start_matches("torch.") {
            "bfloat16" | "bf16" => Some(KvDtype::Bf16),
            "float16" | "half" | "fp16" => Some(KvDtype::F16),
            "float32" | "float" | "fp32" => Some(KvDtype::F32),
            _ => None,
        }
    }

    /// SGLang's `--kv-cache-dtype` resolution. `auto` is the model dtype, except that from 0.5.5 a
    /// checkpoint with `kv_cache_quant_algo == "FP8"` gets FP8 e4m3. `None` for a name this layout
    /// does not accept.
    pub fn resolve(
        layout: Layout,
        kv_cache_dtype: &str,
        model_dtype: KvDtype,
        checkpoint_kv_fp8: bool,
    ) -> Option<KvDtype> {
        match kv_cache_dtype {
            "auto" if checkpoint_kv_fp8 && layout >= Layout::V0_5_5 => Some(KvDtype::Fp8E4m3),
            "auto" => Some(model_dtype),
            "fp8_e5m2" => Some(KvDtype::Fp8E5m2),
            "fp8_e4m3" => Some(KvDtype::Fp8E4m3),
            "bf16" | "bfloat16" if layout >= Layout::V0_5_5 => Some(KvDtype::Bf16),
            "fp4_e2m1" if (Layout::V0_5_5..Layout::V0_5_23).contains(&layout) => {
                Some(KvDtype::Fp4E2m1)
            }
            "nvfp4" | "fp4_mx_block16" if layout == Layout::V0_5_23 => Some(KvDtype::Fp4E2m1),
            "mxfp8" if layout == Layout::V0_5_23 => Some(KvDtype::Mxfp8),
            _ => None,
        }
    }

    /// The `dtype:` SGLang prints in "KV Cache is allocated" (0.5.18+), CUDA names.
    pub fn torch_name(self) -> &'static str {
        match self {
            KvDtype::F32 => "torch.float32",
            KvDtype::F16 => "torch.float16",
            KvDtype::Bf16 => "torch.bfloat16",
            KvDtype::Fp8E4m3 | KvDtype::Mxfp8 => "torch.float8_e4m3fn",
            KvDtype::Fp8E5m2 => "torch.float8_e5m2",
            KvDtype::Fp4E2m1 => "torch.float4_e2m1fn_x2",
        }
    }
}

/// Attention geometry for the cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attention {
    /// MHA / GQA / MQA. `total_kv_heads` is before tensor-parallel sharding.
    Mha {
        total_kv_heads: u64,
        head_dim: u64,
        v_head_dim: u64,
    },
    /// Multi-head latent attention: one joint latent of `kv_lora_rank + qk_rope_head_dim`.
    Mla {
        kv_lora_rank: u64,
        qk_rope_head_dim: u64,
    },
}

/// Inputs of [`cell_bytes`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CellInput {
    pub layout: Layout,
    pub attention: Attention,
    /// KV layers on this rank: `num_effective_layers` (this PP stage's slice), or for a Mamba
    /// hybrid the full-attention layers inside the slice; for a draft with MTP, its
    /// `num_nextn_predict_layers`.
    pub layers: u64,
    pub kv_dtype: KvDtype,
    /// Attention TP size: `tp_size`, or `tp_size / dp_size` with `--enable-dp-attention`.
    pub attn_tp_size: u64,
    /// Decode context parallel size (0.5.23 `attn_dcp_size`; 1 elsewhere).
    pub attn_dcp_size: u64,
    /// 0.5.18+ EAGLE/STANDALONE target: the draft's KV layers priced into the target cell
    /// (0 without speculative decoding; ignored before 0.5.18).
    pub draft_layers: u64,
    /// 0.5.18+: the hisparse ratio multiplying the draft term (1 normally).
    pub draft_loc_space_scale: u64,
}

impl CellInput {
    /// A plain target-model cell: no DCP, no draft.
    pub fn new(
        layout: Layout,
        attention: Attention,
        layers: u64,
        kv_dtype: KvDtype,
        attn_tp_size: u64,
    ) -> CellInput {
        CellInput {
            layout,
            attention,
            layers,
            kv_dtype,
            attn_tp_size,
            attn_dcp_size: 1,
            draft_layers: 0,
            draft_loc_space_scale: 1,
        }
    }
}

/// A cell SGLang computes with terms the research note did not transcribe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellError {
    Unsupported(String),
    ZeroLayers,
}

impl fmt::Display for CellError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CellError::Unsupported(what) => write!(f, "cell size not modelled: {what}"),
            CellError::ZeroLayers => write!(f, "cell size: no KV layers on this rank"),
        }
    }
}

impl std::error::Error for CellError {}

/// SGLang `ModelConfig.get_num_kv_heads(tp)`: `max(1, total // (attn_tp // dcp))`.
pub fn kv_heads_per_rank(total_kv_heads: u64, attn_tp_size: u64, attn_dcp_size: u64) -> u64 {
    let shards = (attn_tp_size / attn_dcp_size.max(1)).max(1);
    (total_kv_heads / shards).max(1)
}

/// Bytes of KV per token on one rank, as the layout's `profile_max_num_token` /
/// `_compute_cell_size` computes it.
pub fn cell_bytes(input: &CellInput) -> Result<u64, CellError> {
    let CellInput {
        layout,
        attention,
        layers: l,
        kv_dtype,
        ..
    } = *input;
    if l == 0 {
        return Err(CellError::ZeroLayers);
    }
    let isz = kv_dtype.itemsize();
    let unsupported = |what: &str| Err(CellError::Unsupported(format!("{what} in {layout}")));
    let base = match attention {
        Attention::Mla {
            kv_lora_rank,
            qk_rope_head_dim,
        } => {
            let dim = kv_lora_rank + qk_rope_head_dim;
            match kv_dtype {
                KvDtype::Mxfp8 => return unsupported("MXFP8 MLA KV"),
                KvDtype::Fp4E2m1 if layout == Layout::V0_4_6 => return unsupported("FP4 KV"),
                // cell//2 + ((kv_lora_rank + qk_rope_head_dim)//16) * L * isz
                KvDtype::Fp4E2m1 => (dim * l * isz) / 2 + (dim / 16) * l * isz,
                _ => dim * l * isz,
            }
        }
        Attention::Mha {
            total_kv_heads,
            head_dim,
            v_head_dim,
        } => {
            let n = kv_heads_per_rank(total_kv_heads, input.attn_tp_size, input.attn_dcp_size);
            match layout {
                // K and V both use head_dim.
                Layout::V0_4_6 | Layout::V0_5_5 => match kv_dtype {
                    KvDtype::Fp4E2m1 | KvDtype::Mxfp8 => return unsupported("FP4/MXFP8 MHA KV"),
                    _ => n * head_dim * l * 2 * isz,
                },
                Layout::V0_5_12 | Layout::V0_5_18 | Layout::V0_5_23 => {
                    let cell = n * (head_dim + v_head_dim) * l * isz;
                    match kv_dtype {
                        // cell//2 + (n*head_dim*num_layers*2*isz)//16
                        KvDtype::Fp4E2m1 if layout == Layout::V0_5_12 => {
                            cell / 2 + (n * head_dim * l * 2 * isz) / 16
                        }
                        KvDtype::Fp4E2m1 => {
                            return unsupported("NVFP4 MHA KV (recipe-dependent scale buffers)")
                        }
                        KvDtype::Mxfp8 if layout == Layout::V0_5_23 => {
                            cell + n * (head_dim + v_head_dim) * l / 32
                        }
                        KvDtype::Mxfp8 => return unsupported("MXFP8 KV"),
                        _ => cell,
                    }
                }
            }
        }
    };
    // 0.5.18: cell = int(cell * (1 + draft_layers / L)) (a float product).
    if layout == Layout::V0_5_18 && input.draft_layers > 0 {
        let scale = 1.0 + input.draft_layers as f64 / l as f64;
        return Ok(py_int(base as f64 * scale) as u64);
    }
    // 0.5.23: cell += int(cell * draft_layers / L) * scale.
    if layout >= Layout::V0_5_23 && input.draft_layers > 0 {
        let draft = py_int(base as f64 * input.draft_layers as f64 / l as f64) as u64;
        return Ok(base + draft * input.draft_loc_space_scale);
    }
    Ok(base)
}

/// Hybrid-SWA per-token sizes (0.5.12+ `HybridSWAPoolConfigurator`, MHA layers).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SwaCell {
    /// Bytes per token of one full-attention layer.
    pub full_per_token: u64,
    /// Bytes per token of one sliding-window layer.
    pub swa_per_token: u64,
    /// `full_per_token * F + swa_full_tokens_ratio * swa_per_token * S` (a Python float).
    pub cell: f64,
}

/// `full_per_token*(F + draft_full) + swa_per_token*draft_swa_full
///  + swa_full_tokens_ratio*swa_per_token*(S + draft_swa)`, here without draft terms.
/// Full and SWA layers share the geometry (Gemma 3, GPT-OSS); `n` is the per-rank KV heads.
pub fn swa_cell(
    n_kv_heads: u64,
    head_dim: u64,
    v_head_dim: u64,
    kv_dtype: KvDtype,
    full_layers: u64,
    swa_layers: u64,
    swa_full_tokens_ratio: f64,
) -> SwaCell {
    let per = n_kv_heads * (head_dim + v_head_dim) * kv_dtype.itemsize();
    let ints = per * full_layers; // + swa_per_token * draft_swa_full (0)
    let cell = ints as f64 + swa_full_tokens_ratio * per as f64 * swa_layers as f64;
    SwaCell {
        full_per_token: per,
        swa_per_token: per,
        cell,
    }
}

/// Tokens from a budget and a float cell: `int(available_bytes // cell)` (hybrid SWA).
pub fn tokens_for_float_cell(available_bytes: i64, cell: f64) -> i64 {
    py_int(py_floordiv(available_bytes as f64, cell))
}

/// The sizes printed by "KV Cache is allocated" for `tokens` (GiB, before `:.2f`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KvSizes {
    /// `K size: {k:.2f} GB, V size: {v:.2f} GB`.
    KV { k_gib: f64, v_gib: f64 },
    /// `KV size: {kv:.2f} GB` (MLA).
    Latent { kv_gib: f64 },
}

/// `(tokens + page_size) * heads * dim * layers * itemsize / 2^30` per buffer: the pool has
/// `page_size` padded rows in front (slot 0 receives dummy writes). L1/L2 size V with `head_dim`.
pub fn logged_kv_sizes(input: &CellInput, tokens: u64, page_size: u64) -> KvSizes {
    let rows = tokens + page_size;
    let l = input.layers;
    let isz = input.kv_dtype.itemsize();
    match input.attention {
        Attention::Mla {
            kv_lora_rank,
            qk_rope_head_dim,
        } => KvSizes::Latent {
            kv_gib: (rows * (kv_lora_rank + qk_rope_head_dim) * l * isz) as f64 / GIB,
        },
        Attention::Mha {
            total_kv_heads,
            head_dim,
            v_head_dim,
        } => {
            let n = kv_heads_per_rank(total_kv_heads, input.attn_tp_size, input.attn_dcp_size);
            let v_dim = if input.layout <= Layout::V0_5_5 {
                head_dim
            } else {
                v_head_dim
            };
            KvSizes::KV {
                k_gib: (rows * n * head_dim * l * isz) as f64 / GIB,
                v_gib: (rows * n * v_dim * l * isz) as f64 / GIB,
            }
        }
    }
}

#[cfg(test)]
#[path = "cell_tests.rs"]
mod tests;
