//! The KV cell of the resolved settings: `vramledger_engines::sizing::model_cell` computes
//! it; here the settings a run, a log and the flags resolved are handed to it.

use vramledger_engines::sizing::model::ModelGeometry;
use vramledger_engines::sizing::model_cell::{kv_dtype, model_cell, CellSettings};
use vramledger_engines::sizing::Layout;

use super::inputs::Settings;

/// What the cell depends on, out of the resolved settings.
pub fn cell_settings(s: &Settings) -> CellSettings {
    CellSettings {
        pp: s.pp.value,
        dp: s.dp,
        dp_attention: s.dp_attention,
        disable_hybrid_swa_memory: s.disable_hybrid_swa_memory,
        swa_full_tokens_ratio: s.swa_full_tokens_ratio,
        speculative: s.speculative,
        speculative_num_draft_layers: s.speculative_num_draft_layers,
    }
}

/// The cell alone (the defaults-only answer with a model).
pub fn cell_only(
    model: &ModelGeometry,
    settings: &Settings,
    layout: Layout,
) -> Result<u64, String> {
    let kv = kv_dtype(layout, &settings.kv_cache_dtype.value, model)?;
    model_cell(
        model,
        &cell_settings(settings),
        layout,
        settings.tp.value,
        kv,
    )
    .map(|c| c.bytes)
}
