//! Per-rank stage tracking: boundaries in, stage transitions out.
//!
//! Owns the little state a single line cannot carry. SGLang's draft model prints exactly the
//! target's lines ("Init torch distributed …", "Memory baseline taken", "Load weight begin"), so a
//! second weight load on a rank becomes `draft_weight_load`; and in 0.5.18+ the draft is loaded
//! before the pools, so the target's "Memory pool end" keeps `kv_pool` until the draft's pool is
//! built too. Progress and failure lines never move a stage. Must stay small and allocation-light
//! (the shim runs it): a bounded list of ranks, no maps, no strings.

use super::vocab::{event as ev, stage as st};
use super::{Boundary, Engine, LineKind, RankTag};

/// Ranks tracked at most; lines of further ranks are refined as if seen first.
const MAX_RANKS: usize = 1024;

/// A stage change on one rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The rank (as named by the line prefix).
    pub rank: RankTag,
    /// The stage that ends.
    pub from: &'static str,
    /// The stage that starts.
    pub to: &'static str,
}

#[derive(Clone, Copy, Debug)]
struct RankState {
    rank: RankTag,
    stage: &'static str,
    weight_ends: u32,
    pool_ends: u32,
}

impl RankState {
    fn new(rank: RankTag) -> Self {
        RankState {
            rank,
            stage: st::STARTUP,
            weight_ends: 0,
            pool_ends: 0,
        }
    }
}

/// Follows the stage of every rank through its boundaries.
#[derive(Clone, Debug, Default)]
pub struct StageTracker {
    ranks: Vec<RankState>,
}

impl StageTracker {
    /// An empty tracker: every rank is in [`st::STARTUP`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The current stage of `rank`.
    pub fn stage(&self, rank: &RankTag) -> &'static str {
        self.ranks
            .iter()
            .find(|s| s.rank == *rank)
            .map_or(st::STARTUP, |s| s.stage)
    }

    /// Feeds one recognised line; returns the transition it causes on its rank, if any.
    pub fn observe(&mut self, b: &Boundary<'_>) -> Option<Transition> {
        if b.kind != LineKind::Boundary {
            return None;
        }
        let mut scratch = RankState::new(b.rank);
        let state = match self.ranks.iter().position(|s| s.rank == b.rank) {
            Some(i) => &mut self.ranks[i],
            None if self.ranks.len() < MAX_RANKS => {
                self.ranks.push(scratch);
                self.ranks.last_mut().unwrap_or(&mut scratch)
            }
            None => &mut scratch,
        };
        let to = refine(state, b);
        (to != state.stage).then(|| {
            let from = std::mem::replace(&mut state.stage, to);
            Transition {
                rank: b.rank,
                from,
                to,
            }
        })
    }
}

