//! Turns what a hook saw into journal records.
//!
//! Hooks call these after the real function returned (or, for release-type calls,
//! [`Ticket::before`] first and [`Ticket::finish`] after). The hot path (an allocation or a
//! free) takes the calling thread's state once ([`crate::thread`]), asks the driver nothing
//! of its own (`crate::devices`), keeps the books under one short lock (`crate::books`) and
//! writes a 24-byte record (`crate::journal`).

use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

use vramledger_format::record::flags;
use vramledger_format::{Api, Event, Kind, Owner, EVENT_FIXED_LEN};

use crate::attribution::{self, ModuleClass};
use crate::journal::{self, Opening, Reserved};
use crate::thread::{self, Thread};
use crate::{books, clock, devices, pools, process, real, stages};

/// Opens the journal on first use (header, then the current stage).
pub fn ensure() -> bool {
    if journal::is_open() {
        return true;
    }
    // Asked before the open: finding the driver may take the loader's lock, which no code
    // may wait for while other threads wait for the open.
    let version = driver_version();
    journal::ensure_open(move || opening(version))
}

fn opening(driver_version: Option<i32>) -> Opening {
    let clock_name = clock::choose();
    let start_mono = clock::mono_ns();
    let header = process::header(driver_version, clock::realtime_ns(), start_mono, clock_name);
    let mut records = vec![(Kind::Header as u16, header.encode())];
    let (id, name) = stages::current();
    let mut e = event(Kind::Stage, Api::VramledgerStage);
    e.stage = id;
    e.t_ns = start_mono;
    records.push((Kind::Stage as u16, payload(&e, name.as_bytes())));
    if let Some((wrapped, version)) = pools::announced() {
        let mut e = event(Kind::PoolHooks, Api::VramledgerPoolHooks);
        e.arg0 = *wrapped;
        e.t_ns = start_mono;
        records.push((Kind::PoolHooks as u16, payload(&e, version)));
    }
    Opening {
        start_mono,
        records,
    }
}

/// An event frame's payload (fixed part, then text).
fn payload(e: &Event, text: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; EVENT_FIXED_LEN];
    e.encode_fixed(&mut p);
    p.extend_from_slice(text);
    p
}

fn driver_version() -> Option<i32> {
    static F: AtomicUsize = AtomicUsize::new(0);
    let f = real::driver_fn(c"cuDriverGetVersion", &F);
    if f == 0 {
        return None;
    }
    let mut v = 0i32;
    // SAFETY: cuDriverGetVersion(int*) of the real driver, into a local.
    let f: unsafe extern "C" fn(*mut i32) -> i32 = unsafe { std::mem::transmute(f) };
    // SAFETY: as above.
    (unsafe { f(&mut v) } == 0).then_some(v)
}

/// A new event of `kind` from `api`, stamped with time, thread `t` and stage.
#[inline]
pub fn event_on(t: &Thread, kind: Kind, api: Api) -> Event {
    Event {
        kind: kind as u16,
        api: api as u16,
        t_ns: clock::mono_ns(),
        tid: t.tid(),
        stage: stages::current_id(),
        device: -1,
        ..Event::default()
    }
}

/// [`event_on`] for the calling thread.
pub fn event(kind: Kind, api: Api) -> Event {
    Event {
        kind: kind as u16,
        api: api as u16,
        t_ns: clock::mono_ns(),
        tid: thread::tid(),
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
    emit_raw(None, e, path.as_bytes());
}

/// Fills `module`, `owner` and `flags` from the call stack and capture state.
#[inline(always)]
pub fn attribute(t: &Thread, e: &mut Event, vmm: bool) {
    let (module, class) = attribution::calling_module(t, new_module);
    let capture = attribution::capture_flags(t);
    e.module = module;
    e.flags |= capture;
    if module == 0 {
        e.flags |= flags::MODULE_UNKNOWN;
    }
    e.owner = attribution::owner(class, vmm, capture) as u8;
    if class == ModuleClass::Skip {
        e.owner = Owner::Direct as u8;
    }
    pools::tag(e, class == ModuleClass::Torch);
}

/// Records an event (after the call it describes). Records about existing memory (maps,
/// retains) get its owner and device from the live books.
#[inline]
pub fn emit_on(t: Option<&Thread>, e: &mut Event, text: &[u8]) {
    if !ensure() {
        return;
    }
    e.t_ns = e
        .t_ns
        .max(journal::state::START_MONO.load(Ordering::Relaxed));
    books::book(e);
    name_device(e.device);
    journal::append_event(t, e, text);
}

/// [`emit_on`] without the calling thread's state at hand (`e` itself stays as it is).
pub fn emit(e: &Event, text: &[u8]) {
    emit_on(None, &mut e.clone(), text);
}

/// Writes `e` as it is (no books, no device record).
fn emit_raw(t: Option<&Thread>, mut e: Event, text: &[u8]) {
    e.t_ns = e
        .t_ns
        .max(journal::state::START_MONO.load(Ordering::Relaxed));
    journal::append_event(t, &e, text);
}

/// The first time the journal meets device `d`: one `device` record with its UUID and PCI
/// bus id (driver calls, outside any lock).
#[inline]
fn name_device(d: i32) {
    if devices::first_sight(d) {
        let mut e = event(Kind::Device, Api::VramledgerSample);
        e.device = d;
        emit_raw(None, e, devices::identity(d).as_bytes());
    }
}

/// A release-type call, recorded in two halves around the real call so that the journal
/// order is the driver's order even when another thread reuses the address at once.
pub struct Ticket {
    slot: Option<Reserved>,
    event: Event,
}

impl Ticket {
    /// Before the call: reserve the record's place, take the memory out of the books.
    #[inline]
    pub fn before(t: &Thread, mut e: Event) -> Ticket {
        if !ensure() {
            return Ticket {
                slot: None,
                event: e,
            };
        }
        e.t_ns = e
            .t_ns
            .max(journal::state::START_MONO.load(Ordering::Relaxed));
        books::book(&mut e);
        let slot = journal::reserve_event(Some(t), &e);
        Ticket { slot, event: e }
    }

    /// After the call: write the record with the call's result. By reference: moving the
    /// ticket (an event of ~120 bytes) would touch stack lines the driver call evicted.
    #[inline]
    pub fn finish(&mut self, t: &Thread, result: i32) {
        if let Some(slot) = self.slot.take() {
            slot.commit(Some(t), &mut self.event, result);
        }
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
