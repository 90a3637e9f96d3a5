//! What SGLang's pre-capture sizing reads and what it answers: [`SizingInput`], [`SizingResult`]
//! and a startup failure ([`SizingError`]). Their own room, so that the arithmetic (`tokens`),
//! the pool (`pool`) and the failures (`failure`) all read them from below.

use super::defaults_input::Speculative;
use super::hybrid::{MambaInput, SwaInput};
use super::layout::Layout;

/// L1/L2 EAGLE target headroom: the pool grows by
/// `max_num_reqs * steps * topk + max_num_reqs * draft_tokens + 100` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecHeadroom {
    pub num_steps: u64,
    pub eagle_topk: u64,
    pub num_draft_tokens: u64,
}

impl SpecHeadroom {
    /// Whether `layout` prices this headroom for `spec` into the target's pool: L1 (0.4.x) for
    /// any algorithm, L2 (0.5.5) for EAGLE and STANDALONE; later layouts size the draft apart.
    pub fn priced(layout: Layout, spec: Speculative) -> bool {
        match (layout, spec) {
            (_, Speculative::None) => false,
            (Layout::V0_4_6, _) => true,
            (Layout::V0_5_5, Speculative::Eagle | Speculative::Standalone) => true,
            _ => false,
        }
    }
}

/// Everything SGLang's sizing reads. [`SizingInput::new`] fills the neutral values.
#[derive(Debug, Clone, PartialEq)]
pub struct SizingInput {
    pub layout: Layout,
    /// Bytes per token from `cell::cell_bytes` (ignored for the hybrid-SWA split from L3).
    pub cell_bytes: u64,
    /// The fraction the model runner uses (for L1 see `defaults::l1_runner_fraction`).
    pub mem_fraction_static: f64,
    /// `pre_model_load_memory`: free GiB after distributed init (MIN over TP×PP ranks).
    pub pre_gib: f64,
    /// Free GiB after weights (MIN over ranks) when sizing runs.
    pub available_gib: f64,
    /// L4a/L4 multimodal reservation in GiB (0 for text models; ignored before 0.5.18).
    pub mm_reservation_gib: f64,
    pub page_size: u64,
    /// `--max-total-tokens`.
    pub max_total_tokens: Option<i64>,
    /// L2+: the smallest token count among the other PP stages (SGLang's PP MIN all-reduce).
    pub pp_min_tokens: Option<i64>,
    pub context_len: u64,
    /// `--max-running-requests`.
    pub max_running_requests: Option<u64>,
    /// `dp_size` with `--enable-dp-attention`, else 1.
    pub attn_dp_size: u64,
    /// L1/L2 EAGLE/STANDALONE target (L1: any algorithm).
    pub spec_headroom: Option<SpecHeadroom>,
    /// L2+: hybrid sliding-window pools.
    pub swa: Option<SwaInput>,
    /// L2+: Mamba / linear-attention state cache.
    pub mamba: Option<MambaInput>,
    /// L4a/L4 Mamba with post-capture sizing: slack is at least this many GiB
    /// (`pre_capture_activation_reserve_mb / 1024`).
    pub mamba_min_slack_gib: Option<f64>,
    /// L4: KV-sharding scratch subtracted from the budget (0 normally).
    pub fixed_overhead_bytes: u64,
    /// L4a/L4 post-capture: tokens may only shrink below this.
    pub cap_tokens: Option<i64>,
    /// L1 releases up to 0.4.6.postN build `ReqToTokenPool(size=max_num_reqs + 1)` (0.4.7 and
    /// later: `size=max_num_reqs`); see [`super::layout::req_pool_extra_slot`].
    pub req_pool_extra_slot: bool,
}

impl SizingInput {
    /// A plain text model, page size 1, no caps, no PP, no spec, no hybrid layers.
    pub fn new(
        layout: Layout,
        cell_bytes: u64,
        mem_fraction_static: f64,
        pre_gib: f64,
        available_gib: f64,
        context_len: u64,
    ) -> SizingInput {
        SizingInput {
            layout,
            cell_bytes,
            mem_fraction_static,
            pre_gib,
            available_gib,
            mm_reservation_gib: 0.0,
            page_size: 1,
            max_total_tokens: None,
            pp_min_tokens: None,
            context_len,
            max_running_requests: None,
            attn_dp_size: 1,
            spec_headroom: None,
            swa: None,
            mamba: None,
            mamba_min_slack_gib: None,
            fixed_overhead_bytes: 0,
            cap_tokens: None,
            req_pool_extra_slot: false,
        }
    }
}

/// What SGLang would size.
#[derive(Debug, Clone, PartialEq)]
pub struct SizingResult {
    /// `rest_memory` in GiB after slack, multimodal reservation and the Mamba carve-out.
    pub rest_gib: f64,
    /// The bytes divided by the cell: `int(rest × 2^30)` (L3+, after the L4 fixed overhead);
    /// in L1/L2 the same value for reference (they divide the float).
    pub budget_bytes: i64,
    /// Tokens from the budget before caps (L1/L2: with EAGLE headroom); what the
    /// `max_total_tokens=… is larger than the profiled value …` warning prints.
    pub profiled_tokens: i64,
    /// `max_total_num_tokens` (the full-attention pool for hybrid SWA).
    pub tokens: i64,
    pub swa_tokens: Option<i64>,
    pub mamba_cache_size: Option<i64>,
    /// L1/L2: the `ReqToTokenPool` size: `max_num_reqs + 1` up to 0.4.6.postN (its
    /// `init_memory_pool` builds `ReqToTokenPool(size=max_num_reqs + 1, ...)`), `max_num_reqs`
    /// from 0.4.7. `TpModelWorker` caps `max_running_requests` at this size.
    pub req_pool_size: i64,
    pub max_running_requests: i64,
    /// SGLang's warning when `--max-total-tokens` exceeds the profiled value.
    pub cap_warning: Option<String>,
    pub error: Option<SizingError>,
}

/// Which startup check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedCheck {
    /// L4a/L4 `_profile_available_bytes`: `rest_memory <= 0` (ValueError).
    RestNotPositive,
    /// `max_total_num_tokens <= 0` ("Not enough memory", RuntimeError).
    TokensNotPositive,
    /// Mamba hybrids: no state-cache slot fits (`max_mamba_cache_size <= 0`).
    MambaCacheEmpty,
    /// 0.5.23 hybrid SWA: the SWA pool cannot hold `sliding_window + page_size` tokens.
    SwaPoolTooSmall,
}

/// A startup failure SGLang would raise, with the way out.
#[derive(Debug, Clone, PartialEq)]
pub struct SizingError {
    pub check: FailedCheck,
    /// The exception text SGLang prints. For the Mamba check only its opening and numbers are
    /// reproduced (the number formats and the "Try: …" advice were not transcribed).
    pub message: String,
    /// The inequality with the numbers in it.
    pub inequality: String,
    /// `1 − (available − mm) / pre`: the continuous bound for `rest > 0`.
    pub minimum_fraction: f64,
    /// The smallest three-decimal `mem_fraction_static` with which the same inputs size without
    /// error; `None` when even 1.0 fails (weights leave no room for one page of KV).
    pub smallest_working_fraction: Option<f64>,
}
