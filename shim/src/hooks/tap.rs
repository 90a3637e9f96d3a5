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

#![allow(non_snake_case)]

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

use vramledger_engines::log::settings::{self, SettingsKind};
use vramledger_engines::log::{self, LineKind, Rules, StageTracker};
use vramledger_format::Api;

use crate::entry::real;
use crate::forksafe::ForkSafeMutex;
use crate::{config, guard, recorder, stages};

type WriteFn = unsafe extern "C" fn(c_int, *const c_void, usize) -> isize;

static REAL_WRITE: AtomicUsize = AtomicUsize::new(0);
static PENDING: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];
// 0 unknown, 1 on (grammar only), 2 on with rules, 3 off.
static MODE: AtomicU8 = AtomicU8::new(0);
/// A partial line longer than this is dropped (no log line is that long).
const MAX_CARRY: usize = 16 * 1024;

#[derive(Default)]
struct Tap {
    carry: [Vec<u8>; 2],
    tracker: StageTracker,
    rules: Option<Rules>,
    rules_tried: bool,
}

static TAP: ForkSafeMutex<Tap> = ForkSafeMutex::new();

fn real_write() -> Option<WriteFn> {
    let mut p = REAL_WRITE.load(Ordering::Acquire);
    if p == 0 {
        p = real::real_dlsym(libc::RTLD_NEXT, c"write");
        REAL_WRITE.store(p, Ordering::Release);
    }
    // SAFETY: the next `write` after vramledger is libc's, with this signature.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, WriteFn>(p) })
}

fn mode() -> u8 {
    let m = MODE.load(Ordering::Relaxed);
    if m != 0 {
        return m;
    }
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
    // The prefilter reads the caller's bytes before the call (while they are still in cache);
    // it changes nothing. Recording waits until after the call, on the bytes really written.
    let tapped = if (fd == 1 || fd == 2) && !buf.is_null() && count > 0 {
        let m = mode();
        // SAFETY: the caller hands write(2) `count` readable bytes at `buf`.
        m != 3
            && needs_look(
                fd,
                unsafe { std::slice::from_raw_parts(buf as *const u8, count) },
                m == 2,
            )
    } else {
        false
    };
    let rc = unsafe { f(fd, buf, count) };
    if tapped && rc > 0 {
        // SAFETY: the real write just read `rc` ≤ `count` bytes from `buf`.
        let bytes = unsafe { std::slice::from_raw_parts(buf as *const u8, rc as usize) };
        look((fd - 1) as usize, bytes);
    }
    rc
}

/// The fast path: false for a whole line that the prefilter rejects, with no partial line
/// pending and no rule file (that is almost every write a server makes).
#[inline]
fn needs_look(fd: c_int, bytes: &[u8], with_rules: bool) -> bool {
    let ends_line = matches!(bytes.last(), Some(b'\n' | b'\r'));
    !ends_line
        || with_rules
        || PENDING[(fd - 1) as usize].load(Ordering::Relaxed)
        || log::may_match(bytes)
}

/// The slow path, after the write: lines are assembled and classified; `errno` is kept.
#[cold]
fn look(which: usize, bytes: &[u8]) {
    // SAFETY: errno is thread-local; the caller must see the real write's errno.
    let saved = unsafe { *libc::__errno_location() };
    guard::record(|| slow_path(which, bytes));
    unsafe { *libc::__errno_location() = saved };
}

