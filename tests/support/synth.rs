//! Synthetic journals for ledger and CLI tests: write exactly the records a test needs.

use std::path::Path;

use vramledger_format::frame::{encode_frame, frame_len};
use vramledger_format::{preamble, Api, Event, Header, Kind, MemKind, Owner};

pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// A journal under construction.
pub struct Synth {
    pub bytes: Vec<u8>,
    t: u64,
    stage: u32,
    stages: Vec<String>,
}

fn frame(kind: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; frame_len(payload.len())];
    encode_frame(kind, payload, &mut b);
    b
}

impl Synth {
    pub fn new(pid: u32, run_id: &str) -> Synth {
        Synth::on(pid, run_id, "testhost", "python\0-m\0sglang.launch_server")
    }

    /// A journal of a process on `host` that ran `cmdline` (its arguments NUL-separated).
    pub fn on(pid: u32, run_id: &str, host: &str, cmdline: &str) -> Synth {
        let mut h = Header::default();
        h.push("pid", pid.to_string());
        h.push("ppid", "1");
        h.push("run_id", run_id);
        h.push("host", host);
        h.push("cmdline", cmdline);
        h.push(
            "start_unix_ns",
            (1_700_000_000_000_000_000u64 + pid as u64).to_string(),
        );
        let mut bytes = preamble().to_vec();
        bytes.extend(frame(Kind::Header as u16, &h.encode()));
        let mut s = Synth {
            bytes,
            t: 1_000,
            stage: 0,
            stages: vec!["startup".into()],
        };
        let mut e = s.event(Kind::Stage, Api::VramledgerStage);
        e.text = "startup".into();
        s.push(e);
        s
    }

    fn event(&mut self, kind: Kind, api: Api) -> Event {
        self.t += 1_000;
        Event {
            kind: kind as u16,
            api: api as u16,
            t_ns: self.t,
            tid: 7,
            device: 0,
            stage: self.stage,
            ..Event::default()
        }
    }

    pub fn push(&mut self, e: Event) -> &mut Self {
        let payload = e.encode();
        self.bytes.extend(frame(e.kind, &payload));
        self
    }

    /// A stage boundary (with an optional engine line) followed by a free-memory sample.
    pub fn stage(&mut self, name: &str, line: Option<&str>, free: u64) -> &mut Self {
        let id = match self.stages.iter().position(|s| s == name) {
            Some(i) => i as u32,
            None => {
                self.stages.push(name.into());
                self.stages.len() as u32 - 1
            }
        };
        self.stage = id;
        let mut e = self.event(
            Kind::Stage,
            if line.is_some() {
                Api::VramledgerLogLine
            } else {
                Api::VramledgerStage
            },
        );
        e.stage = id;
        e.text = match line {
            Some(l) => format!("{name}\n{l}"),
            None => name.into(),
        };
        self.push(e);
        self.sample(free)
    }

    pub fn sample(&mut self, free: u64) -> &mut Self {
        let mut e = self.event(Kind::MemInfo, Api::VramledgerSample);
        e.arg0 = free;
        e.arg1 = 16 * GIB;
        self.push(e)
    }

    pub fn module(&mut self, id: u32, path: &str) -> &mut Self {
        let mut e = self.event(Kind::Module, Api::None);
        e.module = id;
        e.text = path.into();
        self.push(e)
    }

    pub fn context(&mut self, before: u64, size: u64) -> &mut Self {
        let mut e = self.event(Kind::Context, Api::cuDevicePrimaryCtxRetain);
        e.owner = Owner::Context as u8;
        e.size = size;
        e.arg0 = before;
        e.arg1 = before - size;
        self.push(e)
    }

    pub fn alloc(&mut self, addr: u64, size: u64, owner: Owner, module: u32) -> &mut Self {
        let mut e = self.event(Kind::Alloc, Api::cuMemAlloc_v2);
        e.addr = addr;
        e.size = size;
        e.owner = owner as u8;
        e.module = module;
        e.mem = MemKind::Device as u8;
        self.push(e)
    }

    pub fn free(&mut self, addr: u64) -> &mut Self {
        let mut e = self.event(Kind::Free, Api::cuMemFree_v2);
        e.addr = addr;
        self.push(e)
    }

    pub fn vmm(
        &mut self,
        handle: u64,
        addr: u64,
        size: u64,
        owner: Owner,
        module: u32,
    ) -> &mut Self {
        let mut e = self.event(Kind::VmmCreate, Api::cuMemCreate);
        e.handle = handle;
        e.size = size;
        e.owner = owner as u8;
        e.module = module;
        self.push(e);
        let mut m = self.event(Kind::VmmMap, Api::cuMemMap);
        m.addr = addr;
        m.size = size;
        m.handle = handle;
        self.push(m)
    }

    pub fn write(&self, path: &Path) {
        std::fs::write(path, &self.bytes).unwrap();
    }
}
