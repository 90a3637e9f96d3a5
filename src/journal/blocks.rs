//! Reading format 2 (`vramledger_format::block`): sealed blocks are read whole, a block whose
//! seal does not match is skipped, an unsealed block (its writer stopped) is read to its last
//! committed record. [`Decoder`] turns records into events (templates, the time base), shared
//! by the full reader and the follower.

use std::cell::OnceCell;
use std::ops::ControlFlow;
use std::path::Path;

use vramledger_format::compact::{self, Template, MAX_TEMPLATE};
use vramledger_format::walk::{self, BlockState, BlockView, Item};
use vramledger_format::{Event, Header, Kind};

use super::{Each, Journal};

/// A template id more than this far past the highest one defined is damage, not a writer's.
const MAX_TEMPLATE_JUMP: usize = 1 << 16;

/// Where decoded events go: kept in the journal, or handed on (which may stop the reading).
/// Generic, so a replay's per-record work inlines into the decoding loop.
/// The event is lent (a sink that keeps it takes it), so no copy of it is made per record.
pub(crate) trait Sink {
    /// A compact record's kind and time, before its event is made ([`Each::brief`]).
    #[inline]
    fn brief(&mut self, _kind: u16, _t_ns: u64) -> Option<ControlFlow<()>> {
        None
    }
    fn event(&mut self, j: &mut Journal, e: &mut Event) -> ControlFlow<()>;
    /// [`Sink::event`] of a compact record (nearly every record): a sink may inline it into
    /// the walk's loop and keep [`Sink::event`], for the others, out of it.
    #[inline(always)]
    fn compact_event(&mut self, j: &mut Journal, e: &mut Event) -> ControlFlow<()> {
        self.event(j, e)
    }
    /// [`Sink::compact_event`] of a record whose template is [`briefable`]: admitting it
    /// would change nothing, so a sink that admits may skip that.
    #[inline(always)]
    fn briefable_event(&mut self, j: &mut Journal, e: &mut Event) -> ControlFlow<()> {
        self.compact_event(j, e)
    }
}

impl<S: FnMut(&mut Journal, &mut Event) -> ControlFlow<()> + ?Sized> Sink for S {
    #[inline]
    fn event(&mut self, j: &mut Journal, e: &mut Event) -> ControlFlow<()> {
        self(j, e)
    }
}

/// The reader's sink: each event admitted ([`Journal::admit`]), then handed to `each`.
struct Admit<'a, F: ?Sized>(&'a mut F);

impl<F: Each + ?Sized> Sink for Admit<'_, F> {
    #[inline(always)]
    fn brief(&mut self, kind: u16, t_ns: u64) -> Option<ControlFlow<()>> {
        self.0.brief(kind, t_ns)
    }
    #[inline]
    fn event(&mut self, j: &mut Journal, e: &mut Event) -> ControlFlow<()> {
        self.compact_event(j, e)
    }
    // In the walk's loop: a call per record (its frame, the event through memory) cost the
    // books walk ~18 instructions a record.
    #[inline(always)]
    fn compact_event(&mut self, j: &mut Journal, e: &mut Event) -> ControlFlow<()> {
        j.admit(e);
        self.0.event(e)
    }
    #[inline(always)]
    fn briefable_event(&mut self, _j: &mut Journal, e: &mut Event) -> ControlFlow<()> {
        self.0.event(e)
    }
}

/// Whether a compact record of template `t` may be offered briefly: admitting its event would
/// change nothing (a plausible device; not a module or stage record, whose names are noted).
#[inline]
fn briefable(t: &Template) -> bool {
    (-1..=super::MAX_DEVICE).contains(&t.device)
        && t.kind != Kind::Module as u16
        && t.kind != Kind::Stage as u16
}

/// The sink that keeps every event in the journal.
pub(crate) fn keep(j: &mut Journal, e: &mut Event) -> ControlFlow<()> {
    j.take(std::mem::take(e));
    ControlFlow::Continue(())
}

/// A template id's definition, if any, and whether its records may be offered briefly
/// ([`briefable`], decided once per definition, not per record).
#[derive(Debug, Clone, Copy, Default)]
struct Defined {
    t: Template,
    state: State,
}

/// [`Defined::state`]: no definition; defined; defined and briefable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum State {
    #[default]
    Undefined,
    Defined,
    Briefable,
}

