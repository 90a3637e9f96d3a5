//! What keeps a journal truncated by someone else from killing the target.
//!
//! Records are stored through a shared mapping (no system call per record, and a `kill -9`
//! loses nothing already copied). Pages of a mapping past the end of its file fault with
//! SIGBUS, so when another process truncates the journal the next store would kill the
//! target. A SIGBUS handler, installed when the first chunk is mapped, acts only on faults
//! that are the journal's:
//! - a fault raised by the kernel whose address lies inside a mapped journal chunk, or
//! - the same fault passed on by a handler the target installed later that re-raises it
//!   with `raise` (Python's faulthandler does so after printing its traceback): a SIGBUS
//!   sent by this very process while the journal file is shorter than what was reserved.
//!
//! Then it replaces the faulting chunk (or, for a re-raised fault, every chunk reaching past
//! the end of the file) with anonymous memory, stops recording (one warning) and returns:
//! the interrupted store completes into memory nobody reads, and the target goes on. Every
//! other SIGBUS goes to the disposition that was there before, as exactly as a handler can:
//! a handler is called with the same arguments under the mask it asked for (and
//! `SA_RESETHAND` honoured), the default or an ignored disposition is restored and the fault
//! happens again (or the signal is raised again), so the target dies as it would have.
//!
//! Everything here is async-signal-safe: atomics, `mmap`, `fstat`, `sigaction`, raw `write`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::chunks::{self, BASES, CHUNK, CHUNKS, IN_HANDLER, MAX_CHUNKS, RETIRING};

static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The disposition found at install time (written once, before the handler can run).
static mut PREVIOUS: Option<libc::sigaction> = None;
/// Set when the previous disposition had SA_RESETHAND and was used once.
static RESET: AtomicBool = AtomicBool::new(false);
static FAULTS_HANDLED: AtomicUsize = AtomicUsize::new(0);

/// Installs the handler once per process image (a forked child keeps it; `exec` resets it).
pub fn install() {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: sigaction with zeroed, then filled, structures; PREVIOUS is written here only,
    // before our handler is installed, and only read by the handler afterwards.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
            return;
        }
        PREVIOUS = Some(old);
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_sigbus as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(libc::SIGBUS, &act, std::ptr::null_mut());
    }
}

/// SIGBUS faults of the journal absorbed so far in this process.
pub fn faults_handled() -> usize {
    FAULTS_HANDLED.load(Ordering::Relaxed)
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: errno is thread-local; the interrupted code must find it unchanged.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: `info` and `ctx` are the kernel's, for this SA_SIGINFO handler.
    let ours = unsafe { absorb(info) };
    if !ours {
        // SAFETY: as above; the previous disposition gets what the kernel gave us.
        unsafe { chain(sig, info, ctx) };
    }
    // SAFETY: as for the read above.
    unsafe { *libc::__errno_location() = saved };
}

/// True when this SIGBUS was the journal's and has been made harmless.
unsafe fn absorb(info: *mut libc::siginfo_t) -> bool {
    if info.is_null() {
        return false;
    }
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let info = unsafe { &*info };
    if info.si_code > 0 {
        // SAFETY: for a fault (si_code > 0) the kernel fills si_addr.
        let addr = unsafe { info.si_addr() } as usize;
        return replace_chunks(|base| addr >= base && addr < base + CHUNK as usize) > 0;
    }
    // A re-raised fault: sent by this process (tkill) while the journal is short.
    // SAFETY: for SI_TKILL the kernel fills si_pid; getpid has no preconditions.
    if info.si_code != libc::SI_TKILL || unsafe { info.si_pid() } != unsafe { libc::getpid() } {
        return false;
    }
    let Some(size) = super::state::file_size() else {
        return false;
    };
    if size >= chunks::RESERVED_END.load(Ordering::Acquire) {
        return false;
    }
    replace_chunks_past(size) > 0
}

