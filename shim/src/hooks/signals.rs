//! `sigaction`, `signal` and the older ways to install a handler (`bsd_signal`, `sysv_signal`
//! and `__sysv_signal`, which a C program built to a strict standard calls for `signal`,
//! `sigset`), interposed so that the tap knows when it runs inside a signal
//! handler: a handler may call `write` (it is async-signal-safe, and Python's faulthandler
//! dumps a traceback with it, after an abort that can come from inside `malloc`), but the
//! tap's slow path allocates and reads the driver, which is not safe there. Inside a handler
//! the tap passes the bytes on and looks at nothing ([`in_handler`]).
//!
//! A handler the program installs is called through a trampoline of the same kind (one for
//! `sa_handler`, one for `sa_sigaction`): the kernel gets the program's own flags and mask,
//! the trampoline counts the handler's depth on its thread and calls the program's function
//! with the arguments the kernel gave, and every reading of the handler (the old action of
//! `sigaction`, the return of `signal`) shows the program's function, never a trampoline.
//! `SIG_DFL`, `SIG_IGN`, `SIGKILL`, `SIGSTOP` and signal numbers out of range pass through
//! untouched, and so does everything with `VRAMLEDGER_DISABLE=1` at load. No lock anywhere
//! (`sigaction` may be called from a handler): one atomic slot per signal and trampoline.
//!
//! Known limits: a handler left by `siglongjmp` counts as left when the next handler on its
//! thread runs, or when the tap next looks from a frame above the one the handler entered on
//! (from an alternate signal stack: when that stack lies below the thread's own); until then
//! that thread's lines are passed on unread (the program is never affected). Two threads
//! changing one signal's handler at the same instant may read each other's as the old one.
//! A `vfork` child's `sigaction` passes through unwrapped (its memory is the parent's until it
//! execs, and its handlers are not). `sigvec` (not in glibc's API since 2.21) is not
//! interposed.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::real;

/// Signal numbers 1 to 64 (Linux's `_NSIG` is 65).
const SIGNALS: usize = 65;

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: AtomicUsize = AtomicUsize::new(0);
/// The program's `sa_handler` of each signal whose kernel action is [`plain_trampoline`].
static PLAIN: [AtomicUsize; SIGNALS] = [EMPTY; SIGNALS];
/// The program's `sa_sigaction` of each signal whose kernel action is [`info_trampoline`].
static INFO: [AtomicUsize; SIGNALS] = [EMPTY; SIGNALS];
/// Handlers installed from now on are wrapped (set at load unless vramledger is off).
static WRAP: AtomicBool = AtomicBool::new(false);
static REAL_SIGACTION: AtomicUsize = AtomicUsize::new(0);

/// A libc function that installs a handler as `signal` does (a signal and a handler in, the
/// previous disposition out): its name, and its address once found.
struct SignalLike {
    name: &'static std::ffi::CStr,
    real: AtomicUsize,
}

impl SignalLike {
    const fn new(name: &'static std::ffi::CStr) -> SignalLike {
        SignalLike {
            name,
            real: AtomicUsize::new(0),
        }
    }

    fn real(&self) -> Option<SignalFn> {
        let p = real_of(&self.real, self.name);
        // SAFETY: the next function of this name after vramledger is libc's `signal`,
        // `bsd_signal`, `sysv_signal`, `__sysv_signal` or `sigset`, each with this signature.
        (p != 0).then(|| unsafe { std::mem::transmute::<usize, SignalFn>(p) })
    }
}

static SIGNAL: SignalLike = SignalLike::new(c"signal");
static BSD_SIGNAL: SignalLike = SignalLike::new(c"bsd_signal");
static SYSV_SIGNAL: SignalLike = SignalLike::new(c"sysv_signal");
static SYSV_SIGNAL_INTERNAL: SignalLike = SignalLike::new(c"__sysv_signal");
static SIGSET: SignalLike = SignalLike::new(c"sigset");

/// `sigset`'s disposition that blocks the signal instead of installing anything (glibc's
/// `SIG_HOLD`).
const SIG_HOLD: libc::sighandler_t = 2;

type SigactionFn =
    unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
type SignalFn = unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;
type PlainFn = extern "C" fn(c_int);
type InfoFn = extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void);

thread_local! {
    /// Handlers running on this thread, and the stack address the outermost one entered at.
    static DEPTH: Cell<(u32, usize)> = const { Cell::new((0, 0)) };
}

/// Whether this thread is running a signal handler the program installed.
#[inline]
pub fn in_handler() -> bool {
    let (depth, entry) = DEPTH.with(Cell::get);
    if depth == 0 {
        return false;
    }
    let here = stack_address();
    if here >= entry {
        // Back above the handler's first frame: it was left by a long jump.
        DEPTH.with(|d| d.set((0, 0)));
        return false;
    }
    true
}

