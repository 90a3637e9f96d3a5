//! The fake driver (crates/fakecuda) and its C clients (tests/clients), without any preload:
//! free-memory accounting, OOM, the capture rule, VMM refcounts, pool caching, the
//! cuGetProcAddress table, and the pass-through of an unknown CUresult.
//! Needs `cargo build --workspace` (or `-p fakecuda`) first.
mod support;

use support::clients;

#[test]
fn torch_like_accounts_allocator_capture_expandable_pools_and_host_memory() {
    let out = clients().run_ok("torch_like", &[], &[]);
    for line in [
        "init cudaSetDevice(0): rc=0 used=300MiB",
        "c10_alloc 512KiB+5MiB+100MiB: rc=0 used=422MiB",
        "c10_free 5MiB then c10_alloc 6MiB (cached segment reused): rc=0 used=422MiB",
        "segments: 3",
        // The capture rule: an unrelaxed cudaMalloc is refused and invalidates the capture.
        "capture#1 cudaMalloc without RELAXED: rc=900 used=422MiB",
        "capture#1 end: rc=901 used=422MiB",
        "capture#2 private-pool segment 64MiB: rc=0 used=486MiB",
        "capture#2 end: rc=0 used=486MiB",
        "expandable map 64MiB (4 x 20MiB pages): rc=0 used=566MiB",
        "expandable small map 3MiB (2 x 2MiB pages): rc=0 used=570MiB",
        "expandable unmap: rc=0 used=486MiB",
        // Pools reserve 32 MiB chunks and keep them until trimmed.
        "cudaMallocAsync 1MiB: rc=0 used=518MiB",
        "cudaFreeAsync: rc=0 used=518MiB",
        "pool: reserved=32MiB used=0",
        "cudaMemPoolTrimTo 0: rc=0 used=486MiB",
        "cudaMallocManaged 256MiB: rc=0 used=486MiB",
        "cudaHostAlloc 16MiB: rc=0 used=486MiB",
        "cudaHostRegister 1MiB: rc=0 used=486MiB",
        "nvml: sizing call rc=7 count=1",
        "nvml: bus=0000:1A:00.0 same_device=1 total_minus_cuda_total=644939776 free_matches=1 processes=1 \
         pid_matches=1 process_used=486MiB",
        "graph reset (private pool freed): rc=0 used=422MiB",
        "c10_empty_cache: rc=0 used=300MiB",
        "expandable release: rc=0 used=300MiB",
        "segments: 0",
        "torch_like: ok",
    ] {
        out.assert_line(line);
    }
}

#[test]
fn a_child_forked_after_cuinit_cannot_use_cuda() {
    let out = clients().run_ok("fork_driver", &[], &[]);
    // Forked before any cuInit: a process like any other (this child has no context, so the
    // allocation asks for one).
    out.assert_line("child forked before cuInit: cuInit=0 cuDeviceGetCount=0 cuMemAlloc=201");
    out.assert_line("parent: cuInit=0 cuDeviceGetCount=0 devices=2");
    // Forked after: every call answers CUDA_ERROR_NOT_INITIALIZED, cuInit included.
    out.assert_line("child forked after cuInit: cuInit=3 cuDeviceGetCount=3 cuMemAlloc=3");
    out.assert_line("parent after the child: cuDeviceGetCount=0");
}

#[test]
fn cublas_workspace_is_allocated_and_freed() {
    let out = clients().run_ok("cublas_like", &[], &[]);
    out.assert_line("cublas workspace 4MiB: rc=0 used=304MiB");
    out.assert_line("cudaMalloc 10MiB: rc=0 used=314MiB");
    out.assert_line("cublas destroy: rc=0 used=300MiB");
}

