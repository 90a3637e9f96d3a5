//! The fake device's shape, read from the environment once per process.
use std::sync::OnceLock;

pub struct Config {
    pub devices: usize,
    pub mem_bytes: u64,
    pub context_bytes: u64,
    /// FAKECUDA_FAIL_RESULT: a raw code cuMemAlloc_v2 returns instead of allocating.
    pub fail_result: Option<i32>,
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
    })
}