/// An address in the caller's frame (the stack grows down on every target built for).
#[inline(always)]
fn stack_address() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// Runs `call` counted as a handler on this thread (a count that a long jump left behind, the
/// stack back above its entry, counts as none).
#[inline(always)]
fn counted(call: impl FnOnce()) {
    let here = stack_address();
    let (depth, entry) = match DEPTH.with(Cell::get) {
        (depth, entry) if depth > 0 && here < entry => (depth, entry),
        _ => (0, here),
    };
    DEPTH.with(|d| d.set((depth + 1, entry)));
    call();
    DEPTH.with(|d| d.set((depth, if depth == 0 { 0 } else { entry })));
}

/// What a slot holds when it names a function of the program's (not a disposition, and never
/// a trampoline, which would call itself).
fn program_function(h: usize) -> Option<usize> {
    let ours = [
        plain_trampoline as PlainFn as usize,
        info_trampoline as InfoFn as usize,
    ];
    (h > libc::SIG_IGN && h != libc::SIG_ERR && !ours.contains(&h)).then_some(h)
}

extern "C" fn plain_trampoline(sig: c_int) {
    let Some(h) = slot(&PLAIN, sig).and_then(|s| program_function(s.load(Ordering::Acquire)))
    else {
        return; // never: a function is stored before the trampoline is installed
    };
    // SAFETY: the program installed `h` as this signal's `sa_handler` (no SA_SIGINFO).
    let f = unsafe { std::mem::transmute::<usize, PlainFn>(h) };
    counted(|| f(sig));
}

extern "C" fn info_trampoline(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let Some(h) = slot(&INFO, sig).and_then(|s| program_function(s.load(Ordering::Acquire))) else {
        return; // never, as above
    };
    // SAFETY: the program installed `h` as this signal's `sa_sigaction` (with SA_SIGINFO);
    // the kernel's own arguments are passed on.
    let f = unsafe { std::mem::transmute::<usize, InfoFn>(h) };
    counted(|| f(sig, info, ctx));
}

fn slot(slots: &[AtomicUsize; SIGNALS], sig: c_int) -> Option<&AtomicUsize> {
    usize::try_from(sig).ok().and_then(|s| slots.get(s))
}

/// Whether a handler for `sig` may be wrapped (never by a `vfork` child, which shares the
/// parent's slots until it execs: its handler must not become the parent's).
fn wrappable(sig: c_int) -> bool {
    WRAP.load(Ordering::Relaxed)
        && sig > 0
        && (sig as usize) < SIGNALS
        && sig != libc::SIGKILL
        && sig != libc::SIGSTOP
        && super::tap::own_process()
}

/// Decides at load whether handlers are wrapped, and finds the real functions while finding
/// them is safe (not inside a handler).
pub fn init_at_load() {
    let _ = real_sigaction();
    for f in [
        &SIGNAL,
        &BSD_SIGNAL,
        &SYSV_SIGNAL,
        &SYSV_SIGNAL_INTERNAL,
        &SIGSET,
    ] {
        let _ = f.real();
    }
    WRAP.store(!crate::config::disabled_now(), Ordering::Relaxed);
}

fn real_sigaction() -> Option<SigactionFn> {
    let p = real_of(&REAL_SIGACTION, c"sigaction");
    // SAFETY: the next `sigaction` after vramledger is libc's, with this signature.
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, SigactionFn>(p) })
}

fn real_of(slot: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    let p = slot.load(Ordering::Acquire);
    if p != 0 {
        return p;
    }
    // SAFETY: errno is thread-local; the lookup must not change what the caller sees.
    let saved = unsafe { *libc::__errno_location() };
    let p = real::real_dlsym(libc::RTLD_NEXT, name);
    slot.store(p, Ordering::Release);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    p
}

/// The program's function behind kernel handler `h` (`h` itself when it is not a
/// trampoline), given each slot's value before this call changed it.
fn shown(h: usize, plain_before: usize, info_before: usize) -> usize {
    if h == plain_trampoline as PlainFn as usize {
        plain_before
    } else if h == info_trampoline as InfoFn as usize {
        info_before
    } else {
        h
    }
}

