//! Which prefill graphs SGLang captures, decided before its memory defaults: the reserve prices
//! them only when they are on.
//!
//! - 0.5.12 (`ServerArgs._handle_piecewise_cuda_graph`): piecewise CUDA graphs are on by default
//!   and turned off by DP attention, PP > 1, any platform but CUDA, an MoE all-to-all backend,
//!   a multimodal model or PD disaggregation.
//! - 0.5.18 (`_handle_cuda_graph_config`): the prefill backend defaults to breakable graphs on
//!   CUDA and to torch.compile piecewise graphs elsewhere; piecewise graphs are turned off by
//!   the same rules as in 0.5.12 (so on HIP and NPU they are always off), breakable ones by a
//!   multimodal model; a decode-only PD server has none.
//! - 0.5.23 (`arg_groups/cuda_graph_hook.py`): breakable on CUDA, none elsewhere; PP > 1 or a
//!   multimodal model turn breakable graphs off; a decode-only PD server has none.
//!
//! An explicitly set backend (a flag, or the value a `server_args` line logged) skips the rules,
//! as SGLang's lock does. Rules on inputs vramledger does not take (LoRA, torch.compile, GGUF,
//! CPU offload, context parallelism, two-batch overlap, deterministic inference, model
//! architecture lists) are not applied: a logged value covers them. Executed against the wheels
//! in `scripts/sglang_reference` (every platform, PP 1 to 8, DP attention, speculative).

use super::defaults_input::{DefaultsInput, Disaggregation, Platform, PrefillGraph};
use super::layout::Layout;

/// The prefill graphs the defaults price: for 0.5.12 `TcPiecewise` (piecewise on) or
/// `Disabled`; for 0.5.18+ the resolved backend; `None` for layouts without prefill graphs.
pub fn resolved_prefill_graph(input: &DefaultsInput) -> Option<PrefillGraph> {
    match input.layout {
        Layout::V0_4_6 | Layout::V0_5_5 => None,
        Layout::V0_5_12 => {
            let on = input
                .piecewise_graph
                .unwrap_or_else(|| !piecewise_incompatible(input));
            Some(if on {
                PrefillGraph::TcPiecewise
            } else {
                PrefillGraph::Disabled
            })
        }
        layout => Some(
            input
                .prefill_graph
                .unwrap_or_else(|| unlocked_prefill_backend(layout, input)),
        ),
    }
}

/// The torch.compile piecewise rules (0.5.12's `_handle_piecewise_cuda_graph`, 0.5.18's
/// `_disable_tc_piecewise_cudagraph_if_incompatible`) on the inputs vramledger has.
fn piecewise_incompatible(input: &DefaultsInput) -> bool {
    input.enable_dp_attention
        || input.pp_size > 1
        || input.platform != Platform::Cuda
        || input.deepep
        || input.multimodal
        || input.disaggregation != Disaggregation::Null
}

fn unlocked_prefill_backend(layout: Layout, input: &DefaultsInput) -> PrefillGraph {
    let cuda = input.platform == Platform::Cuda;
    let backend = match (layout, cuda) {
        (_, true) => PrefillGraph::Breakable,
        (Layout::V0_5_18, false) => PrefillGraph::TcPiecewise,
        _ => PrefillGraph::Disabled,
    };
    let backend = match backend {
        PrefillGraph::TcPiecewise if piecewise_incompatible(input) => PrefillGraph::Disabled,
        PrefillGraph::Breakable if layout >= Layout::V0_5_23 && input.pp_size > 1 => {
            PrefillGraph::Disabled
        }
        PrefillGraph::Breakable if input.multimodal => PrefillGraph::Disabled,
        b => b,
    };
    // `_apply_cuda_graph_disaggregation_roles`: a decode server captures no prefill graph.
    if input.disaggregation == Disaggregation::Decode {
        PrefillGraph::Disabled
    } else {
        backend
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(layout: Layout, platform: Platform) -> DefaultsInput {
        let mut i = DefaultsInput::new(layout, Some(196_592.0), 1);
        i.platform = platform;
        i
    }

    #[test]
    fn per_layout_platform_and_parallelism() {
        use PrefillGraph::*;
        let cases = [
            (Layout::V0_5_5, Platform::Cuda, 1, false, None),
            (Layout::V0_5_12, Platform::Cuda, 1, false, Some(TcPiecewise)),
            (Layout::V0_5_12, Platform::Hip, 1, false, Some(Disabled)),
            (Layout::V0_5_12, Platform::Npu, 1, false, Some(Disabled)),
            (Layout::V0_5_12, Platform::Cuda, 2, false, Some(Disabled)),
            (Layout::V0_5_12, Platform::Cuda, 1, true, Some(Disabled)),
            (Layout::V0_5_18, Platform::Cuda, 1, false, Some(Breakable)),
            (Layout::V0_5_18, Platform::Cuda, 2, true, Some(Breakable)),
            (Layout::V0_5_18, Platform::Hip, 1, false, Some(Disabled)),
            (Layout::V0_5_23, Platform::Cuda, 1, true, Some(Breakable)),
            (Layout::V0_5_23, Platform::Cuda, 2, false, Some(Disabled)),
            (Layout::V0_5_23, Platform::Npu, 1, false, Some(Disabled)),
        ];
        for (layout, platform, pp, dpa, want) in cases {
            let mut i = input(layout, platform);
            i.pp_size = pp;
            i.enable_dp_attention = dpa;
            i.dp_size = if dpa { 2 } else { 1 };
            assert_eq!(
                resolved_prefill_graph(&i),
                want,
                "{layout} {platform:?} pp {pp} dpa {dpa}"
            );
        }
    }

    #[test]
    fn a_set_backend_skips_the_rules() {
        let mut i = input(Layout::V0_5_23, Platform::Cuda);
        i.pp_size = 4;
        i.prefill_graph = Some(PrefillGraph::Breakable);
        assert_eq!(resolved_prefill_graph(&i), Some(PrefillGraph::Breakable));
        let mut i = input(Layout::V0_5_12, Platform::Hip);
        i.piecewise_graph = Some(true);
        assert_eq!(resolved_prefill_graph(&i), Some(PrefillGraph::TcPiecewise));
        let mut i = input(Layout::V0_5_18, Platform::Cuda);
        i.disaggregation = Disaggregation::Decode;
        assert_eq!(resolved_prefill_graph(&i), Some(PrefillGraph::Disabled));
    }
}
