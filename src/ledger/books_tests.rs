//! The ledger's rules on hand-built journals: balance, owners, stage boundaries, peaks.
//!
//! "Balanced" (start free = Σ stage deltas + end free) telescopes by construction when every
//! boundary has one free value, so these tests assert what can fail: each stage's delta, the
//! owners that explain it, what is left unattributed (negative included), where free memory
//! comes from when a reading is missing, who a free is charged to, and where peaks are.

use vramledger_format::{Api, Event, Kind, MemKind, Owner};

use crate::journal::Journal;
use crate::ledger::pools::PoolKey;
use crate::ledger::process::{self, DeviceBooks, ProcessBooks, StageRow};
use crate::ledger::samples::Source;
use crate::ledger::test_records;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const TOTAL: u64 = 80 * GIB;

/// A journal under construction: records 1 µs apart on device 0, thread 1.
struct J {
    events: Vec<Event>,
}

impl J {
    /// `startup`, sampled at `free`.
    fn new(free: u64) -> J {
        let mut j = J { events: Vec::new() };
        j.stage("startup").sample(free);
        j
    }
    fn ev(&mut self, kind: Kind, api: Api) -> &mut Event {
        let e = test_records::push(&mut self.events, kind, api);
        e.tid = 1;
        e
    }
    /// A stage record (the shim's own mark; no engine line).
    fn stage(&mut self, name: &str) -> &mut J {
        let e = self.ev(Kind::Stage, Api::VramledgerStage);
        e.device = -1;
        e.text = name.to_string();
        self
    }
    /// vramledger's free-memory sample (the block right after a stage record).
    fn sample(&mut self, free: u64) -> &mut J {
        let e = self.ev(Kind::MemInfo, Api::VramledgerSample);
        e.arg0 = free;
        e.arg1 = TOTAL;
        self
    }
    /// The program's own `cuMemGetInfo` (a reading that is no boundary sample).
    fn mem_get_info(&mut self, free: u64) -> &mut J {
        let e = self.ev(Kind::MemInfo, Api::cuMemGetInfo_v2);
        e.arg0 = free;
        e.arg1 = TOTAL;
        self
    }
    fn alloc(&mut self, addr: u64, size: u64, owner: Owner) -> &mut J {
        self.alloc_on(1, addr, size, owner)
    }
    fn alloc_on(&mut self, tid: u32, addr: u64, size: u64, owner: Owner) -> &mut J {
        let e = self.ev(Kind::Alloc, Api::cuMemAlloc_v2);
        e.tid = tid;
        e.addr = addr;
        e.size = size;
        e.arg0 = size;
        e.owner = owner as u8;
        e.mem = MemKind::Device as u8;
        self
    }
    /// A free as the shim records it: it does not know the block's owner.
    fn free(&mut self, addr: u64) -> &mut J {
        let e = self.ev(Kind::Free, Api::cuMemFree_v2);
        e.addr = addr;
        self
    }
    /// The last record on device `device` instead.
    fn on_device(&mut self, device: i32) -> &mut J {
        self.last(|e| e.device = device)
    }
    /// The last record made by module `module`.
    fn in_module(&mut self, module: u32) -> &mut J {
        self.last(|e| e.module = module)
    }
    fn last(&mut self, set: impl FnOnce(&mut Event)) -> &mut J {
        if let Some(e) = self.events.last_mut() {
            set(e);
        }
        self
    }
    fn books(&self) -> ProcessBooks {
        process::replay(&Journal {
            events: self.events.clone(),
            ..Journal::default()
        })
    }
}

fn device0(p: &ProcessBooks) -> &DeviceBooks {
    p.devices.iter().find(|d| d.device == 0).expect("device 0")
}

fn stage<'a>(d: &'a DeviceBooks, name: &str) -> &'a StageRow {
    d.stages.iter().find(|s| s.name == name).expect(name)
}

fn gib(n: f64) -> i64 {
    (n * GIB as f64) as i64
}

