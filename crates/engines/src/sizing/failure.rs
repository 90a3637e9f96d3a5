//! SGLang's startup failures in the sizing step, and the way out.
//!
//! Each failure names the check that failed (`rest_memory <= 0` in 0.5.18+, `max_total_num_tokens
//! <= 0` everywhere, the Mamba and 0.5.23 SWA pool checks), the exception text SGLang raises, the
//! inequality with its numbers, and the smallest three-decimal `mem_fraction_static` that passes
//! with everything else unchanged (found by re-running the same arithmetic, so page size, caps
//! and hybrid pools are honoured).

use super::hybrid::MambaInput;
use super::layout::Layout;
use super::pyfloat::{py_ceil, py_fixed, py_repr};
use super::tokens_input::{FailedCheck, SizingError, SizingInput, SizingResult};

fn minimum_fraction(input: &SizingInput) -> f64 {
    1.0 - (input.available_gib - mm_of(input)) / input.pre_gib
}

pub(super) fn mm_of(input: &SizingInput) -> f64 {
    if input.layout >= Layout::V0_5_18 {
        input.mm_reservation_gib
    } else {
        0.0
    }
}

fn rest_text(input: &SizingInput, f: f64) -> String {
    format!(
        "available {} − pre {} × (1 − {}) − mm {} GiB",
        py_fixed(input.available_gib, 4),
        py_fixed(input.pre_gib, 4),
        py_repr(f),
        py_fixed(mm_of(input), 4)
    )
}

fn error(
    input: &SizingInput,
    check: FailedCheck,
    message: String,
    inequality: String,
) -> SizingError {
    SizingError {
        check,
        message,
        inequality,
        minimum_fraction: minimum_fraction(input),
        smallest_working_fraction: None,
    }
}

pub(super) fn rest_error(input: &SizingInput, f: f64) -> SizingError {
    // SGLang's own numbers leave the multimodal reservation out.
    let minimum = 1.0 - input.available_gib / input.pre_gib;
    let suggested = py_ceil(minimum * 1000.0) as f64 / 1000.0;
    let message = format!(
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={}. \
         Raise --mem-fraction-static above {} (minimum viable = 1 - available/pre = {}). \
         If using speculative decoding, draft weights are now counted.",
        py_repr(f),
        py_fixed(suggested, 3),
        py_fixed(minimum, 4)
    );
    let rest = input.available_gib - input.pre_gib * (1.0 - f) - mm_of(input);
    let inequality = format!(
        "rest_memory = {} = {} GiB <= 0",
        rest_text(input, f),
        py_fixed(rest, 4)
    );
    error(input, FailedCheck::RestNotPositive, message, inequality)
}

pub(super) fn tokens_error(input: &SizingInput, f: f64, r: &SizingResult) -> SizingError {
    let base = "Not enough memory. Please try to increase --mem-fraction-static.";
    let message = match input.layout {
        Layout::V0_5_5 => format!(
            "{base} Current value: self.server_args.mem_fraction_static={}",
            py_repr(f)
        ),
        // 0.4.6 has no suffix; from 0.5.12 the check is `MemoryPoolConfig.__post_init__`, and
        // every configurator builds the config without `mem_fraction_static` (it is set
        // afterwards), so the " Current value: …" suffix is never appended (SGLang reference
        // table, 0.5.12 token rows).
        _ => base.to_string(),
    };
    let inequality = format!(
        "max_total_num_tokens = {} <= 0 (rest_memory = {} = {} GiB, page {} × cell {} B)",
        r.tokens,
        rest_text(input, f),
        py_fixed(r.rest_gib, 4),
        input.page_size,
        input.cell_bytes
    );
    error(input, FailedCheck::TokensNotPositive, message, inequality)
}

pub(super) fn mamba_error(
    input: &SizingInput,
    f: f64,
    k: i64,
    rest: f64,
    m: &MambaInput,
) -> SizingError {
    let message = format!(
        "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed \
         max_mamba_cache_size={k} (total_rest_memory={} GB, mamba_cache_per_req={} MB).",
        py_fixed(rest, 2),
        py_fixed(m.cache_per_req_bytes as f64 / 1048576.0, 2)
    );
    let inequality = format!(
        "max_mamba_cache_size = {k} <= 0 (rest before the carve-out = {} GiB)",
        rest_text(input, f)
    );
    error(input, FailedCheck::MambaCacheEmpty, message, inequality)
}

pub(super) fn swa_error(input: &SizingInput, f: f64, swa_tokens: i64, window: u64) -> SizingError {
    let message = format!(
        "SWA pool ({swa_tokens} tokens) cannot hold even one request: the prefill admission \
         floor is sliding_window_size ({window}) + page_size ({}). Increase \
         --swa-full-tokens-ratio or the total KV budget.",
        input.page_size
    );
    let inequality = format!(
        "swa_tokens {swa_tokens} <= sliding_window {window} + page {} (at f = {})",
        input.page_size,
        py_repr(f)
    );
    error(input, FailedCheck::SwaPoolTooSmall, message, inequality)
}
