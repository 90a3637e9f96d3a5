//! Every offline command on random journals (valid frames and checksums, random records):
//! one message and exit code ≤ 2, never a panic, whatever the records say.

use std::path::{Path, PathBuf};
use std::process::Command;

use vramledger_format::frame::{encode_frame, frame_len};
use vramledger_format::{preamble, Event, Header, Kind};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

fn push(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let at = out.len();
    out.resize(at + frame_len(payload.len()), 0);
    encode_frame(kind, payload, &mut out[at..]);
}

fn random_journal(seed: u64, path: &Path) {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut out = preamble().to_vec();
    let mut h = Header::default();
    h.push("pid", seed.to_string());
    h.push("run_id", "fuzz");
    push(&mut out, Kind::Header as u16, &h.encode());
    let kinds: Vec<u16> = Kind::ALL
        .iter()
        .map(|k| *k as u16)
        .chain([0xBEEF])
        .collect();
    let big = [0u64, 1, 2 << 20, 0x1000, 0x2000, u64::MAX, 1 << 63];
    for _ in 0..(r.next() % 300 + 1) {
        let mut e = Event {
            kind: r.pick(&kinds),
            t_ns: r.next() % (1 << 40),
            tid: (r.next() % 50) as u32,
            device: r.pick(&[-1, 0, 1, 7, 4095, 4096, i32::MAX, i32::MIN]),
            stage: (r.next() % 6) as u32,
            module: (r.next() % 6) as u32,
            owner: (r.next() % 10) as u8,
            mem: (r.next() % 7) as u8,
            api: r.pick(&[
                0u16, 1, 4, 5, 20, 22, 23, 24, 42, 62, 70, 100, 101, 102, 103, 9999,
            ]),
            result: r.pick(&[0, 0, 0, 2, 900, -1]),
            flags: (r.next() % 32) as u32,
            addr: r.pick(&big),
            size: r.pick(&big),
            handle: r.pick(&big),
            arg0: r.pick(&big),
            arg1: r.pick(&big),
            arg2: r.pick(&big),
            text: String::new(),
        };
        e.text = match r.next() % 4 {
            0 => String::new(),
            1 => "weight_load".into(),
            2 => "kv_pool\n[TP0] Load weight end. avail mem=1.00 GB, mem usage=2.00 GB.".into(),
            _ => "\u{fffd}zz\n\n".into(),
        };
        push(&mut out, e.kind, &e.encode());
    }
    std::fs::write(path, out).unwrap();
}

#[test]
fn random_journals_never_panic_any_command() {
    let cli = env!("CARGO_BIN_EXE_vramledger");
    let root =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for seed in 1..=25u64 {
        let dir = root.join(seed.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        random_journal(seed, &dir.join("j.vlj"));
    }
    let first = root.join("1");
    for seed in 1..=25u64 {
        let dir = root.join(seed.to_string());
        let d = dir.to_string_lossy().into_owned();
        let j = dir.join("j.vlj").to_string_lossy().into_owned();
        let f = first.to_string_lossy().into_owned();
        let o = |n: &str| dir.join(n).to_string_lossy().into_owned();
        let commands: Vec<Vec<String>> = vec![
            vec!["report".into(), d.clone()],
            vec!["report".into(), "--json".into(), d.clone()],
            vec![
                "report".into(),
                d.clone(),
                "--html".into(),
                "-o".into(),
                o("r.html"),
                "--force".into(),
            ],
            vec!["dump".into(), j.clone()],
            vec!["dump".into(), "--text".into(), j.clone()],
            vec![
                "snapshot".into(),
                d.clone(),
                "--at-peak".into(),
                "--format".into(),
                "memory-viz".into(),
                "-o".into(),
                o("s.pickle"),
                "--force".into(),
            ],
            vec![
                "snapshot".into(),
                d.clone(),
                "--format".into(),
                "perfetto".into(),
                "-o".into(),
                o("s.json"),
                "--force".into(),
            ],
            vec![
                "snapshot".into(),
                d.clone(),
                "--at-oom".into(),
                "-o".into(),
                o("o.json"),
                "--force".into(),
            ],
            vec!["diff".into(), d.clone(), f.clone()],
            vec!["check".into(), "--baseline".into(), f.clone(), d.clone()],
            vec!["size".into(), d.clone()],
        ];
        for args in commands {
            let out = Command::new(cli).args(&args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            let code = out.status.code().unwrap_or(-1);
            assert!(
                (0..=2).contains(&code) && !err.contains("panicked"),
                "seed {seed}: {args:?} → {code}\n{err}"
            );
        }
    }
}
