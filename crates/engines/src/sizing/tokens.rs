//! SGLang's pre-capture KV token count: from free memory to `max_total_num_tokens`.
//!
//! `rest = available − pre × (1 − mem_fraction_static) − mm_reservation` (GiB floats, as SGLang
//! computes them), the Mamba carve-out, the division by the cell (float `//` in L1/L2, integer
//! bytes from L3), page flooring, `--max-total-tokens` cap, PP minimum, hybrid-SWA split,
//! `max_running_requests`, and the startup errors with the smallest `mem_fraction_static` that
//! would have passed. Each layout's order of operations is kept, so results can be compared bit
//! for bit with SGLang's own functions given the same float inputs.
//!
//! Worked example (Llama-3.1-8B bf16, tp 1, L1; the 80 GB docs log): pre 78.81, available 63.72,
//! f 0.88: rest = 63.72 − 78.81 × 0.12 = 54.2628 GiB; 54.2628 × 2^30 // 131072 = 444520 tokens
//! (the log says 444500: the inputs are rounded to 0.01 GiB, ±46 tokens here).

use super::failure::{mamba_error, mm_of, rest_error, swa_error, tokens_error};
use super::hybrid::carve_mamba;
use super::layout::Layout;
use super::pool::{cap_warning, config_from_budget, estimated_reqs, floor_page};
use super::pyfloat::{py_floordiv, py_floordiv_int, py_int, to_float32, GIB};
pub use super::tokens_input::{FailedCheck, SizingError, SizingInput, SizingResult, SpecHeadroom};
use std::fmt;

/// 0.5.18+ `mm_runtime_reservation_gb`: a multimodal model reserves `SGLANG_VLM_CACHE_SIZE_MB`
/// (100 MB by default; the feature-transport pool only with cuda_ipc/cuda_vmm transport, unset
/// = cpu) out of the KV budget. GiB; 0 for text models and older layouts.
pub fn mm_reservation_gib(layout: Layout, multimodal: bool) -> f64 {
    if multimodal && layout >= Layout::V0_5_18 {
        100.0 / 1024.0
    } else {
        0.0
    }
}

/// Inputs SGLang would accept but this module cannot size faithfully.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizingInputError {
    ZeroCell,
    ZeroPage,
    PreNotPositive,
    /// A feature the layout does not have, or whose formula was not transcribed.
    Unsupported(String),
}

impl fmt::Display for SizingInputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizingInputError::ZeroCell => write!(f, "cell size is 0"),
            SizingInputError::ZeroPage => write!(f, "page size is 0"),
            SizingInputError::PreNotPositive => write!(f, "pre-load free memory is not positive"),
            SizingInputError::Unsupported(what) => write!(f, "not modelled: {what}"),
        }
    }
}

impl std::error::Error for SizingInputError {}

/// Free GiB as `get_available_gpu_memory(distributed=True)` returns it from per-rank free bytes:
/// a float32 MIN all-reduce when there are several ranks, then `/ 2^30`.
pub fn distributed_min_gib(free_bytes: &[u64]) -> f64 {
    let min = free_bytes.iter().copied().min().unwrap_or(0) as f64;
    if free_bytes.len() > 1 {
        to_float32(min) / GIB
    } else {
        min / GIB
    }
}

/// Runs SGLang's sizing; on a startup failure also searches the smallest working fraction.
pub fn size_sglang(input: &SizingInput) -> Result<SizingResult, SizingInputError> {
    validate(input)?;
    let mut result = run(input, input.mem_fraction_static);
    if let Some(err) = result.error.as_mut() {
        err.smallest_working_fraction = smallest_working_fraction(input);
    }
    Ok(result)
}