/// Replaces every mapped chunk whose base satisfies `pick` with anonymous memory. A chunk
/// that another thread's handler is replacing at this moment counts too: this one waits for
/// it (one `mmap` away), so the interrupted store finds anonymous memory when it resumes.
fn replace_chunks(pick: impl Fn(usize) -> bool) -> usize {
    let mut n = 0;
    for (slot, base) in CHUNKS.iter().zip(BASES.iter()).take(MAX_CHUNKS) {
        let p = slot.load(Ordering::Acquire);
        if p == IN_HANDLER {
            let b = base.load(Ordering::Acquire);
            if b != 0 && pick(b) {
                while slot.load(Ordering::Acquire) == IN_HANDLER {
                    // SAFETY: sched_yield has no preconditions (async-signal-safe).
                    unsafe { libc::sched_yield() };
                }
                n += 1;
            }
            continue;
        }
        if p.is_null() || p == RETIRING || !pick(p as usize) {
            continue;
        }
        if slot
            .compare_exchange(p, IN_HANDLER, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            continue; // being retired: nobody stores into it any more
        }
        // SAFETY: [p, p + CHUNK) is our own mapping, claimed above so that nobody unmaps it
        // meanwhile; MAP_FIXED replaces it in one step.
        let m = unsafe {
            libc::mmap(
                p.cast(),
                CHUNK as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        slot.store(p, Ordering::Release);
        if m != libc::MAP_FAILED {
            n += 1;
        }
    }
    if n > 0 {
        FAULTS_HANDLED.fetch_add(1, Ordering::Relaxed);
        super::state::fail_from_signal();
    }
    n
}

/// Replaces every mapped chunk that reaches past `size` bytes of the file.
fn replace_chunks_past(size: u64) -> usize {
    let mut bases = [0usize; 8];
    let mut found = 0;
    for (k, base) in BASES.iter().enumerate() {
        let b = base.load(Ordering::Acquire);
        if b != 0 && (k as u64 + 1) * CHUNK > size && found < bases.len() {
            bases[found] = b;
            found += 1;
        }
    }
    replace_chunks(|b| bases[..found].contains(&b))
}

/// Passes a SIGBUS that is not the journal's to the disposition that was there before.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: PREVIOUS was written before this handler was installed and never again.
    let prev = unsafe { (*std::ptr::addr_of!(PREVIOUS)).as_ref().copied() };
    let prev = match prev {
        Some(p)
            if !RESET.load(Ordering::Acquire)
                && p.sa_sigaction != libc::SIG_DFL
                && p.sa_sigaction != libc::SIG_IGN =>
        {
            p
        }
        other => {
            let ignored = other.is_some_and(|p| p.sa_sigaction == libc::SIG_IGN)
                && !RESET.load(Ordering::Acquire);
            // SAFETY: info is valid (SA_SIGINFO).
            let sent = info.is_null() || unsafe { (*info).si_code } <= 0;
            if sent && ignored {
                return; // an ignored signal that was sent: nothing happens, as before
            }
            // SAFETY: restoring the default disposition.
            unsafe {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigemptyset(&mut dfl.sa_mask);
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
            if sent {
                // Sent, not a fault: it would not happen again by itself. Blocked while we
                // run, it is delivered with the default action as soon as this returns.
                // SAFETY: raise has no preconditions.
                unsafe { libc::raise(sig) };
            }
            // A fault happens again on return and meets the default action (a core dump, as
            // without vramledger; the kernel never lets a fault be ignored either).
            return;
        }
    };
    let handler = prev.sa_sigaction;
    // SAFETY: the mask the previous handler asked for, on top of the interrupted code's own
    // (what the kernel would have set had it called that handler directly).
    unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        if !ctx.is_null() {
            let uc = &*(ctx as *const libc::ucontext_t);
            mask = uc.uc_sigmask;
        }
        for s in 1..=64 {
            if libc::sigismember(&prev.sa_mask, s) == 1 {
                libc::sigaddset(&mut mask, s);
            }
        }
        if prev.sa_flags & libc::SA_NODEFER == 0 {
            libc::sigaddset(&mut mask, sig);
        } else {
            libc::sigdelset(&mut mask, sig);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &mask, &mut old);
        if prev.sa_flags & libc::SA_RESETHAND != 0 {
            RESET.store(true, Ordering::Release);
        }
        if prev.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(handler);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
            f(sig);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}
