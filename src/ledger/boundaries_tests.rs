//! Boundaries from stage records and from API events, on hand-built journals.

use super::*;
use crate::journal::Journal;
use crate::ledger::process;
use crate::ledger::samples::Source;
use vramledger_format::{MemKind, Owner};

const MIB: u64 = 1 << 20;

/// A journal under construction: events 1 µs apart, device 0.
#[derive(Default)]
struct J {
    events: Vec<Event>,
}

impl J {
    fn new() -> J {
        let mut j = J::default();
        j.stage("startup", Api::VramledgerStage, None);
        j.sample(80 << 30);
        j
    }
    fn ev(&mut self, kind: Kind, api: Api) -> &mut Event {
        crate::ledger::test_records::push(&mut self.events, kind, api)
    }
    fn stage(&mut self, name: &str, api: Api, line: Option<&str>) -> &mut J {
        let e = self.ev(Kind::Stage, api);
        e.device = -1;
        e.text = match line {
            Some(l) => format!("{name}\n{l}"),
            None => name.to_string(),
        };
        self
    }
    fn line(&mut self, name: &str, line: &str) -> &mut J {
        self.stage(name, Api::VramledgerLogLine, Some(line))
    }
    fn sample(&mut self, free: u64) -> &mut J {
        let e = self.ev(Kind::MemInfo, Api::VramledgerSample);
        e.arg0 = free;
        e.arg1 = 80 << 30;
        self
    }
    fn alloc(&mut self, addr: u64, size: u64, owner: Owner) -> &mut J {
        let e = self.ev(Kind::Alloc, Api::cuMemAlloc_v2);
        e.addr = addr;
        e.size = size;
        e.owner = owner as u8;
        e.mem = MemKind::Device as u8;
        self
    }
    fn capture(&mut self, addr: u64, size: u64) -> &mut J {
        self.ev(Kind::CaptureBegin, Api::cuStreamBeginCapture_v2);
        self.alloc(addr, size, Owner::TorchGraphPool);
        self.ev(Kind::CaptureEnd, Api::cuStreamEndCapture);
        self
    }
    fn journal(&self) -> Journal {
        Journal {
            events: self.events.clone(),
            ..Journal::default()
        }
    }
}

fn names(b: &[StageBoundary]) -> Vec<(&str, SetBy)> {
    b.iter().map(|b| (b.name.as_str(), b.set_by)).collect()
}

const LOADED: &str = "(EngineCore pid=1) INFO 12-01 09:43:29 [model_runner.py:305] Model loading took 15.0 GiB and 0.000002 seconds";
const AVAILABLE: &str = "(EngineCore pid=1) INFO 12-01 09:43:35 [gpu_worker.py:560] Available KV cache memory: 52.95 GiB";
const BAR: &str = "Capturing CUDA graphs (PIECEWISE):   0%|          | 0/8 [00:00<?, ?it/s]";
const FINISHED: &str = "(EngineCore pid=1) INFO 12-01 09:43:36 [model_runner.py:747] Graph capturing finished in 1 secs, took 0.23 GiB";
const READY: &str = "(EngineCore pid=1) INFO 12-01 09:43:37 [core.py:340] init engine (profile, create kv cache, warmup model) took 8.83 s (compilation: 4.42 s)";

#[test]
fn a_capture_opens_graph_capture_and_the_late_bar_is_the_same_boundary() {
    let mut j = J::new();
    j.line("kv_cache", AVAILABLE).sample(60 << 30);
    j.alloc(1 << 40, 8 * MIB, Owner::Torch);
    j.capture(2 << 40, 2 * MIB);
    j.line("graph_capture", BAR).sample(50 << 30);
    j.capture(3 << 40, 2 * MIB);
    j.line("post_capture", FINISHED).sample(49 << 30);
    let b = derive(&j.journal());
    assert_eq!(
        names(&b),
        [
            ("startup", SetBy::Implicit),
            ("kv_cache", SetBy::EngineLine),
            ("graph_capture", SetBy::ApiEvent),
            ("post_capture", SetBy::EngineLine),
        ]
    );
    // It opens at the capture itself (event 5: the begin after the torch allocation).
    assert_eq!(j.events[b[2].index].kind(), Some(Kind::CaptureBegin));
    assert!(!b[2].sampled);
    assert!(b[2]
        .detail
        .starts_with("a stream capture began (cuStreamBeginCapture_v2)"));
    assert!(b[2].detail.contains("the line came"), "{}", b[2].detail);
    assert_eq!(b[2].line.as_deref(), Some(BAR));
    // The bar's own record is a repeat, not a boundary.
    let bar = j.events.iter().position(|e| e.text.ends_with(BAR)).unwrap();
    assert!(is_repeat(&b, bar, &j.events[bar]));
    assert!(!is_repeat(&b, b[3].index, &j.events[b[3].index]));
}