#[test]
fn nccl_free_sequence_returns_all_memory_and_host_numa_is_not_vram() {
    let out = clients().run_ok("nccl_like", &[], &[]);
    for line in [
        "nccl comm init: rc=0 used=300MiB",
        // 4 x 8 MiB on the device; the host-NUMA buffer takes nothing from it.
        "internal buffers 4 x 8MiB device + 1 host-NUMA: rc=0 used=332MiB",
        "legacy buffer cuMemAlloc 6MiB: rc=0 used=338MiB",
        "ncclMemAlloc 10MiB: rc=0 used=348MiB",
        "ncclCommRegister: rc=0 used=348MiB",
        "ncclCommWindowRegister: rc=0 used=350MiB",
        "ncclCommWindowDeregister: rc=0 used=348MiB",
        "ncclMemFree: rc=0 used=338MiB",
        "nccl free all: rc=0 used=300MiB",
        "nccl_like: ok",
    ] {
        out.assert_line(line);
    }
}

#[test]
fn direct_linking_library_allocates_and_frees() {
    let out = clients().run_ok("direct_like", &[], &[]);
    out.assert_line("thirdparty cuMemAlloc_v2 16MiB: rc=0 used=316MiB");
    out.assert_line("thirdparty cuMemCreate 8MiB: rc=0 used=324MiB");
    out.assert_line("thirdparty free all: rc=0 used=300MiB");
}

#[test]
fn many_threads_allocate_concurrently() {
    let out = clients().run_ok("threads", &["8", "200"], &[]);
    out.assert_line("threads: N=8 M=200 allocs=1600 frees=1600 failures=0 used_delta=0MiB");
}

#[test]
fn forked_child_cannot_use_cuda_and_parent_is_unaffected() {
    let out = clients().run_ok("fork_child", &[], &[]);
    out.assert_line("parent cudaMalloc 8MiB: rc=0 used=308MiB");
    // cudaMemGetInfo fails in the child too (used=-1).
    out.assert_line("child cudaMalloc 4MiB: rc=3 used=-1MiB");
    out.assert_line("parent: child exited status=0");
    out.assert_line("parent cudaMalloc 8MiB after child: rc=0 used=316MiB");
}

#[test]
fn out_of_memory_is_code_2_and_changes_nothing() {
    // 1 GiB device, 300 MiB context: 724 MiB free holds 11 buffers of 64 MiB.
    let out = clients().run_ok("oom", &[], &[("FAKECUDA_MEM_BYTES", "1073741824")]);
    out.assert_line("oom: allocated 11 x 64MiB, then rc=2");
    out.assert_line("oom: freed all: rc=0 used=300MiB");
}

#[test]
fn sigkill_client_reports_ready_and_dies() {
    use std::io::{BufRead, BufReader};
    let c = clients();
    let mut child = c
        .command("sigkill", &["3"], &[])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn sigkill");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("read stdout");
        let ready = line == "READY";
        seen.push(line);
        if ready {
            break;
        }
    }
    assert_eq!(
        seen.last().map(String::as_str),
        Some("READY"),
        "output: {seen:?}"
    );
    assert!(
        seen.contains(&"allocated 3 x 8MiB used=324MiB".to_string()),
        "output: {seen:?}"
    );
    // kill -9 (the std API sends SIGKILL).
    child.kill().expect("kill");
    let status = child.wait().expect("wait");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9));
}

