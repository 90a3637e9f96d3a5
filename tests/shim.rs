//! libvramledger.so preloaded into client programs that drive the fake driver the way
//! cudart, PyTorch, cuBLAS and NCCL drive the real one; journals asserted exactly.
//!
//! Needs `cargo build --workspace` first (the shim and the fake driver are cdylibs).

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use support::{clients, profile_dir, RunOutput};
use vramledger::journal::{self, Journal};
use vramledger_format::{Api, Event, Kind, LiveBooks, MemKind, Owner};

const MIB: u64 = 1 << 20;

fn shim() -> PathBuf {
    if let Some(p) = std::env::var_os("VRAMLEDGER_TEST_SHIM") {
        return PathBuf::from(p); // another build of the library, to compare
    }
    let lib = profile_dir().join("libvramledger.so");
    assert!(
        lib.is_file(),
        "{} is missing: run `cargo build --workspace` first",
        lib.display()
    );
    lib
}

fn out_dir(test: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("shim-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a client with and without the preload; returns the hooked run and its journals.
fn traced(
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
    test: &str,
) -> (RunOutput, Vec<Journal>) {
    let dir = out_dir(test);
    let shim = shim();
    let mut full: Vec<(&str, &str)> = env.to_vec();
    let shim_s = shim.to_string_lossy().into_owned();
    let dir_s = dir.to_string_lossy().into_owned();
    full.push(("LD_PRELOAD", &shim_s));
    full.push(("VRAMLEDGER_OUT", &dir_s));
    let hooked = clients().run(name, args, &full);
    (hooked, journals(&dir))
}

fn journals(dir: &Path) -> Vec<Journal> {
    journal::find(dir)
        .unwrap()
        .iter()
        .map(|p| journal::read(p).unwrap())
        .collect()
}

fn only(js: Vec<Journal>) -> Journal {
    assert_eq!(js.len(), 1, "expected one journal, found {}", js.len());
    js.into_iter().next().unwrap()
}

fn of_kind(j: &Journal, kind: Kind) -> Vec<&Event> {
    j.events.iter().filter(|e| e.kind() == Some(kind)).collect()
}

/// (module file name, owner, size) of every allocation-type record.
fn made(j: &Journal) -> Vec<(String, Owner, u64, Kind)> {
    j.events
        .iter()
        .filter(|e| matches!(e.kind(), Some(Kind::Alloc | Kind::VmmCreate)))
        .map(|e| {
            (
                j.module_name(e.module).to_string(),
                e.owner(),
                e.size,
                e.kind().unwrap(),
            )
        })
        .collect()
}

fn replay(j: &Journal) -> LiveBooks {
    let mut b = LiveBooks::new();
    for e in &j.events {
        b.apply(e);
    }
    b
}

fn same_output(name: &str, args: &[&str], env: &[(&str, &str)], hooked: &RunOutput) {
    let plain = clients().run(name, args, env);
    assert_eq!(
        plain.status.code(),
        hooked.status.code(),
        "{}\n{}",
        plain.dump(),
        hooked.dump()
    );
    assert_eq!(
        plain.stdout, hooked.stdout,
        "output changed under the preload"
    );
}

#[test]
fn torch_like_owners_capture_vmm_pools_host() {
    let (out, js) = traced("torch_like", &[], &[], "torch");
    assert!(out.success(), "{}", out.dump());
    same_output("torch_like", &[], &[], &out);
    let j = only(js);
    assert!(j.warnings.is_empty(), "{:?}", j.warnings);

    // The caching allocator's memory comes from libc10_cuda (through libcudart, unwound past
    // it) and is PyTorch's; what the program itself allocates through cudart is direct.
    let made = made(&j);
    assert!(
        made.iter().filter(|m| m.0 == "libc10_cuda.so").count() >= 9,
        "{made:?}"
    );
    for (module, owner, size, kind) in &made {
        match module.as_str() {
            "libc10_cuda.so" => assert!(matches!(owner, Owner::Torch | Owner::TorchGraphPool)),
            "torch_like" => assert_eq!(*owner, Owner::Direct, "{kind:?} of {size}"),
            other => panic!("{kind:?} of {size} attributed to {other}"),
        }
    }
    // Exactly the 64 MiB private-pool segment is graph-pool memory.
    let graph: Vec<u64> = made
        .iter()
        .filter(|m| m.1 == Owner::TorchGraphPool)
        .map(|m| m.2)
        .collect();
    assert_eq!(graph, vec![64 * MIB]);
    // The unrelaxed cudaMalloc inside the first capture failed with 900, recorded as such.
    let failed = of_kind(&j, Kind::AllocFailed);
    assert_eq!(
        failed
            .iter()
            .map(|e| (e.result, e.size))
            .collect::<Vec<_>>(),
        vec![(900, MIB)]
    );
    // Expandable segments: 4 x 20 MiB and 2 x 2 MiB handles, torch-owned, plus VA reservations.
    let creates: Vec<u64> = of_kind(&j, Kind::VmmCreate)
        .iter()
        .map(|e| e.size)
        .collect();
    assert_eq!(
        creates,
        vec![20 * MIB, 20 * MIB, 20 * MIB, 20 * MIB, 2 * MIB, 2 * MIB]
    );
    assert!(!of_kind(&j, Kind::VaReserve).is_empty());
    assert!(of_kind(&j, Kind::VaReserve)
        .iter()
        .all(|e| e.mem() == MemKind::Virtual));
    // Stream-ordered: the per-call size is recorded, the pool's 32 MiB chunk is sampled,
    // and the trim brings the pool back to zero.
    let samples: Vec<u64> = of_kind(&j, Kind::PoolSample)
        .iter()
        .map(|e| e.arg0)
        .collect();
    assert_eq!(samples.first(), Some(&(32 * MIB)), "{samples:?}");
    assert_eq!(samples.last(), Some(&0), "{samples:?}");
    // Managed and host memory are never VRAM.
    let managed: Vec<&Event> = of_kind(&j, Kind::Alloc)
        .into_iter()
        .filter(|e| e.mem() == MemKind::Managed)
        .collect();
    assert_eq!(managed.len(), 1);
    assert_eq!(managed[0].size, 256 * MIB);
    let host: Vec<(Api, u64)> = of_kind(&j, Kind::HostAlloc)
        .iter()
        .map(|e| (e.api().unwrap(), e.size))
        .collect();
    assert_eq!(
        host,
        vec![
            (Api::cuMemHostAlloc, 16 * MIB),
            (Api::cuMemHostRegister_v2, MIB)
        ]
    );
    // The context was measured through NVML: the fake driver's 300 MiB.
    let ctx: Vec<&Event> = of_kind(&j, Kind::Context)
        .into_iter()
        .filter(|e| e.api() == Some(Api::cuDevicePrimaryCtxRetain))
        .collect();
    assert_eq!(ctx.len(), 1);
    assert_eq!(ctx[0].size, 300 * MIB);
    assert_eq!(
        ctx[0].arg2,
        300 * MIB,
        "NVML per-process used after the retain"
    );
    // The program freed everything: nothing is left in the books.
    let books = replay(&j);
    let left: Vec<_> = books
        .totals()
        .filter(|((_, _, mem), _)| *mem == MemKind::Device)
        .collect();
    assert!(left.is_empty(), "left: {left:?}");
    assert_eq!(books.unknown_frees, 0);
    // The program's own cudaMemGetInfo readings are recorded.
    assert!(of_kind(&j, Kind::MemInfo)
        .iter()
        .any(|e| e.api() == Some(Api::cuMemGetInfo_v2)));
}

#[test]
fn cublas_workspace_and_application_memory_have_their_modules() {
    let (out, js) = traced("cublas_like", &[], &[], "cublas");
    assert!(out.success(), "{}", out.dump());
    let j = only(js);
    let made = made(&j);
    assert_eq!(
        made,
        vec![
            (
                "libcublas.so.13".to_string(),
                Owner::Direct,
                4 * MIB,
                Kind::Alloc
            ),
            (
                "cublas_like".to_string(),
                Owner::Direct,
                10 * MIB,
                Kind::Alloc
            ),
        ]
    );
}

#[test]
fn nccl_buffers_registrations_and_free_sequence() {
    let (out, js) = traced("nccl_like", &[], &[], "nccl");
    assert!(out.success(), "{}", out.dump());
    same_output("nccl_like", &[], &[], &out);
    let j = only(js);
    let creates = of_kind(&j, Kind::VmmCreate);
    assert!(!creates.is_empty());
    for e in &creates {
        assert_eq!(j.module_name(e.module), "libnccl.so.2");
        assert_eq!(e.owner(), Owner::Nccl);
    }
    // One host-NUMA buffer: recorded, but not as VRAM.
    assert_eq!(
        creates
            .iter()
            .filter(|e| e.mem() == MemKind::HostPinned)
            .count(),
        1
    );
    // Registrations are edges, never memory.
    let regs: Vec<Api> = of_kind(&j, Kind::Register)
        .iter()
        .map(|e| e.api().unwrap())
        .collect();
    assert!(regs.contains(&Api::ncclMemAlloc), "{regs:?}");
    assert!(regs.contains(&Api::ncclCommRegister), "{regs:?}");
    assert!(regs.contains(&Api::ncclCommWindowRegister), "{regs:?}");
    // NCCL's release sequence (retain, release, unmap, release) returns every byte.
    let mut books = LiveBooks::new();
    let mut peak = 0u64;
    for e in &j.events {
        books.apply(e);
        peak = peak.max(books.held(0, Owner::Nccl, MemKind::Device));
    }
    assert!(peak > 0);
    assert_eq!(books.held(0, Owner::Nccl, MemKind::Device), 0);
    assert_eq!(books.unknown_frees, 0);
    assert!(
        of_kind(&j, Kind::VmmRelease).len() > creates.len(),
        "NCCL releases more often than it creates"
    );
}

#[test]
fn direct_link_and_procaddr_vmm_from_a_third_party_module() {
    let (out, js) = traced("direct_like", &[], &[], "direct");
    assert!(out.success(), "{}", out.dump());
    let j = only(js);
    assert_eq!(
        made(&j),
        vec![
            (
                "libthirdparty.so".to_string(),
                Owner::Direct,
                16 * MIB,
                Kind::Alloc
            ),
            (
                "libthirdparty.so".to_string(),
                Owner::Vmm,
                8 * MIB,
                Kind::VmmCreate
            ),
        ]
    );
}

#[test]
fn many_threads_lose_and_duplicate_nothing() {
    let (out, js) = traced("threads", &["8", "250"], &[], "threads");
    assert!(out.success(), "{}", out.dump());
    out.assert_line("threads: N=8 M=250 allocs=2000 frees=2000 failures=0 used_delta=0MiB");
    let j = only(js);
    assert!(j.warnings.is_empty(), "{:?}", j.warnings);
    let allocs = of_kind(&j, Kind::Alloc);
    let frees = of_kind(&j, Kind::Free);
    assert_eq!((allocs.len(), frees.len()), (2000, 2000));
    // Addresses are reused across threads at once; the journal order must still pair them.
    let books = replay(&j);
    assert_eq!(books.unknown_frees, 0);
    assert_eq!(books.totals().count(), 0);
    let tids: std::collections::BTreeSet<u32> = allocs.iter().map(|e| e.tid).collect();
    assert_eq!(tids.len(), 8);
}

#[test]
fn forked_child_writes_its_own_journal() {
    let (out, js) = traced("fork_child", &[], &[], "fork");
    assert!(out.success(), "{}", out.dump());
    assert_eq!(js.len(), 2);
    let by_pid: BTreeMap<u32, &Journal> = js.iter().map(|j| (j.pid().unwrap(), j)).collect();
    let (parent, child) = {
        let mut it = by_pid.values();
        let a = *it.next().unwrap();
        let b = *it.next().unwrap();
        if b.header.get("ppid") == a.header.get("pid") {
            (a, b)
        } else {
            (b, a)
        }
    };
    assert_eq!(child.header.get("ppid"), parent.header.get("pid"));
    let sizes = |j: &Journal| {
        of_kind(j, Kind::Alloc)
            .iter()
            .map(|e| e.size)
            .collect::<Vec<_>>()
    };
    assert_eq!(sizes(parent), vec![8 * MIB, 8 * MIB]);
    assert_eq!(of_kind(parent, Kind::Free).len(), 2);
    // The child cannot use its parent's CUDA (as with the real driver): its attempt is
    // recorded in its own journal, with the driver's answer.
    assert!(sizes(child).is_empty());
    let failed: Vec<(i32, u64)> = of_kind(child, Kind::AllocFailed)
        .iter()
        .map(|e| (e.result, e.size))
        .collect();
    assert_eq!(failed, vec![(3, 4 * MIB)]);
    assert!(child.warnings.is_empty(), "{:?}", child.warnings);
}

#[test]
fn out_of_memory_records_the_error_and_the_live_ledger() {
    let env = [
        ("FAKECUDA_MEM_BYTES", "1073741824"),
        ("FAKECUDA_CONTEXT_BYTES", "0"),
    ];
    let (out, js) = traced("oom", &[], &env, "oom");
    assert!(out.success(), "{}", out.dump());
    out.assert_line("oom: allocated 16 x 64MiB, then rc=2");
    let j = only(js);
    let failed_at = j
        .events
        .iter()
        .position(|e| e.kind() == Some(Kind::AllocFailed))
        .unwrap();
    let failed = &j.events[failed_at];
    assert_eq!(
        (failed.result, failed.size, failed.owner()),
        (2, 64 * MIB, Owner::Direct)
    );
    // Right after it: a free-memory sample (0 bytes free) and the live ledger (16 x 64 MiB).
    let after: Vec<&Event> = j.events[failed_at + 1..]
        .iter()
        .take_while(|e| e.kind() != Some(Kind::Free))
        .collect();
    let sample = after
        .iter()
        .find(|e| e.kind() == Some(Kind::MemInfo))
        .expect("meminfo after the failure");
    assert_eq!(sample.arg0, 0);
    let live: u64 = after
        .iter()
        .filter(|e| e.kind() == Some(Kind::Live) && e.mem() == MemKind::Device)
        .map(|e| e.size)
        .sum();
    assert_eq!(live, 16 * 64 * MIB);
}

#[test]
fn kill_9_loses_at_most_the_event_in_flight() {
    let dir = out_dir("sigkill");
    let shim = shim().to_string_lossy().into_owned();
    let dir_s = dir.to_string_lossy().into_owned();
    let mut cmd = clients().command(
        "sigkill",
        &["6"],
        &[("LD_PRELOAD", &shim), ("VRAMLEDGER_OUT", &dir_s)],
    );
    cmd.stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 256];
    while !seen.contains("READY") {
        use std::io::Read;
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "sigkill exited early: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    // SAFETY-free: kill -9 through the standard library.
    child.kill().unwrap();
    child.wait().unwrap();
    let j = only(journals(&dir));
    assert_eq!(of_kind(&j, Kind::Alloc).len(), 6);
    assert!(j.pid().is_some());
}

#[test]
fn unknown_results_null_arguments_and_odd_lookups_pass_through_unchanged() {
    for env in [&[][..], &[("FAKECUDA_FAIL_RESULT", "12345")][..]] {
        let (out, js) = traced("bad_args", &[], env, "bad_args");
        same_output("bad_args", &[], env, &out);
        assert!(
            out.stderr.lines().all(|l| !l.starts_with("vramledger")),
            "{}",
            out.stderr
        );
        assert!(!js.is_empty());
    }
    let (out, _) = traced("procaddr_walk", &[], &[], "procaddr");
    assert!(out.success(), "{}", out.dump());
    same_output("procaddr_walk", &[], &[], &out);
}

#[test]
fn disabled_means_pure_pass_through() {
    // Off is silent, whatever else is set (debug lines included).
    let (out, js) = traced(
        "torch_like",
        &[],
        &[("VRAMLEDGER_DISABLE", "1"), ("VRAMLEDGER_DEBUG", "1")],
        "disabled",
    );
    assert!(out.success(), "{}", out.dump());
    same_output("torch_like", &[], &[], &out);
    assert!(js.is_empty(), "a journal was written although disabled");
    let plain = clients().run("torch_like", &[], &[]);
    assert_eq!(out.stderr, plain.stderr, "stderr changed although disabled");
}

#[test]
fn the_library_exports_only_its_hooks_and_public_api() {
    let out = std::process::Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(shim())
        .output()
        .expect("nm (binutils) is needed for this test");
    let text = String::from_utf8_lossy(&out.stdout);
    let exported: std::collections::BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .map(str::to_string)
        .collect();
    let mut expected: std::collections::BTreeSet<String> = Api::ALL
        .iter()
        .map(|a| a.name())
        .filter(|n| n.starts_with("cu") || n.starts_with("nccl"))
        .map(str::to_string)
        .collect();
    // dlsym, the tap's write/writev and stdio output functions, sigaction, signal and the
    // older calls that install handlers (the tap's signal-handler guard), and the public API.
    for extra in [
        "dlsym",
        "write",
        "writev",
        "sigaction",
        "signal",
        "bsd_signal",
        "sysv_signal",
        "__sysv_signal",
        "sigset",
        "vramledger_stage",
        "vramledger_sample",
        "printf",
        "fprintf",
        "vprintf",
        "vfprintf",
        "dprintf",
        "vdprintf",
        "__printf_chk",
        "__fprintf_chk",
        "__vprintf_chk",
        "__vfprintf_chk",
        "__dprintf_chk",
        "__vdprintf_chk",
        "puts",
        "fputs",
        "fputs_unlocked",
        "fwrite",
        "fwrite_unlocked",
        "fputc",
        "putc",
        "_IO_putc",
        "putchar",
        "fputc_unlocked",
        "putc_unlocked",
        "putchar_unlocked",
        "vramledger_pool_begin",
        "vramledger_pool_end",
        "vramledger_pool_hooks",
        "vramledger_torch_segment",
    ] {
        expected.insert(extra.to_string());
    }
    assert_eq!(exported, expected);
}

#[test]
fn a_context_made_and_destroyed_again_and_again_is_counted_once() {
    // Four contexts made and destroyed in turn (a stage each), then a fifth that ends the run:
    // each destroy gives its context back, except the last (the books end before it), so the
    // books hold one context at the end, not five, and nothing is unattributed.
    let (out, js) = traced("context_cycles", &["4"], &[], "ctxcycles");
    assert!(out.success(), "{}", out.dump());
    out.assert_line("context_cycles: ok");
    let j = only(js);
    let books = vramledger::ledger::build(std::slice::from_ref(&j));
    let dev = &books.processes[0].devices[0];
    assert!(dev.balanced());
    assert_eq!(dev.unattributed(), 0);
    assert_eq!(dev.live_at_end.get(Owner::Context), 300 * MIB as i64);
    for s in dev.stages.iter().filter(|s| s.name.starts_with("cycle_")) {
        assert_eq!(s.by_owner.get(Owner::Context), 0, "{}", s.name);
    }
    let peak = dev
        .peak_by_owner
        .iter()
        .find(|(o, _)| **o == Owner::Context)
        .map(|(_, p)| p.bytes);
    assert_eq!(peak, Some(300 * MIB as i64));
    // The destroys the books take say the device and the free memory around them.
    let destroys: Vec<_> = j
        .events
        .iter()
        .filter(|e| e.api() == Some(Api::cuCtxDestroy_v2))
        .collect();
    assert_eq!(destroys.len(), 5);
    assert!(destroys
        .iter()
        .all(|e| e.device == 0 && e.arg1 > e.arg0 && e.arg0 != u64::MAX));
}

#[test]
fn a_program_that_never_asks_for_free_memory_still_balances() {
    // No engine line, no stage mark, no cudaMemGetInfo: free memory is read at exit, or, when
    // the runtime releases its context at exit first, right before that release.
    for teardown in ["none", "early", "late"] {
        let env = [("FAKECUDART_EXIT_TEARDOWN", teardown)];
        let (out, js) = traced(
            "faults",
            &["quiet", "3"],
            &env,
            &format!("quiet-{teardown}"),
        );
        assert!(out.success(), "{}", out.dump());
        out.assert_line("quiet: 3 x 8MiB held");
        let j = only(js);
        assert!(j.warnings.is_empty(), "{:?}", j.warnings);
        let books = vramledger::ledger::build(std::slice::from_ref(&j));
        let dev = &books.processes[0].devices[0];
        let total: u64 = 16 << 30;
        assert_eq!(dev.start_free, Some(total), "{teardown}");
        assert_eq!(
            dev.end_free,
            Some(total - 300 * MIB - 24 * MIB),
            "{teardown}: free@end is what the process held at its end"
        );
        assert!(dev.balanced(), "{teardown}");
        assert_eq!(dev.unattributed(), 0, "{teardown}");
        // The last reading comes from vramledger, not from the program.
        let last = j
            .events
            .iter()
            .rev()
            .find(|e| e.kind() == Some(Kind::MemInfo))
            .unwrap();
        assert_eq!(last.api(), Some(Api::VramledgerSample));
    }
}

#[test]
fn no_record_is_stamped_before_the_journal_starts() {
    // cuInit opens the journal: its record used to carry a time before the header's start.
    for client in ["torch_like", "fork_child", "threads"] {
        let (out, js) = traced(client, &["4", "50"], &[], &format!("start-{client}"));
        assert!(out.success(), "{}", out.dump());
        for j in js {
            let start: u64 = j.header.get("start_mono_ns").unwrap().parse().unwrap();
            let first = j.events.iter().map(|e| e.t_ns).min().unwrap();
            assert!(first >= start, "{client}: {first} < start {start}");
            let init = j.events.iter().find(|e| e.api() == Some(Api::cuInit));
            if let Some(e) = init {
                assert!(e.t_ns >= start);
            }
        }
    }
}

/// Each device a process uses is named once, before its first event, by the driver's UUID
/// and PCI bus id (metrics label series with them).
#[test]
fn each_device_is_named_once_with_its_uuid_and_pci_bus_id() {
    let (out, js) = traced("torch_like", &[], &[], "device-names");
    assert!(out.success(), "{}", out.dump());
    let j = only(js);
    let used: std::collections::BTreeSet<i32> = j
        .events
        .iter()
        .filter(|e| e.device >= 0 && e.kind() != Some(Kind::Device))
        .map(|e| e.device)
        .collect();
    assert!(!used.is_empty());
    let named: Vec<i32> = of_kind(&j, Kind::Device).iter().map(|e| e.device).collect();
    assert_eq!(
        named
            .iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        used
    );
    assert_eq!(named.len(), used.len(), "once each: {named:?}");
    for &d in &used {
        let id = j.device_identity(d).unwrap();
        assert_eq!(
            id.uuid.as_deref(),
            Some(format!("GPU-fa4ecda0-0000-4000-8000-{d:012x}").as_str())
        );
        assert_eq!(
            id.pci_bus_id.as_deref(),
            Some(format!("0000:{:02X}:00.0", 0x1A + 0x0C * d).as_str())
        );
        let first_use = j
            .events
            .iter()
            .position(|e| e.device == d && e.kind() != Some(Kind::Device))
            .unwrap();
        let record = j
            .events
            .iter()
            .position(|e| e.device == d && e.kind() == Some(Kind::Device))
            .unwrap();
        assert!(
            record < first_use,
            "device {d}: named after its first event"
        );
    }
    assert_eq!(j.device_identity(63), None);
}

/// A journal closed at exit ends with its final seal, cut to its used size; every block in it
/// is sealed and its checksum holds.
#[test]
fn a_journal_closed_at_exit_is_sealed_and_cut_to_its_size() {
    use vramledger_format::walk::{self, BlockState, Step};
    let (out, js) = traced("threads", &["4", "5000"], &[], "closed-at-exit");
    assert!(out.success(), "{}", out.dump());
    let j = only(js);
    assert!(j.warnings.is_empty(), "{:?}", j.warnings);
    let raw = std::fs::read(&j.path).unwrap();
    assert_ne!(
        raw.len() % (4 << 20),
        0,
        "cut to its used size, not to a chunk"
    );
    let seal = vramledger_format::block::Seal::read(&raw, raw.len() - 16);
    assert_eq!(
        seal.map(|s| s.flags),
        Some(vramledger_format::block::SEAL_FINAL),
        "the file ends with the final seal"
    );
    let mut states = Vec::new();
    let mut last = false;
    walk::walk(&raw, |s| {
        if let Step::Block(b) = s {
            states.push(b.state);
            last = b.last;
        }
    });
    assert!(last, "a final seal");
    assert!(
        states.iter().all(|s| *s == BlockState::Sealed),
        "{states:?}"
    );
    // 40,000 events in 24-byte records: under 32 bytes an event, everything included.
    assert!(
        raw.len() < 40_000 * 32,
        "{} bytes for 40,000 events",
        raw.len()
    );
}

/// Through the runtime the shim walks past libcudart to the caller: the slow way for the first
/// calls of a call path, then by the frame sizes it learned. Every one of 600 allocations
/// interleaved from two callers of the same runtime entry point is owned by the right one.
#[test]
fn the_walk_past_the_runtime_finds_each_caller_every_time() {
    let (out, js) = traced("rt_mix", &["300"], &[("VRAMLEDGER_DEBUG", "1")], "rt-mix");
    assert!(out.success(), "{}", out.dump());
    out.assert_line("rt_mix: 300 rounds ok");
    // The first calls of each path unwind; the rest walk by the sizes learned.
    let walks = out
        .stderr
        .lines()
        .find_map(|l| l.split("walks past the runtime: ").nth(1))
        .unwrap_or_else(|| panic!("no walk count\n{}", out.dump()));
    let n = |word: &str| -> u64 {
        walks
            .split(", ")
            .find(|p| p.contains(word))
            .and_then(|p| p.split(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    assert!(n("unwound") <= 10, "{walks}");
    assert!(n("learned") >= 590, "{walks}");
    let j = only(js);
    let allocs: Vec<(String, Owner, u64)> = made(&j)
        .into_iter()
        .filter(|m| m.3 == Kind::Alloc)
        .map(|m| (m.0, m.1, m.2))
        .collect();
    assert_eq!(allocs.len(), 600);
    for (i, pair) in allocs.chunks(2).enumerate() {
        assert_eq!(
            (pair[0].0.as_str(), pair[0].1, pair[0].2),
            ("libc10_cuda.so", Owner::Torch, 2 * MIB),
            "round {i}"
        );
        assert_eq!(
            (pair[1].0.as_str(), pair[1].1, pair[1].2),
            ("rt_mix", Owner::Direct, 4 * MIB),
            "round {i}"
        );
    }
    let books = replay(&j);
    assert_eq!(books.unknown_frees, 0);
}

/// The device of each allocation is its context's, with no driver call of vramledger's own
/// while a process has contexts on one device: a process on both devices gets each right.
#[test]
fn allocations_on_two_devices_of_one_process_keep_their_devices() {
    let (out, js) = traced("two_devices", &["100"], &[], "two-devices");
    assert!(out.success(), "{}", out.dump());
    out.assert_line("two_devices: 100 rounds ok");
    let j = only(js);
    let allocs = of_kind(&j, Kind::Alloc);
    assert_eq!(allocs.len(), 200);
    for e in allocs {
        let want = if e.size == 4 * MIB { 0 } else { 1 };
        assert_eq!(e.device, want, "{e:?}");
    }
    for e in of_kind(&j, Kind::Free) {
        assert_eq!(e.device, if e.size == 4 * MIB { 0 } else { 1 }, "{e:?}");
    }
    assert!(j.device_identity(0).is_some() && j.device_identity(1).is_some());
}

/// With `VRAMLEDGER_DEBUG=1` the shim says, at each stage boundary and at exit, how much of
/// the process's time its own recording took: every recording counted, the time inside a
/// part of the time since load, and the sums growing from stage to stage.
#[test]
fn debug_says_the_time_inside_vramledger_at_each_stage_and_at_exit() {
    let (out, js) = traced(
        "server_like",
        &[],
        &[("VRAMLEDGER_DEBUG", "1"), ("DEMO_KV_MIB", "64")],
        "self-time",
    );
    assert!(out.success(), "{}", out.dump());
    // (when, recordings, ms inside, s since load)
    let said: Vec<(String, u64, f64, f64)> = out
        .stderr
        .lines()
        .filter_map(|l| l.split("self time at ").nth(1))
        .map(|rest| {
            let (when, rest) = rest.split_once(": ").unwrap();
            let num = |s: &str| s.split(' ').next().unwrap().to_string();
            let n: u64 = num(rest).parse().unwrap();
            let ms: f64 = num(rest.split(" recordings, ").nth(1).unwrap())
                .parse()
                .unwrap();
            let up: f64 = num(rest.split(" of ").nth(1).unwrap()).parse().unwrap();
            (when.to_string(), n, ms, up)
        })
        .collect();
    let whens: Vec<&str> = said.iter().map(|s| s.0.as_str()).collect();
    for stage in [
        "stage weight_load",
        "stage graph_capture",
        "stage serving",
        "exit",
    ] {
        assert!(whens.contains(&stage), "{whens:?}\n{}", out.dump());
    }
    assert_eq!(whens.last(), Some(&"exit"));
    for w in said.windows(2) {
        assert!(w[1].1 >= w[0].1 && w[1].2 >= w[0].2, "{said:?}");
    }
    let (_, n, ms, up) = said.last().unwrap().clone();
    // Every allocating or freeing record was one recording at least.
    let records = js.iter().map(|j| j.events.len() as u64).sum::<u64>();
    assert!(
        n > 0 && n >= records / 2,
        "{n} recordings, {records} records"
    );
    assert!(ms > 0.0 && ms < up * 1000.0, "{ms} ms inside of {up} s");
}
