//! SGLang's defaults that depend on the GPU: `mem_fraction_static`, `chunked_prefill_size` and the
//! decode CUDA-graph `max_bs`, per layout.
//!
//! L1 (0.4.6.post5) picks `mem_fraction_static` from a table by TP×PP size; L2 onward derive it
//! from the MB to keep for run time: `round((gpu_mem - reserved_mb) / gpu_mem, 3)`, with capacity
//! tiers for the chunk size and graph batch size, a 10 GiB floor above 60 GiB, speculative /
//! piecewise / DP-attention / DeepEP / post-capture terms, and the multimodal (ViT) reduction.
//! `gpu_mem` is MiB as SGLang reads it (`nvidia-smi` minimum over GPUs, as a float). Terms are
//! added in SGLang's order; all are multiples of 0.5 MB, so the sums are exact in f64.

use super::graphs::resolved_prefill_graph;
use super::layout::Layout;
use super::model::VisionDims;
use super::pyfloat::py_round;
use super::reserve::{graph_reserve_mb, piecewise_len, prefill_len, tier};
pub use super::reserve::{pre_capture_activation_reserve_mb, prefill_graph_batch_sizes};

pub use super::defaults_input::{
    DefaultsInput, Disaggregation, Platform, PrefillGraph, Speculative,
};

/// The resolved defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Defaults {
    pub chunked_prefill_size: i64,
    /// Decode graph max batch size; L1 leaves it unset above 25,000 MiB.
    pub cuda_graph_max_bs: Option<u64>,
    /// 0.5.18+: the prefill graph batch-size count that priced the graph reserve.
    pub prefill_graph_bs_len: Option<usize>,
    /// The prefill graphs the reserve priced (0.5.12: `TcPiecewise` when piecewise graphs are
    /// on, else `Disabled`; 0.5.18+: the backend); `None` before 0.5.12.
    pub prefill_graph: Option<PrefillGraph>,
    /// MB kept for run time (L2+); `None` for L1's table and when `gpu_mem` is unknown.
    pub reserved_mb: Option<f64>,
    /// The fraction before the multimodal adjustment.
    pub base_fraction: f64,
    /// The default `mem_fraction_static` SGLang prints in `server_args`.
    pub mem_fraction_static: f64,
}

/// `adjust_mem_fraction_for_vlm` (ViT path): `mfs * 0.95 * clamp(1 - 0.1 * (ratio - 1), 0.8, 1.05)`
/// with `ratio = layers * hidden^2 / (24 * 1024^2)`, in SGLang's order of operations.
pub fn vlm_adjusted_fraction(mfs: f64, vision: VisionDims) -> f64 {
    let current = (vision.num_hidden_layers * vision.hidden_size * vision.hidden_size) as f64;
    let baseline = (24u64 * 1024 * 1024) as f64;
    let ratio = current / baseline;
    let dynamic = (1.0 - 0.1 * (ratio - 1.0)).clamp(0.8, 1.05);
    mfs * (0.95 * dynamic)
}

/// 0.4.x `ModelRunner.model_specific_adjustment`: the fraction the runner actually uses.
/// Multimodal models get `*= 0.90`, then the aiter backend with `context_len > 8192` gets
/// `*= 0.85`. Read from a 0.4.7-era `model_runner.py`; present in 0.4.6.post5 is not confirmed,
/// and 0.5.x moved the multimodal reduction to `server_args` (see [`vlm_adjusted_fraction`]).
pub fn l1_runner_fraction(mfs: f64, multimodal: bool, aiter_long_context: bool) -> f64 {
    let mut f = mfs;
    if multimodal {
        f *= 0.90;
    }
    if aiter_long_context {
        f *= 0.85;
    }
    f
}

/// The defaults SGLang derives for this GPU and configuration.
pub fn sglang_defaults(input: &DefaultsInput) -> Defaults {
    match input.layout {
        Layout::V0_4_6 => l1_defaults(input),
        _ => reserved_mb_defaults(input),
    }
}

fn l1_defaults(input: &DefaultsInput) -> Defaults {
    let gpu = input.gpu_mem_mib;
    let parallel = input.tp_size * input.pp_size;
    let mut mfs = match gpu {
        Some(g) if g <= 81920.0 => match parallel {
            p if p >= 16 => 0.79,
            p if p >= 8 => 0.81,
            p if p >= 4 => 0.85,
            p if p >= 2 => 0.87,
            _ => 0.88,
        },
        _ => 0.88,
    };
    if let Some(g) = gpu.filter(|g| *g > 96.0 * 1024.0) {
        // "15 GB + additional 3GB for cuda graph"
        mfs = f64::min(mfs + 49152.0 * (1.0 - mfs) / g, (g - 18432.0) / g);
    }
    let small = gpu.is_some_and(|g| g < 25_000.0);
    let chunked = input.chunked_prefill_size.unwrap_or(if small {
        2048
    } else if input.disaggregation != Disaggregation::Null {
        16384
    } else {
        8192
    });
    let max_bs = input
        .cuda_graph_max_bs
        .or(small.then_some(if input.tp_size < 4 { 8 } else { 80 }));
    Defaults {
        chunked_prefill_size: chunked,
        cuda_graph_max_bs: max_bs,
        prefill_graph_bs_len: None,
        prefill_graph: None,
        reserved_mb: None,
        base_fraction: mfs,
        mem_fraction_static: mfs,
    }
}

