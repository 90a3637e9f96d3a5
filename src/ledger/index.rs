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

/// Whether the index reads nothing of a record of kind tag `kind` but its time, by tag
/// (tags past the table included: nothing matches on them). The others are the kinds
/// [`Walk::whole`] matches on, and stage and capture records, which may set a boundary.
const TIMES_ONLY: [bool; 128] = {
    let whole = [
        Kind::Stage,
        Kind::CaptureBegin,
        Kind::CaptureEnd,
        Kind::Module,
        Kind::PoolEnd,
        Kind::PoolBegin,
        Kind::PoolHooks,
        Kind::TorchSegment,
        Kind::AllocFailed,
        Kind::Context,
    ];
    let mut t = [true; 128];
    let mut k = 0;
    while k < whole.len() {
        t[whole[k] as usize] = false;
        k += 1;
    }
    t
};

#[inline(always)]
fn times_only(kind: u16) -> bool {
    TIMES_ONLY.get(kind as usize).copied().unwrap_or(true)
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
    /// Per device, the record that ended its last context ([`super::context`]).
    pub context_ends: super::context::Ends,
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
            last_t: 0,
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
            mut scan,
            i,
            last_t,
            min_t,
            max_t,
            ..
        } = w;
        let lost = scan.lost();
        scan.walked(i);
        x.records = i;
        x.last_t = (i > 0).then_some(last_t);
        x.min_t = (min_t != u64::MAX).then_some(min_t);
        x.max_t = (i > 0).then_some(max_t);
        x.boundaries = scan.finish();
        (x, lost)
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
    /// The last record's time; the lowest non-zero and the highest time so far.
    last_t: u64,
    min_t: u64,
    max_t: u64,
}

impl Walk {
    /// A record offered by its kind and time (most records: they matter here only by their
    /// time, and no event is made for them); `None` asks for its event. Small, so that it
    /// inlines into the decoding loop.
    #[inline(always)]
    fn brief(&mut self, kind: u16, t_ns: u64) -> Option<ControlFlow<()>> {
        if !times_only(kind) || !self.scan.quiet() {
            return None;
        }
        // Not the first record: the scan is quiet only after one was taken whole.
        self.scan.step_quiet(self.i, t_ns);
        self.times(t_ns);
        self.i += 1;
        Some(ControlFlow::Continue(()))
    }

    /// A record's time `t` in the time range (branch-free: times of neighbours are a few µs
    /// out of order at random).
    #[inline(always)]
    fn times(&mut self, t: u64) {
        self.last_t = t;
        self.min_t = self.min_t.min(if t > 0 { t } else { u64::MAX });
        self.max_t = self.max_t.max(t);
    }

    /// A record's event.
    #[inline(never)]
    fn whole(&mut self, e: &Event) -> ControlFlow<()> {
        let (i, kind) = (self.i, e.kind());
        self.scan.step_kind(i, e, kind);
        self.times(e.t_ns);
        let x = &mut self.x;
        if i == 0 {
            x.first_t = Some(e.t_ns);
        }
        match kind {
            Some(Kind::Alloc | Kind::Free) => {}
            Some(Kind::Stage) => x.rank.stage(e),
            Some(Kind::Context) => x.context_ends.take(i, e),
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
