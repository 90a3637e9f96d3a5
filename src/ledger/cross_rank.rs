//! The cross-rank view: per stage, the free memory each rank had when the stage ended, the
//! minimum over ranks (SGLang sizes every rank's KV pool from the minimum), and SGLang's
//! imbalance rule: a rank whose local value is above the minimum by more than 10% (the
//! minimum is below 90% of it) sees "The memory capacity is unbalanced".

use super::process::ProcessBooks;

/// One rank's figure for a stage.
#[derive(Debug, Clone)]
pub struct RankFree {
    pub host: String,
    pub pid: u32,
    pub rank: u32,
    pub device: i32,
    pub free: u64,
    /// The minimum over ranks is below 90% of this rank's value.
    pub unbalanced: bool,
}

/// One stage across ranks.
#[derive(Debug, Clone)]
pub struct CrossRankStage {
    pub name: String,
    pub min_free: u64,
    pub ranks: Vec<RankFree>,
}

/// Builds the view from every process that has a rank and a device.
pub fn build(processes: &[ProcessBooks]) -> Vec<CrossRankStage> {
    let ranked: Vec<&ProcessBooks> = processes
        .iter()
        .filter(|p| p.rank.is_some() && !p.devices.is_empty())
        .collect();
    if ranked.len() < 2 {
        return Vec::new();
    }
    let mut names: Vec<String> = Vec::new();
    for p in &ranked {
        for s in &p.devices[0].stages {
            if !names.contains(&s.name) {
                names.push(s.name.clone());
            }
        }
    }
    let mut out = Vec::new();
    for name in names {
        let mut ranks: Vec<RankFree> = Vec::new();
        for p in &ranked {
            let dev = &p.devices[0];
            if let Some(free) = dev
                .stages
                .iter()
                .find(|s| s.name == name)
                .and_then(|s| s.end_free)
            {
                ranks.push(RankFree {
                    host: p.host.clone(),
                    pid: p.pid,
                    rank: p.rank.unwrap_or(0),
                    device: dev.device,
                    free,
                    unbalanced: false,
                });
            }
        }
        if ranks.len() < 2 {
            continue;
        }
        let min_free = ranks.iter().map(|r| r.free).min().unwrap_or(0);
        for r in &mut ranks {
            r.unbalanced = (min_free as f64) < 0.9 * r.free as f64;
        }
        ranks.sort_by_key(|r| (r.rank, r.host.clone(), r.pid));
        out.push(CrossRankStage {
            name,
            min_free,
            ranks,
        });
    }
    out
}
