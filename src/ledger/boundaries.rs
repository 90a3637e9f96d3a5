//! Stage boundaries of one journal, and what set each one.
//!
//! The stage records the shim wrote (an engine line, a rule-file line or an explicit
//! `vramledger_stage` mark) are the first source. Where a line is missing or reworded, the API
//! events the journal holds set the boundary instead, so a journal recorded by an older shim
//! gains the stage on replay:
//! - the first NCCL communicator event (an NCCL-owned allocation, an NCCL registration or a
//!   peer import) while still in `startup` opens `dist_init`;
//! - a stream capture that begins outside a graph-capture stage opens `graph_capture`, unless
//!   the stage is `memory_profiling` (vLLM's V1 runner captures throwaway graphs there to
//!   estimate their memory) or `serving`;
//! - a graph-capture stage that ends at a boundary other than `post_capture` (or at the end of
//!   the journal) gets `post_capture` right after its last capture end;
//! - vLLM's "Model loading took X GiB and T seconds" without a begin line starts `weight_load`
//!   T seconds before the line.
//!
//! API events never override an explicit mark or a rule-file stage. A stage record that repeats
//! the stage an API event already opened (the line arrived later, e.g. a tqdm bar without a
//! newline) is the same boundary, not a new one; so is an engine line repeating the stage an
//! engine line opened (another rank's prefix in the same process). Every consumer of stage spans (the books, the
//! snapshot, the HTML timeline) reads them from [`derive`], so they agree by construction.

use vramledger_engines::log::{self, event as ev, stage as st};
use vramledger_format::{Api, Event, Kind, Owner};

use crate::journal::Journal;

#[path = "rising.rs"]
mod rising;
use rising::{Found, Rising};

/// What set a stage boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetBy {
    /// Nothing: the books open in `startup` (or the shim's own opening record).
    Implicit,
    /// A line of the engine's output recognised by the grammar.
    EngineLine,
    /// A driver or NCCL event in the journal (no line said so).
    ApiEvent,
    /// The program called `vramledger_stage`.
    ExplicitMark,
    /// A line matched by a `VRAMLEDGER_RULES` rule file.
    RuleFile,
    /// The end of the journal (for the end of the last stage).
    EndOfJournal,
}

impl SetBy {
    /// The name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            SetBy::Implicit => "implicit",
            SetBy::EngineLine => "engine_line",
            SetBy::ApiEvent => "api_event",
            SetBy::ExplicitMark => "explicit_mark",
            SetBy::RuleFile => "rule_file",
            SetBy::EndOfJournal => "end_of_journal",
        }
    }

    /// Whether an API event may set the next boundary (never over a mark or a rule).
    fn yields_to_api(self) -> bool {
        matches!(self, SetBy::Implicit | SetBy::EngineLine | SetBy::ApiEvent)
    }
}

/// One boundary: the stage `name` starts at event `index`.
#[derive(Debug, Clone, PartialEq)]
pub struct StageBoundary {
    pub name: String,
    /// The first event of the stage (a stage record, or the API event that opened it).
    pub index: usize,
    /// When the stage starts (for a stage placed by a printed duration, that instant).
    pub t_ns: u64,
    /// The time of its first record.
    pub record_t_ns: u64,
    /// The engine or rule line of the stage record, if any.
    pub line: Option<String>,
    pub set_by: SetBy,
    /// For people: which line, event or rule, and how a derived boundary was placed.
    pub detail: String,
    /// A stage record whose boundary samples follow it (free memory read at this very point).
    pub sampled: bool,
}

/// Whether `e` is a stage record that [`derive`] folded into the stage already open.
pub fn is_repeat(boundaries: &[StageBoundary], i: usize, e: &Event) -> bool {
    e.kind() == Some(Kind::Stage) && boundaries.binary_search_by_key(&i, |b| b.index).is_err()
}

fn is_capture_stage(name: &str) -> bool {
    name.starts_with(st::GRAPH_CAPTURE)
}

/// Why `e` belongs to communicator creation, if it does.
fn communicator_event(e: &Event) -> Option<String> {
    let api = e.api().map_or("?", Api::name);
    match e.kind()? {
        Kind::Alloc | Kind::VmmCreate if e.owner() == Owner::Nccl && e.result == 0 => {
            Some(format!("the first NCCL allocation ({api})"))
        }
        Kind::Register => Some(format!("an NCCL buffer registration ({api})")),
        Kind::VmmImport => Some(format!("a peer's memory imported ({api})")),
        _ => None,
    }
}

