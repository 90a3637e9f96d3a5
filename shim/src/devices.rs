//! Devices: which one a call ran on, which ones the journal has named, and how the driver
//! names each (UUID, PCI bus id).
//!
//! The device of an allocation is the calling thread's current context's. Asking the driver
//! (`cuCtxGetDevice`) on every allocation is a driver call of vramledger's own, cheap on the
//! fake driver and not on the real one, so it is asked only when it can differ:
//! - a process that sees one device (`cuDeviceGetCount` = 1) allocates on device 0;
//! - a process whose contexts are all on one device (every primary retain and context
//!   creation passes through the hooks and is noted here) allocates on that device; to be sure
//!   no context came another way, one allocation in [`CHECK_EVERY`] of each thread (its first
//!   included) asks the driver anyway, and a disagreement turns this off for good;
//! - otherwise, and for any call that failed, the driver is asked.

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

use crate::real;
use crate::thread::Thread;

/// One allocation in this many checks the one-device rule against the driver.
pub const CHECK_EVERY: u32 = 64;

/// Devices a context of this process was made on (primary retains, context creations).
static CONTEXTS: &AtomicU64 = &crate::hot::HOT.contexts;
/// Devices this journal has named (a `device` record was written).
static NAMED: &AtomicU64 = &crate::hot::HOT.named;
/// `cuDeviceGetCount` (0: not asked, -1: unknown).
static COUNT: &AtomicI32 = &crate::hot::HOT.device_count;
/// The one-device rule was caught wrong once: never used again in this process.
static RULE_OFF: &AtomicBool = &crate::hot::HOT.rule_off;

/// A context of this process exists on `dev` from now on.
#[inline]
pub fn context_on(dev: i32) {
    if (0..64).contains(&dev) {
        CONTEXTS.fetch_or(1 << dev, Ordering::AcqRel);
    }
}

fn driver_count() -> i32 {
    let c = COUNT.load(Ordering::Relaxed);
    if c != 0 {
        return c;
    }
    static F: AtomicUsize = AtomicUsize::new(0);
    let f = real::driver_fn(c"cuDeviceGetCount", &F);
    let mut n: c_int = 0;
    let c = if f == 0 {
        -1
    } else {
        // SAFETY: cuDeviceGetCount(int*) of the real driver, into a local.
        let f: unsafe extern "C" fn(*mut c_int) -> c_int = unsafe { std::mem::transmute(f) };
        // SAFETY: as above.
        if unsafe { f(&mut n) } == 0 && n > 0 {
            n
        } else {
            -1
        }
    };
    // Only a definite answer is kept (before cuInit the driver says nothing).
    if c > 0 {
        COUNT.store(c, Ordering::Relaxed);
    }
    c
}

/// The device of the calling thread's current context, from the driver; -1 when it has none.
pub fn current() -> i32 {
    static F: AtomicUsize = AtomicUsize::new(0);
    let f = real::driver_fn(c"cuCtxGetDevice", &F);
    if f == 0 {
        return -1;
    }
    let mut d = -1i32;
    // SAFETY: cuCtxGetDevice(CUdevice*) of the real driver, into a local.
    let f: unsafe extern "C" fn(*mut i32) -> i32 = unsafe { std::mem::transmute(f) };
    // SAFETY: as above.
    if unsafe { f(&mut d) } == 0 {
        d
    } else {
        -1
    }
}

/// The device a call that returned `rc` ran on (`t`: the calling thread, which counts its
/// calls for the occasional check against the driver: no counter shared between threads).
#[inline]
pub fn of_call(t: &Thread, rc: i32) -> i32 {
    if rc != 0 {
        return current();
    }
    match COUNT.load(Ordering::Relaxed) {
        1 => return 0,
        0 if driver_count() == 1 => return 0,
        _ => {}
    }
    let mask = CONTEXTS.load(Ordering::Acquire);
    if mask.count_ones() != 1 || RULE_OFF.load(Ordering::Relaxed) {
        return current();
    }
    let dev = mask.trailing_zeros() as i32;
    let n = t.calls.get();
    t.calls.set(n.wrapping_add(1));
    if n.is_multiple_of(CHECK_EVERY) {
        let asked = current();
        if asked != dev {
            RULE_OFF.store(true, Ordering::Relaxed);
            return asked;
        }
    }
    dev
}

