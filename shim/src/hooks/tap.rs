//! The stdout/stderr tap: the program's own log lines mark the stages.
//!
//! `write` is interposed for the whole process, so its cost matters for every write: a write
//! to any other descriptor is forwarded and nothing else; a write to fd 1 or 2 that ends a
//! line, with no partial line pending and nothing the grammar could match, costs one prefilter
//! pass (`may_match`). Lines are classified with the same grammar the offline parser uses
//! (`vramledger_engines::log`), per rank through a stage tracker; a rule file named by
//! `VRAMLEDGER_RULES` adds stages for other engines. The tap's lock is never held across a
//! driver call: transitions are collected under it and entered after. `errno` is preserved.
//! Once the engine says it is serving, the grammar-only tap steps aside for good.
//!
//! The caller's bytes are read only after the real `write` returned, and only the bytes it
//! took: a buffer the kernel refuses in part or in whole (an unmapped page, a bad pointer)
//! gives the caller the same count or EFAULT as without vramledger, and is never touched.
//! `writev` is tapped the same way; stdio output reaches [`observe`] from `hooks::stdio`.
//!
//! Lines that carry sizing numbers without changing the stage ([`SIZING`]: vLLM's `GPU KV
//! cache size`, `Maximum concurrency`, the `--kv-cache-memory=` summary, …) are kept as
//! engine-line records, so the journal alone says what the engine sized.

#![allow(non_snake_case)]

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering};

use vramledger_engines::log::settings::{self, SettingsKind};
use vramledger_engines::log::{self, event as ev, LineKind, Rules, StageTracker};
use vramledger_engines::redact;
use vramledger_format::Api;

use super::tap_filter;
use crate::forksafe::ForkSafeMutex;
use crate::{boundary, config, guard, samples};

mod write;

static PENDING: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// The process the tap's state is this process's for (set at load and in a forked child): a
/// `vfork` child shares the parent's memory until it execs, and its lines (an exec failure
/// message) are not the parent's.
static TAP_PID: AtomicI32 = AtomicI32::new(0);

/// Whether this is the process the tap's state belongs to (one `getpid`: slow paths only).
pub fn own_process() -> bool {
    let pid = TAP_PID.load(Ordering::Relaxed);
    // SAFETY: getpid has no preconditions.
    pid == 0 || pid == unsafe { libc::getpid() }
}

/// Whether the program is in the middle of a line on stderr (the tap saw its start and not
/// its end): a warning written now would land inside it.
pub fn stderr_mid_line() -> bool {
    PENDING[1].load(Ordering::Relaxed) && own_process()
}
// 0 unknown, 1 on (grammar only), 2 on with rules, 3 off.
static MODE: AtomicU8 = AtomicU8::new(0);
/// What `MODE` and `PENDING` say, in one load for `write`'s common path ([`quick_for`]).
static QUICK: AtomicU8 = AtomicU8::new(0);
/// The bit of [`QUICK`] that says the tap is off.
const OFF: u8 = 4;
/// A partial line longer than this is dropped (no log line is that long).
const MAX_CARRY: usize = 16 * 1024;

/// Events of lines that carry the engine's sizing figures: kept as engine-line records when
/// they do not start a stage (a stage record keeps its own line).
pub const SIZING: &[&str] = &[
    ev::KV_CACHE_SIZE,
    ev::MAX_CONCURRENCY,
    ev::KV_CACHE_MEMORY_SUGGESTION,
    ev::KV_CACHE_BLOCKS,
    ev::AVAILABLE_KV_CACHE_MEMORY,
    ev::KV_CACHE_MEMORY_SPECIFIED,
    ev::MEMORY_PROFILE_RESULT,
    ev::MEMORY_BUDGET,
    ev::CUDA_GRAPH_ESTIMATE,
    ev::CUDA_GRAPH_POOL,
    ev::CUDA_GRAPH_PROFILING,
    ev::SUMMARY,
    ev::MAX_TOTAL_TOKENS_CAPPED,
    ev::MAX_RUNNING_REQUESTS_REDUCED,
    ev::MAX_RUNNING_REQUESTS_CAPPED,
];

#[derive(Default)]
struct Tap {
    carry: [Vec<u8>; 2],
    /// Inside a line too long to be a log line: skip to its end.
    skipping: [bool; 2],
    tracker: StageTracker,
    rules: Option<Rules>,
    rules_tried: bool,
}