/// Records into events: the templates defined so far and the time base of compact records.
#[derive(Debug, Clone, Default)]
pub(crate) struct Decoder {
    templates: Vec<Defined>,
    base: u64,
    pub header_seen: bool,
    /// Compact records whose template was never defined (lost in flight with it).
    pub orphans: usize,
    /// The file offset where the last block walked ends, when the file ends inside it and it
    /// has no seal (no writer's shape but an unsealable exit: [`cut_short`]), until a record
    /// lost in flight explains it.
    open_end: Option<usize>,
}

impl Decoder {
    /// Applies one record to `j` (`base`: the file offset of the bytes walked), keeping its
    /// event.
    pub fn item(&mut self, j: &mut Journal, item: Item<'_>, base: usize) {
        let _ = self.item_to(j, item, base, &mut keep);
    }

    /// Applies one record to `j`, handing its event (if any) to `sink`. Inlined into the
    /// walks' loops (a call per record costs the replay a fifth of its time).
    #[inline(always)]
    pub fn item_to<S: Sink + ?Sized>(
        &mut self,
        j: &mut Journal,
        item: Item<'_>,
        base: usize,
        sink: &mut S,
    ) -> ControlFlow<()> {
        match item {
            Item::Frame { at, kind, payload } => {
                return self.frame(j, base + at, kind, payload, sink)
            }
            Item::Compact { at, fields } => {
                return self.compact_to(j, at, fields.template, fields.t_rel, || fields, base, sink)
            }
            Item::Seal { .. } => return ControlFlow::Continue(()),
            _ => {}
        }
        // Each of the rest says why the block ends where it does.
        self.open_end = None;
        match item {
            Item::Lost { at, .. } => j.warnings.push(format!(
                "{}: a record in flight when the process stopped was lost at offset {}",
                j.path.display(),
                base + at
            )),
            Item::LostRest { at, .. } => j.warnings.push(format!(
                "{}: a record in flight when the process stopped was lost at offset {}, and the rest of its block with it",
                j.path.display(),
                base + at,
            )),
            Item::Damaged { at, .. } => {
                j.corrupt = true;
                j.warnings.push(format!(
                    "{}: a corrupt record at offset {} ends its block (the rest of it was skipped)",
                    j.path.display(),
                    base + at,
                ));
            }
            Item::Cut { at } => {
                j.corrupt = true;
                j.warnings.push(super::cut_off(&j.path, base + at));
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }

    /// A compact record at `at` (template id, time, and its fields when they are asked for)
    /// to `sink`: offered briefly first when its template allows.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn compact_to<S: Sink + ?Sized>(
        &mut self,
        j: &mut Journal,
        at: usize,
        template: u32,
        t_rel: u64,
        fields: impl FnOnce() -> compact::Fields,
        base: usize,
        sink: &mut S,
    ) -> ControlFlow<()> {
        let Some(d) = self
            .templates
            .get(template as usize)
            .filter(|d| d.state != State::Undefined)
        else {
            self.orphan(j, base + at);
            return ControlFlow::Continue(());
        };
        let t = &d.t;
        if d.state == State::Briefable {
            let t_ns = self.base.wrapping_add(t_rel);
            if let Some(flow) = sink.brief(t.kind, t_ns) {
                return flow;
            }
            return sink.briefable_event(j, &mut compact::event(&fields(), t, self.base));
        }
        sink.compact_event(j, &mut compact::event(&fields(), t, self.base))
    }

    /// Every record of `recs` (the bytes walked start at file offset `base`) to `sink`, until
    /// it breaks: whole compact records by the inlined lane, the rest as items.
    #[inline(always)]
    pub fn records_to<S: Sink + ?Sized>(
        &mut self,
        j: &mut Journal,
        mut recs: walk::Records<'_>,
        base: usize,
        sink: &mut S,
    ) -> ControlFlow<()> {
        loop {
            if let Some((at, raw)) = recs.next_compact() {
                self.compact_to(j, at, raw.template, raw.t_rel, || raw.fields(), base, sink)?;
                continue;
            }
            match recs.next() {
                None => return ControlFlow::Continue(()),
                Some(Item::Seal { .. }) => {}
                Some(item) => self.item_to(j, item, base, sink)?,
            }
        }
    }

    /// A compact record whose template was never defined.
    #[cold]
    fn orphan(&mut self, j: &mut Journal, at: usize) {
        self.orphans += 1;
        if self.orphans == 1 {
            j.warnings.push(format!(
                "{}: a record at offset {at} names a template lost in flight when the process stopped (such records are left out)",
                j.path.display(),
            ));
        }
    }

    fn frame<S: Sink + ?Sized>(
        &mut self,
        j: &mut Journal,
        at: usize,
        kind: u16,
        payload: &[u8],
        sink: &mut S,
    ) -> ControlFlow<()> {
        if kind == Kind::Header as u16 {
            match Header::decode(payload) {
                Some(h) if !self.header_seen => {
                    self.base = h
                        .get("start_mono_ns")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    j.header = super::secrets::header(h);
                    self.header_seen = true;
                }
                Some(_) => j.warnings.push(format!(
                    "{}: a second header at offset {at} was ignored",
                    j.path.display()
                )),
                None => j.warnings.push(format!(
                    "{}: the header record is malformed",
                    j.path.display()
                )),
            }
            return ControlFlow::Continue(());
        }
        if kind == Kind::Template as u16 {
            match Template::decode(payload) {
                Some((id, t))
                    if (id as usize) < self.templates.len() + MAX_TEMPLATE_JUMP
                        && id <= MAX_TEMPLATE =>
                {
                    let id = id as usize;
                    if self.templates.len() <= id {
                        self.templates.resize(id + 1, Defined::default());
                    }
                    let state = if briefable(&t) {
                        State::Briefable
                    } else {
                        State::Defined
                    };
                    self.templates[id] = Defined { t, state };
                }
                _ => {
                    j.corrupt = true;
                    j.warnings.push(format!(
                        "{}: a malformed template record at offset {at} was ignored",
                        j.path.display()
                    ));
                }
            }
            return ControlFlow::Continue(());
        }
        match Event::decode(kind, payload) {
            Some(mut e) => return sink.event(j, &mut e),
            None => j.warnings.push(format!(
                "{}: record at offset {at} is too short for its kind",
                j.path.display()
            )),
        }
        ControlFlow::Continue(())
    }

    /// What a block's state says, for humans.
    pub fn block(&mut self, j: &mut Journal, b: &BlockView, base: usize) {
        // A writer grows its file by whole blocks and seals the last one before it cuts the
        // file at exit: an unsealed block the file ends inside was cut short by something else
        // (or its writer could not seal it, which `cut_short` says too).
        let short = b.data.end < b.start + vramledger_format::block::BLOCK;
        self.open_end = (b.state == BlockState::Open && short).then_some(base + b.data.end);
        if b.state == BlockState::Corrupt {
            j.corrupt = true;
            j.warnings.push(format!(
                "{}: a corrupt block at offset {} ({} bytes) was skipped: its checksum does not match",
                j.path.display(),
                base + b.start,
                b.data.end - b.start
            ));
        }
    }
}

/// The blocks of one journal's bytes as [`walk::block`] reads them, kept once a walk went
/// through them all, so later walks of the same bytes check no seal again.
#[derive(Debug, Default)]
pub struct BlockViews(OnceCell<Vec<BlockView>>);

/// Decodes a journal of format 2 into `j` (preamble already checked), handing each event to
/// `each` (after [`Journal::admit`]); stops where `each` breaks. The blocks are walked as
/// [`walk::walk`] walks them (as `views` kept them, when a walk of these bytes kept them).
pub(crate) fn parse<F: Each + ?Sized>(
    path: &Path,
    bytes: &[u8],
    views: &BlockViews,
    j: &mut Journal,
    each: &mut F,
) {
    let mut d = Decoder::default();
    let mut sink = Admit(each);
    let kept = views.0.get();
    let mut seen = Vec::new();
    let mut whole = true;
    let mut k = 0;
    'blocks: loop {
        let b = match kept {
            Some(v) => match v.get(k) {
                Some(b) => b.clone(),
                None => break,
            },
            None => match walk::block(bytes, k) {
                Some(b) => b,
                None => break,
            },
        };
        if kept.is_none() {
            seen.push(b.clone());
        }
        let (area, skip, last) = (b.data.clone(), b.state == BlockState::Corrupt, b.last);
        d.block(j, &b, 0);
        if !skip
            && d.records_to(j, walk::Records::new(bytes, area), 0, &mut sink)
                .is_break()
        {
            whole = false;
            break 'blocks;
        }
        if last {
            if let Some(end) = final_end(&b) {
                let rest = bytes.get(end..).unwrap_or_default();
                if let Some(n) = rest.iter().position(|&x| x != 0) {
                    after_final_seal(j, end + n);
                }
            }
            break;
        }
        k += 1;
    }
    if kept.is_none() && whole {
        let _ = views.0.set(seen);
    }
    if whole {
        cut_short(&d, j);
    }
    no_header(&d, path, j);
}