/// Sizing at the two ends of the inputs' rounding error: `(low, high)` with available
/// `∓ avail_err_gib` and pre `± pre_err_gib` (tokens never decrease with available nor increase
/// with pre). For numbers read from logs printed with `:.2f`, each error is 0.005 GiB
/// (0.01 when pre is a sum of two printed numbers).
pub fn sizing_bounds(
    input: &SizingInput,
    avail_err_gib: f64,
    pre_err_gib: f64,
) -> Result<(SizingResult, SizingResult), SizingInputError> {
    let mut low = input.clone();
    low.available_gib -= avail_err_gib;
    low.pre_gib += pre_err_gib;
    let mut high = input.clone();
    high.available_gib += avail_err_gib;
    high.pre_gib -= pre_err_gib;
    Ok((size_sglang(&low)?, size_sglang(&high)?))
}

/// The `mem_fraction_static` interval consistent with a logged token count, given the logged
/// free memory: the rest must lie in `[tokens × cell, (tokens + page) × cell)` bytes, so
/// `f = 1 − (available − mm − rest) / pre` ranges over `[low, high)`. Ignores caps and hybrid
/// pools; used to explain a count the formula does not reproduce.
pub fn implied_fraction_range(
    tokens: i64,
    cell_bytes: u64,
    page_size: u64,
    pre_gib: f64,
    available_gib: f64,
    mm_gib: f64,
) -> (f64, f64) {
    let rest_low = tokens as f64 * cell_bytes as f64 / GIB;
    let rest_high = (tokens + page_size as i64) as f64 * cell_bytes as f64 / GIB;
    (
        1.0 - (available_gib - mm_gib - rest_low) / pre_gib,
        1.0 - (available_gib - mm_gib - rest_high) / pre_gib,
    )
}

fn validate(input: &SizingInput) -> Result<(), SizingInputError> {
    let unsupported = |what: &str| {
        Err(SizingInputError::Unsupported(format!(
            "{what} in {}",
            input.layout
        )))
    };
    if input.cell_bytes == 0 && input.swa.is_none() {
        return Err(SizingInputError::ZeroCell);
    }
    if input.page_size == 0 {
        return Err(SizingInputError::ZeroPage);
    }
    if input.pre_gib.is_nan() || input.pre_gib <= 0.0 {
        return Err(SizingInputError::PreNotPositive);
    }
    if input.layout == Layout::V0_4_6 && (input.swa.is_some() || input.mamba.is_some()) {
        return unsupported("hybrid SWA / Mamba pools");
    }
    if let Some(m) = &input.mamba {
        if m.cache_per_req_bytes == 0 {
            return Err(SizingInputError::ZeroCell);
        }
        if input.layout >= Layout::V0_5_18 && m.num_draft_tokens > 0 {
            return unsupported("Mamba state cache with speculative decoding");
        }
    }
    Ok(())
}

