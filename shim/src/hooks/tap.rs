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

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

use vramledger_engines::log::settings::{self, SettingsKind};
use vramledger_engines::log::{self, event as ev, LineKind, Rules, StageTracker};
use vramledger_engines::redact;
use vramledger_format::Api;

use super::tap_filter;
use crate::forksafe::ForkSafeMutex;
use crate::{boundary, config, guard, real, samples};

type WriteFn = unsafe extern "C" fn(c_int, *const c_void, usize) -> isize;

static REAL_WRITE: AtomicUsize = AtomicUsize::new(0);
static PENDING: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];
// 0 unknown, 1 on (grammar only), 2 on with rules, 3 off.
static MODE: AtomicU8 = AtomicU8::new(0);
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
fn real_write() -> Option<WriteFn> {
    let mut p = REAL_WRITE.load(Ordering::Acquire);
    if p == 0 {
        p = find_real(&REAL_WRITE, c"write");
    }
    // SAFETY: the next `write` after vramledger is libc's, with this signature.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, WriteFn>(p) })
}

/// The next definition of `name` after vramledger, found once (errno kept).
#[cold]
fn find_real(slot: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    // SAFETY: errno is thread-local; the lookup must not change what the caller sees.
    let saved = unsafe { *libc::__errno_location() };
    let p = real::real_dlsym(libc::RTLD_NEXT, name);
    slot.store(p, Ordering::Release);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    p
}

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
    MODE.store(m, Ordering::Relaxed);
    m
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: usize) -> isize {
    let Some(f) = real_write() else {
        // SAFETY: errno is thread-local; EIO says the write did not happen.
        unsafe { *libc::__errno_location() = libc::EIO };
        return -1;
    };
    // SAFETY: the caller's own arguments, passed on unchanged.
    let rc = unsafe { f(fd, buf, count) };
    if rc > 0 && (fd == 1 || fd == 2) {
        // SAFETY: the real write just read these `rc` ≤ `count` bytes from `buf`.
        observe(fd, unsafe {
            std::slice::from_raw_parts(buf as *const u8, rc as usize)
        });
    }
    rc
}

type WritevFn = unsafe extern "C" fn(c_int, *const libc::iovec, c_int) -> isize;
static REAL_WRITEV: AtomicUsize = AtomicUsize::new(0);

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const libc::iovec, iovcnt: c_int) -> isize {
    let mut p = REAL_WRITEV.load(Ordering::Acquire);
    if p == 0 {
        p = find_real(&REAL_WRITEV, c"writev");
    }
    if p == 0 {
        // SAFETY: errno is thread-local; EIO says the write did not happen.
        unsafe { *libc::__errno_location() = libc::EIO };
        return -1;
    }
    // SAFETY: the next `writev` after vramledger is libc's, with this signature; the caller's
    // own arguments, passed on unchanged.
    let rc = unsafe { std::mem::transmute::<usize, WritevFn>(p)(fd, iov, iovcnt) };
    if rc > 0 && (fd == 1 || fd == 2) && !iov.is_null() && iovcnt > 0 {
        // SAFETY: the real writev read the array and took `rc` bytes from its buffers, in order.
        let iovs = unsafe { std::slice::from_raw_parts(iov, iovcnt as usize) };
        let mut left = rc as usize;
        for v in iovs {
            if left == 0 {
                break;
            }
            let n = v.iov_len.min(left);
            if n > 0 {
                // SAFETY: the first `n` bytes of this buffer were taken by the real writev.
                observe(fd, unsafe {
                    std::slice::from_raw_parts(v.iov_base as *const u8, n)
                });
            }
            left -= n;
        }
    }
    rc
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
    if (fd == 1 || fd == 2) && mode() != 3 {
        let which = (fd - 1) as usize;
        guard::record(|| {
            let mut tap = TAP.lock();
            tap.carry[which].clear();
            tap.skipping[which] = true;
            PENDING[which].store(true, Ordering::Relaxed);
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
    let ends_line = matches!(bytes.last(), Some(b'\n' | b'\r'));
    !ends_line
        || with_rules
        || PENDING[(fd - 1) as usize].load(Ordering::Relaxed)
        || tap_filter::may_match(bytes)
}

/// The slow path, after the write: lines are assembled and classified; `errno` is kept.
#[cold]
fn look(which: usize, bytes: &[u8]) {
    // SAFETY: errno is thread-local; the caller must see the real write's errno.
    let saved = unsafe { *libc::__errno_location() };
    guard::record(|| slow_path(which, bytes));
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
        PENDING[which].store(!carry.is_empty() || skipping, Ordering::Relaxed);
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
                MODE.store(3, Ordering::Relaxed);
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
        MODE.store(1, Ordering::Relaxed);
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
    for p in &PENDING {
        p.store(false, Ordering::Relaxed);
    }
}