fn record_boundary(i: usize, e: &Event, first: bool) -> StageBoundary {
    let (name, line) = match e.text.split_once('\n') {
        Some((n, l)) => (n.to_string(), Some(l.to_string())),
        None => (e.text.clone(), None),
    };
    let (set_by, detail) = match (e.api(), &line) {
        (Some(Api::VramledgerLogLine), Some(l)) if log::classify(l).is_some() => {
            (SetBy::EngineLine, l.trim().to_string())
        }
        (Some(Api::VramledgerLogLine), Some(l)) => (SetBy::RuleFile, l.trim().to_string()),
        _ if first && name == st::STARTUP => (SetBy::Implicit, String::new()),
        _ => (SetBy::ExplicitMark, format!("vramledger_stage(\"{name}\")")),
    };
    StageBoundary {
        name,
        index: i,
        t_ns: e.t_ns,
        record_t_ns: e.t_ns,
        line,
        set_by,
        detail,
        sampled: true,
    }
}

fn derived(name: &str, at: (usize, u64, u64), set_by: SetBy, detail: String) -> StageBoundary {
    let (index, t_ns, record_t_ns) = at;
    StageBoundary {
        name: name.to_string(),
        index,
        t_ns,
        record_t_ns,
        line: None,
        set_by,
        detail,
        sampled: false,
    }
}

/// The boundaries of one journal, derived as its records stream past (one pass, no look
/// back at records: what a rule needs of earlier records is kept here).
#[derive(Default)]
pub struct Scan {
    out: Vec<StageBoundary>,
    /// `out` is only the implicit opening `startup` (no event has set anything yet).
    implicit_opening: bool,
    /// Index of the last capture end in the current capture stage, and the time of the
    /// record right after it (where `post_capture` would open).
    last_capture_end: Option<(usize, Option<u64>)>,
    /// The entry point of that capture end.
    end_api: Option<Api>,
    open_captures: usize,
    /// Time of the current boundary's first record.
    current_t: u64,
    /// The records of the current stage after its first one whose time is above every
    /// earlier one's: the first record at or after any instant is among them.
    rising: Rising,
    /// Records seen.
    seen: usize,
    /// What the current stage lets records do: an NCCL event may open `dist_init` (the
    /// stage is `startup` and yields to API events); a printed loading time may place
    /// `weight_load` before it (so its rising times are kept).
    opens_dist_init: bool,
    keeps_times: bool,
    /// A lookback needed rising times a bounded scan did not keep ([`Scan::lost`]).
    lost: bool,
    /// Only a record that may set a boundary can change anything but the rising times
    /// ([`Scan::quiet`]); false until the first record was taken whole.
    quiet: bool,
}

impl Scan {
    /// A scan that keeps only the first of each stage's rising times ([`Rising::bounded`]):
    /// when [`Scan::lost`] says a lookback needed more, walk again with [`Scan::default`].
    pub fn bounded() -> Scan {
        Scan {
            rising: Rising::bounded(),
            ..Scan::default()
        }
    }

    /// Whether a boundary may be missing or misplaced because this scan was bounded.
    pub fn lost(&self) -> bool {
        self.lost
    }

    fn current(&self) -> &StageBoundary {
        &self.out[self.out.len() - 1]
    }

    /// Closes a graph-capture stage that ends at `next` (name, index; `None`: the journal's
    /// end) with `post_capture` right after its last capture end.
    fn close_capture(&mut self, next: Option<(&str, usize)>) {
        let cur = self.current();
        if !is_capture_stage(&cur.name) || !cur.set_by.yields_to_api() || self.open_captures > 0 {
            return;
        }
        if next.is_some_and(|(n, _)| n == st::POST_CAPTURE || is_capture_stage(n)) {
            return;
        }
        let Some((end, after_t)) = self.last_capture_end else {
            return;
        };
        let at = end + 1;
        if at >= next.map_or(self.seen, |(_, i)| i) {
            return;
        }
        let Some(t) = after_t else {
            return;
        };
        let api = self.end_api.map_or("?", Api::name);
        self.out.push(derived(
            st::POST_CAPTURE,
            (at, t, t),
            SetBy::ApiEvent,
            format!("after the last stream capture ended ({api})"),
        ));
        self.last_capture_end = None;
    }

