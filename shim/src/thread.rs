//! Everything vramledger keeps per thread, in one thread-local: a hook looks it up once
//! (a thread-local in a shared library costs a call each time it is reached).

use std::cell::Cell;

use vramledger_format::compact::Template;

use crate::attribution::modules::{ModuleClass, ModuleInfo};

const NO_MODULE: (usize, ModuleInfo) = (
    0,
    ModuleInfo {
        id: 0,
        class: ModuleClass::Other,
    },
);

/// Templates a thread remembers (an allocating thread mostly alternates two or three).
const REMEMBERED: usize = 8;

/// A remembered template: its key (`Template::key`), then the journal generation it was
/// defined in and its id in one word.
type Remembered = ([u64; 4], u64);

const NONE: Remembered = ([0; 4], u64::MAX);

/// A remembered template on a cache line of its own (40 bytes would straddle two).
#[repr(align(64))]
struct Place(Cell<Remembered>);

/// One thread's state: the words a hook reads first, in the first cache line (a real driver
/// call evicts the caches: each line touched after it is a miss), then one line per template.
#[repr(C, align(64))]
pub struct Thread {
    /// vramledger is recording on this thread now (its own driver calls must not record).
    pub busy: Cell<bool>,
    /// The running hook's return address (its caller), or 0.
    pub entry_ip: Cell<usize>,
    /// The caller's stack pointer at that call (the hook frame's CFA), or 0.
    pub entry_cfa: Cell<usize>,
    /// Stream captures this thread began and has not ended.
    pub captures: Cell<u32>,
    /// The thread's stream-capture mode (`cuThreadExchangeStreamCaptureMode`).
    pub mode: Cell<u32>,
    /// Allocations this thread made while the one-device rule held (`crate::devices`).
    pub calls: Cell<u32>,
    tid: Cell<u32>,
    /// The highest address of this thread's stack (0: not asked yet, 1: unknown).
    stack_top: Cell<usize>,
    /// The caller this thread met last and its module (`attribution::modules`), or 0.
    pub module: Cell<(usize, ModuleInfo)>,
    templates: [Place; REMEMBERED],
}

// The words a hook reads first fill the first line, alone.
const _: () = assert!(std::mem::offset_of!(Thread, templates) == 64);

/// Where a thread remembers template `t`.
#[inline]
fn place(t: &Template) -> usize {
    (t.kind as usize ^ (t.api as usize).rotate_left(1)) % REMEMBERED
}

thread_local! {
    static THREAD: Thread = const {
        Thread {
            busy: Cell::new(false),
            entry_ip: Cell::new(0),
            entry_cfa: Cell::new(0),
            captures: Cell::new(0),
            mode: Cell::new(0),
            calls: Cell::new(0),
            tid: Cell::new(0),
            stack_top: Cell::new(0),
            module: Cell::new(NO_MODULE),
            templates: [const { Place(Cell::new(NONE)) }; REMEMBERED],
        }
    };
}

/// Runs `f` with this thread's state (`None` while the thread is being torn down).
#[inline(always)]
pub fn with<R>(f: impl FnOnce(&Thread) -> R) -> Option<R> {
    THREAD.try_with(f).ok()
}

impl Thread {
    /// The kernel thread id (asked once per thread).
    #[inline]
    pub fn tid(&self) -> u32 {
        let v = self.tid.get();
        if v != 0 {
            return v;
        }
        // SAFETY: gettid has no preconditions.
        let v = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        self.tid.set(v);
        v
    }

    /// The highest address of this thread's stack, or 0 when it cannot be told.
    pub fn stack_top(&self) -> usize {
        match self.stack_top.get() {
            0 => {
                let top = query_stack_top().unwrap_or(1);
                self.stack_top.set(top);
                if top == 1 {
                    0
                } else {
                    top
                }
            }
            1 => 0,
            top => top,
        }
    }

    /// The id of `t` in journal `generation`, if this thread used it lately.
    #[inline]
    pub fn template(&self, generation: u32, t: &Template) -> Option<u32> {
        let (key, tag) = self.templates[place(t)].0.get();
        (tag >> 32 == generation as u64 && key == t.key()).then_some(tag as u32)
    }

    /// Remembers `id` for `t` (in the place of its kind and entry point: an allocating thread's
    /// allocation and free templates do not push each other out).
    #[inline]
    pub fn remember(&self, generation: u32, t: &Template, id: u32) {
        self.templates[place(t)]
            .0
            .set((t.key(), (generation as u64) << 32 | id as u64));
    }

    /// In a forked child: the forking thread has a new id, and its templates were the
    /// parent journal's.
    pub fn reset_in_child(&self) {
        self.tid.set(0);
        self.stack_top.set(0);
        self.module.set(NO_MODULE);
        for c in &self.templates {
            c.0.set(NONE);
        }
    }
}

fn query_stack_top() -> Option<usize> {
    // SAFETY: pthread_getattr_np fills an attribute object for the calling thread, which is
    // read and destroyed here; every out-pointer is a local.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: usize = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (rc == 0 && !addr.is_null()).then(|| addr as usize + size)
    }
}

/// The calling thread's kernel id (0 while it is being torn down).
pub fn tid() -> u32 {
    with(Thread::tid).unwrap_or(0)
}