#[test]
fn bad_arguments_give_the_real_error_codes() {
    let out = clients().run_ok("bad_args", &[], &[]);
    for line in [
        "cuMemAlloc_v2 before cuInit: rc=3",
        "cuDeviceGetCount before cuInit: rc=3",
        "driver version: 13000",
        "cuDeviceGet(&d, 99): rc=101",
        "cuMemAlloc_v2 without a context: rc=201",
        "cuMemAlloc_v2(NULL, 1MiB): rc=1",
        "cuMemRelease(unknown handle): rc=400",
        "fresh thread cuMemAlloc_v2: rc=201",
        "fresh thread current context is NULL: 1",
        "cuGetProcAddress_v2(cuNoSuchFunction): rc=500",
        "  name=CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        "  pitch=1024",
        "cuIpcOpenMemHandle_v2 own handle: rc=201",
        "other GLOBAL-mode thread cuMemAlloc_v2 during GLOBAL capture: rc=900",
        "capturing thread cuMemAlloc_v2 in GLOBAL mode: rc=900",
        "RELAXED cuMemCreate 2MiB during capture: rc=0",
        "other thread cuMemAlloc_v2 during THREAD_LOCAL capture: rc=0",
        "  device=1 used=300MiB",
        "fail_result cuMemAlloc_v2: rc=0",
        "bad_args: ok",
    ] {
        out.assert_line(line);
    }
    // Unknown symbol vs. too-new symbol statuses, each with a NULL pointer.
    assert!(out
        .stdout
        .contains("cuGetProcAddress_v2(cuNoSuchFunction): rc=500\n  status=1 pfn_null=1\n"));
    assert!(out
        .stdout
        .contains("cuGetProcAddress_v2(cuMemAllocAsync, 11000): rc=500\n  status=2 pfn_null=1\n"));
    // VMM: released-but-mapped memory stays; the last release after unmap returns it; an
    // imported handle shares the memory; host-NUMA memory is not device memory.
    let vmm = &out.stdout[out
        .stdout
        .find("vmm cuMemCreate 4MiB")
        .expect("vmm section")..];
    let deltas: Vec<&str> = vmm.lines().filter(|l| l.contains("delta=")).collect();
    assert_eq!(
        deltas,
        [
            "  delta=4MiB",
            "  delta=4MiB",
            "  delta=0MiB",
            "  new handle: 1 delta=2MiB",
            "  delta=2MiB",
            "  delta=0MiB",
            "  delta=0MiB"
        ],
        "{}",
        out.dump()
    );
}

#[test]
fn unknown_result_codes_pass_through() {
    let out = clients().run_ok("bad_args", &[], &[("FAKECUDA_FAIL_RESULT", "4242")]);
    out.assert_line("fail_result cuMemAlloc_v2: rc=4242");
    out.assert_line("fail_result name lookup: rc=1");
    // Argument and context checks still come first.
    out.assert_line("cuMemAlloc_v2(NULL, 1MiB): rc=1");
    out.assert_line("fresh thread cuMemAlloc_v2: rc=201");
}

#[test]
fn eviction_changes_no_result() {
    // FAKECUDA_EVICT_KB only costs time: every call answers as without it.
    for client in ["cublas_like", "bad_args"] {
        let plain = clients().run_ok(client, &[], &[]);
        let evicting = clients().run_ok(client, &[], &[("FAKECUDA_EVICT_KB", "64")]);
        assert_eq!(plain.stdout, evicting.stdout, "{}", evicting.dump());
    }
}

#[test]
fn environment_configures_the_device() {
    let out = clients().run_ok("cublas_like", &[], &[("FAKECUDA_CONTEXT_BYTES", "0")]);
    out.assert_line("init cudaSetDevice(0): rc=0 used=0MiB");
    out.assert_line("cublas workspace 4MiB: rc=0 used=4MiB");
    let out = clients().run("cublas_like", &[], &[("FAKECUDA_DEVICES", "0")]);
    assert!(!out.success());
    out.assert_line("init cudaSetDevice(0): rc=100 used=-1MiB");
}