#[test]
fn a_missing_finish_line_closes_the_capture_after_its_last_end() {
    let mut j = J::new();
    j.line("kv_cache", AVAILABLE).sample(60 << 30);
    j.capture(2 << 40, 2 * MIB);
    j.capture(3 << 40, 2 * MIB);
    let last_end = j.events.len() - 1;
    j.alloc(4 << 40, 4 * MIB, Owner::Torch); // post-capture warm-up
    j.line("serving", READY).sample(40 << 30);
    let b = derive(&j.journal());
    assert_eq!(
        names(&b),
        [
            ("startup", SetBy::Implicit),
            ("kv_cache", SetBy::EngineLine),
            ("graph_capture", SetBy::ApiEvent),
            ("post_capture", SetBy::ApiEvent),
            ("serving", SetBy::EngineLine),
        ]
    );
    assert_eq!(b[3].index, last_end + 1);
    assert!(b[3].detail.contains("cuStreamEndCapture"));
}

#[test]
fn plain_pytorch_captures_get_both_ends_from_the_api() {
    let mut j = J::new();
    j.alloc(1 << 40, 8 * MIB, Owner::Torch);
    j.capture(2 << 40, 2 * MIB);
    j.alloc(4 << 40, 2 * MIB, Owner::Torch);
    let b = derive(&j.journal());
    assert_eq!(
        names(&b),
        [
            ("startup", SetBy::Implicit),
            ("graph_capture", SetBy::ApiEvent),
            ("post_capture", SetBy::ApiEvent),
        ]
    );
    // A capture that is the journal's last event leaves nothing to open after it.
    let mut j = J::new();
    j.capture(2 << 40, 2 * MIB);
    assert_eq!(names(&derive(&j.journal())).len(), 2);
}

#[test]
fn captures_while_profiling_serving_or_after_a_mark_open_nothing() {
    let mut j = J::new();
    j.line("memory_profiling", "Loading model weights took 2.8884 GB")
        .sample(60 << 30);
    j.capture(2 << 40, 2 * MIB); // V1 runner's throwaway profiling graphs
    j.line("serving", READY).sample(50 << 30);
    j.capture(3 << 40, 2 * MIB);
    j.stage("mine", Api::VramledgerStage, None).sample(49 << 30);
    j.capture(4 << 40, 2 * MIB);
    let b = derive(&j.journal());
    let got: Vec<&str> = b.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(got, ["startup", "memory_profiling", "serving", "mine"]);
    // A rule-file stage is not overridden either, and says where it came from.
    let mut j = J::new();
    j.line("my_stage", "MYENGINE phase two").sample(60 << 30);
    j.capture(2 << 40, 2 * MIB);
    let b = derive(&j.journal());
    assert_eq!(names(&b)[1], ("my_stage", SetBy::RuleFile));
    assert_eq!(b.len(), 2);
}