/// # Safety
/// The caller's arguments of `sigaction(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let Some(real) = real_sigaction() else {
        // SAFETY: errno is thread-local; ENOSYS says nothing was changed.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        return -1;
    };
    let load = |s: &[AtomicUsize; SIGNALS]| slot(s, sig).map_or(0, |a| a.load(Ordering::Acquire));
    let (mut plain_before, mut info_before) = (load(&PLAIN), load(&INFO));
    // SAFETY: `act`, when not null, points to the caller's action (read, never written).
    let wanted = unsafe { act.as_ref() }.copied();
    let wrapped = match wanted {
        Some(a) if wrappable(sig) && program_function(a.sa_sigaction).is_some() => {
            let info = a.sa_flags & libc::SA_SIGINFO != 0;
            let (slots, tramp) = if info {
                (&INFO, info_trampoline as InfoFn as usize)
            } else {
                (&PLAIN, plain_trampoline as PlainFn as usize)
            };
            // Stored before the kernel can call the trampoline.
            let before = slot(slots, sig).map_or(0, |s| s.swap(a.sa_sigaction, Ordering::AcqRel));
            if info {
                info_before = before;
            } else {
                plain_before = before;
            }
            Some((
                libc::sigaction {
                    sa_sigaction: tramp,
                    ..a
                },
                slots,
                before,
            ))
        }
        _ => None,
    };
    let act_passed = wrapped
        .as_ref()
        .map_or(act, |(w, _, _)| w as *const libc::sigaction);
    // SAFETY: libc's sigaction with the caller's old-action pointer and either the caller's
    // action or a copy of it whose handler is a trampoline.
    let rc = unsafe { real(sig, act_passed, old) };
    if rc != 0 {
        if let Some((_, slots, before)) = wrapped {
            if let Some(s) = slot(slots, sig) {
                s.store(before, Ordering::Release); // nothing was installed
            }
        }
        return rc;
    }
    // SAFETY: on success libc filled `old`, when not null, with the previous action.
    if let Some(o) = unsafe { old.as_mut() } {
        o.sa_sigaction = shown(o.sa_sigaction, plain_before, info_before);
    }
    rc
}

/// # Safety
/// The caller's arguments of `signal(2)`.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: the caller's arguments.
    unsafe { install_like(&SIGNAL, sig, handler) }
}

/// # Safety
/// The caller's arguments of `bsd_signal(3)` (`signal`'s semantics).
#[no_mangle]
pub unsafe extern "C" fn bsd_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: the caller's arguments.
    unsafe { install_like(&BSD_SIGNAL, sig, handler) }
}

/// # Safety
/// The caller's arguments of `sysv_signal(3)` (one-shot: the kernel resets the handler).
#[no_mangle]
pub unsafe extern "C" fn sysv_signal(
    sig: c_int,
    handler: libc::sighandler_t,
) -> libc::sighandler_t {
    // SAFETY: the caller's arguments.
    unsafe { install_like(&SYSV_SIGNAL, sig, handler) }
}

/// # Safety
/// The caller's arguments of `sysv_signal(3)`: glibc's `signal.h` sends a program's `signal`
/// here when it is built to a strict standard (`-std=c11`, no `_DEFAULT_SOURCE`).
#[no_mangle]
pub unsafe extern "C" fn __sysv_signal(
    sig: c_int,
    handler: libc::sighandler_t,
) -> libc::sighandler_t {
    // SAFETY: the caller's arguments.
    unsafe { install_like(&SYSV_SIGNAL_INTERNAL, sig, handler) }
}

/// # Safety
/// The caller's arguments of `sigset(3)` (`SIG_HOLD` blocks the signal, installs nothing).
#[no_mangle]
pub unsafe extern "C" fn sigset(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: the caller's arguments.
    unsafe { install_like(&SIGSET, sig, handler) }
}

/// # Safety
/// `sig` and `handler` are the caller's arguments of `f`.
unsafe fn install_like(
    f: &SignalLike,
    sig: c_int,
    handler: libc::sighandler_t,
) -> libc::sighandler_t {
    let Some(real) = f.real() else {
        // SAFETY: errno is thread-local; ENOSYS says nothing was changed.
        unsafe { *libc::__errno_location() = libc::ENOSYS };
        return libc::SIG_ERR;
    };
    let load = |s: &[AtomicUsize; SIGNALS]| slot(s, sig).map_or(0, |a| a.load(Ordering::Acquire));
    let (plain_before, info_before) = (load(&PLAIN), load(&INFO));
    // SAFETY: libc's function with the caller's own arguments (libc sets its flags and mask).
    let prev = unsafe { real(sig, handler) };
    if prev == libc::SIG_ERR {
        return prev;
    }
    let prev = shown(prev, plain_before, info_before);
    if wrappable(sig) && handler != SIG_HOLD && program_function(handler).is_some() {
        wrap_installed(sig, handler);
    }
    prev
}

/// `handler`, just installed by libc's `signal` (or one like it) with libc's flags and mask,
/// is put behind the plain trampoline with the same flags and mask (until then it runs
/// unwrapped).
fn wrap_installed(sig: c_int, handler: usize) {
    let Some(real) = real_sigaction() else {
        return;
    };
    // SAFETY: errno is thread-local; these calls must not change what the caller sees.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: an all-zero sigaction is a valid value of the C struct.
    let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: libc's sigaction reading the current action into `now`.
    let read = unsafe { real(sig, std::ptr::null(), &mut now) };
    if read == 0 && now.sa_sigaction == handler && now.sa_flags & libc::SA_SIGINFO == 0 {
        if let Some(s) = slot(&PLAIN, sig) {
            s.store(handler, Ordering::Release);
            let tramped = libc::sigaction {
                sa_sigaction: plain_trampoline as PlainFn as usize,
                ..now
            };
            // SAFETY: libc's sigaction with the action just read, its handler the trampoline.
            let _ = unsafe { real(sig, &tramped, std::ptr::null_mut()) };
        }
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}