    /// Appends `b` (its index is past every boundary so far, or equal to an opening that holds
    /// no event yet, which it replaces).
    fn push(&mut self, b: StageBoundary) {
        self.close_capture(Some((&b.name, b.index)));
        let cur = self.current();
        if b.index < cur.index || (b.index == cur.index && cur.sampled) {
            return;
        }
        if b.index == cur.index {
            self.out.pop();
        }
        self.implicit_opening = false;
        self.last_capture_end = None;
        self.out.push(b);
    }

    /// vLLM's "Model loading took X GiB and T seconds" on a record at `t_ns`, in a stage that
    /// is not `weight_load`: the record where loading began, T seconds earlier (after the
    /// current stage's first record).
    fn load_begin(&mut self, t_ns: u64, line: &str) -> Option<StageBoundary> {
        let b = log::classify(line)?;
        if b.engine != log::Engine::Vllm || b.event != ev::LOAD_MODEL_END {
            return None;
        }
        let took = b.numbers.time_s.filter(|t| t.is_finite() && *t >= 0.0)?;
        let cur = self.current();
        if cur.name == st::WEIGHT_LOAD || !cur.set_by.yields_to_api() {
            return None;
        }
        let target = t_ns.saturating_sub((took * 1e9) as u64);
        // The stage starts at that instant; its first record is the first one at or after it.
        let (k, t_k) = match self.rising.first_at_or_after(target) {
            Found::At(k, t_k) => (k, t_k),
            Found::None => return None,
            Found::Lost => {
                self.lost = true;
                return None;
            }
        };
        Some(derived(
            st::WEIGHT_LOAD,
            (k, target.max(self.current_t), t_k),
            SetBy::EngineLine,
            format!(
                "{took} s before '{}' (the duration it prints; no begin line was recorded)",
                b.text
            ),
        ))
    }

    /// Takes record `i` (records come in journal order, each once).
    pub fn step(&mut self, i: usize, e: &Event) {
        self.step_kind(i, e, e.kind());
    }

    /// Whether a record of `kind` may set a boundary now (else only its time matters:
    /// [`Scan::step_time`]). Most records (allocations and frees past startup) can set
    /// nothing.
    #[inline]
    fn may_set(&self, kind: Option<Kind>) -> bool {
        self.out.is_empty()
            || self.opens_dist_init
            || matches!(
                kind,
                Some(Kind::Stage | Kind::CaptureBegin | Kind::CaptureEnd)
            )
    }

    /// Takes record `i`, at `t_ns`, that can set nothing ([`Scan::may_set`] said so).
    #[inline(always)]
    fn step_time(&mut self, i: usize, t_ns: u64) {
        self.seen = i + 1;
        if let Some((end, after @ None)) = &mut self.last_capture_end {
            if *end + 1 == i {
                *after = Some(t_ns);
            }
        }
        if self.keeps_times {
            self.rising.offer(i, t_ns);
        }
        self.quiet = self.is_quiet();
    }

    /// Whether a record that is not a stage or capture record changes nothing here but the
    /// rising times ([`Scan::step_quiet`] takes it): no opening is pending, an NCCL event
    /// cannot open `dist_init`, and no capture end waits for the time of the record after it.
    #[inline(always)]
    pub fn quiet(&self) -> bool {
        self.quiet
    }

    fn is_quiet(&self) -> bool {
        !self.out.is_empty()
            && !self.opens_dist_init
            && !matches!(self.last_capture_end, Some((_, None)))
    }

    /// Takes record `i`, at `t_ns`, while [`Scan::quiet`], when it is not a stage or capture
    /// record (the index's common case: most records). Records taken so far are then told
    /// [`Scan::walked`] before [`Scan::finish`].
    #[inline(always)]
    pub fn step_quiet(&mut self, i: usize, t_ns: u64) {
        if self.keeps_times {
            self.rising.offer(i, t_ns);
        }
    }

    /// `records` were taken (some by [`Scan::step_quiet`], which does not count them).
    pub fn walked(&mut self, records: usize) {
        self.seen = self.seen.max(records);
    }

