//! The first of a replay's two walks: what must be known of the whole journal before its
//! books can be kept (the stage boundaries, some set after the records they cover; module
//! names; the pools captures name only at their end; rank; the journal's time range). Only
//! what a rule needs is kept, never the records.

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;

use vramledger_format::{Kind, POOL_UNKNOWN};

use super::boundaries::{Scan, StageBoundary};
use super::rank::RankScan;
use super::records::{Offer, Records};

/// `CUDA_ERROR_OUT_OF_MEMORY`.
pub const CUDA_ERROR_OUT_OF_MEMORY: i32 = 2;

/// Whether the index reads nothing of a record of `kind` but its time (the kinds [`Index::scan`]
/// matches on are the others).
#[inline]
fn times_only(kind: Option<Kind>) -> bool {
    !matches!(
        kind,
        Some(
            Kind::Stage
                | Kind::Module
                | Kind::PoolEnd
                | Kind::PoolBegin
                | Kind::PoolHooks
                | Kind::TorchSegment
                | Kind::AllocFailed
        )
    )
}

/// What the first walk learned.
#[derive(Debug, Clone, Default)]
pub struct Index {
    /// Stage boundaries, in record order; the first opens `startup`.
    pub boundaries: Vec<StageBoundary>,
    /// Module id → path (the last record defining an id wins, as in [`crate::journal`]).
    pub modules: BTreeMap<u32, String>,
    /// Pools that captures named only at their end: window serial → pool id.
    pub capture_pools: HashMap<u64, (u64, u64)>,
    pub rank: RankScan,
    /// Records walked.
    pub records: usize,
    /// The first and the last record's time; the lowest non-zero and the highest time.
    pub first_t: Option<u64>,
    pub last_t: Option<u64>,
    pub min_t: Option<u64>,
    pub max_t: Option<u64>,
    /// Pool windows the Python hooks reported, and torch's version when they were installed.
    pub pool_windows: u64,
    pub pool_hooks: Option<String>,
    /// torch's last allocator snapshot: its number and the index of its first record.
    pub last_torch_snapshot: Option<(u64, usize)>,
    /// The first allocation that failed with out-of-memory: its index and time.
    pub first_oom: Option<(usize, u64)>,
}

impl Index {
    /// Walks `r` once.
    pub fn scan<R: Records>(r: &R) -> Index {
        let known = r.modules();
        let mut x = Index {
            modules: known.cloned().unwrap_or_default(),
            ..Index::default()
        };
        let mut scan = Scan::default();
        let mut i = 0usize;
        let (mut min_t, mut max_t) = (u64::MAX, 0u64);
        r.walk_brief(|offer| {
            let (e, kind) = match offer {
                // Most records matter here only by their time: no event made for them.
                Offer::Brief { kind, t_ns } => {
                    let kind = Kind::from_repr(kind);
                    if scan.may_set(kind) || !times_only(kind) {
                        return None;
                    }
                    scan.step_time(i, t_ns);
                    x.times(i, t_ns, &mut min_t, &mut max_t);
                    i += 1;
                    return Some(ControlFlow::Continue(()));
                }
                Offer::Whole(e) => (e, e.kind()),
            };
            scan.step_kind(i, e, kind);
            x.times(i, e.t_ns, &mut min_t, &mut max_t);
            match kind {
                Some(Kind::Alloc | Kind::Free) => {}
                Some(Kind::Stage) => x.rank.stage(e),
                Some(Kind::Module) if known.is_none() => {
                    x.modules.insert(e.module, e.text.clone());
                }
                Some(Kind::PoolEnd) if e.handle != 0 && e.arg0 != POOL_UNKNOWN => {
                    x.capture_pools.insert(e.handle, (e.arg0, e.arg1));
                }
                Some(Kind::PoolBegin) => x.pool_windows += 1,
                Some(Kind::PoolHooks) => x.pool_hooks = Some(e.text.clone()),
                Some(Kind::TorchSegment)
                    if x.last_torch_snapshot.is_none_or(|(n, _)| n != e.handle) =>
                {
                    x.last_torch_snapshot = Some((e.handle, i));
                }
                Some(Kind::AllocFailed)
                    if e.result == CUDA_ERROR_OUT_OF_MEMORY && x.first_oom.is_none() =>
                {
                    x.first_oom = Some((i, e.t_ns));
                }
                _ => {}
            }
            i += 1;
            Some(ControlFlow::Continue(()))
        });
        x.records = i;
        x.min_t = (min_t != u64::MAX).then_some(min_t);
        x.max_t = (i > 0).then_some(max_t);
        x.boundaries = scan.finish();
        x
    }

    /// Record `i`'s time `t` in the time range.
    #[inline]
    fn times(&mut self, i: usize, t: u64, min_t: &mut u64, max_t: &mut u64) {
        if i == 0 {
            self.first_t = Some(t);
        }
        self.last_t = Some(t);
        if t > 0 {
            *min_t = (*min_t).min(t);
        }
        *max_t = (*max_t).max(t);
    }

    /// The module file name of id `id` (empty when unknown).
    pub fn module_name(&self, id: u32) -> &str {
        self.modules
            .get(&id)
            .map(|p| p.rsplit('/').next().unwrap_or(p))
            .unwrap_or("")
    }

    /// The span (index into [`Index::boundaries`]) record `i` belongs to: the last boundary
    /// at or before it (records before an opening boundary belong to the opening stage).
    pub fn span_of(&self, i: usize) -> usize {
        self.boundaries
            .partition_point(|b| b.index <= i)
            .saturating_sub(1)
    }

    /// The name of span `span` (`startup` past the end).
    pub fn stage_name(&self, span: usize) -> &str {
        self.boundaries
            .get(span)
            .map_or("startup", |b| b.name.as_str())
    }
}