/// One sizing pass at fraction `f`, without the smallest-fraction search.
pub(super) fn run(input: &SizingInput, f: f64) -> SizingResult {
    let layout = input.layout;
    let page = input.page_size as i64;
    let slack = {
        let s = input.pre_gib * (1.0 - f);
        match input.mamba_min_slack_gib {
            Some(min) if layout >= Layout::V0_5_18 && input.mamba.is_some() => f64::max(s, min),
            _ => s,
        }
    };
    let mm = if layout >= Layout::V0_5_18 {
        input.mm_reservation_gib
    } else {
        0.0
    };
    let mut rest = input.available_gib - slack - mm;
    let mut mamba_k = None;
    if let Some(m) = &input.mamba {
        if let Some(c) = carve_mamba(layout, rest, m) {
            rest = c.rest_gib;
            mamba_k = Some(c.max_mamba_cache_size);
        }
    }
    let mut r = SizingResult {
        rest_gib: rest,
        budget_bytes: py_int(rest * GIB),
        profiled_tokens: 0,
        tokens: 0,
        swa_tokens: None,
        mamba_cache_size: mamba_k,
        req_pool_size: 0,
        max_running_requests: 0,
        cap_warning: None,
        error: None,
    };
    if let (Some(k), Some(m)) = (mamba_k, &input.mamba) {
        if k <= 0 {
            r.error = Some(mamba_error(input, f, k, rest, m));
            return r;
        }
    }
    if layout >= Layout::V0_5_18 && rest <= 0.0 {
        r.error = Some(rest_error(input, f));
        return r;
    }
    let mamba_cap = |reqs: i64| match (mamba_k, &input.mamba) {
        (Some(k), Some(m)) => reqs.min(py_floordiv_int(k, m.requests_ratio.max(1) as i64)),
        _ => reqs,
    };

    if layout <= Layout::V0_5_5 {
        // int(rest_memory * (1 << 30) // cell_size): float floor division.
        let mut tokens = py_int(py_floordiv(rest * GIB, input.cell_bytes as f64));
        let mut pool = match input.max_running_requests {
            Some(m) => m as i64,
            None => estimated_reqs(tokens, input.context_len),
        };
        pool = mamba_cap(pool);
        if let Some(s) = &input.spec_headroom {
            let p = pool as u64;
            tokens += (p * s.num_steps * s.eagle_topk + p * s.num_draft_tokens + 100) as i64;
        }
        r.profiled_tokens = tokens;
        if let Some(cap) = input.max_total_tokens {
            if cap > tokens {
                r.cap_warning = Some(cap_warning(cap, tokens));
            }
            tokens = tokens.min(cap);
        }
        tokens = floor_page(tokens, page);
        if layout == Layout::V0_5_5 {
            if let Some(pp) = input.pp_min_tokens {
                tokens = tokens.min(pp);
            }
            if let Some(swa) = &input.swa {
                let (full, swa_tokens) = swa.split_l2(tokens);
                tokens = full;
                r.swa_tokens = Some(swa_tokens);
            }
        }
        r.tokens = tokens;
        // 0.4.6.post5: ReqToTokenPool(size=max_num_reqs + 1); 0.4.7+: size=max_num_reqs.
        // (SGLang reference table, 0.4.6 token rows: max_running_requests 2049 at 80 GB.)
        r.req_pool_size = if layout == Layout::V0_4_6 && input.req_pool_extra_slot {
            pool + 1
        } else {
            pool
        };
        let server_limit = match input.max_running_requests {
            Some(m) => (m / input.attn_dp_size.max(1)) as i64,
            None => py_floordiv_int(tokens, 2),
        };
        r.max_running_requests = server_limit.min(r.req_pool_size);
    } else {
        if layout == Layout::V0_5_23 {
            r.budget_bytes = (r.budget_bytes - input.fixed_overhead_bytes as i64).max(0);
        }
        let c = config_from_budget(input, r.budget_bytes, mamba_k);
        r.profiled_tokens = c.profiled_tokens;
        r.tokens = c.tokens;
        r.swa_tokens = c.swa_tokens;
        r.max_running_requests = c.max_running_requests;
        r.cap_warning = c.cap_warning;
        if let (Some(swa), Some(s)) = (&input.swa, c.swa_tokens) {
            if let Some(w) = swa
                .sliding_window_size
                .filter(|_| layout == Layout::V0_5_23)
            {
                if (w + input.page_size) as i64 >= s {
                    r.error = Some(swa_error(input, f, s, w));
                    return r;
                }
            }
        }
    }
    if r.tokens <= 0 {
        r.error = Some(tokens_error(input, f, &r));
    }
    r
}

/// The smallest `k / 1000` that sizes without error, starting a little below the continuous
/// bound (one page of KV must fit) and stepping up to 1.0.
fn smallest_working_fraction(input: &SizingInput) -> Option<f64> {
    let need_gib = (input.page_size * input.cell_bytes.max(1)) as f64 / GIB;
    let bound = 1.0 - (input.available_gib - mm_of(input) - need_gib) / input.pre_gib;
    let start = py_int((bound * 1000.0).floor()).clamp(0, 1000) - 1;
    (start.max(0)..=1000)
        .map(|k| k as f64 / 1000.0)
        .find(|f| run(input, *f).error.is_none())
}

#[cfg(test)]
#[path = "tokens_tests.rs"]
mod tests;
