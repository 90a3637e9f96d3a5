//! PyTorch's pool windows, as the Python hook reports them: which private memory pool a
//! caching-allocator segment made now belongs to.
//!
//! PyTorch routes allocations into a private pool (CUDA graphs, `MemPool`) while a window
//! opened by `beginAllocateToPool(device, pool, filter)` is open, also outside any stream
//! capture: CUDA-graph trees warm up in their pool, `use_mem_pool` routes a thread. The
//! driver sees none of it, so the Python hook (python-boot/vramledger_pools.py) tells this
//! registry through the C API ([`crate::pools_api`]), and [`tag`] applies it to each
//! allocation that PyTorch's allocator makes.
//!
//! The registry mirrors torch's `captures_underway` list: windows in the order they opened,
//! the first one whose filter matches wins (as in torch's `get_pool`), an end closes the first
//! window of that pool. Captures the hook saw are remembered too: while one is open on a
//! thread but its pool routing is paused (`_cuda_endAllocateToPool` inside the capture, as
//! vLLM's and SGLang's symmetric-memory contexts do), the thread's allocations are torch's
//! default pool, not the graph pool the capture heuristic would guess.
//!
//! The lock is held for a list update or a scan of at most [`MAX_WINDOWS`] entries; no
//! driver call happens under it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use vramledger_format::record::flags;
use vramledger_format::{Event, Kind, MemKind, Owner, PoolScope};

use crate::forksafe::ForkSafeMutex;

/// More windows than any real program holds open at once (torch's list has one per capture
/// or `use_mem_pool` in progress); beyond it new windows are not tracked.
pub const MAX_WINDOWS: usize = 256;

/// A pool id, `None` while a capture's pool is not known yet.
pub type PoolId = Option<(u64, u64)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    serial: u64,
    device: i32,
    pool: PoolId,
    scope: PoolScope,
    tid: u32,
}

/// A capture the hook saw begin on a thread, not ended yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Capture {
    tid: u32,
    device: i32,
    serial: u64,
}

/// Where an allocation by PyTorch's allocator goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Into the pool of window `serial` (`pool` when known).
    Pool { serial: u64, pool: PoolId },
    /// Into the default pool, although a stream capture is open on this thread: the hook saw
    /// the capture and its pool routing is paused.
    Default,
    /// The hook knows nothing that applies: the capture-window rules decide.
    Unknown,
}

/// The windows open now.
#[derive(Debug, Default)]
pub struct Registry {
    windows: Vec<Window>,
    captures: Vec<Capture>,
    next_serial: u64,
}

fn same_device(window: i32, alloc: i32) -> bool {
    window < 0 || alloc < 0 || window == alloc
}

impl Registry {
    /// Opens a window; returns its serial number, or `None` when the registry is full.
    pub fn begin(&mut self, tid: u32, device: i32, pool: PoolId, scope: PoolScope) -> Option<u64> {
        if self.windows.len() >= MAX_WINDOWS || self.captures.len() >= MAX_WINDOWS {
            return None;
        }
        self.next_serial += 1;
        let serial = self.next_serial;
        self.windows.push(Window {
            serial,
            device,
            pool,
            scope,
            tid,
        });
        if scope == PoolScope::Capture {
            self.captures.push(Capture {
                tid,
                device,
                serial,
            });
        }
        Some(serial)
    }

    /// Closes the first window of `pool` on `device` (torch's `endAllocateToPool`). With
    /// `capture`, this is the end of the calling thread's latest capture on `device`: the
    /// capture is forgotten, and when no window of `pool` is open, the capture's own window
    /// (whose pool may not have been known at its start) is closed. Returns the serial and
    /// scope of the window closed.
    pub fn end(
        &mut self,
        tid: u32,
        device: i32,
        pool: PoolId,
        capture: bool,
    ) -> Option<(u64, PoolScope)> {
        let mut capture_serial = None;
        if capture {
            if let Some(i) = self
                .captures
                .iter()
                .rposition(|c| c.tid == tid && same_device(c.device, device))
            {
                capture_serial = Some(self.captures.remove(i).serial);
            }
        }
        let by_pool = pool.and_then(|p| {
            self.windows
                .iter()
                .position(|w| w.pool == Some(p) && same_device(w.device, device))
        });
        let at = by_pool.or_else(|| {
            capture_serial.and_then(|s| self.windows.iter().position(|w| w.serial == s))
        })?;
        let w = self.windows.remove(at);
        Some((w.serial, w.scope))
    }

