//! Reading a model's `config.json` for `vramledger size` with every field that sizes
//! something bounded first ([`crate::sizing::limits`]): a layer count of 2^53 is one message, not
//! an allocation of 2^53 layer kinds.

use vramledger_engines::sizing::json::{self, Value};
use vramledger_engines::sizing::model::ModelGeometry;

use crate::sizing::limits::{
    MAX_HEADS, MAX_HEAD_DIM, MAX_HIDDEN, MAX_KV_ELEMENTS, MAX_LAYERS, MAX_SPECULATIVE, MAX_TOKENS,
};

/// The keys of a config (top level, `text_config`, `vision_config`) that size something,
/// with their largest value.
const CONFIG_BOUNDS: &[(&str, u64)] = &[
    ("num_hidden_layers", MAX_LAYERS),
    ("num_attention_heads", MAX_HEADS),
    ("num_key_value_heads", MAX_HEADS),
    ("hidden_size", MAX_HIDDEN),
    ("head_dim", MAX_HEAD_DIM),
    ("v_head_dim", MAX_HEAD_DIM),
    ("kv_lora_rank", MAX_HEAD_DIM),
    ("qk_rope_head_dim", MAX_HEAD_DIM),
    ("num_nextn_predict_layers", MAX_SPECULATIVE),
    ("sliding_window", MAX_TOKENS),
    ("sliding_window_pattern", MAX_LAYERS),
    ("max_position_embeddings", MAX_TOKENS),
];

/// Per-layer descriptions: at most [`MAX_LAYERS`] entries.
const CONFIG_LISTS: &[&str] = &[
    "layer_types",
    "layers_block_type",
    "hybrid_override_pattern",
];

fn check_config_object(v: &Value, at: &str) -> Result<(), String> {
    for (key, max) in CONFIG_BOUNDS {
        let Some(x @ Value::Number(text)) = v.get(key) else {
            continue;
        };
        // Only integers size anything (the reader ignores other numbers); a huge integer
        // that does not even fit 64 bits is out of range too.
        let integer = text.bytes().all(|b| b.is_ascii_digit());
        match x.as_u64() {
            Some(n) if n <= *max => {}
            _ if !integer => {}
            _ => return Err(format!("`{at}{key}` is {text}: out of range (0 to {max})")),
        }
    }
    for key in CONFIG_LISTS {
        let n = match v.get(key) {
            Some(Value::Array(a)) => a.len(),
            Some(Value::String(s)) => s.chars().count(),
            _ => continue,
        };
        if n as u64 > MAX_LAYERS {
            return Err(format!(
                "`{at}{key}` describes {n} layers: out of range (at most {MAX_LAYERS})"
            ));
        }
    }
    Ok(())
}

/// Reads a model's `config.json` text with every sizing field bounded.
pub fn from_text(text: &str) -> Result<ModelGeometry, String> {
    let root = json::parse(text).map_err(|e| format!("config.json: {e}"))?;
    check_config_object(&root, "")?;
    for nested in ["text_config", "vision_config"] {
        if let Some(v) = root.get(nested).filter(|v| v.is_object()) {
            check_config_object(v, &format!("{nested}."))?;
        }
    }
    let m = ModelGeometry::from_config(&root).map_err(|e| e.to_string())?;
    let layers = m.num_hidden_layers + m.num_nextn_predict_layers.unwrap_or(0) + MAX_SPECULATIVE;
    let per_layer = match m.mla {
        Some(d) => d.kv_lora_rank + d.qk_rope_head_dim,
        None => m.num_key_value_heads * (m.head_dim + m.v_head_dim),
    };
    if layers.saturating_mul(per_layer) > MAX_KV_ELEMENTS {
        return Err(format!(
            "config.json: {} layers × {per_layer} KV elements per layer is out of range (at most {MAX_KV_ELEMENTS} per token)",
            m.num_hidden_layers
        ));
    }
    Ok(m)
}

/// Reads a model's `config.json` file (a regular file of at most 16 MiB).
pub fn read(path: &std::path::Path) -> Result<ModelGeometry, String> {
    let text = crate::infile::read_text(path, crate::infile::Kind::ModelConfig)?;
    from_text(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LLAMA: &str = r#"{"architectures": ["LlamaForCausalLM"], "head_dim": 128,
        "hidden_size": 2048, "num_attention_heads": 16, "num_hidden_layers": 8,
        "num_key_value_heads": 8, "torch_dtype": "bfloat16"}"#;

    #[test]
    fn real_configs_read_and_absurd_ones_are_named() {
        let m = from_text(LLAMA).unwrap();
        assert_eq!(m.num_hidden_layers, 8);
        for (edit, why) in [
            (
                (
                    "\"num_hidden_layers\": 8",
                    "\"num_hidden_layers\": 9007199254740992",
                ),
                "`num_hidden_layers` is 9007199254740992: out of range",
            ),
            (
                ("\"head_dim\": 128", "\"head_dim\": 99999999999999999999999"),
                "`head_dim` is 99999999999999999999999",
            ),
            (
                (
                    "\"num_key_value_heads\": 8",
                    "\"num_key_value_heads\": 16000",
                ),
                "KV elements per layer is out of range",
            ),
            (
                (
                    "\"hidden_size\": 2048",
                    "\"text_config\": {\"num_key_value_heads\": 100000}, \"hidden_size\": 2048",
                ),
                "`text_config.num_key_value_heads`",
            ),
        ] {
            let text = LLAMA.replace(edit.0, edit.1);
            let e = from_text(&text).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        let many = format!(
            r#"{{"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 4, "hybrid_override_pattern": "{}"}}"#,
            "M".repeat(5000)
        );
        let e = from_text(&many).unwrap_err();
        assert!(e.contains("describes 5000 layers"), "{e}");
    }
}
