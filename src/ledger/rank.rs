//! Which rank a process is, from the prefixes and lines its stage records carry.

use vramledger_engines::log::{self, RankTag};
use vramledger_format::{Event, Kind};

use crate::journal::Journal;

/// The rank facts of one journal, gathered from its stage records as they stream past.
#[derive(Debug, Clone, Copy, Default)]
pub struct RankScan {
    /// The first prefix that names a rank (one naming the TP rank wins: vLLM names a worker
    /// by its TP rank only once the parallel groups exist).
    pub tag: Option<RankTag>,
    /// The `rank=` of vLLM's `world_size=… rank=… … backend=…` line.
    pub dist_rank: Option<u32>,
}

impl RankScan {
    /// Takes one record (only stage records say anything).
    pub fn step(&mut self, e: &Event) {
        if e.kind() == Some(Kind::Stage) {
            self.stage(e);
        }
    }

    /// Takes one stage record.
    pub fn stage(&mut self, e: &Event) {
        let Some(b) = e.text.split_once('\n').and_then(|(_, l)| log::classify(l)) else {
            return;
        };
        let upgrade = self
            .tag
            .is_none_or(|t| t.tp.is_none() && b.rank.tp.is_some());
        if !b.rank.is_empty() && upgrade {
            self.tag = Some(b.rank);
        }
        if b.event == log::event::DIST_INIT_BEGIN && self.dist_rank.is_none() {
            self.dist_rank = b.numbers.rank.and_then(|r| u32::try_from(r).ok());
        }
    }
}

/// The rank tag and `rank=` of `j` (see [`RankScan`]).
pub fn rank_of(j: &Journal) -> (Option<RankTag>, Option<u32>) {
    let mut s = RankScan::default();
    for e in &j.events {
        s.step(e);
    }
    (s.tag, s.dist_rank)
}