    /// Where an allocation on `device` by thread `tid` goes; `capturing` says a stream capture
    /// is open on that thread (the driver's view).
    pub fn verdict(&self, tid: u32, device: i32, capturing: bool) -> Verdict {
        for w in &self.windows {
            if !same_device(w.device, device) {
                continue;
            }
            let hit = match w.scope {
                PoolScope::AllThreads => true,
                PoolScope::Thread | PoolScope::Stream => w.tid == tid,
                PoolScope::Capture => w.tid == tid && capturing,
            };
            if hit {
                return Verdict::Pool {
                    serial: w.serial,
                    pool: w.pool,
                };
            }
        }
        let known_capture = self
            .captures
            .iter()
            .any(|c| c.tid == tid && same_device(c.device, device));
        if capturing && known_capture {
            Verdict::Default
        } else {
            Verdict::Unknown
        }
    }

    /// Windows and captures held (0: nothing to look up).
    pub fn held(&self) -> usize {
        self.windows.len() + self.captures.len()
    }
}

static REGISTRY: ForkSafeMutex<Registry> = ForkSafeMutex::new();
/// [`Registry::held`], readable without the lock: the allocation fast path.
static HELD: &AtomicUsize = &crate::hot::HOT.pools_held;

/// Runs `f` on the registry and publishes how much it holds.
pub fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut r = REGISTRY.lock();
    let out = f(&mut r);
    HELD.store(r.held(), Ordering::Release);
    out
}

/// Applies the pool windows to an allocation already attributed by module and capture
/// state: device memory made by PyTorch (`torch`) inside a window becomes
/// `torch_graph_pool` with the pool id; inside a paused capture it is `torch`.
#[inline(always)]
pub fn tag(e: &mut Event, torch: bool) {
    if HELD.load(Ordering::Acquire) == 0 || !torch || e.mem != MemKind::Device as u8 {
        return;
    }
    if !matches!(
        e.kind(),
        Some(Kind::Alloc | Kind::AllocFailed | Kind::VmmCreate)
    ) {
        return; // pool creations and the like hold no segment
    }
    let capturing = e.flags & flags::CAPTURE_THIS_THREAD != 0;
    let verdict = REGISTRY.lock().verdict(e.tid, e.device, capturing);
    apply(e, verdict);
}

/// Writes a verdict into an allocation record.
pub fn apply(e: &mut Event, verdict: Verdict) {
    match verdict {
        Verdict::Pool {
            pool: Some((a, b)), ..
        } => {
            e.owner = Owner::TorchGraphPool as u8;
            e.flags |= flags::TORCH_POOL;
            e.arg1 = a;
            e.arg2 = b;
        }
        Verdict::Pool { serial, pool: None } => {
            e.owner = Owner::TorchGraphPool as u8;
            e.flags |= flags::TORCH_POOL_PENDING;
            e.arg1 = serial;
        }
        Verdict::Default => e.owner = Owner::Torch as u8,
        Verdict::Unknown => {}
    }
}

/// What the Python hooks said when they were installed: functions wrapped, torch's version.
static HOOKS: OnceLock<(u64, Vec<u8>)> = OnceLock::new();

/// The hooks announced themselves; true the first time.
pub fn announce(wrapped: u64, version: &[u8]) -> bool {
    HOOKS.set((wrapped, version.to_vec())).is_ok()
}

/// What the hooks announced, if they did.
pub fn announced() -> Option<&'static (u64, Vec<u8>)> {
    HOOKS.get()
}

