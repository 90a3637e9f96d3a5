//! What KV sizing needs from a Hugging Face `config.json`.
//!
//! [`ModelGeometry::from_config_json`] reads the attention geometry the way SGLang's `ModelConfig`
//! does: text fields from `text_config` when the checkpoint nests them (Gemma 3, Kimi K2.5,
//! Qwen-VL), else from the top level; `head_dim` defaulting to `hidden_size / num_attention_heads`,
//! `v_head_dim` to `head_dim`, `num_key_value_heads` to `num_attention_heads`; MLA when
//! `kv_lora_rank` is set; the per-layer kind (full, sliding-window, Mamba/linear, no KV) from
//! `layer_types`, `layers_block_type`, `hybrid_override_pattern` or Gemma 3's
//! `sliding_window_pattern`. It does not know model-specific overrides SGLang applies in code
//! (for example per-architecture head-dim fixes); callers can edit the plain fields.

use super::json::{self, JsonError, Value};
use std::fmt;

/// The MLA latent dimensions (DeepSeek V2/V3, Kimi K2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MlaDims {
    pub kv_lora_rank: u64,
    pub qk_rope_head_dim: u64,
}

/// How one decoder layer uses the KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerKind {
    /// Full attention: one KV slot per token in the full pool.
    Full,
    /// Sliding-window attention (a hybrid-SWA "SWA" sub-pool layer).
    Sliding,
    /// Mamba / linear attention: fixed per-request state, no per-token KV.
    Mamba,
    /// A block without attention or state (e.g. Nemotron-H MLP blocks).
    NoKv,
}

/// The vision tower size that SGLang's multimodal adjustment of `mem_fraction_static` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VisionDims {
    /// `vision_config.num_hidden_layers` (SGLang's default when absent: 24).
    pub num_hidden_layers: u64,
    /// `vision_config.hidden_size` (SGLang's default when absent: 1024).
    pub hidden_size: u64,
}

/// The model geometry used by KV sizing.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelGeometry {
    pub architectures: Vec<String>,
    pub model_type: Option<String>,
    pub num_hidden_layers: u64,
    pub num_attention_heads: u64,
    /// Total KV heads before tensor-parallel sharding.
    pub num_key_value_heads: u64,
    pub hidden_size: u64,
    pub head_dim: u64,
    pub v_head_dim: u64,
    pub mla: Option<MlaDims>,
    /// MTP / EAGLE draft layers shipped with the checkpoint (`num_nextn_predict_layers`).
    pub num_nextn_predict_layers: Option<u64>,
    pub sliding_window: Option<u64>,
    /// One entry per decoder layer.
    pub layer_kinds: Vec<LayerKind>,
    /// `torch_dtype` (or newer `dtype`), e.g. `"bfloat16"`.
    pub torch_dtype: Option<String>,
    /// `quantization_config.quant_method`, e.g. `"fp8"`, `"awq"`.
    pub quant_method: Option<String>,
    /// `quantization_config.kv_cache_quant_algo == "FP8"`: `--kv-cache-dtype auto` means FP8 KV
    /// in SGLang 0.5.5 and later.
    pub checkpoint_kv_fp8: bool,
    /// `max_position_embeddings` (SGLang's `context_len` before rope-scaling adjustments).
    pub max_position_embeddings: Option<u64>,
    /// Present when the config has a `vision_config`.
    pub vision: Option<VisionDims>,
    /// Heuristic: a `vision_config`/`audio_config`, or an architecture named
    /// `*ForConditionalGeneration` / `*VL*`. SGLang decides from its own architecture list.
    pub is_multimodal: bool,
}

/// Why a config could not be read.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelError {
    Json(JsonError),
    NotAnObject,
    /// A required field is missing or not a non-negative integer.
    Field(&'static str),
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Json(e) => write!(f, "config.json: {e}"),
            ModelError::NotAnObject => write!(f, "config.json: top level is not an object"),
            ModelError::Field(name) => {
                write!(f, "config.json: `{name}` is missing or not an integer")
            }
        }
    }
}

impl std::error::Error for ModelError {}

impl ModelGeometry {
    /// Parses `config.json` text.
    pub fn from_config_json(text: &str) -> Result<ModelGeometry, ModelError> {
        let root = json::parse(text).map_err(ModelError::Json)?;
        ModelGeometry::from_config(&root)
    }

