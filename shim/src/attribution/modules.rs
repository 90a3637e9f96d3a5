//! Which loaded module an instruction address lies in, and the module's small id (a module
//! record names it in the journal the first time).
//!
//! The hook path asks [`lookup`]: one load from a direct-mapped table of 4096 words, each
//! holding an address and its module (no lock). A miss asks the loader (`dladdr`), outside
//! any lock, then the registry of modules under its lock, and fills the table. Collisions just
//! replace an entry, so the table never grows.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::forksafe::ForkSafeMutex;

/// How a module's allocations are owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleClass {
    /// Frames to look past: the driver, the runtime, vramledger.
    Skip,
    /// PyTorch (c10, libtorch).
    Torch,
    /// NCCL.
    Nccl,
    /// Anything else.
    Other,
}

impl ModuleClass {
    const ALL: [ModuleClass; 4] = [
        ModuleClass::Skip,
        ModuleClass::Torch,
        ModuleClass::Nccl,
        ModuleClass::Other,
    ];

    fn code(self) -> u64 {
        self as u64
    }
}

/// Classifies a module by its file name.
pub fn classify(file_name: &str) -> ModuleClass {
    let n = file_name;
    if n.starts_with("libcuda.") || n.starts_with("libcudart") || n.starts_with("libvramledger") {
        ModuleClass::Skip
    } else if n.starts_with("libc10") || n.starts_with("libtorch") {
        ModuleClass::Torch
    } else if n.starts_with("libnccl") || n.starts_with("librccl") {
        ModuleClass::Nccl
    } else {
        ModuleClass::Other
    }
}

/// A module: its id in this journal and its class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModuleInfo {
    pub id: u32,
    pub class: ModuleClass,
}

/// Called with each new module: `(id, path)`; the recorder writes a module record.
pub type NewModule = fn(u32, &str);

const SLOTS: usize = 4096;
/// Ids a table entry can hold (14 bits); modules past it are looked up the slow way.
const MAX_CACHED_ID: u32 = (1 << 14) - 1;
/// Addresses a table entry can hold (48 bits: every user-space address of x86-64 and
/// AArch64 with 4-level tables).
const MAX_CACHED_IP: usize = (1 << 48) - 1;

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: AtomicU64 = AtomicU64::new(0);
static TABLE: [AtomicU64; SLOTS] = [EMPTY; SLOTS];

#[derive(Default)]
struct Registry {
    by_base: BTreeMap<usize, ModuleInfo>,
    next_id: u32,
}

static REGISTRY: ForkSafeMutex<Registry> = ForkSafeMutex::new();
static OWN_BASE: AtomicUsize = AtomicUsize::new(0);

/// The two entries (a 2-way set: two hot addresses that hash alike both stay) of `ip`.
#[inline]
fn set(ip: usize) -> [&'static AtomicU64; 2] {
    let h = ((ip as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize & !1;
    [&TABLE[h % SLOTS], &TABLE[(h + 1) % SLOTS]]
}

/// The module of `ip` if the table holds it (the hook path: no lock, no loader).
#[inline]
pub fn lookup(ip: usize) -> Option<ModuleInfo> {
    let e = set(ip)
        .into_iter()
        .map(|s| s.load(Ordering::Acquire))
        .find(|&e| e != 0 && (e >> 16) as usize == ip)?;
    Some(ModuleInfo {
        id: ((e >> 2) & MAX_CACHED_ID as u64) as u32,
        class: ModuleClass::ALL[(e & 3) as usize],
    })
}

/// [`module_of`], first through the thread's last answer (`last_answer`, in its state): a
/// thread mostly allocates from one call site, and its state's first cache line is read
/// anyway, where the table's two lines (entry, class) would be more misses after the driver
/// call. (Answers never change: a base keeps its id; a forked child clears both.)
#[inline]
pub fn module_of_on(
    last_answer: &Cell<(usize, ModuleInfo)>,
    ip: usize,
    on_new: NewModule,
) -> Option<ModuleInfo> {
    let (last, m) = last_answer.get();
    if last == ip && ip != 0 {
        return Some(m);
    }
    let m = module_of(ip, on_new)?;
    last_answer.set((ip, m));
    Some(m)
}

fn remember(ip: usize, m: ModuleInfo) {
    if ip == 0 || ip > MAX_CACHED_IP || m.id > MAX_CACHED_ID {
        return;
    }
    let e = (ip as u64) << 16 | (m.id as u64) << 2 | m.class.code();
    let [first, second] = set(ip);
    // The first entry keeps the first address that took it; the second takes the rest.
    match first.compare_exchange(0, e, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {}
        Err(cur) if (cur >> 16) as usize == ip => first.store(e, Ordering::Release),
        Err(_) => second.store(e, Ordering::Release),
    }
}

fn dladdr(ip: usize) -> (usize, String) {
    // SAFETY: dladdr fills `info` for any address and never dereferences `ip`.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(ip as *const c_void, &mut info) == 0 {
            return (0, String::new());
        }
        let name = if info.dli_fname.is_null() {
            String::new()
        } else {
            CStr::from_ptr(info.dli_fname)
                .to_string_lossy()
                .into_owned()
        };
        (info.dli_fbase as usize, name)
    }
}

