//! Readings and lines the journal keeps beside the hooked calls: free memory through the
//! driver and NVML, the live books, the engine's settings and sizing lines, warnings.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use vramledger_engines::log::settings::{self, SettingsKind};
use vramledger_engines::redact;
use vramledger_format::{Api, Kind};

use crate::recorder::{self, emit, event};
use crate::{books, devices, journal, nvml, real};

/// Reads free/total of the current context's device through the real driver and records
/// it. Returns `(device, free, total)` when the driver answered.
pub fn meminfo() -> Option<(i32, u64, u64)> {
    static F: AtomicUsize = AtomicUsize::new(0);
    let f = real::resolve(Api::cuMemGetInfo_v2);
    let f = if f != 0 {
        f
    } else {
        real::driver_fn(c"cuMemGetInfo_v2", &F)
    };
    if f == 0 {
        return None;
    }
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: cuMemGetInfo_v2(size_t*, size_t*) of the real driver, into locals.
    let f: unsafe extern "C" fn(*mut usize, *mut usize) -> i32 = unsafe { std::mem::transmute(f) };
    // SAFETY: as above.
    if unsafe { f(&mut free, &mut total) } != 0 {
        return None;
    }
    let device = devices::current();
    let mut e = event(Kind::MemInfo, Api::VramledgerSample);
    e.device = device;
    e.arg0 = free as u64;
    e.arg1 = total as u64;
    emit(&e, b"");
    Some((device, free as u64, total as u64))
}

/// NVML samples for every device the journal has met.
pub fn nvml_all() {
    for d in devices::named() {
        if let Some(s) = nvml::sample(d) {
            nvml_event(d, s);
        }
    }
}

/// Records one NVML reading of device `d`.
pub fn nvml_event(d: i32, s: nvml::Sample) {
    let mut e = event(Kind::NvmlSample, Api::NvmlSample);
    e.device = d;
    e.arg0 = s.device_free;
    e.arg1 = s.device_total;
    e.arg2 = s.process_used.unwrap_or(u64::MAX);
    emit(&e, b"");
}

/// Writes one `live` record per (device, owner, memory kind) held now.
pub fn live_books() {
    for ((device, owner, mem), bytes) in books::totals() {
        let mut e = event(Kind::Live, Api::VramledgerSample);
        e.device = device;
        e.owner = owner as u8;
        e.mem = mem as u8;
        e.size = bytes;
        journal::append_event(None, &e, b"");
    }
}

/// Free memory, NVML and the live books, as of now.
pub fn boundary() {
    meminfo();
    nvml_all();
    live_books();
}

/// After a failed allocation: free memory and the live books at that moment.
pub fn after_failed_allocation() {
    boundary();
}

/// Records an engine settings line (`line`, as printed) and the model folder it names: secrets
/// redacted first, the line bounded and split into parts (`vramledger_engines::log::settings`).
/// A relative model path that exists from here is made absolute (the reader runs elsewhere).
pub fn settings_line(kind: SettingsKind, line: &[u8]) {
    if !recorder::ensure() {
        return;
    }
    let raw = String::from_utf8_lossy(line);
    // Kept cut past its bound: its last word may be a token's start, too short to be told.
    let cut = line.len() > settings::MAX_LINE;
    let text = if cut {
        redact::cut_text(&raw)
    } else {
        redact::text(&raw)
    }
    .into_owned();
    let e = event(Kind::Warning, Api::VramledgerSettings);
    for part in settings::encode_cut(kind, &text, cut) {
        emit(&e, part.as_bytes());
    }
    let Some(path) = settings::model_path(kind, &text) else {
        return;
    };
    let resolved = match std::env::current_dir() {
        Ok(cwd) if !path.starts_with('/') && cwd.join(&path).exists() => {
            cwd.join(&path).to_string_lossy().into_owned()
        }
        _ => path,
    };
    for part in settings::encode(SettingsKind::ModelPath, &resolved) {
        emit(&e, part.as_bytes());
    }
}

/// Engine lines kept per process at most (they are startup lines: a few each).
pub const MAX_ENGINE_LINES: u32 = 512;
/// Bytes of one engine line kept.
pub const MAX_ENGINE_LINE: usize = 4096;
static ENGINE_LINES: AtomicU32 = AtomicU32::new(0);

/// Records an engine line that carries sizing numbers without changing the stage (vLLM's
/// `GPU KV cache size: N tokens`, `Maximum concurrency …`, the after-capture
/// `--kv-cache-memory=` summary, …): a `warning`-kind record with api
/// `vramledger_engine_line`, its text the line, secrets redacted, cut at 4 KiB, at most 512.
pub fn engine_line(line: &[u8]) {
    if ENGINE_LINES.fetch_add(1, Ordering::Relaxed) >= MAX_ENGINE_LINES || !recorder::ensure() {
        return;
    }
    // Redacted whole, then cut: a token cut first would keep its start, its shape gone.
    let whole = redact::text(&String::from_utf8_lossy(line)).into_owned();
    let mut end = whole.len().min(MAX_ENGINE_LINE);
    while !whole.is_char_boundary(end) {
        end -= 1; // never cut inside a character
    }
    let text = &whole[..end];
    let e = event(Kind::Warning, Api::VramledgerEngineLine);
    emit(&e, text.as_bytes());
}

/// Records a warning for humans.
pub fn warning(text: &str) {
    recorder::warning(text);
}

/// In a forked child: its own journal keeps its own engine lines.
pub fn reset_in_child() {
    ENGINE_LINES.store(0, Ordering::Relaxed);
}