#[test]
fn get_proc_address_hands_out_the_versioned_exports() {
    let out = clients().run_ok("procaddr_walk", &[], &[]);
    out.assert_line("bootstrap cuGetProcAddress v=13000 rc=0 status=0 -> cuGetProcAddress_v2");
    let expect = |name: &str, v: u32, flags: u32, target: &str| {
        let (rc, status) = match target {
            "NULL-version" => (500, 2),
            "NULL" => (500, 1),
            _ => (0, 0),
        };
        let shown = if target.starts_with("NULL") {
            "NULL"
        } else {
            target
        };
        out.assert_line(&format!(
            "{name} v={v} flags={flags} rc={rc} status={status} -> {shown}"
        ));
    };
    for v in [11000, 12000, 13000] {
        for flags in [0, 2] {
            for (base, export) in [
                ("cuMemAlloc", "cuMemAlloc_v2"),
                ("cuMemFree", "cuMemFree_v2"),
                ("cuMemGetInfo", "cuMemGetInfo_v2"),
                ("cuMemAllocPitch", "cuMemAllocPitch_v2"),
                ("cuMemGetAddressRange", "cuMemGetAddressRange_v2"),
                ("cuDeviceTotalMem", "cuDeviceTotalMem_v2"),
                ("cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2"),
                ("cuCtxDestroy", "cuCtxDestroy_v2"),
                ("cuCtxPushCurrent", "cuCtxPushCurrent_v2"),
                ("cuCtxPopCurrent", "cuCtxPopCurrent_v2"),
                ("cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2"),
                ("cuMemHostRegister", "cuMemHostRegister_v2"),
                ("cuMemAllocHost", "cuMemAllocHost_v2"),
                ("cuStreamDestroy", "cuStreamDestroy_v2"),
                ("cuMemCreate", "cuMemCreate"),
                ("cuMemRetainAllocationHandle", "cuMemRetainAllocationHandle"),
                ("cuMemAllocManaged", "cuMemAllocManaged"),
                ("cuNoSuchSymbol", "NULL"),
                ("cuMemAlloc_v2", "NULL"),
            ] {
                expect(base, v, flags, export);
            }
            let ptsz = |legacy: &'static str, per_thread: &'static str| {
                if flags == 2 {
                    per_thread
                } else {
                    legacy
                }
            };
            expect(
                "cuStreamBeginCapture",
                v,
                flags,
                ptsz("cuStreamBeginCapture_v2", "cuStreamBeginCapture_v2_ptsz"),
            );
            expect(
                "cuStreamEndCapture",
                v,
                flags,
                ptsz("cuStreamEndCapture", "cuStreamEndCapture_ptsz"),
            );
            let stream_ordered = [
                (
                    "cuMemAllocAsync",
                    ptsz("cuMemAllocAsync", "cuMemAllocAsync_ptsz"),
                ),
                (
                    "cuMemFreeAsync",
                    ptsz("cuMemFreeAsync", "cuMemFreeAsync_ptsz"),
                ),
                (
                    "cuMemAllocFromPoolAsync",
                    ptsz("cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"),
                ),
                ("cuMemPoolCreate", "cuMemPoolCreate"),
                ("cuMemPoolTrimTo", "cuMemPoolTrimTo"),
                ("cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool"),
            ];
            for (base, export) in stream_ordered {
                expect(
                    base,
                    v,
                    flags,
                    if v < 11020 { "NULL-version" } else { export },
                );
            }
            let to_graph = ptsz(
                "cuStreamBeginCaptureToGraph",
                "cuStreamBeginCaptureToGraph_ptsz",
            );
            expect(
                "cuStreamBeginCaptureToGraph",
                v,
                flags,
                if v < 12030 { "NULL-version" } else { to_graph },
            );
            let ctx_create = match v {
                11000 => "cuCtxCreate_v2",
                12000 => "cuCtxCreate_v3",
                _ => "cuCtxCreate_v4",
            };
            expect("cuCtxCreate", v, flags, ctx_create);
            let gpa = if v < 12000 {
                "<unexported>"
            } else {
                "cuGetProcAddress_v2"
            };
            expect("cuGetProcAddress", v, flags, gpa);
        }
    }
    // Every exported name has its own address (no twin folded into another).
    out.assert_line("exports distinct: 1");
    // The unexported pre-12.0 entry point works with the 4-argument ABI.
    out.assert_line("legacy cuGetProcAddress(cuMemAlloc, 11000) rc=0 -> cuMemAlloc_v2");
}