/// A walk of a format-2 file read a part at a time (whole blocks each, so that no more than
/// a part of it is held): [`PartWalk::part`] for each part in file order, then
/// [`PartWalk::finish`]. The same events, warnings and damage as [`parse`] of the whole file.
pub(crate) struct PartWalk<'e, F: ?Sized> {
    d: Decoder,
    sink: Admit<'e, F>,
    /// The walk is over: a final seal, a break, or a refused block.
    pub done: bool,
    /// `each` broke the walk.
    pub broke: bool,
    /// The file offset right after the final seal, when the walk ended at one: only zeros
    /// may follow it ([`after_final_seal`] when anything else does).
    pub final_end: Option<usize>,
}

impl<'e, F: Each + ?Sized> PartWalk<'e, F> {
    pub fn new(each: &'e mut F) -> PartWalk<'e, F> {
        PartWalk {
            d: Decoder::default(),
            sink: Admit(each),
            done: false,
            broke: false,
            final_end: None,
        }
    }

    /// Walks the blocks of `part`: the file's bytes from offset `base` (a multiple of the
    /// block size), whole blocks but where the file ends (`file_ends`: it ends with `part`).
    /// `check` sees each block first (its view in file offsets, and its bytes); refusing it
    /// ends the walk there.
    pub fn part(
        &mut self,
        j: &mut Journal,
        part: &[u8],
        base: usize,
        file_ends: bool,
        check: &mut dyn FnMut(&BlockView, &[u8]) -> bool,
    ) {
        let mut k = 0;
        while !self.done {
            let Some(b) = walk::block_in(part, k, base == 0) else {
                return;
            };
            let in_file = BlockView {
                start: base + b.start,
                data: base + b.data.start..base + b.data.end,
                state: b.state,
                last: b.last,
            };
            let block_end = part.len().min(b.start + vramledger_format::block::BLOCK);
            if !check(&in_file, &part[b.start..block_end]) {
                self.done = true;
                return;
            }
            self.d.block(j, &b, base);
            if b.state != BlockState::Corrupt {
                let recs = walk::Records::in_part(part, b.data.clone(), file_ends);
                if self.d.records_to(j, recs, base, &mut self.sink).is_break() {
                    self.broke = true;
                    self.done = true;
                    return;
                }
            }
            if b.last {
                self.done = true;
                self.final_end = final_end(&b).map(|end| base + end);
            }
            k += 1;
        }
    }

    /// After the last part walked.
    pub fn finish(self, path: &Path, j: &mut Journal) {
        if !self.broke {
            cut_short(&self.d, j);
        }
        no_header(&self.d, path, j);
    }
}

/// Where the final seal of block `b` ends (`None` for a corrupt block, whose seal is not
/// trusted).
fn final_end(b: &BlockView) -> Option<usize> {
    (b.state == BlockState::Sealed).then_some(b.data.end + vramledger_format::block::SEAL_LEN)
}

/// Bytes other than zeros after the final seal (at file offset `at`): the file was appended
/// to or joined with another. A writer leaves only zeros there (a process killed after its
/// final seal, before the file was cut to its length).
pub(crate) fn after_final_seal(j: &mut Journal, at: usize) {
    j.corrupt = true;
    j.warnings.push(format!(
        "{}: bytes follow the journal's final seal at offset {at} (the file was appended to, or joined with another); they were not read",
        j.path.display()
    ));
}

/// After a whole walk: a file that ends inside an unsealed block, at a record's end (no
/// record lost in flight there), was most likely cut short (an interrupted copy) and may miss
/// what followed. Said, not counted as damage: a writer that could not seal its last block at
/// exit leaves the same shape with nothing missing.
fn cut_short(d: &Decoder, j: &mut Journal) {
    if let Some(end) = d.open_end {
        j.warnings.push(format!(
            "{}: the journal ends at offset {end} inside a block without its seal: the file was probably cut short (an interrupted copy?), and records after that point are not in it",
            j.path.display()
        ));
    }
}

fn no_header(d: &Decoder, path: &Path, j: &mut Journal) {
    if !d.header_seen {
        j.corrupt = true;
        j.warnings.push(format!(
            "{}: the journal has no header record",
            path.display()
        ));
    }
}
