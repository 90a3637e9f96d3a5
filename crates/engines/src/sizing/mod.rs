//! KV-cache sizing arithmetic: SGLang's, per released layout, and vLLM's.
//!
//! vramledger measures free memory at every startup stage; this module re-runs the engine's own
//! KV-cache sizing on those numbers, so a report can say why the engine chose its token count,
//! what another `mem_fraction_static` / GPU / TP size would give, and which check failed when a
//! start dies in sizing. It is pure arithmetic on plain structs: no I/O, no dependencies (it is
//! compiled into the in-process shim), no knowledge of log lines (that is `log`'s job).
//!
//! # Brief overview
//!
//! - [`layout`]: which SGLang code shape a version runs ([`Layout`], `for_version("0.5.7")`).
//! - [`model`] (with its small [`json`] reader): the geometry KV sizing needs from `config.json`.
//! - [`cell`]: bytes of KV per token per layout (MHA/GQA, MLA, FP8/FP4/MXFP8, EAGLE draft layers,
//!   hybrid-SWA per-token sizes) and the sizes the "KV Cache is allocated" line prints;
//!   [`model_cell`]: a model's cell under one configuration (KV dtype, attention TP, the last
//!   PP stage's layers, the SWA split), with the arithmetic in words.
//! - [`defaults`]: the default `mem_fraction_static`, `chunked_prefill_size` and decode graph
//!   `max_bs` from the GPU capacity (MiB), TP/PP/DP, speculative, DeepEP, multimodal settings.
//! - [`tokens`]: `rest = available − pre × (1 − f) − mm`, the Mamba carve-out ([`hybrid`]), the
//!   cell division, page floor, caps, PP minimum, SWA split, `max_running_requests`, and the
//!   startup errors with SGLang's wording and the smallest fraction that works; [`pool`] is the
//!   budget-to-pools step shared with [`post_capture`] (0.5.18+ resize after graph capture).
//! - [`vllm`]: V0 `determine_num_available_blocks` and V1 `determine_available_memory` → blocks;
//!   [`vllm_budget`]: 0.26's budget on exact or interval bytes, the `--kv-cache-memory` suggestion.
//! - [`pyfloat`]: Python's `round`, `int`, `//`, `repr` and `:.Nf`, so that every step is the
//!   float operation SGLang performs, in its order; results compare bit for bit given the same
//!   inputs (free memory in GiB floats, as `get_available_gpu_memory` returns them).
//!
//! # Example
//!
//! Llama-3.1-8B on an 80 GB GPU with SGLang 0.4.1 (the docs quick-start log): 78.81 GiB free
//! after distributed init, 63.72 GiB after the weights.
//!
//! ```
//! use vramledger_engines::sizing::{cell, defaults, tokens, Layout, ModelGeometry};
//!
//! let config = r#"{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
//!     "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
//!     "torch_dtype": "bfloat16", "max_position_embeddings": 131072}"#;
//! let model = ModelGeometry::from_config_json(config).unwrap();
//! let layout = Layout::for_version_or_oldest("0.4.1").unwrap();
//!
//! // Default fraction on an H100 (81559 MiB), tp 1: L1's table gives 0.88.
//! let d = defaults::sglang_defaults(&defaults::DefaultsInput::new(layout, Some(81559.0), 1));
//! assert_eq!(d.mem_fraction_static, 0.88);
//!
//! // 8 kv heads x (128 + 128) x 32 layers x 2 bytes = 131072 bytes per token.
//! let attention = cell::Attention::Mha {
//!     total_kv_heads: model.num_key_value_heads,
//!     head_dim: model.head_dim,
//!     v_head_dim: model.v_head_dim,
//! };
//! let c = cell::CellInput::new(layout, attention, model.num_hidden_layers, cell::KvDtype::Bf16, 1);
//! let cell_bytes = cell::cell_bytes(&c).unwrap();
//! assert_eq!(cell_bytes, 131_072);
//!
//! // rest = 63.72 − 78.81 × 0.12 = 54.2628 GiB → 444520 tokens (the log, from rounded
//! // inputs, says 444500: inside the ±46 tokens that 0.01-GiB printing leaves).
//! let input = tokens::SizingInput::new(layout, cell_bytes, 0.88, 78.81, 63.72, 131_072);
//! let r = tokens::size_sglang(&input).unwrap();
//! assert_eq!(r.tokens, 444_520);
//! assert!(r.error.is_none());
//! ```

pub mod cell;
pub mod defaults;
pub mod defaults_input;
mod failure;
pub mod graphs;
pub mod hybrid;
pub mod json;
pub mod layout;
pub mod model;
pub mod model_cell;
pub mod pool;
pub mod post_capture;
pub mod pyfloat;
mod reserve;
pub mod tokens;
pub mod tokens_input;
pub mod vllm;
pub mod vllm_budget;

pub use cell::{cell_bytes, Attention, CellInput, KvDtype};
pub use defaults::{sglang_defaults, Defaults, DefaultsInput};
pub use layout::Layout;
pub use model::ModelGeometry;
pub use post_capture::{post_capture_resize, PostCaptureInput, PostCaptureResult};
pub use tokens::{
    size_sglang, FailedCheck, SizingError, SizingInput, SizingInputError, SizingResult,
};
pub use vllm::{v0_blocks, v1_blocks, VllmResult};
