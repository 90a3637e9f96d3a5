//! Which SGLang layout a log was printed by, from its line formats alone.
//!
//! Each format gives a bound: "at least 0.5.18" (a `dtype:` inside "KV Cache is allocated",
//! named target graph captures, post-capture sizing lines), "at most 0.5.5" ("Load weight end.
//! type=…" without `elapsed=`), "0.4.x" (a summary line without `available_gpu_mem`) and so on
//! (`sglang-memory.md` §9.6, plus the wording of the "Not enough memory" error per layout).
//! The answer is the newest layout inside the bounds; with no format evidence there is no
//! answer and the caller falls back to the newest layout.

use super::{event as ev, Boundary};
use crate::sizing::Layout;

/// Bounds collected from the lines seen so far.
#[derive(Debug, Clone, Default)]
pub struct Hints {
    lower: Option<(Layout, &'static str)>,
    upper: Option<(Layout, &'static str)>,
}

impl Hints {
    fn at_least(&mut self, l: Layout, why: &'static str) {
        if !matches!(self.lower, Some((cur, _)) if l <= cur) {
            self.lower = Some((l, why));
        }
    }

    fn at_most(&mut self, l: Layout, why: &'static str) {
        if !matches!(self.upper, Some((cur, _)) if l >= cur) {
            self.upper = Some((l, why));
        }
    }

    /// Takes the evidence of one SGLang line.
    pub fn observe(&mut self, b: &Boundary<'_>) {
        let t = b.text;
        match b.event {
            ev::DIST_INIT_BEGIN if t.starts_with("Init parallel") => {
                self.at_least(Layout::V0_5_23, "'Init parallel begin.' (0.5.23)")
            }
            ev::MEMORY_BASELINE => {
                self.at_least(Layout::V0_5_23, "'Memory baseline taken' (0.5.23)")
            }
            ev::KV_CACHE_ALLOCATED if b.words.dtype.is_some() => self.at_least(
                Layout::V0_5_18,
                "'dtype:' in 'KV Cache is allocated' (0.5.18 or newer)",
            ),
            ev::KV_CACHE_ALLOCATED if b.numbers.tokens.is_none() => self.at_most(
                Layout::V0_4_6,
                "'KV Cache is allocated' without '#tokens' (early 0.4.x)",
            ),
            ev::KV_CACHE_VA_RESERVED
            | ev::POST_CAPTURE_DECODE_GAP
            | ev::POST_CAPTURE_KV_ALLOCATED
            | ev::POST_CAPTURE_TOKENS
            | ev::NO_KV_ROOM => self.at_least(
                Layout::V0_5_18,
                "post-capture sizing / 'leave no GPU memory' lines (0.5.18 or newer)",
            ),
            ev::CAPTURE_PREFILL_BEGIN
            | ev::CAPTURE_PREFILL_END
            | ev::CAPTURE_DECODE_BEGIN
            | ev::CAPTURE_DECODE_END
            | ev::CAPTURE_VERIFY_BEGIN
            | ev::CAPTURE_VERIFY_END => self.at_least(
                Layout::V0_5_18,
                "named target graph captures (0.5.18 or newer)",
            ),
            ev::CAPTURE_END if t.contains("Time elapsed:") => self.at_most(
                Layout::V0_5_12,
                "'Time elapsed:' in 'Capture cuda graph end' (0.5.12 or older)",
            ),
            ev::LOAD_WEIGHT_END if t.starts_with("Load weight end. type=") => self.at_most(
                Layout::V0_5_5,
                "'Load weight end. type=…' without elapsed= (0.5.5 or older)",
            ),
            ev::SUMMARY if b.numbers.avail_mem_gib.is_none() => self.at_most(
                Layout::V0_4_6,
                "summary line without available_gpu_mem (0.4.x)",
            ),
            ev::NOT_ENOUGH_MEMORY => {
                if t.contains("self.server_args.mem_fraction_static") {
                    self.at_least(Layout::V0_5_5, "0.5.5's 'Not enough memory' wording");
                    self.at_most(Layout::V0_5_5, "0.5.5's 'Not enough memory' wording");
                } else if t.contains("Current value: mem_fraction_static") {
                    self.at_least(Layout::V0_5_12, "0.5.12+'s 'Not enough memory' wording");
                }
                // The plain wording is 0.4.x's and also 0.5.12+'s (their MemoryPoolConfig is
                // built without mem_fraction_static, so the suffix is never added): no bound.
            }
            _ => {}
        }
    }

    /// Every layout the evidence allows, oldest first, and why: the layouts between the bounds
    /// (all of them without evidence; the newer bound alone when the bounds disagree).
    pub fn candidates(&self) -> (Vec<Layout>, String) {
        let Some((newest, why)) = self.conclude() else {
            return (
                Layout::ALL.to_vec(),
                "no version given and no line format decides".to_string(),
            );
        };
        if matches!((self.lower, self.upper), (Some((lo, _)), Some((hi, _))) if lo > hi) {
            return (vec![newest], why);
        }
        let lo = self.lower.map_or(Layout::V0_4_6, |(l, _)| l);
        let all = Layout::ALL
            .into_iter()
            .filter(|l| *l >= lo && *l <= newest)
            .collect();
        (all, why)
    }

    /// The layout the evidence points to and why; `None` without evidence.
    pub fn conclude(&self) -> Option<(Layout, String)> {
        match (self.lower, self.upper) {
            (None, None) => None,
            (Some((lo, lw)), Some((hi, hw))) if lo > hi => Some((
                lo,
                format!("line formats disagree ({lw}; {hw}); the newer bound was kept"),
            )),
            (lo, Some((hi, hw))) => {
                let mut why = format!("line formats: {hw}");
                if let Some((_, lw)) = lo {
                    why.push_str(&format!("; {lw}"));
                }
                Some((hi, why))
            }
            (Some((_, lw)), None) => Some((
                Layout::V0_5_23,
                format!("line formats: {lw}; the newest layout at or above it"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::classify;

    fn detect(lines: &[&str]) -> Option<Layout> {
        let mut h = Hints::default();
        for l in lines {
            if let Some(b) = classify(l) {
                h.observe(&b);
            }
        }
        h.conclude().map(|(l, _)| l)
    }

    #[test]
    fn formats_bound_the_layout() {
        assert_eq!(
            detect(&["[2025-01-01 00:00:00 TP0] Init torch distributed begin."]),
            None
        );
        // 0.4.1 docs log: KV line without #tokens, old summary.
        assert_eq!(
            detect(&[
                "[2025-01-23 19:35:20 TP0] KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB.",
                "[2025-01-23 19:35:27 TP0] max_total_num_tokens=444500, max_prefill_tokens=16384, max_running_requests=2049, context_len=131072",
            ]),
            Some(Layout::V0_4_6)
        );
        // "Load weight end. type=" caps at 0.5.5.
        assert_eq!(
            detect(&["[2025-01-01 00:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.72 GB"]),
            Some(Layout::V0_5_5)
        );
        // dtype in the KV line: at least 0.5.18, newest inside.
        assert_eq!(
            detect(&["[2025-01-01 00:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100, K size: 1.00 GB, V size: 1.00 GB"]),
            Some(Layout::V0_5_23)
        );
        assert_eq!(
            detect(&["RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: self.server_args.mem_fraction_static=0.88"]),
            Some(Layout::V0_5_5)
        );
    }

    #[test]
    fn candidates_are_the_layouts_between_the_bounds() {
        let of = |lines: &[&str]| {
            let mut h = Hints::default();
            for l in lines {
                if let Some(b) = classify(l) {
                    h.observe(&b);
                }
            }
            h.candidates().0
        };
        // "Load weight end. type=" caps at 0.5.5, nothing bounds it below: 0.4.6 and 0.5.5.
        assert_eq!(
            of(&["[2025-01-01 00:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.72 GB"]),
            [Layout::V0_4_6, Layout::V0_5_5]
        );
        // At least 0.5.18: 0.5.18 and 0.5.23.
        assert_eq!(
            of(&["[2025-01-01 00:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100, K size: 1.00 GB, V size: 1.00 GB"]),
            [Layout::V0_5_18, Layout::V0_5_23]
        );
        assert_eq!(of(&[]), Layout::ALL);
    }
}
