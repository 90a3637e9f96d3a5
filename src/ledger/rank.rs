//! Which rank a process is, from the prefixes and lines its stage records carry.

use vramledger_engines::log::{self, RankTag};
use vramledger_format::Kind;

use crate::journal::Journal;

/// The first prefix that names a rank (one naming the TP rank wins: vLLM names a worker by its
/// TP rank only once the parallel groups exist), and the `rank=` of vLLM's
/// `world_size=… rank=… … backend=…` line.
pub fn rank_of(j: &Journal) -> (Option<RankTag>, Option<u32>) {
    let mut tag: Option<RankTag> = None;
    let mut dist_rank = None;
    for e in j.events.iter().filter(|e| e.kind() == Some(Kind::Stage)) {
        let Some(b) = e.text.split_once('\n').and_then(|(_, l)| log::classify(l)) else {
            continue;
        };
        let upgrade = tag.is_none_or(|t| t.tp.is_none() && b.rank.tp.is_some());
        if !b.rank.is_empty() && upgrade {
            tag = Some(b.rank);
        }
        if b.event == log::event::DIST_INIT_BEGIN && dist_rank.is_none() {
            dist_rank = b.numbers.rank.and_then(|r| u32::try_from(r).ok());
        }
    }
    (tag, dist_rank)
}