#[test]
fn nccl_communicator_creation_opens_dist_init_only_from_startup() {
    let mut j = J::new();
    j.alloc(1 << 40, 2 * MIB, Owner::Torch);
    j.alloc(2 << 40, 32 * MIB, Owner::Nccl);
    let first_nccl = j.events.len() - 1;
    j.alloc(3 << 40, 32 * MIB, Owner::Nccl);
    j.line("weight_load", "Loading model from scratch...")
        .sample(60 << 30);
    j.alloc(4 << 40, 32 * MIB, Owner::Nccl); // a later communicator: stays where it is
    let b = derive(&j.journal());
    assert_eq!(
        names(&b),
        [
            ("startup", SetBy::Implicit),
            ("dist_init", SetBy::ApiEvent),
            ("weight_load", SetBy::EngineLine),
        ]
    );
    assert_eq!(b[1].index, first_nccl);
    assert!(b[1].detail.contains("NCCL allocation (cuMemAlloc_v2)"));
    // Registrations and peer imports are communicator events too; the line, when it comes
    // after, is the same boundary.
    for kind in [Kind::Register, Kind::VmmImport] {
        let mut j = J::new();
        j.ev(kind, Api::None);
        j.line(
            "dist_init",
            "world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://x:1 backend=nccl",
        );
        let b = derive(&j.journal());
        assert_eq!(names(&b)[1], ("dist_init", SetBy::ApiEvent), "{kind:?}");
        assert_eq!(b.len(), 2);
    }
    // The line first: the allocations belong to the stage it opened.
    let mut j = J::new();
    j.line(
        "dist_init",
        "world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://x:1 backend=nccl",
    );
    j.alloc(2 << 40, 32 * MIB, Owner::Nccl);
    assert_eq!(
        names(&derive(&j.journal()))[1],
        ("dist_init", SetBy::EngineLine)
    );
}

#[test]
fn model_loading_duration_starts_weight_load() {
    let mut j = J::new();
    j.line(
        "dist_init",
        "world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://x:1 backend=nccl",
    );
    j.sample(79 << 30);
    for k in 0..6 {
        j.alloc((10 + k) << 40, 256 * MIB, Owner::Torch);
    }
    // 2 µs before the line's record: the 5th allocation (events are 1 µs apart).
    j.line("memory_profiling", LOADED).sample(78 << 30);
    let b = derive(&j.journal());
    assert_eq!(
        names(&b),
        [
            ("startup", SetBy::Implicit),
            ("dist_init", SetBy::EngineLine),
            ("weight_load", SetBy::EngineLine),
            ("memory_profiling", SetBy::EngineLine),
        ]
    );
    let rec = b[3].index;
    assert_eq!(j.events[rec].t_ns - b[2].t_ns, 2_000);
    assert!(
        b[2].detail
            .starts_with("0.000002 s before 'Model loading took"),
        "{}",
        b[2].detail
    );
    // With the begin line recorded, nothing is derived.
    let mut j = J::new();
    j.line("weight_load", "Loading model from scratch...")
        .sample(79 << 30);
    j.alloc(10 << 40, 256 * MIB, Owner::Torch);
    j.line("memory_profiling", LOADED).sample(78 << 30);
    assert_eq!(derive(&j.journal()).len(), 3);
}

#[test]
fn books_balance_over_derived_boundaries() {
    // Free memory moves only with the hooked bytes: every derived boundary gets the reading
    // before it corrected by what moved since, and the deltas still telescope.
    let mut j = J::new();
    j.line("kv_cache", AVAILABLE).sample(80 << 30);
    j.alloc(1 << 40, 8 * MIB, Owner::Torch);
    j.capture(2 << 40, 2 * MIB);
    j.alloc(4 << 40, 4 * MIB, Owner::Torch);
    j.line("serving", READY).sample((80 << 30) - 14 * MIB);
    let books = process::replay(&j.journal());
    let d = &books.devices[0];
    assert!(d.balanced());
    let stage = |n: &str| d.stages.iter().find(|s| s.name == n).unwrap();
    let gc = stage("graph_capture");
    assert_eq!(gc.start_source, Source::Derived);
    assert_eq!(gc.device_delta, 2 * MIB as i64);
    assert_eq!(gc.by_owner.get(Owner::TorchGraphPool), 2 * MIB as i64);
    assert_eq!(gc.by_owner.get(Owner::Unattributed), 0);
    assert_eq!(stage("post_capture").device_delta, 4 * MIB as i64);
    assert_eq!(stage("kv_cache").device_delta, 8 * MIB as i64);
    assert_eq!(
        (gc.start_set_by, gc.end_set_by),
        (SetBy::ApiEvent, SetBy::ApiEvent)
    );
    let serving = stage("serving");
    assert_eq!(serving.end_set_by, SetBy::EndOfJournal);
    assert_eq!(serving.start_set_by, SetBy::EngineLine);
}

