//! Turns what a hook saw into journal records, and keeps the live books in-process.
//!
//! Hooks call these after the real function returned (or, for release-type calls,
//! [`Ticket::before`] first and [`Ticket::finish`] after). The live books lock is taken
//! for a map update only; no driver call happens under it.

use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use vramledger_engines::log::settings::{self, SettingsKind};
use vramledger_format::record::flags;
use vramledger_format::{Api, Event, Kind, LiveBooks, MemKind, Owner, EVENT_FIXED_LEN};

use crate::attribution::{self, ModuleClass};
use crate::entry::real;
use crate::forksafe::ForkSafeMutex;
use crate::{journal, process, stages};

static LIVE: ForkSafeMutex<LiveBooks> = ForkSafeMutex::new();
static DEVICES_SEEN: AtomicU64 = AtomicU64::new(0);
/// The journal's start (CLOCK_MONOTONIC ns), as its header says. No record is stamped
/// earlier: an event stamped before the journal opened (the `cuInit` that opens it) takes
/// the start time.
static START_MONO: AtomicU64 = AtomicU64::new(0);

/// Opens the journal on first use (header, then the current stage).
pub fn ensure() -> bool {
    if journal::is_open() {
        return true;
    }
    // Asked before the open: finding the driver may take the loader's lock, which no code
    // may wait for while other threads wait for the open.
    let version = driver_version();
    journal::ensure_open(move || opening_records(version))
}

fn opening_records(driver_version: Option<i32>) -> Vec<(u16, Vec<u8>)> {
    let start_mono = process::mono_ns();
    START_MONO.store(start_mono, Ordering::Release);
    let header = process::header(driver_version, process::realtime_ns(), start_mono);
    let mut out = vec![(Kind::Header as u16, header.encode())];
    let (id, name) = stages::current();
    let mut e = event(Kind::Stage, Api::VramledgerStage);
    e.stage = id;
    let mut payload = e.encode();
    payload.truncate(EVENT_FIXED_LEN);
    payload.extend_from_slice(name.as_bytes());
    out.push((Kind::Stage as u16, payload));
    out.extend(crate::pools_api::opening_record());
    out
}

fn driver_version() -> Option<i32> {
    static F: AtomicUsize = AtomicUsize::new(0);
    let f = real::driver_fn(c"cuDriverGetVersion", &F);
    if f == 0 {
        return None;
    }
    let mut v = 0i32;
    // SAFETY: cuDriverGetVersion(int*) from the real driver.
    let f: unsafe extern "C" fn(*mut i32) -> i32 = unsafe { std::mem::transmute(f) };
    (unsafe { f(&mut v) } == 0).then_some(v)
}

/// A new event of `kind` from `api`, stamped with time, thread and stage.
pub fn event(kind: Kind, api: Api) -> Event {
    Event {
        kind: kind as u16,
        api: api as u16,
        t_ns: process::mono_ns(),
        tid: process::tid(),
        stage: stages::current_id(),
        device: -1,
        ..Event::default()
    }
}

fn new_module(id: u32, path: &str) {
    if !ensure() {
        return;
    }
    let mut e = event(Kind::Module, Api::None);
    e.module = id;
    journal::append_event(&e, path.as_bytes());
}

/// Fills `module`, `owner` and `flags` from the call stack and capture state.
#[inline(always)]
pub fn attribute(e: &mut Event, vmm: bool) {
    let (module, class) = attribution::calling_module(new_module);
    let capture = attribution::capture_flags();
    e.module = module;
    e.flags |= capture;
    if module == 0 {
        e.flags |= flags::MODULE_UNKNOWN;
    }
    e.owner = attribution::owner(class, vmm, capture) as u8;
    if class == ModuleClass::Skip {
        e.owner = Owner::Direct as u8;
    }
    crate::pools::tag(e, class == ModuleClass::Torch);
}

/// The device of the calling thread's current context, -1 when it has none.
pub fn current_device() -> i32 {
    static F: AtomicUsize = AtomicUsize::new(0);
    let f = real::driver_fn(c"cuCtxGetDevice", &F);
    if f == 0 {
        return -1;
    }
    let mut d = -1i32;
    // SAFETY: cuCtxGetDevice(CUdevice*) from the real driver.
    let f: unsafe extern "C" fn(*mut i32) -> i32 = unsafe { std::mem::transmute(f) };
    if unsafe { f(&mut d) } == 0 {
        d
    } else {
        -1
    }
}

fn note_device(d: i32) {
    if (0..64).contains(&d) {
        DEVICES_SEEN.fetch_or(1 << d, Ordering::Relaxed);
    }
}

/// Devices that appeared in any event so far.
pub fn devices_seen() -> Vec<i32> {
    let m = DEVICES_SEEN.load(Ordering::Relaxed);
    (0..64).filter(|d| m & (1u64 << d) != 0).collect()
}

/// Records an event (after the call it describes). Records about existing memory (maps,
/// retains) get its owner and device from the live books.
pub fn emit(e: &Event, text: &[u8]) {
    if !ensure() {
        return;
    }
    let mut e = e.clone();
    e.t_ns = e.t_ns.max(START_MONO.load(Ordering::Relaxed));
    book(&mut e);
    note_device(e.device);
    journal::append_event(&e, text);
}

/// A release-type call, recorded in two halves around the real call so that the journal
/// order is the driver's order even when another thread reuses the address at once.
pub struct Ticket {
    slot: Option<journal::Slot>,
    event: Event,
}

