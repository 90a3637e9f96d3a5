//! A seeded synthetic run shaped like a long-running SGLang server's journal, for the replay
//! and report benchmarks: startup with a context and NVML readings, NCCL communicator setup,
//! weight loading, the KV pool, CUDA-graph capture (graph-pool memory inside capture
//! windows), then serving, where nearly every record is churn: the caching allocator's
//! segments (`cuMemAlloc`/`cuMemFree`), expandable segments (VMM create/map/unmap/release),
//! pinned host buffers, and now and then a `cuMemGetInfo` or NVML reading, a pool sample and
//! one out-of-memory failure. The live set stays bounded (a few thousand blocks), as in a
//! real server. Exactly `n` records follow the header.

use vramledger_format::record::flags;
use vramledger_format::{Api, Event, Header, Kind, MemKind, Owner};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TOTAL: u64 = 80 * GIB;

/// The header of the synthetic process.
pub fn header(pid: u32) -> Header {
    let mut h = Header::default();
    h.push("pid", pid.to_string());
    h.push("ppid", "1");
    h.push("run_id", "bench");
    h.push("host", "benchhost");
    h.push("cmdline", "python3\0-m\0sglang.launch_server\0--tp\x001");
    h.push("start_unix_ns", "1700000000000000000");
    h.push("start_mono_ns", "1000000");
    h
}

struct Gen<'a> {
    emit: &'a mut dyn FnMut(&Event),
    left: usize,
    x: u64,
    t: u64,
    stage: u32,
    free: u64,
    next_addr: u64,
    next_handle: u64,
    /// Live cuMemAlloc blocks: (address, size).
    blocks: Vec<(u64, u64)>,
    /// Live VMM handles: (handle, address, size).
    handles: Vec<(u64, u64, u64)>,
    host: Vec<u64>,
}