static TAP: ForkSafeMutex<Tap> = ForkSafeMutex::new();

#[inline(always)]
fn mode() -> u8 {
    let m = MODE.load(Ordering::Relaxed);
    if m != 0 {
        return m;
    }
    mode_first()
}

#[cold]
fn mode_first() -> u8 {
    let cfg = config::get();
    let m = if config::disabled() || !cfg.tap {
        3
    } else if cfg.rules.is_some() {
        2
    } else {
        1
    };
    set_mode(m);
    m
}

/// [`QUICK`] for a mode and the partial lines pending on fd 1 and 2: bit `fd - 1` set while
/// the grammar-only tap has no partial line on that fd (then a whole line that the prefilter
/// rejects is all there is to it), [`OFF`] once the tap is off, 0 (ask [`observe`]) otherwise.
fn quick_for(mode: u8, pending: [bool; 2]) -> u8 {
    match mode {
        1 => u8::from(!pending[0]) | u8::from(!pending[1]) << 1,
        3 => OFF,
        _ => 0,
    }
}

/// The mode changes (the slow paths only). A partial line that another thread marks pending
/// meanwhile clears its bit after this store or is seen by the load after it (both SeqCst):
/// a quick bit is never left set over a pending line.
fn set_mode(m: u8) {
    if m == 3 {
        write::route_off();
    }
    MODE.store(m, Ordering::SeqCst);
    QUICK.store(quick_for(m, [false; 2]), Ordering::SeqCst);
    for (which, p) in PENDING.iter().enumerate() {
        if p.load(Ordering::SeqCst) {
            QUICK.fetch_and(!(1 << which), Ordering::SeqCst);
        }
    }
}

/// A partial line is (or is no longer) pending on fd `which + 1` (under the tap's lock, or in
/// a forked child before it runs anything else). A quick bit is set only while the mode is
/// grammar-only; one set just as the tap turns off costs that fd a prefilter pass, no more.
fn set_pending(which: usize, pending: bool) {
    PENDING[which].store(pending, Ordering::SeqCst);
    if pending {
        QUICK.fetch_and(!(1 << which), Ordering::SeqCst);
    } else if MODE.load(Ordering::SeqCst) == 1 {
        QUICK.fetch_or(1 << which, Ordering::SeqCst);
    }
}

/// Bytes the program has just written to fd 1 or 2 (by `write`, `writev` or stdio): the
/// prefilter, then, for what it cannot rule out, the slow path. `errno` is kept.
#[inline(always)]
pub fn observe(fd: c_int, bytes: &[u8]) {
    if !(fd == 1 || fd == 2) || bytes.is_empty() {
        return;
    }
    let m = mode();
    if m != 3 && needs_look(fd, bytes, m == 2) {
        look((fd - 1) as usize, bytes);
    }
}

/// Whether [`observe`] would look further at `bytes` written to `fd` (stdio asks before it
/// copies them out of a stream's buffer).
#[inline]
pub fn needs(fd: c_int, bytes: &[u8]) -> bool {
    if !(fd == 1 || fd == 2) || bytes.is_empty() {
        return false;
    }
    let m = mode();
    m != 3 && needs_look(fd, bytes, m == 2)
}

/// Bytes written to fd 1 or 2 that the tap will not see (stdio output too long to format
/// again): the line they are part of is skipped to its end.
pub fn unseen(fd: c_int) {
    if (fd == 1 || fd == 2) && mode() != 3 && !super::signals::in_handler() {
        let which = (fd - 1) as usize;
        guard::record(|| {
            let mut tap = TAP.lock();
            tap.carry[which].clear();
            tap.skipping[which] = true;
            set_pending(which, true);
        });
    }
}

/// True while the tap wants bytes at all (stdio checks this before formatting anything).
#[inline]
pub fn wanted() -> bool {
    mode() != 3
}

/// The fast path: false for a whole line that the prefilter rejects, with no partial line
/// pending and no rule file (that is almost every write a server makes).
#[inline(always)]
fn needs_look(fd: c_int, bytes: &[u8], with_rules: bool) -> bool {
    !tap_filter::ends_line(bytes)
        || with_rules
        || PENDING[(fd - 1) as usize].load(Ordering::Relaxed)
        || tap_filter::may_match(bytes)
}