impl Ticket {
    /// Before the call: reserve the record's place, take the memory out of the books.
    pub fn before(mut e: Event) -> Ticket {
        if !ensure() {
            return Ticket {
                slot: None,
                event: e,
            };
        }
        e.t_ns = e.t_ns.max(START_MONO.load(Ordering::Relaxed));
        book(&mut e);
        let slot = journal::reserve(EVENT_FIXED_LEN);
        Ticket { slot, event: e }
    }

    /// After the call: write the record with the call's result.
    pub fn finish(mut self, result: i32) {
        self.event.result = result;
        if let Some(slot) = self.slot.take() {
            journal::commit_event(slot, &self.event, b"");
        }
    }
}

/// Completes `e` from the live books (owner, size, device of the memory it is about) and
/// applies it to them. The lock is held for map updates only.
fn book(e: &mut Event) {
    let mut books = LIVE.lock();
    fill_from_books(&books, e);
    books.apply(e);
}

fn fill_from_books(books: &LiveBooks, e: &mut Event) {
    match e.kind() {
        Some(Kind::Free | Kind::HostFree) => {
            if let Some(b) = books.block_at(e.addr) {
                e.owner = b.owner as u8;
                e.size = b.size;
                e.device = b.device;
                e.module = b.module;
                e.mem = b.mem as u8;
            }
        }
        Some(Kind::VmmRelease | Kind::VmmRetain | Kind::VmmMap) if e.owner == 0 => {
            if let Some((owner, size, device)) = books.handle_info(e.handle) {
                e.owner = owner as u8;
                e.device = device;
                if e.size == 0 {
                    e.size = size;
                }
            }
        }
        Some(Kind::VmmUnmap) => {
            if let Some(h) = books.mapping_at(e.addr) {
                e.handle = h;
                if let Some((owner, _, device)) = books.handle_info(h) {
                    e.owner = owner as u8;
                    e.device = device;
                }
            }
        }
        _ => {}
    }
}

/// Writes one `live` record per (device, owner, memory kind) held now.
pub fn write_live_books() {
    let totals: Vec<((i32, Owner, MemKind), u64)> = LIVE.lock().totals().collect();
    for ((device, owner, mem), bytes) in totals {
        let mut e = event(Kind::Live, Api::VramledgerSample);
        e.device = device;
        e.owner = owner as u8;
        e.mem = mem as u8;
        e.size = bytes;
        journal::append_event(&e, b"");
    }
}

/// Reads free/total of the current context's device through the real driver and
/// records it. Returns `(device, free, total)` when the driver answered.
pub fn sample_meminfo() -> Option<(i32, u64, u64)> {
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
    // SAFETY: cuMemGetInfo_v2(size_t*, size_t*) from the real driver.
    let f: unsafe extern "C" fn(*mut usize, *mut usize) -> i32 = unsafe { std::mem::transmute(f) };
    if unsafe { f(&mut free, &mut total) } != 0 {
        return None;
    }
    let device = current_device();
    let mut e = event(Kind::MemInfo, Api::VramledgerSample);
    e.device = device;
    e.arg0 = free as u64;
    e.arg1 = total as u64;
    emit(&e, b"");
    Some((device, free as u64, total as u64))
}

/// NVML samples for every device seen so far.
pub fn sample_nvml() {
    for d in devices_seen() {
        if let Some(s) = crate::nvml::sample(d) {
            nvml_event(d, s);
        }
    }
}

/// Records one NVML reading of device `d`.
pub fn nvml_event(d: i32, s: crate::nvml::Sample) {
    let mut e = event(Kind::NvmlSample, Api::NvmlSample);
    e.device = d;
    e.arg0 = s.device_free;
    e.arg1 = s.device_total;
    e.arg2 = s.process_used.unwrap_or(u64::MAX);
    emit(&e, b"");
}

/// Records an engine settings line (`line`, as printed) and the model folder it names: secrets
/// redacted first, the line bounded and split into parts (`vramledger_engines::log::settings`).
/// A relative model path that exists from here is made absolute (the reader runs elsewhere).
pub fn settings_line(kind: SettingsKind, line: &[u8]) {
    if !ensure() {
        return;
    }
    let text = settings::redact(&String::from_utf8_lossy(line));
    let e = event(Kind::Warning, Api::VramledgerSettings);
    for part in settings::encode(kind, &text) {
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

/// Records a warning for humans.
pub fn warning(text: &str) {
    let e = event(Kind::Warning, Api::None);
    emit(&e, text.as_bytes());
}

/// A C string argument as bytes (empty for NULL).
///
/// # Safety
/// `p` is NULL or NUL-terminated.
pub unsafe fn c_bytes<'a>(p: *const std::ffi::c_char) -> &'a [u8] {
    if p.is_null() {
        return b"";
    }
    // SAFETY: guaranteed by the caller.
    unsafe { CStr::from_ptr(p) }.to_bytes()
}

/// In a forked child: new journal, new module ids, empty books.
pub fn reset_after_fork() {
    journal::reset_after_fork();
    DEVICES_SEEN.store(0, Ordering::Relaxed);
    crate::lifetime::reset_in_child();
    attribution::reset_modules();
    process::reset_tid();
    LIVE.reset_in_child();
    stages::reset_in_child();
    crate::hooks::tap::reset_in_child();
    crate::pools::reset_in_child();
}