/// 0.5.12+ NPU defaults (`hardware_backend/npu/utils.py::set_default_server_args`, run before
/// the memory defaults): `(chunked_prefill_size, decode max_bs)` for up to 32 GiB and 64 GiB.
fn npu_presets(input: &DefaultsInput) -> (Option<i64>, Option<u64>) {
    let pick = |small: u64, large: u64| if input.tp_size < 4 { small } else { large };
    match input.gpu_mem_mib {
        _ if input.platform != Platform::Npu || input.layout < Layout::V0_5_12 => (None, None),
        Some(m) if m <= 32.0 * 1024.0 => (Some(4096), Some(pick(16, 64))),
        Some(m) if m <= 64.0 * 1024.0 => (Some(8192), Some(pick(64, 256))),
        _ => (None, None),
    }
}

fn reserved_mb_defaults(input: &DefaultsInput) -> Defaults {
    let layout = input.layout;
    let gpu = input.gpu_mem_mib;
    let (tier_chunked, tier_bs) = tier(layout, input.platform, gpu, input.tp_size);
    let (npu_chunked, npu_bs) = npu_presets(input);
    let chunked = input
        .chunked_prefill_size
        .or(npu_chunked)
        .unwrap_or(tier_chunked);
    let given_bs = input.cuda_graph_max_bs.or(npu_bs);
    let mut max_bs = given_bs.unwrap_or(tier_bs);
    let prefill_graph = resolved_prefill_graph(input);
    if layout == Layout::V0_5_23 && given_bs.is_none() {
        if let Some(mrr) = input.max_running_requests.filter(|m| max_bs > *m) {
            max_bs = mrr;
        }
    }
    let mb = max_bs as f64;
    let dp = input.dp_size as f64;
    let parallel_mb = (input.tp_size * input.pp_size) as f64 / 8.0 * 1024.0;
    let above_60g = gpu.is_some_and(|g| g > 60.0 * 1024.0);
    let mut prefill_bs_len = None;

    let reserved = if layout <= Layout::V0_5_12 {
        let act = if chunked > 0 {
            chunked.max(2048)
        } else {
            input.max_prefill_tokens.max(2048)
        };
        let mut r = 512.0;
        r += act as f64 * 1.5;
        r += mb * 2.0;
        r += parallel_mb;
        if input.enable_dp_attention {
            r += mb * dp * 3.0;
            if max_bs > 300 {
                r += mb * dp * 1.5;
            }
        }
        if prefill_graph == Some(PrefillGraph::TcPiecewise) {
            r += if input.mla {
                1.5 * 1024.0
            } else {
                input
                    .piecewise_tokens_len
                    .unwrap_or_else(|| piecewise_len(input, chunked)) as f64
                    * 8.0
            };
        }
        if above_60g {
            r = f64::max(r, 10.0 * 1024.0);
        }
        r += match input.speculative {
            Speculative::None | Speculative::Ngram => 0.0,
            Speculative::Standalone => 6.0 * 1024.0,
            Speculative::Eagle if layout == Layout::V0_5_12 => 4.0 * 1024.0,
            Speculative::Eagle => 2.0 * 1024.0,
        };
        r
    } else if input.post_capture_kv_sizing {
        1536.0 + parallel_mb
    } else {
        let act = if input.disaggregation == Disaggregation::Decode {
            let running = input
                .max_running_requests
                .filter(|m| *m > 0)
                .unwrap_or(if max_bs > 0 { max_bs } else { 1 });
            let draft = input
                .speculative_num_draft_tokens
                .filter(|d| *d > 0)
                .unwrap_or(1);
            ((running * draft) as i64).max(2048)
        } else if chunked > 0 {
            chunked.max(2048)
        } else {
            input.max_prefill_tokens.max(2048)
        };
        let prefill = prefill_graph.unwrap_or(PrefillGraph::Disabled);
        let len = prefill_len(input, prefill, chunked);
        prefill_bs_len = Some(len);
        let mut r = 512.0;
        r += act as f64 * 1.5;
        r += parallel_mb;
        r += graph_reserve_mb(input, prefill, mb, len);
        if above_60g {
            r = f64::max(r, 10.0 * 1024.0);
        }
        if input.disaggregation != Disaggregation::Prefill && input.decode_graph && input.deepep {
            r += 2.0 * 1024.0;
        }
        if layout == Layout::V0_5_23 && input.xpu {
            r += 2.0 * 1024.0;
        }
        r
    };

    let base = match gpu {
        Some(g) => py_round((g - reserved) / g, 3),
        None if layout == Layout::V0_5_23 => 0.95,
        None => 0.88,
    };
    let vlm_gate = match layout {
        Layout::V0_4_6 | Layout::V0_5_5 | Layout::V0_5_12 => input.multimodal,
        _ => input.multimodal && input.disaggregation != Disaggregation::Decode,
    };
    let mfs = match (vlm_gate, input.vision) {
        (true, _) if layout == Layout::V0_5_23 && input.post_capture_kv_sizing => match gpu {
            Some(g) => base - 8.0 * 1024.0 / g,
            None => base,
        },
        (true, Some(v)) => vlm_adjusted_fraction(base, v),
        _ => base,
    };
    Defaults {
        chunked_prefill_size: chunked,
        cuda_graph_max_bs: Some(max_bs),
        prefill_graph_bs_len: prefill_bs_len,
        prefill_graph,
        reserved_mb: gpu.map(|_| reserved),
        base_fraction: base,
        mem_fraction_static: mfs,
    }
}

#[cfg(test)]
#[path = "defaults_tests.rs"]
mod tests;
