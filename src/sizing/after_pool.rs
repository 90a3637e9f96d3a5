//! The run-time memory after the KV pool: from one rank's books, the stages after the pool up
//! to its lowest free memory, with their device deltas and owners.

use vramledger_engines::log::stage;

use crate::ledger::StageRow;

/// The run-time memory after the KV pool, from the books of one rank.
#[derive(Debug, Clone)]
pub struct AfterPool {
    /// "rank 0 (pid 2090, device 0)" or the log's rank prefix.
    pub rank: String,
    /// Free memory when the pool was built ("Memory pool end").
    pub pool_end_free_bytes: i64,
    /// The lowest free memory after it.
    pub low_free_bytes: i64,
    /// `pool_end_free − low_free`: what the server took beyond the KV pool.
    pub need_bytes: i64,
    /// The stages up to the low point, with their device deltas and owners (runs only).
    pub stages: Vec<StageNeed>,
    pub exact: bool,
}

/// One stage's part of the run-time need.
#[derive(Debug, Clone)]
pub struct StageNeed {
    pub name: String,
    pub delta_bytes: i64,
    pub owners: Vec<(String, i64)>,
}

pub fn after_pool(label: &str, stages: &[StageRow]) -> Option<(AfterPool, Option<u64>)> {
    let pool = stages.iter().position(|s| s.name == stage::KV_POOL)?;
    let pool_end = stages[pool].end_free? as i64;
    let later = &stages[pool + 1..];
    let (mut low, mut low_at) = (pool_end, None);
    for (i, s) in later.iter().enumerate() {
        if let Some(f) = s.end_free {
            if (f as i64) < low {
                low = f as i64;
                low_at = Some(i);
            }
        }
    }
    let listed = low_at.map_or(0, |i| i + 1);
    let need_stages = later[..listed]
        .iter()
        .map(|s| StageNeed {
            name: s.name.clone(),
            delta_bytes: s.device_delta,
            owners: s
                .by_owner
                .iter()
                .filter(|(_, b)| *b != 0)
                .map(|(o, b)| (o.name().to_string(), b))
                .collect(),
        })
        .collect();
    let capture_end = later
        .iter()
        .rfind(|s| s.name.starts_with("graph_capture"))
        .and_then(|s| s.end_free);
    Some((
        AfterPool {
            rank: label.to_string(),
            pool_end_free_bytes: pool_end,
            low_free_bytes: low,
            need_bytes: pool_end.saturating_sub(low),
            stages: need_stages,
            exact: true,
        },
        capture_end,
    ))
}
