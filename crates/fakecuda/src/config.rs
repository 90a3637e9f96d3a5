//! The fake device's shape, read from the environment once per process.
use std::sync::OnceLock;

pub struct Config {
    pub devices: usize,
    pub mem_bytes: u64,
    pub context_bytes: u64,
    /// FAKECUDA_FAIL_RESULT: a raw code cuMemAlloc_v2 returns instead of allocating.
    pub fail_result: Option<i32>,
    /// FAKECUDA_EVICT_KB (default 0: off): each cuMemAlloc*/cuMemFree* call first walks a
    /// private buffer of this many KiB (a byte read and written per 64-byte line), standing
    /// in for the real driver's cache footprint (ioctl, page tables: ~40 µs a call), so that
    /// what an interposer touches after the call comes back from L3, as on a GPU host.
    pub evict_kb: usize,
}

/// At most 16 devices: each gets 1 TiB of address space below 0x8000_0000_0000.
const MAX_DEVICES: usize = 16;

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok()?.trim().parse().ok()
}

pub fn get() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(|| Config {
        devices: env::<usize>("FAKECUDA_DEVICES")
            .unwrap_or(2)
            .min(MAX_DEVICES),
        mem_bytes: env("FAKECUDA_MEM_BYTES").unwrap_or(17_179_869_184),
        context_bytes: env("FAKECUDA_CONTEXT_BYTES").unwrap_or(314_572_800),
        fail_result: env("FAKECUDA_FAIL_RESULT"),
        evict_kb: env::<usize>("FAKECUDA_EVICT_KB").unwrap_or(0).min(1 << 20),
    })
}

/// Walks this thread's eviction buffer when `FAKECUDA_EVICT_KB` asks for one.
pub fn evict() {
    let kb = get().evict_kb;
    if kb == 0 {
        return;
    }
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    // try_with: no panic while the thread's locals are being torn down.
    let _ = BUF.try_with(|b| {
        let Ok(mut b) = b.try_borrow_mut() else {
            return;
        };
        if b.len() != kb << 10 {
            b.resize(kb << 10, 0);
        }
        // black_box: the walk is the point, so the compiler must not drop or shorten it.
        let buf = std::hint::black_box(&mut b[..]);
        for i in (0..buf.len()).step_by(64) {
            buf[i] = buf[i].wrapping_add(1);
        }
    });
}
