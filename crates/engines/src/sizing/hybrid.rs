//! The two hybrid-model adjustments of SGLang's token count: the Mamba state-cache carve-out
//! (taken from `rest_memory` before the KV cell divides it) and the hybrid sliding-window split
//! into "full" and "SWA" token pools.
//!
//! Mamba: 0.5.5's `handle_max_mamba_cache` (used here for L2 and L3) and 0.5.23's
//! `_handle_max_mamba_cache` (used for L4a and L4; its presence in 0.5.18 is not confirmed).
//! The per-request state bytes (`mamba_cache_per_req`) are an input: SGLang derives them from
//! model-specific conv/SSM shapes this crate does not model.

use super::layout::Layout;
use super::pyfloat::{py_floordiv, py_int, GIB};

/// Mamba / linear-attention state cache parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MambaInput {
    /// `mamba_cache_per_req`: conv + SSM state bytes of one request over all Mamba layers.
    pub cache_per_req_bytes: u64,
    /// `mamba_full_memory_ratio` r: the state cache gets `r / (1 + r)` of the rest (default 0.9).
    pub full_memory_ratio: f64,
    /// Speculative draft tokens D (0.5.5: each slot holds `1 + D` states). 0 without spec.
    pub num_draft_tokens: u64,
    /// 0.5.23: extra bytes per slot (0 normally).
    pub extra_per_slot_bytes: u64,
    /// 0.5.23: fixed replay-SSM bytes (0 normally).
    pub replayssm_fixed_bytes: u64,
    /// 0.5.23: PP scale of the per-request state (1 normally).
    pub pp_scale: u64,
    /// `max_num_reqs` is capped at `max_mamba_cache_size // ratio`
    /// (`MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`, or 1 with radix cache disabled).
    pub requests_ratio: u64,
}

impl MambaInput {
    /// Defaults: ratio 0.9, no spec, no extras, requests ratio 1.
    pub fn new(cache_per_req_bytes: u64) -> MambaInput {
        MambaInput {
            cache_per_req_bytes,
            full_memory_ratio: 0.9,
            num_draft_tokens: 0,
            extra_per_slot_bytes: 0,
            replayssm_fixed_bytes: 0,
            pp_scale: 1,
            requests_ratio: 1,
        }
    }
}

/// The carve-out: how many request slots of state, and what rest is left for KV.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MambaCarve {
    pub max_mamba_cache_size: i64,
    /// GiB left for the KV cache.
    pub rest_gib: f64,
}

/// Carves the Mamba state cache out of `rest_gib`. `None` for 0.5.23 with speculative decoding,
/// whose joint solve (intermediate states) the research note did not transcribe fully.
pub fn carve_mamba(layout: Layout, rest_gib: f64, m: &MambaInput) -> Option<MambaCarve> {
    let r = m.full_memory_ratio;
    if layout <= Layout::V0_5_12 {
        // K = int(rest * r / (1 + r) * 2^30 // per_req // (1 + D))
        // rest -= K * per_req * (1 + D) / 2^30
        let per = m.cache_per_req_bytes as f64;
        let states = (1 + m.num_draft_tokens) as f64;
        let k = py_int(py_floordiv(
            py_floordiv(rest_gib * r / (1.0 + r) * GIB, per),
            states,
        ));
        let used =
            (k as i128 * m.cache_per_req_bytes as i128 * (1 + m.num_draft_tokens) as i128) as f64;
        return Some(MambaCarve {
            max_mamba_cache_size: k,
            rest_gib: rest_gib - used / GIB,
        });
    }
    if m.num_draft_tokens > 0 {
        return None;
    }
    // per_slot = per_req * pp_scale + extra; budget = rest * r / (1 + r) * 2^30
    // K = int((budget - replayssm - per_slot) // per_slot)
    // rest -= ((K + 1) * per_slot + replayssm) / 2^30
    let per_slot = m.cache_per_req_bytes * m.pp_scale + m.extra_per_slot_bytes;
    let budget = rest_gib * r / (1.0 + r) * GIB;
    let k = py_int(py_floordiv(
        budget - m.replayssm_fixed_bytes as f64 - per_slot as f64,
        per_slot as f64,
    ));
    let used = (k as i128 + 1) * per_slot as i128 + m.replayssm_fixed_bytes as i128;
    Some(MambaCarve {
        max_mamba_cache_size: k,
        rest_gib: rest_gib - used as f64 / GIB,
    })
}