impl Gen<'_> {
    fn rnd(&mut self) -> u64 {
        self.x ^= self.x << 13;
        self.x ^= self.x >> 7;
        self.x ^= self.x << 17;
        self.x
    }

    fn event(&mut self, kind: Kind, api: Api) -> Event {
        // 0.3–1.3 µs apart, and now and then a record stamped a little before the previous
        // one (threads take the clock before their slot).
        self.t += 300 + self.rnd() % 1000;
        let skew = if self.rnd().is_multiple_of(64) {
            200
        } else {
            0
        };
        Event {
            kind: kind as u16,
            api: api as u16,
            t_ns: self.t - skew,
            tid: 100 + (self.rnd() % 3) as u32,
            device: 0,
            stage: self.stage,
            ..Event::default()
        }
    }

    fn push(&mut self, e: Event) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        (self.emit)(&e);
        true
    }

    fn sample(&mut self) {
        let mut e = self.event(Kind::MemInfo, Api::VramledgerSample);
        e.arg0 = self.free;
        e.arg1 = TOTAL;
        self.push(e);
    }

    fn nvml(&mut self) {
        let mut e = self.event(Kind::NvmlSample, Api::NvmlSample);
        e.arg0 = self.free;
        e.arg1 = TOTAL;
        e.arg2 = TOTAL - self.free;
        self.push(e);
    }

    fn stage(&mut self, id: u32, name: &str, line: Option<&str>) {
        self.stage = id;
        let api = if line.is_some() {
            Api::VramledgerLogLine
        } else {
            Api::VramledgerStage
        };
        let mut e = self.event(Kind::Stage, api);
        e.text = match line {
            Some(l) => format!("{name}\n[2025-06-01 10:00:00 TP0] {l}"),
            None => name.to_string(),
        };
        self.push(e);
        self.sample();
    }

    fn alloc(&mut self, size: u64, owner: Owner, module: u32, fl: u32) {
        let mut e = self.event(Kind::Alloc, Api::cuMemAlloc_v2);
        e.addr = self.next_addr;
        self.next_addr += size.next_multiple_of(2 * MIB);
        e.size = size;
        e.arg0 = size;
        e.owner = owner as u8;
        e.mem = MemKind::Device as u8;
        e.module = module;
        e.flags = fl;
        if self.push(e.clone()) {
            self.blocks.push((e.addr, size));
            self.free = self.free.saturating_sub(size);
        }
    }

    fn free_one(&mut self) {
        if self.blocks.is_empty() {
            return;
        }
        let k = (self.rnd() as usize) % self.blocks.len();
        let (addr, size) = self.blocks[k];
        let mut e = self.event(Kind::Free, Api::cuMemFree_v2);
        e.addr = addr;
        if self.push(e) {
            self.blocks.swap_remove(k);
            self.free += size;
        }
    }

    fn vmm_create(&mut self, size: u64, owner: Owner, module: u32) {
        let h = self.next_handle;
        self.next_handle += 1;
        let addr = self.next_addr;
        self.next_addr += size;
        let mut c = self.event(Kind::VmmCreate, Api::cuMemCreate);
        c.handle = h;
        c.size = size;
        c.owner = owner as u8;
        c.module = module;
        let mut m = self.event(Kind::VmmMap, Api::cuMemMap);
        m.addr = addr;
        m.size = size;
        m.handle = h;
        if self.push(c) && self.push(m) {
            self.handles.push((h, addr, size));
            self.free = self.free.saturating_sub(size);
        }
    }

    fn vmm_release(&mut self) {
        if self.handles.is_empty() {
            return;
        }
        let k = (self.rnd() as usize) % self.handles.len();
        let (h, addr, size) = self.handles[k];
        let mut u = self.event(Kind::VmmUnmap, Api::cuMemUnmap);
        u.addr = addr;
        u.size = size;
        let mut r = self.event(Kind::VmmRelease, Api::cuMemRelease);
        r.handle = h;
        if self.push(u) && self.push(r) {
            self.handles.swap_remove(k);
            self.free += size;
        }
    }

    fn host(&mut self) {
        if self.host.len() > 64 || (!self.host.is_empty() && self.rnd().is_multiple_of(2)) {
            let k = (self.rnd() as usize) % self.host.len();
            let mut e = self.event(Kind::HostFree, Api::cuMemFreeHost);
            e.addr = self.host[k];
            if self.push(e) {
                self.host.swap_remove(k);
            }
        } else {
            let mut e = self.event(Kind::HostAlloc, Api::cuMemHostAlloc);
            e.addr = 0x1_0000_0000 + self.rnd() % (1 << 30) * 4096;
            e.size = (1 + self.rnd() % 8) * MIB;
            e.device = -1;
            e.mem = MemKind::HostPinned as u8;
            if self.push(e.clone()) {
                self.host.push(e.addr);
            }
        }
    }

    /// One serving step: mostly segment churn around a bounded live set.
    fn churn(&mut self, owners: &[(Owner, u32)], live: usize) {
        let r = self.rnd() % 1000;
        match r {
            0..=9 => self.nvml(),
            10..=11 => {
                let mut e = self.event(Kind::MemInfo, Api::cuMemGetInfo_v2);
                e.arg0 = self.free;
                e.arg1 = TOTAL;
                self.push(e);
            }
            12..=79 => self.host(),
            80..=139 => {
                if self.handles.len() < 256 && self.rnd().is_multiple_of(2) {
                    let size = (1 + self.rnd() % 16) * 2 * MIB;
                    self.vmm_create(size, Owner::Torch, 1);
                } else {
                    self.vmm_release();
                }
            }
            _ => {
                let grow = self.blocks.len() < live / 2
                    || (self.blocks.len() < live && self.rnd().is_multiple_of(2));
                if grow {
                    let (owner, module) = owners[(self.rnd() as usize) % owners.len()];
                    let size = (1 + self.rnd() % 32) * 2 * MIB;
                    self.alloc(size, owner, module, 0);
                } else {
                    self.free_one();
                }
            }
        }
    }
}