    /// [`Scan::step`] for a record whose kind the caller has read.
    #[inline]
    pub fn step_kind(&mut self, i: usize, e: &Event, kind: Option<Kind>) {
        if !self.may_set(kind) {
            self.step_time(i, e.t_ns);
            return;
        }
        self.seen = i + 1;
        if let Some((end, after @ None)) = &mut self.last_capture_end {
            if *end + 1 == i {
                *after = Some(e.t_ns);
            }
        }
        self.rules(i, e, kind);
        let cur = self.current();
        let yields = cur.set_by.yields_to_api();
        let (startup, loading, at_i) = (
            cur.name == st::STARTUP,
            cur.name == st::WEIGHT_LOAD,
            cur.index == i,
        );
        self.opens_dist_init = yields && startup;
        self.keeps_times = yields && !loading;
        // The time index of the current stage: its first record's time, then rising times.
        if at_i {
            self.rising.clear();
            self.current_t = e.t_ns;
        } else if self.keeps_times {
            self.rising.offer(i, e.t_ns);
        }
        self.quiet = self.is_quiet();
    }

    fn rules(&mut self, i: usize, e: &Event, kind: Option<Kind>) {
        if kind == Some(Kind::Stage) {
            self.stage_record(i, e);
            return;
        }
        if self.out.is_empty() {
            let at = (0, 0, e.t_ns);
            self.out
                .push(derived(st::STARTUP, at, SetBy::Implicit, String::new()));
            self.implicit_opening = true;
        }
        let cur = self.current();
        let free_to_set = cur.set_by.yields_to_api();
        match kind {
            Some(Kind::CaptureBegin) => {
                let opens = free_to_set
                    && !is_capture_stage(&cur.name)
                    && cur.name != st::MEMORY_PROFILING
                    && cur.name != st::SERVING;
                if opens {
                    let api = e.api().map_or("?", Api::name);
                    let why = format!("a stream capture began ({api})");
                    let at = (i, e.t_ns, e.t_ns);
                    self.push(derived(st::GRAPH_CAPTURE, at, SetBy::ApiEvent, why));
                }
                self.open_captures += 1;
            }
            Some(Kind::CaptureEnd) => {
                self.open_captures = self.open_captures.saturating_sub(1);
                if is_capture_stage(&self.current().name) {
                    self.last_capture_end = Some((i, None));
                    self.end_api = e.api();
                }
            }
            _ if free_to_set && cur.name == st::STARTUP => {
                if let Some(why) = communicator_event(e) {
                    let why = format!("NCCL communicator creation: {why}");
                    let at = (i, e.t_ns, e.t_ns);
                    self.push(derived(st::DIST_INIT, at, SetBy::ApiEvent, why));
                }
            }
            _ => {}
        }
    }

    fn stage_record(&mut self, i: usize, e: &Event) {
        let rec = record_boundary(i, e, self.out.is_empty() || self.implicit_opening);
        if self.out.is_empty() {
            self.out.push(rec);
            return;
        }
        if self.implicit_opening && rec.name == self.out[0].name {
            self.out[0] = rec;
            self.implicit_opening = false;
            return;
        }
        let cur = self.current();
        if cur.set_by == SetBy::EngineLine
            && rec.set_by == SetBy::EngineLine
            && rec.name == cur.name
        {
            // Another rank's line (its own tracker) entering the stage this process is in.
            return;
        }
        if cur.set_by == SetBy::ApiEvent && rec.name == cur.name {
            // The line of a boundary an API event already set: the same boundary.
            let late_ms = rec.t_ns.saturating_sub(cur.t_ns) as f64 / 1e6;
            let last = self.out.len() - 1;
            let b = &mut self.out[last];
            b.detail = format!(
                "{}; the line came {late_ms:.1} ms later: {}",
                b.detail, rec.detail
            );
            if b.line.is_none() {
                b.line = rec.line;
            }
            return;
        }
        if let Some(w) = rec.line.as_deref().and_then(|l| self.load_begin(e.t_ns, l)) {
            self.push(w);
        }
        self.push(rec);
    }

    /// The boundaries, in event order (strictly increasing indexes); the first opens `startup`.
    pub fn finish(mut self) -> Vec<StageBoundary> {
        if self.out.is_empty() {
            self.out.push(derived(
                st::STARTUP,
                (0, 0, 0),
                SetBy::Implicit,
                String::new(),
            ));
        } else {
            self.close_capture(None);
        }
        self.out
    }
}

/// The stage boundaries of `j`, in event order (strictly increasing indexes); the first opens
/// `startup`.
pub fn derive(j: &Journal) -> Vec<StageBoundary> {
    let mut s = Scan::default();
    for (i, e) in j.events.iter().enumerate() {
        s.step(i, e);
    }
    s.finish()
}

#[cfg(test)]
#[path = "boundaries_tests.rs"]
mod tests;