struct Found {
    stage: String,
    line: Vec<u8>,
    numbers: [Option<f64>; 2],
    failure: bool,
    /// An engine settings line: recorded as such, never a stage.
    settings: Option<SettingsKind>,
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
        let mut data = std::mem::take(&mut tap.carry[which]);
        if data.len() > settings::MAX_LINE {
            // A settings line past its bound: its rest is dropped up to the line's end.
            match bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(end) => data.extend_from_slice(&bytes[end..]),
                None => {
                    tap.carry[which] = data;
                    return;
                }
            }
        } else {
            data.extend_from_slice(bytes);
        }
        let mut start = 0;
        let grammar_only = tap.rules.is_none();
        for (i, &b) in data.iter().enumerate() {
            if b == b'\n' || b == b'\r' {
                classify_line(&mut tap, &data[start..i], &mut found);
                start = i + 1;
                if grammar_only && found.last().is_some_and(|f| f.stage == log::stage::SERVING) {
                    start = data.len(); // serving: nothing after it is looked at
                    break;
                }
            }
        }
        let rest = &data[start..];
        let mut carry = Vec::new();
        if !rest.is_empty() && rest.len() <= MAX_CARRY {
            carry.extend_from_slice(rest);
        } else if rest.len() > MAX_CARRY && settings::detect(rest).is_some() {
            // Settings lines run to several KiB: kept up to their own bound (+1 byte says cut).
            carry.extend_from_slice(&rest[..rest.len().min(settings::MAX_LINE + 1)]);
        }
        PENDING[which].store(!carry.is_empty(), Ordering::Relaxed);
        tap.carry[which] = carry;
    }
    // Outside the lock: entering a stage samples free memory through the driver.
    for f in found {
        if let Some(kind) = f.settings {
            recorder::settings_line(kind, &f.line);
        } else if f.failure {
            recorder::warning(&String::from_utf8_lossy(&f.line));
        } else {
            stages::enter(&f.stage, Api::VramledgerLogLine, f.numbers, &f.line);
            if f.stage == log::stage::SERVING && MODE.load(Ordering::Relaxed) == 1 {
                // The engine is serving: no startup line follows, and serving is when a
                // server writes the most. The grammar-only tap steps aside (a rule file keeps
                // it on; `vramledger_stage` always works).
                MODE.store(3, Ordering::Relaxed);
            }
        }
    }
}

fn classify_line(tap: &mut Tap, line: &[u8], found: &mut Vec<Found>) {
    if line.is_empty() {
        return;
    }
    if let Some(kind) = settings::detect(line) {
        found.push(Found {
            stage: String::new(),
            line: line.to_vec(),
            numbers: [None, None],
            failure: false,
            settings: Some(kind),
        });
        return;
    }
    if let Some(b) = log::classify_bytes(line) {
        match b.kind {
            LineKind::Boundary => {
                if let Some(t) = tap.tracker.observe(&b) {
                    found.push(Found {
                        stage: t.to.to_string(),
                        line: line.to_vec(),
                        numbers: [b.numbers.avail_mem_gib, b.numbers.mem_usage_gib],
                        failure: false,
                        settings: None,
                    });
                }
            }
            LineKind::Failure => found.push(Found {
                stage: String::new(),
                line: line.to_vec(),
                numbers: [None, None],
                failure: true,
                settings: None,
            }),
            LineKind::Progress => {}
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
                numbers: [None, None],
                failure: false,
                settings: None,
            });
        }
    }
}

fn load_rules() -> Option<Rules> {
    let path = config::get().rules.as_ref()?;
    match std::fs::read_to_string(path) {
        Ok(text) => match Rules::parse(&text) {
            Ok(r) => Some(r),
            Err(e) => {
                guard::warn(&format!(
                    "VRAMLEDGER_RULES={path}: {e}; the rule file is ignored"
                ));
                MODE.store(1, Ordering::Relaxed);
                None
            }
        },
        Err(e) => {
            guard::warn(&format!(
                "VRAMLEDGER_RULES={path}: cannot read it: {e}; the rule file is ignored"
            ));
            MODE.store(1, Ordering::Relaxed);
            None
        }
    }
}

/// In a forked child: partial lines and rank states stay with the parent.
pub fn reset_in_child() {
    TAP.reset_in_child();
    for p in &PENDING {
        p.store(false, Ordering::Relaxed);
    }
}