#[test]
fn each_stage_delta_is_its_free_drop_explained_by_owners_and_the_rest_unattributed() {
    let mut j = J::new(TOTAL);
    // (Direct, not NCCL: an NCCL event in startup would open `dist_init`.)
    j.alloc(0x1000, 10 * GIB, Owner::Torch)
        .alloc(0x2000, GIB, Owner::Direct)
        // 11 GiB hooked, 11.5 GiB gone: 0.5 GiB no hook saw.
        .stage("weight_load")
        .sample(TOTAL - 11 * GIB - GIB / 2)
        .alloc(0x3000, 20 * GIB, Owner::Torch)
        .free(0x2000)
        .stage("kv_pool")
        .sample(TOTAL - 30 * GIB - GIB / 2);
    let p = j.books();
    let d = device0(&p);
    let names: Vec<&str> = d.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["startup", "weight_load", "kv_pool"]);

    let s = stage(d, "startup");
    assert_eq!(
        (s.start_free, s.start_source),
        (Some(TOTAL), Source::Sample)
    );
    assert_eq!(s.device_delta, gib(11.5));
    assert_eq!(s.by_owner.get(Owner::Torch), gib(10.0));
    assert_eq!(s.by_owner.get(Owner::Direct), gib(1.0));
    assert_eq!(s.by_owner.get(Owner::Unattributed), gib(0.5));

    // The free of the direct block is charged to its allocation's owner, not to the owner
    // the free record carries (none).
    let w = stage(d, "weight_load");
    assert_eq!(w.device_delta, gib(19.0));
    assert_eq!(w.by_owner.get(Owner::Torch), gib(20.0));
    assert_eq!(w.by_owner.get(Owner::Direct), -gib(1.0));
    assert_eq!(w.by_owner.get(Owner::Unattributed), 0);
    assert_eq!(w.end_free, stage(d, "kv_pool").start_free);

    assert_eq!(d.start_free, Some(TOTAL));
    assert_eq!(d.end_free, Some(TOTAL - 30 * GIB - GIB / 2));
    assert_eq!(d.sum_deltas(), gib(30.5));
    assert!(d.balanced());
    assert_eq!(d.unattributed(), gib(0.5));
    assert_eq!(d.live_at_end.get(Owner::Torch), gib(30.0));
    assert_eq!(d.live_at_end.get(Owner::Direct), 0);
}

#[test]
fn hooked_bytes_above_a_stages_delta_leave_negative_unattributed() {
    // 3 GiB allocated, yet free memory fell by 2 GiB (the driver reused memory the hooks
    // count as new, or a reading came late): the books say so, they do not clamp.
    let mut j = J::new(TOTAL);
    j.alloc(0x1000, 3 * GIB, Owner::Torch)
        .stage("weight_load")
        .sample(TOTAL - 2 * GIB);
    let d = device0(&j.books()).clone();
    let s = stage(&d, "startup");
    assert_eq!(s.device_delta, gib(2.0));
    assert_eq!(s.by_owner.get(Owner::Torch), gib(3.0));
    assert_eq!(s.by_owner.get(Owner::Unattributed), -gib(1.0));
    assert_eq!(d.unattributed(), -gib(1.0));
    assert!(d.balanced());
}

#[test]
fn a_missing_free_reading_is_derived_from_the_last_reading_and_the_hooks_since() {
    // `weight_load` has no sample of its own: its start is the last reading (the program's
    // cuMemGetInfo, 1 GiB into startup) minus what the hooks took after it.
    let mut j = J::new(TOTAL);
    j.alloc(0x1000, GIB, Owner::Torch)
        .mem_get_info(TOTAL - GIB - 100 * MIB)
        .alloc(0x2000, 4 * GIB, Owner::Torch)
        .stage("weight_load")
        .alloc(0x3000, 2 * GIB, Owner::Torch)
        .stage("kv_pool")
        .sample(TOTAL - 7 * GIB - 100 * MIB);
    let d = device0(&j.books()).clone();
    let w = stage(&d, "weight_load");
    assert_eq!(w.start_source, Source::Derived);
    assert_eq!(w.start_free, Some(TOTAL - 5 * GIB - 100 * MIB));
    assert_eq!(stage(&d, "startup").end_source, Source::Derived);
    assert_eq!(w.end_source, Source::Sample);
    // What no hook saw (100 MiB, before the reading) stays in startup.
    assert_eq!(
        stage(&d, "startup").by_owner.get(Owner::Unattributed),
        100 * MIB as i64
    );
    assert_eq!(w.by_owner.get(Owner::Unattributed), 0);
    assert_eq!(w.device_delta, gib(2.0));
    assert!(d.balanced());
}