/// In a forked child: torch's windows belonged to the parent's threads.
pub fn reset_in_child() {
    REGISTRY.reset_in_child();
    HELD.store(0, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    const T1: u32 = 100;
    const T2: u32 = 200;
    const P1: (u64, u64) = (0, 1);
    const P2: (u64, u64) = (0, 2);

    fn pool_of(v: Verdict) -> PoolId {
        match v {
            Verdict::Pool { pool, .. } => pool,
            _ => None,
        }
    }

    #[test]
    fn a_thread_window_routes_only_its_thread_and_device() {
        let mut r = Registry::default();
        r.begin(T1, 0, Some(P1), PoolScope::Thread).unwrap();
        assert_eq!(pool_of(r.verdict(T1, 0, false)), Some(P1));
        assert_eq!(r.verdict(T2, 0, false), Verdict::Unknown);
        assert_eq!(r.verdict(T1, 1, false), Verdict::Unknown);
        // An allocation whose device the driver could not tell still matches.
        assert_eq!(pool_of(r.verdict(T1, -1, false)), Some(P1));
        assert!(r.end(T1, 0, Some(P1), false).is_some());
        assert_eq!(r.verdict(T1, 0, false), Verdict::Unknown);
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn an_all_threads_window_routes_every_thread() {
        let mut r = Registry::default();
        r.begin(T1, 0, Some(P2), PoolScope::AllThreads).unwrap();
        assert_eq!(pool_of(r.verdict(T2, 0, false)), Some(P2));
        // torch's endAllocateToPool is keyed by pool, not by the thread that opened it.
        assert!(r.end(T2, 0, Some(P2), false).is_some());
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn the_first_open_window_wins_as_in_torch() {
        let mut r = Registry::default();
        r.begin(T1, 0, Some(P1), PoolScope::Thread).unwrap();
        r.begin(T1, 0, Some(P2), PoolScope::Thread).unwrap();
        assert_eq!(pool_of(r.verdict(T1, 0, false)), Some(P1));
        r.end(T1, 0, Some(P1), false).unwrap();
        assert_eq!(pool_of(r.verdict(T1, 0, false)), Some(P2));
        // Ending a pool with no window is torch's error: nothing changes.
        assert_eq!(r.end(T1, 0, Some(P1), false), None);
        assert_eq!(pool_of(r.verdict(T1, 0, false)), Some(P2));
    }

    #[test]
    fn a_capture_window_needs_the_stream_capture_and_can_be_paused() {
        let mut r = Registry::default();
        let s = r.begin(T1, 0, Some(P1), PoolScope::Capture).unwrap();
        assert_eq!(
            r.verdict(T1, 0, true),
            Verdict::Pool {
                serial: s,
                pool: Some(P1)
            }
        );
        // Outside the driver's capture (after cuStreamEndCapture, before capture_end returns)
        // the pool no longer routes: the capture-window rules decide.
        assert_eq!(r.verdict(T1, 0, false), Verdict::Unknown);
        // vLLM's symmetric-memory context pauses the graph pool inside the capture ...
        r.end(T1, 0, Some(P1), false).unwrap();
        assert_eq!(r.verdict(T1, 0, true), Verdict::Default);
        // ... and resumes it for the thread; capture_end closes that window and the capture.
        r.begin(T1, 0, Some(P1), PoolScope::Thread).unwrap();
        assert_eq!(pool_of(r.verdict(T1, 0, true)), Some(P1));
        r.end(T1, 0, Some(P1), true).unwrap();
        assert_eq!(r.verdict(T1, 0, true), Verdict::Unknown);
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn a_capture_without_a_pool_is_named_at_its_end() {
        let mut r = Registry::default();
        let s = r.begin(T1, 0, None, PoolScope::Capture).unwrap();
        assert_eq!(
            r.verdict(T1, 0, true),
            Verdict::Pool {
                serial: s,
                pool: None
            }
        );
        assert_eq!(
            r.end(T1, 0, Some((3, 0)), true),
            Some((s, PoolScope::Capture))
        );
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn the_registry_stays_bounded() {
        let mut r = Registry::default();
        for i in 0..MAX_WINDOWS as u64 {
            assert!(r.begin(T1, 0, Some((0, i)), PoolScope::Thread).is_some());
        }
        assert_eq!(r.begin(T1, 0, Some((9, 9)), PoolScope::Thread), None);
        assert_eq!(r.held(), MAX_WINDOWS);
    }

    #[test]
    fn verdicts_write_owner_flags_and_pool() {
        let mut e = Event {
            owner: Owner::Torch as u8,
            ..Event::default()
        };
        apply(
            &mut e,
            Verdict::Pool {
                serial: 4,
                pool: Some((0, 7)),
            },
        );
        assert_eq!(e.owner(), Owner::TorchGraphPool);
        assert_eq!(e.torch_pool(), Some((0, 7)));
        let mut p = Event::default();
        apply(
            &mut p,
            Verdict::Pool {
                serial: 4,
                pool: None,
            },
        );
        assert_eq!(p.owner(), Owner::TorchGraphPool);
        assert_eq!(p.torch_pool(), None);
        assert_eq!(
            (p.flags & flags::TORCH_POOL_PENDING, p.arg1),
            (flags::TORCH_POOL_PENDING, 4)
        );
        let mut d = Event {
            owner: Owner::TorchGraphPool as u8,
            ..Event::default()
        };
        apply(&mut d, Verdict::Default);
        assert_eq!(d.owner(), Owner::Torch);
    }
}
