//! What a KV byte budget buys (L3 onward), and `max_running_requests` per layout.
//!
//! SGLang 0.5.12+ turns a byte budget into pools in one place (`calculate_pool_sizes` +
//! `_apply_token_constraints` + `resolve_max_num_reqs`); the pre-capture sizing and the
//! post-capture resize both call it. The token rules shared with L1/L2 (page flooring, the
//! request estimate, the cap warning's wording) live here too.

use super::layout::Layout;
use super::pyfloat::{py_floordiv, py_floordiv_int, py_int};
use super::tokens_input::SizingInput;

pub(super) fn floor_page(tokens: i64, page: i64) -> i64 {
    py_floordiv_int(tokens, page) * page
}

/// `estimated = max(min(int(tokens / context_len * 512), 4096), 2048)` (L1/L2 write it as
/// `min(max(.., 2048), 4096)`, the same value).
pub(super) fn estimated_reqs(tokens: i64, context_len: u64) -> i64 {
    py_int(tokens as f64 / context_len as f64 * 512.0).clamp(2048, 4096)
}

pub(super) fn cap_warning(cap: i64, profiled: i64) -> String {
    format!(
        "max_total_tokens={cap} is larger than the profiled value {profiled}. \
         Use the profiled value instead."
    )
}

/// The pools a KV budget buys (L3+ `config_from_budget` / `calculate_pool_sizes`).
#[derive(Debug, Clone, PartialEq)]
pub struct PoolConfig {
    /// Tokens from the budget, page-floored, before caps.
    pub profiled_tokens: i64,
    pub tokens: i64,
    pub swa_tokens: Option<i64>,
    pub max_running_requests: i64,
    pub cap_warning: Option<String>,
}

/// L3+: tokens from a byte budget (after any fixed overhead): `budget // cell` (hybrid SWA: the
/// float configurator cell), page floor, `--max-total-tokens` cap, PP MIN, the post-capture
/// `cap_tokens` (L4a/L4), a re-floor when a constraint changed it, then `max_running_requests`
/// (Mamba: at most `mamba_cache_size // ratio`).
pub fn config_from_budget(
    input: &SizingInput,
    budget_bytes: i64,
    mamba_cache_size: Option<i64>,
) -> PoolConfig {
    let page = input.page_size.max(1) as i64;
    let split = |tokens: i64| -> (i64, Option<i64>) {
        match &input.swa {
            Some(swa) => {
                let (full, s) = swa.split_paged(tokens, page);
                (full, Some(s))
            }
            None => (floor_page(tokens, page), None),
        }
    };
    let raw = match &input.swa {
        Some(swa) => py_int(py_floordiv(budget_bytes as f64, swa.cell())),
        None => py_floordiv_int(budget_bytes, input.cell_bytes.max(1) as i64),
    };
    let (mut tokens, mut swa_tokens) = split(raw);
    let profiled_tokens = tokens;
    let mut cap_warning_text = None;
    let mut constrained = tokens;
    if let Some(cap) = input.max_total_tokens {
        if cap > constrained {
            cap_warning_text = Some(cap_warning(cap, constrained));
        }
        constrained = constrained.min(cap);
    }
    if let Some(pp) = input.pp_min_tokens {
        constrained = constrained.min(pp);
    }
    if let Some(cap) = input.cap_tokens.filter(|_| input.layout >= Layout::V0_5_18) {
        constrained = constrained.min(cap);
    }
    if constrained != tokens {
        (tokens, swa_tokens) = split(constrained);
    }
    let mut mrr = resolve_max_running_requests(input, tokens);
    if let (Some(k), Some(m)) = (mamba_cache_size, &input.mamba) {
        mrr = mrr.min(py_floordiv_int(k, m.requests_ratio.max(1) as i64));
    }
    PoolConfig {
        profiled_tokens,
        tokens,
        swa_tokens,
        max_running_requests: mrr,
        cap_warning: cap_warning_text,
    }
}

/// `max_running_requests` per DP worker (L3+): the user's value divided by the attention DP
/// size, else the estimate; never more than half the tokens (L4a/L4) or the estimate (L3).
pub fn resolve_max_running_requests(input: &SizingInput, tokens: i64) -> i64 {
    let estimated = estimated_reqs(tokens, input.context_len);
    let half = py_floordiv_int(tokens, 2);
    let dp = input.attn_dp_size.max(1);
    match (input.layout, input.max_running_requests) {
        (Layout::V0_5_12, Some(m)) => ((m / dp) as i64).min(estimated),
        (Layout::V0_5_18, Some(m)) => ((m / dp) as i64).min(half),
        (_, Some(m)) => ((m / dp).max(1) as i64).min(half),
        (_, None) => estimated.min(half),
    }
}