#[test]
fn a_device_never_read_has_unknown_free_and_is_not_balanced() {
    // Samples on device 0 only; device 1 allocates but no reading of it exists.
    let mut j = J::new(TOTAL);
    j.ev(Kind::Alloc, Api::cuMemAlloc_v2);
    let e = j.events.last_mut().unwrap();
    (e.device, e.addr, e.size, e.owner, e.mem) =
        (1, 0x9000, GIB, Owner::Torch as u8, MemKind::Device as u8);
    j.stage("weight_load").sample(TOTAL);
    let p = j.books();
    let d1 = p.devices.iter().find(|d| d.device == 1).expect("device 1");
    assert_eq!(d1.start_free, None);
    assert_eq!(d1.stages[0].start_source, Source::Unknown);
    assert_eq!(d1.stages[0].device_delta, 0);
    // The hooks' bytes stay, and nothing can be said of the rest.
    assert_eq!(d1.stages[0].by_owner.get(Owner::Torch), gib(1.0));
    assert!(!d1.balanced());
}

#[test]
fn a_record_belongs_to_the_stage_open_when_it_was_written() {
    let mut j = J::new(TOTAL);
    j.alloc(0x1000, GIB, Owner::Torch)
        .stage("weight_load")
        .sample(TOTAL - GIB)
        .alloc(0x2000, 2 * GIB, Owner::Direct)
        .stage("kv_pool")
        .sample(TOTAL - 3 * GIB)
        .free(0x1000);
    let d = device0(&j.books()).clone();
    let by = |name: &str, o: Owner| stage(&d, name).by_owner.get(o);
    assert_eq!(by("startup", Owner::Torch), gib(1.0));
    assert_eq!(by("startup", Owner::Direct), 0);
    assert_eq!(by("weight_load", Owner::Direct), gib(2.0));
    assert_eq!(by("weight_load", Owner::Torch), 0);
    // The free after the last stage record is the last stage's.
    assert_eq!(by("kv_pool", Owner::Torch), -gib(1.0));
    // Stage times: each starts at its stage record; the last ends at the last record.
    let w = stage(&d, "weight_load");
    let k = stage(&d, "kv_pool");
    assert_eq!(w.end_t_ns, k.start_t_ns);
    assert_eq!(k.end_t_ns, j.events.last().unwrap().t_ns);
}

#[test]
fn a_failed_allocation_moves_nothing() {
    let mut j = J::new(TOTAL);
    j.alloc(0x1000, GIB, Owner::Torch);
    j.events.last_mut().unwrap().result = 2; // CUDA_ERROR_OUT_OF_MEMORY
    j.alloc(0x2000, GIB, Owner::Torch);
    let d = device0(&j.books()).clone();
    assert_eq!(d.live_at_end.get(Owner::Torch), gib(1.0));
    assert_eq!(d.peak_total.bytes, gib(1.0));
}