fn own_base() -> usize {
    let b = OWN_BASE.load(Ordering::Relaxed);
    if b != 0 {
        return b;
    }
    let (base, _) = dladdr(own_base as *const () as usize);
    OWN_BASE.store(base, Ordering::Relaxed);
    base
}

/// The module of `ip`, asking the loader if need be (`on_new` is told each new module).
pub fn module_of(ip: usize, on_new: NewModule) -> Option<ModuleInfo> {
    if let Some(m) = lookup(ip) {
        return Some(m);
    }
    let (base, mut path) = dladdr(ip);
    if base == 0 {
        return None;
    }
    if path.is_empty() {
        path = std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
    }
    let is_self = base == own_base();
    let mut r = REGISTRY.lock();
    let info = match r.by_base.get(&base) {
        Some(m) => *m,
        None => {
            let file = path.rsplit('/').next().unwrap_or(&path);
            let class = if is_self {
                ModuleClass::Skip
            } else {
                classify(file)
            };
            r.next_id += 1;
            let m = ModuleInfo {
                id: r.next_id,
                class,
            };
            r.by_base.insert(base, m);
            on_new(m.id, &path);
            m
        }
    };
    drop(r);
    remember(ip, info);
    Some(info)
}

/// In a forked child: module ids are the parent journal's; the child's defines its own.
pub fn reset_in_child() {
    REGISTRY.reset_in_child();
    for e in &TABLE {
        e.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_by_file_name() {
        assert_eq!(classify("libcuda.so.1"), ModuleClass::Skip);
        assert_eq!(classify("libcuda.so.580.159.04"), ModuleClass::Skip);
        assert_eq!(classify("libcudart.so.13"), ModuleClass::Skip);
        assert_eq!(classify("libc10_cuda.so"), ModuleClass::Torch);
        assert_eq!(classify("libtorch_cuda.so"), ModuleClass::Torch);
        assert_eq!(classify("libnccl.so.2"), ModuleClass::Nccl);
        assert_eq!(classify("libcublas.so.13"), ModuleClass::Other);
        assert_eq!(classify("libcudnn.so.9"), ModuleClass::Other);
    }

    #[test]
    fn the_table_holds_what_it_is_given_and_nothing_else() {
        let ip = 0x7f12_3456_7890usize;
        assert_eq!(lookup(ip), None);
        let m = ModuleInfo {
            id: 77,
            class: ModuleClass::Nccl,
        };
        remember(ip, m);
        assert_eq!(lookup(ip), Some(m));
        assert_eq!(lookup(ip + 1), None);
        remember(ip + 4096, ModuleInfo { id: 1 << 15, ..m }); // too large an id: not kept
        assert_eq!(lookup(ip + 4096), None);
    }
}
