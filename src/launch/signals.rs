//! `vramledger run`'s signal relay: SIGINT, SIGTERM and SIGHUP sent to vramledger go to the
//! command, and vramledger stays to write the report. The thin layer over the C signal API.
//!
//! The command runs in vramledger's own process group (so it keeps the terminal). A signal
//! the kernel sends to the whole foreground group — Ctrl-C, Ctrl-\, a terminal hangup —
//! reaches the command directly, so it is not relayed (it would arrive twice); one sent to
//! vramledger alone (`kill PID`, a service manager, a batch scheduler) is relayed to the
//! command. This is sudo's rule. A signal that was ignored when vramledger started stays
//! ignored, for vramledger and the command (`nohup vramledger run ...` keeps working).
//!
//! The command's process is not reaped until its pid is forgotten here, so a relay can never
//! reach a recycled pid. After it exits the three signals are held until the report is
//! written.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// The signals relayed to the command.
pub const RELAYED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The command's pid while it runs; 0 before it starts and once it has exited.
static CHILD: AtomicI32 = AtomicI32::new(0);
/// Signals (bit per signal number) that arrived before the command started.
static PENDING: AtomicU32 = AtomicU32::new(0);

extern "C" fn relay(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Only async-signal-safe work here: atomics and kill(2).
    if info.is_null() {
        return;
    }
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    let (code, sender) = unsafe { ((*info).si_code, (*info).si_pid()) };
    if code == libc::SI_KERNEL {
        return; // sent to the whole process group: the command has it already
    }
    let child = CHILD.load(Ordering::Acquire);
    if child <= 0 {
        PENDING.fetch_or(1 << sig, Ordering::AcqRel);
        return;
    }
    if sender == child {
        return; // the command signalled vramledger: never bounce it back
    }
    // SAFETY: kill(2) is async-signal-safe; `child` is a live or unreaped pid (see `wait`).
    unsafe {
        libc::kill(child, sig);
    }
}

/// Installs the relay for every signal that is not ignored. Call before the command starts.
pub fn install() {
    for sig in RELAYED {
        // SAFETY: sigaction is plain C data; all zeroes is a valid value to be overwritten.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action makes sigaction(2) only read the current disposition.
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
            continue;
        }
        if old.sa_sigaction == libc::SIG_IGN {
            continue;
        }
        // SAFETY: the handler only touches atomics and calls kill(2); SA_RESTART keeps the
        // CLI's own system calls going through a relayed signal.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = relay as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}

/// The command started as `pid`: relays what arrived before it had a pid.
pub fn started(pid: u32) {
    CHILD.store(pid as i32, Ordering::Release);
    let pending = PENDING.swap(0, Ordering::AcqRel);
    for sig in RELAYED {
        if pending & (1 << sig) != 0 {
            // SAFETY: kill(2) on the command we just started (not yet reaped).
            unsafe {
                libc::kill(pid as i32, sig);
            }
        }
    }
}

/// Waits until the command has exited, without reaping it, then stops relaying: the caller
/// reaps it afterwards (`Child::wait`), so the pid cannot be reused while a relay may run.
pub fn wait_exited(pid: u32) -> std::io::Result<()> {
    loop {
        // SAFETY: siginfo_t is plain C data; all zeroes is a valid value to be overwritten.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid(2) with WNOWAIT only reads the child's state into `info`.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            CHILD.store(0, Ordering::Release);
            return Err(e);
        }
    }
    CHILD.store(0, Ordering::Release);
    Ok(())
}