    /// Reads an already parsed config.
    pub fn from_config(root: &Value) -> Result<ModelGeometry, ModelError> {
        if !root.is_object() {
            return Err(ModelError::NotAnObject);
        }
        let text = root.get("text_config").filter(|v| v.is_object());
        // Text fields: the nested text config first, then the top level.
        let field = |key: &str| -> Option<&Value> {
            text.and_then(|t| t.get(key))
                .filter(|v| **v != Value::Null)
                .or_else(|| root.get(key).filter(|v| **v != Value::Null))
        };
        let uint = |key: &'static str| field(key).and_then(Value::as_u64);
        let required = |key: &'static str| uint(key).ok_or(ModelError::Field(key));

        let architectures: Vec<String> = root
            .get("architectures")
            .or_else(|| text.and_then(|t| t.get("architectures")))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let num_hidden_layers = required("num_hidden_layers")?;
        let num_attention_heads = required("num_attention_heads")?;
        let hidden_size = uint("hidden_size").unwrap_or(0);
        let num_key_value_heads = uint("num_key_value_heads").unwrap_or(num_attention_heads);
        let head_dim = match uint("head_dim") {
            Some(d) => d,
            None if num_attention_heads > 0 => hidden_size / num_attention_heads,
            None => return Err(ModelError::Field("head_dim")),
        };
        let v_head_dim = uint("v_head_dim").unwrap_or(head_dim);
        let mla = match (uint("kv_lora_rank"), uint("qk_rope_head_dim")) {
            (Some(kv_lora_rank), Some(qk_rope_head_dim)) => Some(MlaDims {
                kv_lora_rank,
                qk_rope_head_dim,
            }),
            _ => None,
        };
        let quant = root
            .get("quantization_config")
            .or_else(|| text.and_then(|t| t.get("quantization_config")));
        let quant_method = quant
            .and_then(|q| q.get("quant_method"))
            .and_then(Value::as_str)
            .map(String::from);
        let checkpoint_kv_fp8 = quant
            .and_then(|q| q.get("kv_cache_quant_algo"))
            .and_then(Value::as_str)
            .is_some_and(|s| s.eq_ignore_ascii_case("fp8"));
        let torch_dtype = field("torch_dtype")
            .or_else(|| field("dtype"))
            .and_then(Value::as_str)
            .map(String::from);
        let vision = root
            .get("vision_config")
            .filter(|v| v.is_object())
            .map(|v| VisionDims {
                num_hidden_layers: v
                    .get("num_hidden_layers")
                    .and_then(Value::as_u64)
                    .unwrap_or(24),
                hidden_size: v.get("hidden_size").and_then(Value::as_u64).unwrap_or(1024),
            });
        let is_multimodal = vision.is_some()
            || root.get("audio_config").is_some()
            || architectures
                .iter()
                .any(|a| a.ends_with("ForConditionalGeneration") || a.contains("VL"));
        let layer_kinds = layer_kinds(&field, num_hidden_layers);

        Ok(ModelGeometry {
            model_type: root
                .get("model_type")
                .and_then(Value::as_str)
                .map(String::from),
            architectures,
            num_hidden_layers,
            num_attention_heads,
            num_key_value_heads,
            hidden_size,
            head_dim,
            v_head_dim,
            mla,
            num_nextn_predict_layers: uint("num_nextn_predict_layers"),
            sliding_window: uint("sliding_window"),
            layer_kinds,
            torch_dtype,
            quant_method,
            checkpoint_kv_fp8,
            max_position_embeddings: uint("max_position_embeddings"),
            vision,
            is_multimodal,
        })
    }

    /// Layers with full attention (the KV layers of a Mamba hybrid, the "Full" sub-pool of SWA).
    pub fn full_attention_layers(&self) -> u64 {
        self.count(LayerKind::Full)
    }

    /// Sliding-window layers.
    pub fn sliding_layers(&self) -> u64 {
        self.count(LayerKind::Sliding)
    }

    /// Mamba / linear-attention layers.
    pub fn mamba_layers(&self) -> u64 {
        self.count(LayerKind::Mamba)
    }

    /// Has both full and sliding-window layers (SGLang's hybrid-SWA pool applies unless disabled).
    pub fn is_hybrid_swa(&self) -> bool {
        self.sliding_layers() > 0 && self.full_attention_layers() > 0
    }

    /// Has Mamba / linear-attention layers (SGLang's "mambaish" models).
    pub fn is_mambaish(&self) -> bool {
        self.mamba_layers() > 0
    }

    fn count(&self, kind: LayerKind) -> u64 {
        self.layer_kinds.iter().filter(|k| **k == kind).count() as u64
    }
}

/// Per-layer kinds from whichever description the config carries; all full attention otherwise.
fn layer_kinds<'a>(field: &dyn Fn(&str) -> Option<&'a Value>, layers: u64) -> Vec<LayerKind> {
    let n = layers as usize;
    for key in ["layer_types", "layers_block_type"] {
        if let Some(list) = field(key).and_then(Value::as_array) {
            let kinds: Vec<LayerKind> = list
                .iter()
                .map(|v| kind_of(v.as_str().unwrap_or("")))
                .collect();
            if !kinds.is_empty() {
                return kinds;
            }
        }
    }
    // Nemotron-H: "M-M-M*-..." ('M' Mamba, '*' attention, '-'/'E' MLP or MoE).
    if let Some(pattern) = field("hybrid_override_pattern").and_then(Value::as_str) {
        return pattern
            .chars()
            .map(|c| match c {
                'M' => LayerKind::Mamba,
                '*' => LayerKind::Full,
                _ => LayerKind::NoKv,
            })
            .collect();
    }
    // Gemma 3: layer i is full iff (i + 1) % pattern == 0, else sliding.
    if let Some(p) = field("sliding_window_pattern").and_then(Value::as_u64) {
        if p > 0 && field("sliding_window").is_some() {
            return (0..n)
                .map(|i| {
                    if i as u64 % p == p - 1 {
                        LayerKind::Full
                    } else {
                        LayerKind::Sliding
                    }
                })
                .collect();
        }
    }
    vec![LayerKind::Full; n]
}