#[test]
fn a_second_thread_allocating_while_another_captures_keeps_its_owner() {
    // Thread 1 captures a graph (its allocation is graph-pool memory); thread 2 allocates
    // ordinary torch memory inside the capture window: it is not graph-pool memory, and its
    // free later leaves the graph pool untouched.
    let mut j = J::new(TOTAL);
    j.stage("graph_capture").sample(TOTAL);
    j.ev(Kind::CaptureBegin, Api::cuStreamBeginCapture_v2);
    j.alloc_on(1, 0x1000, 64 * MIB, Owner::TorchGraphPool)
        .alloc_on(2, 0x2000, 32 * MIB, Owner::Torch);
    j.ev(Kind::CaptureEnd, Api::cuStreamEndCapture);
    j.free(0x2000);
    let p = j.books();
    let d = device0(&p);
    let g = stage(d, "graph_capture");
    assert_eq!(g.by_owner.get(Owner::TorchGraphPool), 64 * MIB as i64);
    assert_eq!(g.by_owner.get(Owner::Torch), 0, "allocated then freed");
    assert_eq!(d.live_at_end.get(Owner::TorchGraphPool), 64 * MIB as i64);
    assert_eq!(d.live_at_end.get(Owner::Torch), 0);
    // The peaks per owner saw thread 2's bytes as torch's.
    assert_eq!(d.peak_by_owner[&Owner::Torch].bytes, 32 * MIB as i64);
    assert_eq!(
        d.peak_by_owner[&Owner::TorchGraphPool].bytes,
        64 * MIB as i64
    );
    // PyTorch's pools: the default pool had thread 2's block, now freed; the graph pool
    // (no pool id recorded) holds thread 1's.
    let pool = |key: PoolKey| {
        let r = p.torch_pools.rows.iter().find(|r| r.pool() == key);
        r.map(|r| (r.live, r.peak))
    };
    assert_eq!(pool(PoolKey::Default), Some((0, 32 * MIB as i64)));
    assert_eq!(
        pool(PoolKey::Unknown),
        Some((64 * MIB as i64, 64 * MIB as i64))
    );
}

#[test]
fn a_peak_is_the_first_record_that_reaches_the_most_held() {
    let mut j = J::new(TOTAL);
    j.alloc(0x1000, 4 * GIB, Owner::Torch) // 4
        .alloc(0x2000, 2 * GIB, Owner::Direct) // 6: the peak
        .stage("weight_load")
        .sample(TOTAL - 6 * GIB)
        .free(0x1000) // 2
        .alloc(0x3000, 4 * GIB, Owner::Torch) // 6 again: not a new peak
        .free(0x3000) // 2
        .alloc(0x4000, 3 * GIB, Owner::Torch); // 5
    let p = j.books();
    let d = device0(&p);
    assert_eq!(d.peak_total.bytes, gib(6.0));
    assert_eq!(d.peak_total.stage, "startup");
    assert_eq!(d.peak_total.t_ns, j.events[3].t_ns);
    // Per owner: torch's own height (4 GiB) is first reached in startup.
    let torch = &d.peak_by_owner[&Owner::Torch];
    assert_eq!((torch.bytes, torch.stage.as_str()), (gib(4.0), "startup"));
    assert_eq!(torch.t_ns, j.events[2].t_ns);
    assert_eq!(d.peak_by_owner[&Owner::Direct].bytes, gib(2.0));
    assert!(!d.peak_by_owner.contains_key(&Owner::Nccl));
}

#[test]
fn the_context_is_measured_around_its_creation_and_opens_the_books_before_it() {
    // NVML read 80 GiB free before the context and 79.5 GiB after: 512 MiB is the
    // context's, and the books open at the free memory before it.
    let mut j = J { events: Vec::new() };
    j.stage("startup");
    let e = j.ev(Kind::Context, Api::cuCtxCreate_v2);
    (e.size, e.arg0) = (512 * MIB, TOTAL);
    j.sample(TOTAL - 512 * MIB)
        .alloc(0x1000, GIB, Owner::Torch)
        .stage("weight_load")
        .sample(TOTAL - GIB - 512 * MIB);
    let d = device0(&j.books()).clone();
    let s = stage(&d, "startup");
    assert_eq!(d.start_free, Some(TOTAL));
    assert_eq!(s.by_owner.get(Owner::Context), 512 * MIB as i64);
    assert_eq!(s.by_owner.get(Owner::Torch), gib(1.0));
    assert_eq!(s.by_owner.get(Owner::Unattributed), 0);
    assert_eq!(d.peak_total.bytes, gib(1.5));
    assert!(d.balanced());
}