#[test]
fn another_ranks_line_for_the_current_stage_is_no_boundary() {
    let mut j = J::new();
    j.line("kv_cache", AVAILABLE).sample(60 << 30);
    j.line("kv_cache", "(EngineCore pid=7) INFO 12-01 09:43:35 [kv_cache_utils.py:2177] GPU KV cache size: 433,776 tokens");
    j.sample(59 << 30);
    // Explicit marks repeat on purpose: each is a stage of its own.
    j.stage("step", Api::VramledgerStage, None).sample(58 << 30);
    j.stage("step", Api::VramledgerStage, None).sample(57 << 30);
    let b = derive(&j.journal());
    let got: Vec<&str> = b.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(got, ["startup", "kv_cache", "step", "step"]);
    let rec = j
        .events
        .iter()
        .position(|e| e.text.contains("GPU KV cache size"))
        .unwrap();
    assert!(is_repeat(&b, rec, &j.events[rec]));
}

#[test]
fn the_rising_times_find_the_first_record_at_or_after_any_instant() {
    // Deltas of every varint length, times that fall back now and then (not kept).
    let mut r = super::Rising::default();
    let mut kept: Vec<(usize, u64)> = Vec::new();
    let (mut t, mut x, mut i) = (5u64, 0x9E37_79B9_7F4A_7C15u64, 0usize);
    for _ in 0..5000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let step = match x % 5 {
            0 => x % 100,
            1 => x % 20_000,
            2 => x % (1 << 30),
            3 => x % (1 << 50),
            _ => 0,
        };
        let fall = x % 7 == 0 && t > 1000;
        let at = if fall { t - 1000 } else { t + step };
        i += 1 + (x % 300) as usize; // sparse indexes: multi-byte index deltas too
        r.offer(i, at);
        if kept.last().is_none_or(|&(_, lt)| at > lt) {
            kept.push((i, at));
        }
        t = t.max(at);
    }
    assert_eq!(r.first, kept.first().copied());
    for &(i, at) in kept.iter().step_by(37) {
        assert_eq!(r.first_at_or_after(at), Found::At(i, at));
        let want = kept
            .iter()
            .copied()
            .find(|&(_, kt)| kt >= at.saturating_sub(1))
            .map_or(Found::None, |(i, t)| Found::At(i, t));
        assert_eq!(r.first_at_or_after(at.saturating_sub(1)), want);
    }
    assert_eq!(r.first_at_or_after(t + 1), Found::None);
}

/// A journal whose `dist_init` stage holds `records` allocations before vLLM's loading line,
/// which says loading took `took_s`.
fn long_stage_then_loaded(records: u64, took_s: f64) -> J {
    let mut j = J::new();
    j.line(
        "dist_init",
        "world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://x:1 backend=nccl",
    );
    for k in 0..records {
        j.alloc((1 << 40) + k * 2 * MIB, 2 * MIB, Owner::Torch);
    }
    let loaded = format!(
        "(EngineCore pid=1) INFO 12-01 09:43:29 [model_runner.py:305] Model loading took 15.0 GiB and {took_s:.6} seconds"
    );
    j.line("memory_profiling", &loaded);
    j
}

#[test]
fn a_bounded_scan_that_loses_a_lookback_is_walked_again_whole() {
    use crate::ledger::index::Index;
    let bounded = |j: &J| {
        let mut s = Scan::bounded();
        for (i, e) in j.events.iter().enumerate() {
            s.step(i, e);
        }
        s.lost()
    };
    // 200,000 records 1 µs apart (2 bytes of rising times each): a bounded scan keeps the
    // first 65,536. Loading began 10 ms (10,000 records) before the line: past what it kept.
    let late = long_stage_then_loaded(200_000, 0.010);
    assert!(
        bounded(&late),
        "the lookback must fall past the bounded part"
    );
    let b = derive(&late.journal());
    assert_eq!(Index::scan(&late.journal()).boundaries, b);
    let line = late.events.len() - 1;
    assert_eq!(b[2].name, "weight_load");
    assert_eq!(b[2].index, line - 10_000);
    // Loading began 190 ms before the line: inside the kept part, no second walk needed.
    let early = long_stage_then_loaded(200_000, 0.190);
    assert!(!bounded(&early));
    let b = derive(&early.journal());
    assert_eq!(Index::scan(&early.journal()).boundaries, b);
    assert_eq!(b[2].index, early.events.len() - 1 - 190_000);
}