/// Calls `emit` for each of the `n` records of the run (seeded: the same run every time).
pub fn generate(n: usize, seed: u64, emit: &mut dyn FnMut(&Event)) {
    let mut g = Gen {
        emit,
        left: n,
        x: seed | 1,
        t: 2_000_000,
        stage: 0,
        free: TOTAL,
        next_addr: 0x7000_0000_0000,
        next_handle: 1,
        blocks: Vec::new(),
        handles: Vec::new(),
        host: Vec::new(),
    };
    g.stage(0, "startup", None);
    for (id, path) in [
        (
            1,
            "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so",
        ),
        (
            2,
            "/venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.13",
        ),
        (
            3,
            "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
        ),
        (
            4,
            "/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so",
        ),
        (
            5,
            "/venv/lib/python3.12/site-packages/sgl_kernel/common_ops.so",
        ),
    ] {
        let mut e = g.event(Kind::Module, Api::None);
        e.module = id;
        e.text = path.to_string();
        g.push(e);
    }
    let mut c = g.event(Kind::Context, Api::cuDevicePrimaryCtxRetain);
    c.owner = Owner::Context as u8;
    c.size = 512 * MIB;
    c.arg0 = TOTAL;
    c.arg1 = TOTAL - c.size;
    g.free -= c.size;
    g.push(c);
    g.nvml();
    // NCCL's communicator opens dist_init (an API-event boundary: no line says so).
    g.vmm_create(64 * MIB, Owner::Nccl, 3);
    g.stage(
        2,
        "weight_load",
        Some("Load weight begin. avail mem=78.50 GB"),
    );
    let phase = |share: usize| (n / 1000 * share).max(8);
    for _ in 0..phase(10) {
        let size = (1 + g.rnd() % 128) * 2 * MIB;
        g.alloc(size, Owner::Torch, 1, 0);
    }
    g.alloc(64 * MIB, Owner::Direct, 2, 0);
    g.stage(
        3,
        "kv_pool",
        Some("Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB, mem usage=18.50 GB."),
    );
    g.alloc(40 * GIB, Owner::Torch, 1, 0);
    g.stage(
        4,
        "graph_capture",
        Some("Capture cuda graph begin. This can take up to several minutes. avail mem=19.50 GB"),
    );
    for k in 0..phase(20) / 8 {
        let mut b = g.event(Kind::CaptureBegin, Api::cuStreamBeginCapture_v2);
        b.handle = 0x5000 + k as u64;
        g.push(b);
        for _ in 0..4 {
            let fl = flags::CAPTURE_THIS_THREAD | flags::CAPTURE_OPEN;
            g.alloc(2 * MIB, Owner::TorchGraphPool, 1, fl);
        }
        let mut e = g.event(Kind::CaptureEnd, Api::cuStreamEndCapture);
        e.handle = 0x5000 + k as u64;
        g.push(e);
        g.free_one();
        g.free_one();
    }
    // post_capture is set by the last capture end (no line); serving by SGLang's summary.
    g.stage(
        6,
        "serving",
        Some("max_total_num_tokens=524288, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=8192, available_gpu_mem=18.20 GB"),
    );
    let owners = [
        (Owner::Torch, 1),
        (Owner::Torch, 4),
        (Owner::Direct, 2),
        (Owner::Direct, 5),
        (Owner::Nccl, 3),
    ];
    let oom_at = g.left / 10 * 9;
    while g.left > 0 {
        if g.left == oom_at {
            let mut e = g.event(Kind::AllocFailed, Api::cuMemAlloc_v2);
            e.size = 100 * GIB;
            e.result = 2;
            e.owner = Owner::Torch as u8;
            e.module = 1;
            g.push(e);
            g.sample();
            continue;
        }
        g.churn(&owners, 3000);
    }
}