fn kind_of(name: &str) -> LayerKind {
    let name = name.to_ascii_lowercase();
    if name.contains("sliding") || name == "swa" {
        LayerKind::Sliding
    } else if name.contains("mamba") || name.contains("linear") || name.contains("ssm") {
        LayerKind::Mamba
    } else if name.contains("attention") || name == "full" || name == "global" {
        LayerKind::Full
    } else {
        LayerKind::NoKv
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_defaults_head_dim_from_hidden_size() {
        let m = ModelGeometry::from_config_json(
            r#"{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
                "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
                "torch_dtype": "bfloat16", "max_position_embeddings": 131072}"#,
        )
        .unwrap();
        // 4096 / 32 = 128; v_head_dim defaults to head_dim.
        assert_eq!((m.head_dim, m.v_head_dim), (128, 128));
        assert_eq!(m.num_key_value_heads, 8);
        assert_eq!(m.full_attention_layers(), 32);
        assert!(!m.is_multimodal && !m.is_hybrid_swa() && !m.is_mambaish());
        assert_eq!(m.torch_dtype.as_deref(), Some("bfloat16"));
    }

    #[test]
    fn gemma3_nested_text_config_and_swa_pattern() {
        let m = ModelGeometry::from_config_json(
            r#"{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                "text_config": {"hidden_size": 5376, "num_attention_heads": 32,
                "num_hidden_layers": 62, "num_key_value_heads": 16, "head_dim": 128,
                "sliding_window": 1024, "sliding_window_pattern": 6}}"#,
        )
        .unwrap();
        // head_dim 128 is explicit (5376 / 32 would be 168).
        assert_eq!(m.head_dim, 128);
        // Layers 5, 11, ..., 59 are full: floor(62 / 6) = 10 full, 52 sliding.
        assert_eq!(m.full_attention_layers(), 10);
        assert_eq!(m.sliding_layers(), 52);
        assert_eq!(m.layer_kinds[5], LayerKind::Full);
        assert_eq!(m.layer_kinds[0], LayerKind::Sliding);
        assert!(m.is_hybrid_swa() && m.is_multimodal);
        assert_eq!(m.vision, None);
    }

    #[test]
    fn mla_and_checkpoint_fp8_kv() {
        let m = ModelGeometry::from_config_json(
            r#"{"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168,
                "num_attention_heads": 128, "num_hidden_layers": 61, "num_key_value_heads": 128,
                "kv_lora_rank": 512, "qk_rope_head_dim": 64, "v_head_dim": 128,
                "num_nextn_predict_layers": 1,
                "quantization_config": {"quant_method": "fp8", "kv_cache_quant_algo": "FP8"}}"#,
        )
        .unwrap();
        assert_eq!(
            m.mla,
            Some(MlaDims {
                kv_lora_rank: 512,
                qk_rope_head_dim: 64
            })
        );
        assert_eq!(m.num_nextn_predict_layers, Some(1));
        assert!(m.checkpoint_kv_fp8);
        assert_eq!(m.quant_method.as_deref(), Some("fp8"));
    }

    #[test]
    fn hybrid_mamba_layer_lists() {
        let m = ModelGeometry::from_config_json(
            r#"{"num_hidden_layers": 5, "num_attention_heads": 8, "hidden_size": 512,
                "layer_types": ["mamba", "mamba", "attention", "mamba", "full_attention"]}"#,
        )
        .unwrap();
        assert_eq!((m.mamba_layers(), m.full_attention_layers()), (3, 2));
        let n = ModelGeometry::from_config_json(
            r#"{"num_hidden_layers": 6, "num_attention_heads": 8, "hidden_size": 512,
                "hybrid_override_pattern": "M-M*-E"}"#,
        )
        .unwrap();
        assert_eq!((n.mamba_layers(), n.full_attention_layers()), (2, 1));
        assert!(n.is_mambaish());
    }

    #[test]
    fn vision_defaults_and_errors() {
        let m = ModelGeometry::from_config_json(
            r#"{"architectures": ["Qwen2_5_VLForConditionalGeneration"], "hidden_size": 3584,
                "num_attention_heads": 28, "num_hidden_layers": 28,
                "vision_config": {"depth": 32}}"#,
        )
        .unwrap();
        assert_eq!(
            m.vision,
            Some(VisionDims {
                num_hidden_layers: 24,
                hidden_size: 1024
            })
        );
        assert_eq!(
            ModelGeometry::from_config_json(r#"{"num_attention_heads": 8}"#),
            Err(ModelError::Field("num_hidden_layers"))
        );
        assert_eq!(
            ModelGeometry::from_config_json("[1]"),
            Err(ModelError::NotAnObject)
        );
        assert!(matches!(
            ModelGeometry::from_config_json("{"),
            Err(ModelError::Json(_))
        ));
    }
}