#[test]
fn a_reading_after_a_stages_first_allocation_is_not_its_start() {
    // `weight_load` opens without a sample block; the program reads free memory only after
    // allocating 2 GiB in it. Its start is derived (the startup sample and the hooks since),
    // never that later reading, so the 2 GiB stay in weight_load.
    let mut j = J::new(TOTAL);
    j.alloc(0x1000, GIB, Owner::Torch)
        .stage("weight_load")
        .alloc(0x2000, 2 * GIB, Owner::Torch)
        .mem_get_info(TOTAL - 3 * GIB);
    let d = device0(&j.books()).clone();
    let w = stage(&d, "weight_load");
    assert_eq!(
        (w.start_free, w.start_source),
        (Some(TOTAL - GIB), Source::Derived)
    );
    assert_eq!(w.device_delta, gib(2.0));
    assert_eq!(w.by_owner.get(Owner::Unattributed), 0);
    assert_eq!(stage(&d, "startup").device_delta, gib(1.0));
}

#[test]
fn an_allocation_that_opens_a_stage_starts_it_from_the_last_reading() {
    // NCCL's first allocation opens `dist_init` (no line says so): that allocation record is
    // the boundary, and the stage starts from the last reading before it (the program's own
    // `cuMemGetInfo`, 3 GiB below what the hooks explain), not from the first one.
    let mut j = J::new(TOTAL);
    j.alloc(0x1000, GIB, Owner::Direct)
        .mem_get_info(TOTAL - 4 * GIB)
        .alloc(0x9000_0000, 64 * MIB, Owner::Nccl);
    let d = device0(&j.books()).clone();
    let dist = stage(&d, "dist_init");
    assert_eq!(dist.start_free, Some(TOTAL - 4 * GIB));
    assert_eq!(dist.device_delta, (64 * MIB) as i64);
    assert_eq!(stage(&d, "startup").device_delta, gib(4.0));
}

#[test]
fn an_allocation_ends_a_stages_sample_block() {
    // `weight_load`'s block samples device 0; device 1 is read only after an allocation, so
    // that reading is no start of the stage on device 1: its start is derived (startup's
    // sample and the 1 GiB the hooks saw since).
    let mut j = J::new(TOTAL);
    j.sample(TOTAL).on_device(1);
    j.alloc(0x1000, GIB, Owner::Torch).on_device(1);
    j.stage("weight_load")
        .sample(TOTAL)
        .alloc(0x2000, GIB, Owner::Torch)
        .sample(TOTAL - 3 * GIB)
        .on_device(1);
    let p = j.books();
    let d1 = p.devices.iter().find(|d| d.device == 1).expect("device 1");
    let w = stage(d1, "weight_load");
    assert_eq!(
        (w.start_free, w.start_source),
        (Some(TOTAL - GIB), Source::Derived)
    );
}

#[test]
fn each_module_keeps_its_live_peak_and_allocated_bytes_whatever_its_id() {
    // Small ids (kept by id) and one past them (kept in a list), moves interleaved.
    let mut j = J::new(TOTAL);
    j.alloc(0x1000, 2 * GIB, Owner::Torch)
        .in_module(1)
        .alloc(0x2000, 4 * GIB, Owner::Nccl)
        .in_module(5000)
        .alloc(0x3000, GIB, Owner::Torch)
        .in_module(1)
        .alloc(0x4000, 512 * MIB, Owner::Direct)
        .in_module(3)
        .free(0x1000)
        .free(0x2000);
    let modules = [
        (1, "/v/libc10_cuda.so"),
        (3, "/v/libcublas.so.13"),
        (5000, "/v/libnccl.so.2"),
    ]
    .map(|(id, path)| (id, path.to_string()))
    .into();
    let p = process::replay(&Journal {
        events: j.events.clone(),
        modules,
        ..Journal::default()
    });
    let rows: Vec<_> = device0(&p)
        .modules
        .iter()
        .map(|m| (m.module.as_str(), m.owner, m.live, m.peak, m.allocated))
        .collect();
    assert_eq!(
        rows,
        [
            ("libnccl.so.2", Some(Owner::Nccl), 0, gib(4.0), 4 * GIB),
            (
                "libc10_cuda.so",
                Some(Owner::Torch),
                gib(1.0),
                gib(3.0),
                3 * GIB
            ),
            (
                "libcublas.so.13",
                Some(Owner::Direct),
                gib(0.5),
                gib(0.5),
                GIB / 2
            ),
        ]
    );
}