/// Hybrid sliding-window attention split.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SwaInput {
    pub full_layers: u64,
    pub swa_layers: u64,
    /// `swa_full_tokens_ratio` (default 0.8).
    pub ratio: f64,
    /// Bytes per token of one full layer and one SWA layer (0.5.12+ cell; see `cell::swa_cell`).
    pub full_per_token: u64,
    pub swa_per_token: u64,
    /// The model's sliding window (0.5.23 refuses a SWA pool that cannot hold window + page).
    pub sliding_window_size: Option<u64>,
}

impl SwaInput {
    /// The 0.5.12+ configurator cell: `full_per_token * F + ratio * swa_per_token * S`.
    pub fn cell(&self) -> f64 {
        (self.full_per_token * self.full_layers) as f64
            + self.ratio * self.swa_per_token as f64 * self.swa_layers as f64
    }

    /// 0.5.5 `set_num_token_hybrid`: tokens profiled with the plain cell over all layers, then
    /// `full = int(tokens * num_hidden_layers / (ratio * S + F))`, `swa = int(full * ratio)`
    /// (no page re-alignment).
    pub fn split_l2(&self, tokens: i64) -> (i64, i64) {
        let total = tokens * (self.full_layers + self.swa_layers) as i64;
        let denom = self.ratio * self.swa_layers as f64 + self.full_layers as f64;
        let full = py_int(total as f64 / denom);
        (full, py_int(full as f64 * self.ratio))
    }

    /// 0.5.12+: `full = tokens // page * page`, `swa = int(full * ratio) // page * page`.
    pub fn split_paged(&self, tokens: i64, page: i64) -> (i64, i64) {
        let full = tokens.div_euclid(page) * page;
        let swa = py_int(full as f64 * self.ratio).div_euclid(page) * page;
        (full, swa)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mamba_0_5_5_carve() {
        // rest 5.785 GiB, r 0.9, per_req 75 MiB (78643200 B), no spec:
        // 5.785 * 0.9 / 1.9 * 2^30 = 2.740263 GiB = 2942335161.4 B; // 78643200 = 37 (37.41);
        // rest = 5.785 - 37 * 75 MiB / 1024 MiB = 5.785 - 2.7099609375 = 3.0750390625.
        let m = MambaInput::new(78_643_200);
        let c = carve_mamba(Layout::V0_5_5, 5.785, &m).unwrap();
        assert_eq!(c.max_mamba_cache_size, 37);
        assert!((c.rest_gib - 3.0750390625).abs() < 1e-12);
        // With 3 draft tokens each slot holds 4 states: 37.41 // 4 = 9 slots, 36 states used.
        let spec = MambaInput {
            num_draft_tokens: 3,
            ..m
        };
        let c = carve_mamba(Layout::V0_5_12, 5.785, &spec).unwrap();
        assert_eq!(c.max_mamba_cache_size, 9);
        assert!((c.rest_gib - (5.785 - 36.0 * 75.0 / 1024.0)).abs() < 1e-12);
    }

    #[test]
    fn mamba_0_5_23_carve_keeps_one_spare_slot() {
        // Same numbers: K = int((2942335161.4 - 0 - 78643200) // 78643200) = int(36.41) = 36,
        // and K + 1 = 37 slots are taken from rest (one spare slot).
        let m = MambaInput::new(78_643_200);
        let c = carve_mamba(Layout::V0_5_23, 5.785, &m).unwrap();
        assert_eq!(c.max_mamba_cache_size, 36);
        assert!((c.rest_gib - 3.0750390625).abs() < 1e-12);
        let spec = MambaInput {
            num_draft_tokens: 2,
            ..m
        };
        assert_eq!(carve_mamba(Layout::V0_5_23, 5.785, &spec), None);
    }

    #[test]
    fn swa_splits() {
        // Gemma 3 27B: F 10, S 52, ratio 0.8, 8192 B per layer-token.
        let s = SwaInput {
            full_layers: 10,
            swa_layers: 52,
            ratio: 0.8,
            full_per_token: 8192,
            swa_per_token: 8192,
            sliding_window_size: Some(1024),
        };
        // L2: tokens 100000 over 62 layers -> total 6200000; full = int(6200000 / 51.6) = 120155,
        // swa = int(120155 * 0.8) = 96124.
        assert_eq!(s.split_l2(100_000), (120_155, 96_124));
        // Paged (page 16): full = 120155 // 16 * 16 = 120144; swa = int(96115.2) // 16 * 16 = 96112.
        assert_eq!(s.split_paged(120_155, 16), (120_144, 96_112));
        assert_eq!(s.cell(), 81920.0 + 0.8 * 8192.0 * 52.0);
    }
}