/// True the first time the journal meets device `d` (its `device` record is due).
#[inline]
pub fn first_sight(d: i32) -> bool {
    if !(0..64).contains(&d) {
        return false;
    }
    let bit = 1u64 << d;
    NAMED.load(Ordering::Relaxed) & bit == 0 && NAMED.fetch_or(bit, Ordering::AcqRel) & bit == 0
}

/// Devices the journal has met so far.
pub fn named() -> Vec<i32> {
    let m = NAMED.load(Ordering::Relaxed);
    (0..64).filter(|d| m & (1u64 << d) != 0).collect()
}

/// How the driver names device `d`: `uuid=GPU-…` and `pci_bus_id=…` lines (a line the driver
/// cannot give is left out).
pub fn identity(d: i32) -> String {
    let mut out = String::new();
    if let Some(u) = uuid(d) {
        out.push_str("uuid=");
        out.push_str(&format_uuid(&u));
    }
    if let Some(bus) = pci_bus_id(d) {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("pci_bus_id=");
        out.push_str(&bus);
    }
    out
}

/// The UUID as `nvidia-smi -L` prints it: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn format_uuid(u: &[u8; 16]) -> String {
    let hex: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn handle(d: i32) -> Option<c_int> {
    static F: AtomicUsize = AtomicUsize::new(0);
    let f = real::driver_fn(c"cuDeviceGet", &F);
    if f == 0 {
        return None;
    }
    let mut h: c_int = 0;
    // SAFETY: cuDeviceGet(CUdevice*, int ordinal) of the real driver, into a local.
    let f: unsafe extern "C" fn(*mut c_int, c_int) -> c_int = unsafe { std::mem::transmute(f) };
    // SAFETY: as above.
    (unsafe { f(&mut h, d) } == 0).then_some(h)
}

fn uuid(d: i32) -> Option<[u8; 16]> {
    static V2: AtomicUsize = AtomicUsize::new(0);
    static V1: AtomicUsize = AtomicUsize::new(0);
    let h = handle(d)?;
    let f = match real::driver_fn(c"cuDeviceGetUuid_v2", &V2) {
        0 => real::driver_fn(c"cuDeviceGetUuid", &V1),
        f => f,
    };
    if f == 0 {
        return None;
    }
    let mut u = [0u8; 16];
    // SAFETY: cuDeviceGetUuid(_v2)(CUuuid*, CUdevice): 16 bytes into a local.
    let f: unsafe extern "C" fn(*mut u8, c_int) -> c_int = unsafe { std::mem::transmute(f) };
    // SAFETY: as above.
    (unsafe { f(u.as_mut_ptr(), h) } == 0).then_some(u)
}

/// The PCI bus id of device `d` (`0000:19:00.0`), as NVML and `nvidia-smi` spell it.
pub fn pci_bus_id(d: i32) -> Option<String> {
    let buf = pci_bus_id_c(d)?;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(0);
    let s = String::from_utf8_lossy(&buf[..end]).into_owned();
    (!s.is_empty()).then_some(s)
}

/// The same, NUL-terminated as the driver wrote it (what NVML's lookup by bus id takes).
pub fn pci_bus_id_c(d: i32) -> Option<[u8; 64]> {
    static F: AtomicUsize = AtomicUsize::new(0);
    let h = handle(d)?;
    let f = real::driver_fn(c"cuDeviceGetPCIBusId", &F);
    if f == 0 {
        return None;
    }
    let mut buf = [0u8; 64];
    // SAFETY: cuDeviceGetPCIBusId(char*, int len, CUdevice): at most 63 bytes and a NUL.
    let f: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int =
        // SAFETY: looked up under this very name, whose C signature this is.
        unsafe { std::mem::transmute(f) };
    // SAFETY: as above, into the local buffer of 64 (its last byte stays 0).
    (unsafe { f(buf.as_mut_ptr().cast(), 63, h) } == 0).then_some(buf)
}

/// In a forked child: it has no context, and its journal names no device yet.
pub fn reset_in_child() {
    CONTEXTS.store(0, Ordering::Relaxed);
    NAMED.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    #[test]
    fn uuids_read_as_nvidia_smi_prints_them() {
        let u = [
            0x1f, 0x2e, 0x3d, 0x4c, 0x5b, 0x6a, 0x79, 0x88, 0x97, 0xa6, 0xb5, 0xc4, 0xd3, 0xe2,
            0xf1, 0x00,
        ];
        assert_eq!(
            super::format_uuid(&u),
            "GPU-1f2e3d4c-5b6a-7988-97a6-b5c4d3e2f100"
        );
    }
}