/// The slow path, after the write: lines are assembled and classified; `errno` is kept.
#[cold]
fn look(which: usize, bytes: &[u8]) {
    if !own_process() || super::signals::in_handler() {
        // Not this process's tap, or inside a signal handler, where nothing the slow path
        // does (allocate, lock, read the driver) is safe: the bytes were passed on, no more.
        return; // (getpid sets no errno)
    }
    // SAFETY: errno is thread-local; the caller must see the real write's errno.
    let saved = unsafe { *libc::__errno_location() };
    guard::record(|| slow_path(which, bytes));
    if which == 1 && !PENDING[1].load(Ordering::Relaxed) {
        guard::flush_deferred();
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

#[derive(Default)]
struct Found {
    stage: String,
    line: Vec<u8>,
    numbers: [Option<f64>; 2],
    failure: bool,
    /// An engine settings line: recorded as such, never a stage.
    settings: Option<SettingsKind>,
    /// A sizing line that starts no stage: an engine-line record.
    sizing: bool,
}

#[cold]
fn slow_path(which: usize, bytes: &[u8]) {
    let mut found: Vec<Found> = Vec::new();
    {
        let mut tap = TAP.lock();
        if !tap.rules_tried {
            tap.rules_tried = true;
            tap.rules = load_rules();
        }
        // Lines are taken from the caller's bytes where they lie; only a line split across
        // writes is assembled in the carry (which keeps its capacity: no allocation per
        // write). A line is kept up to its bound ([`line_bound`]); past it, the rest is skipped
        // to the line's end, never copied: a plain line is then dropped, a settings line is
        // kept cut (one byte past its own bound says so).
        let mut carry = std::mem::take(&mut tap.carry[which]);
        let mut skipping = tap.skipping[which];
        let grammar_only = tap.rules.is_none();
        let mut rest = bytes;
        while let Some(i) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            let head = &rest[..i];
            rest = &rest[i + 1..];
            if std::mem::take(&mut skipping) {
                if !carry.is_empty() {
                    classify_line(&mut tap, &carry, &mut found); // a cut settings line
                    carry.clear();
                }
            } else if carry.is_empty() {
                let bound = line_bound(head);
                if head.len() <= bound {
                    classify_line(&mut tap, head, &mut found);
                } else if bound > MAX_CARRY {
                    classify_line(&mut tap, &head[..bound], &mut found);
                }
            } else {
                let bound = line_bound(&carry);
                let take = head.len().min(bound.saturating_sub(carry.len()));
                carry.extend_from_slice(&head[..take]);
                if take == head.len() || bound > MAX_CARRY {
                    classify_line(&mut tap, &carry, &mut found);
                }
                carry.clear();
            }
            if grammar_only && found.last().is_some_and(|f| f.stage == log::stage::SERVING) {
                rest = &[]; // serving: nothing after it is looked at
                break;
            }
        }
        if !rest.is_empty() && !skipping {
            let bound = line_bound(if carry.is_empty() { rest } else { &carry });
            let take = rest.len().min(bound.saturating_sub(carry.len()));
            carry.extend_from_slice(&rest[..take]);
            if take < rest.len() {
                skipping = true;
                if bound <= MAX_CARRY {
                    carry.clear(); // longer than any log line: dropped
                }
            }
        }
        set_pending(which, !carry.is_empty() || skipping);
        tap.carry[which] = carry;
        tap.skipping[which] = skipping;
    }
    // Outside the lock: entering a stage samples free memory through the driver.
    for f in found {
        // A kept line never carries a secret (an engine may print its settings).
        let text = String::from_utf8_lossy(&f.line);
        let line = redact::text(&text);
        if let Some(kind) = f.settings {
            samples::settings_line(kind, &f.line);
        } else if f.sizing {
            samples::engine_line(&f.line);
        } else if f.failure {
            samples::warning(&line);
        } else {
            boundary::enter(&f.stage, Api::VramledgerLogLine, f.numbers, line.as_bytes());
            if f.stage == log::stage::SERVING && MODE.load(Ordering::Relaxed) == 1 {
                // The engine is serving: no startup line follows, and serving is when a
                // server writes the most. The grammar-only tap steps aside (a rule file keeps
                // it on; `vramledger_stage` always works).
                set_mode(3);
            }
        }
    }
}

/// How long the line starting with `start` may be kept: an engine settings line up to its own
/// bound plus one byte (which says it was cut), any other line up to [`MAX_CARRY`].
fn line_bound(start: &[u8]) -> usize {
    if settings::detect(start).is_some() {
        settings::MAX_LINE + 1
    } else {
        MAX_CARRY
    }
}

fn classify_line(tap: &mut Tap, line: &[u8], found: &mut Vec<Found>) {
    if line.is_empty() {
        return;
    }
    if let Some(kind) = settings::detect(line) {
        found.push(Found {
            line: line.to_vec(),
            settings: Some(kind),
            ..Found::default()
        });
        return;
    }
    if let Some(b) = log::classify_bytes(line) {
        let staged = match b.kind {
            LineKind::Boundary => match tap.tracker.observe(&b) {
                Some(t) => {
                    found.push(Found {
                        stage: t.to.to_string(),
                        line: line.to_vec(),
                        numbers: [b.numbers.avail_mem_gib, b.numbers.mem_usage_gib],
                        ..Found::default()
                    });
                    true
                }
                None => false,
            },
            LineKind::Failure => {
                found.push(Found {
                    line: line.to_vec(),
                    failure: true,
                    ..Found::default()
                });
                true
            }
            LineKind::Progress => false,
        };
        if !staged && SIZING.contains(&b.event) {
            found.push(Found {
                line: line.to_vec(),
                sizing: true,
                ..Found::default()
            });
        }
        return;
    }
    if let Some(rules) = &tap.rules {
        if let Some(stage) = std::str::from_utf8(line)
            .ok()
            .and_then(|l| rules.classify(l))
        {
            found.push(Found {
                stage: stage.to_string(),
                line: line.to_vec(),
                ..Found::default()
            });
        }
    }
}

/// Reads the rule file once, when the library is loaded (see `crate::rules_file`). Without
/// `VRAMLEDGER_RULES` nothing is read yet: the settings are still read on first use.
pub fn init_at_load() {
    prime();
    let named = config::var(c"VRAMLEDGER_RULES").is_some_and(|r| !r.is_empty());
    if !named || config::disabled_now() || config::disabled() || !config::get().tap {
        return;
    }
    let rules = load_rules();
    let mut tap = TAP.lock();
    tap.rules_tried = true;
    tap.rules = rules;
}

fn load_rules() -> Option<Rules> {
    let path = config::get().rules.as_ref()?;
    let refused = |why: String| {
        guard::warn(&format!(
            "VRAMLEDGER_RULES={path}: {why}; the rule file is ignored"
        ));
        set_mode(1);
        None
    };
    match crate::rules_file::read(path) {
        Ok(text) => match Rules::parse(&text) {
            Ok(r) => Some(r),
            Err(e) => refused(e.to_string()),
        },
        Err(why) => refused(why),
    }
}

/// In a forked child: partial lines and rank states stay with the parent.
pub fn reset_in_child() {
    TAP.reset_in_child();
    for which in 0..2 {
        set_pending(which, false);
    }
    prime();
}

/// The tap made ready for this process (at load, and in a forked child): whose process its
/// state is, then, unless vramledger is off, the state itself with its partial-line buffers
/// as large as a line kept can be, before the program runs: a `write` from a signal handler
/// (async-signal-safe, and Python's faulthandler does it) that interrupted this thread inside
/// `malloc` must find nothing to allocate on the tap's path, or it waits for the lock the
/// thread it interrupted holds.
fn prime() {
    // SAFETY: getpid has no preconditions.
    TAP_PID.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    if config::disabled_now() {
        return;
    }
    let mut tap = TAP.lock();
    for carry in &mut tap.carry {
        carry.reserve(settings::MAX_LINE + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A quick bit says exactly what `needs_look` would conclude without the prefilter: grammar
    /// only and nothing pending on that fd; the tap off is told apart from "ask".
    #[test]
    fn the_quick_bits_follow_the_mode_and_the_pending_lines() {
        for mode in 0..=3u8 {
            for p in 0..4u8 {
                let pending = [p & 1 != 0, p & 2 != 0];
                let q = quick_for(mode, pending);
                for (which, pending) in pending.iter().enumerate() {
                    assert_eq!(q & (1 << which) != 0, mode == 1 && !pending);
                }
                assert_eq!(q & OFF != 0, mode == 3, "mode {mode}");
                assert_eq!(q == 0, mode == 0 || mode == 2 || (mode == 1 && p == 3));
            }
        }
    }
}