/// The stage a boundary really starts on this rank, updating the rank's counters.
fn refine(state: &mut RankState, b: &Boundary<'_>) -> &'static str {
    if b.engine != Engine::Sglang {
        return b.stage;
    }
    if b.event == ev::LOAD_WEIGHT_END {
        state.weight_ends = state.weight_ends.saturating_add(1);
        return b.stage;
    }
    if (b.stage == st::DIST_INIT || b.stage == st::WEIGHT_LOAD) && state.weight_ends > 0 {
        return st::DRAFT_WEIGHT_LOAD;
    }
    if b.event == ev::MEMORY_POOL_END {
        state.pool_ends = state.pool_ends.saturating_add(1);
        if state.pool_ends < state.weight_ends {
            return st::KV_POOL;
        }
    }
    b.stage
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::classify;

    fn run(lines: &[&str]) -> Vec<&'static str> {
        let mut t = StageTracker::new();
        lines
            .iter()
            .filter_map(|l| classify(l))
            .filter_map(|b| t.observe(&b))
            .map(|tr| tr.to)
            .collect()
    }

    #[test]
    fn eagle_draft_after_target_capture_l1_l2() {
        let got = run(&[
            "[2025-01-01 00:00:00 TP0] Init torch distributed begin.",
            "[2025-01-01 00:00:00 TP0] Init torch distributed ends. mem usage=0.13 GB",
            "[2025-01-01 00:00:00 TP0] Load weight begin. avail mem=78.00 GB",
            "[2025-01-01 00:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.00 GB, mem usage=15.00 GB.",
            "[2025-01-01 00:00:00 TP0] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB",
            "[2025-01-01 00:00:00 TP0] Memory pool end. avail mem=8.00 GB",
            "[2025-01-01 00:00:00 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=7.00 GB",
            "Capturing batches (bs=1 avail_mem=6.50 GB): 100%",
            "[2025-01-01 00:00:00 TP0] Capture cuda graph end. Time elapsed: 1.00 s. mem usage=0.50 GB. avail mem=6.50 GB.",
            "[2025-01-01 00:00:00 TP0] Init torch distributed begin.",
            "[2025-01-01 00:00:00 TP0] Init torch distributed ends. mem usage=0.00 GB",
            "[2025-01-01 00:00:00 TP0] Load weight begin. avail mem=6.50 GB",
            "[2025-01-01 00:00:00 TP0] Load weight end. type=LlamaForCausalLMEagle, dtype=torch.bfloat16, avail mem=6.00 GB, mem usage=0.50 GB.",
            "[2025-01-01 00:00:00 TP0] KV Cache is allocated. #tokens: 1000, K size: 0.01 GB, V size: 0.01 GB",
            "[2025-01-01 00:00:00 TP0] Memory pool end. avail mem=5.90 GB",
            "[2025-01-01 00:00:00 TP0] Capture draft cuda graph begin. This can take up to several minutes. avail mem=5.90 GB",
            "[2025-01-01 00:00:00 TP0] Capture draft cuda graph end. Time elapsed: 1.00 s. mem usage=0.10 GB. avail mem=5.80 GB.",
            "[2025-01-01 00:00:00 TP0] max_total_num_tokens=1000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=48, context_len=8192, available_gpu_mem=5.80 GB",
        ]);
        assert_eq!(
            got,
            [
                st::DIST_INIT,
                st::WEIGHT_LOAD,
                st::KV_POOL,
                st::POST_KV_INIT,
                st::GRAPH_CAPTURE,
                st::POST_CAPTURE,
                st::DRAFT_WEIGHT_LOAD,
                st::KV_POOL,
                st::POST_KV_INIT,
                st::GRAPH_CAPTURE_DRAFT,
                st::POST_CAPTURE,
                st::SERVING,
            ]
        );
    }

    #[test]
    fn draft_loaded_before_pools_l4() {
        let got = run(&[
            "[2026-01-01 00:00:00 TP0] Init parallel begin.",
            "[2026-01-01 00:00:00 TP0] Init parallel ends. elapsed=1.00 s",
            "[2026-01-01 00:00:00 TP0] Memory baseline taken. mem usage=0.50 GB",
            "[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=78.00 GB",
            "[2026-01-01 00:00:00 TP0] Load weight end. elapsed=3.00 s, type=LlamaForCausalLM, avail mem=63.00 GB, mem usage=15.00 GB.",
            "[2026-01-01 00:00:00 TP0] Memory baseline taken. mem usage=0.00 GB",
            "[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=63.00 GB",
            "[2026-01-01 00:00:00 TP0] Load weight end. elapsed=1.00 s, type=LlamaForCausalLMEagle3, avail mem=62.00 GB, mem usage=1.00 GB.",
            "[2026-01-01 00:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100, K size: 20.00 GB, V size: 20.00 GB",
            "[2026-01-01 00:00:00 TP0] Memory pool end. avail mem=21.00 GB",
            "[2026-01-01 00:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100, K size: 0.50 GB, V size: 0.50 GB",
            "[2026-01-01 00:00:00 TP0] Memory pool end. avail mem=20.00 GB",
            "[2026-01-01 00:00:00 TP0] Capture target prefill CUDA graph begin. backend=fa3, num_tokens=[8192], avail mem=19.00 GB",
        ]);
        assert_eq!(
            got,
            [
                st::DIST_INIT,
                st::WEIGHT_LOAD,
                st::KV_POOL,
                st::DRAFT_WEIGHT_LOAD,
                st::KV_POOL,
                st::POST_KV_INIT,
                st::GRAPH_CAPTURE_PREFILL,
            ]
        );
    }

    #[test]
    fn ranks_are_independent_and_progress_never_moves() {
        let mut t = StageTracker::new();
        let a = classify("[2025-01-01 00:00:00 TP0] Load weight begin. avail mem=1.00 GB").unwrap();
        let b = classify("[2025-01-01 00:00:00 TP1] Memory pool end. avail mem=1.00 GB").unwrap();
        let p = classify("Capturing batches (bs=1 avail_mem=6.50 GB)").unwrap();
        assert_eq!(t.observe(&a).map(|x| x.to), Some(st::WEIGHT_LOAD));
        assert_eq!(t.observe(&a), None);
        assert_eq!(
            t.observe(&b).map(|x| (x.from, x.to)),
            Some((st::STARTUP, st::POST_KV_INIT))
        );
        assert_eq!(t.observe(&p), None);
        assert_eq!(t.stage(&a.rank), st::WEIGHT_LOAD);
        assert_eq!(t.stage(&p.rank), st::STARTUP);
    }
}
