//! The first of a replay's two walks: what must be known of the whole journal before its
//! books can be kept (the stage boundaries, some set after the records they cover; module
//! names; the pools captures name only at their end; rank; the journal's time range). Only
//! what a rule needs is kept, never the records.

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;

use vramledger_format::{Event, Kind, POOL_UNKNOWN};

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
    /// Walks `r` once (twice in the rare journal whose lookback needs more of a stage's
    /// rising times than a bounded scan keeps: [`Scan::bounded`]).
    pub fn scan<R: Records>(r: &R) -> Index {
        match Index::scan_with(r, Scan::bounded()) {
            (x, false) => x,
            (_, true) => Index::scan_with(r, Scan::default()).0,
        }
    }

    /// One walk of `r` with `scan`, and whether the scan lost a boundary ([`Scan::lost`]:
    /// never an unbounded one).
    fn scan_with<R: Records>(r: &R, scan: Scan) -> (Index, bool) {
        let known = r.modules();
        let mut w = Walk {
            x: Index {
                modules: known.cloned().unwrap_or_default(),
                ..Index::default()
            },
            known: known.is_some(),
            scan,
            i: 0,
            min_t: u64::MAX,
            max_t: 0,
        };
        r.walk_brief(
            #[inline(always)]
            |offer| match offer {
                Offer::Brief { kind, t_ns } => w.brief(kind, t_ns),
                Offer::Whole(e) => Some(w.whole(e)),
            },
        );
        let Walk {
            mut x,
            scan,
            i,
            min_t,
            max_t,
            ..
        } = w;
        let lost = scan.lost();
        x.records = i;
        x.min_t = (min_t != u64::MAX).then_some(min_t);
        x.max_t = (i > 0).then_some(max_t);
        x.boundaries = scan.finish();
        (x, lost)
    }

    /// Record `i`'s time `t` in the time range.
    #[inline(always)]
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

/// The index being made: what [`Index::scan`] keeps between records.
struct Walk {
    x: Index,
    /// The source knew every module (none is gathered from the records).
    known: bool,
    scan: Scan,
    /// Records walked.
    i: usize,
    min_t: u64,
    max_t: u64,
}

impl Walk {
    /// A record offered by its kind and time (most records: they matter here only by their
    /// time, and no event is made for them); `None` asks for its event. Small, so that it
    /// inlines into the decoding loop.
    #[inline(always)]
    fn brief(&mut self, kind: u16, t_ns: u64) -> Option<ControlFlow<()>> {
        let kind = Kind::from_repr(kind);
        if self.scan.may_set(kind) || !times_only(kind) {
            return None;
        }
        self.scan.step_time(self.i, t_ns);
        self.x.times(self.i, t_ns, &mut self.min_t, &mut self.max_t);
        self.i += 1;
        Some(ControlFlow::Continue(()))
    }

    /// A record's event.
    #[inline(never)]
    fn whole(&mut self, e: &Event) -> ControlFlow<()> {
        let (x, i, kind) = (&mut self.x, self.i, e.kind());
        self.scan.step_kind(i, e, kind);
        x.times(i, e.t_ns, &mut self.min_t, &mut self.max_t);
        match kind {
            Some(Kind::Alloc | Kind::Free) => {}
            Some(Kind::Stage) => x.rank.stage(e),
            Some(Kind::Module) if !self.known => {
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
        self.i += 1;
        ControlFlow::Continue(())
    }
}
