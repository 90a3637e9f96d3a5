//! What the benchmarks share: the synthetic run ([`run`]) and its journal bytes.

#![allow(dead_code)] // each bench uses part of it

pub mod run;

use std::io::Write;
use std::path::{Path, PathBuf};

use vramledger_format::frame::{encode_frame, frame_len};
use vramledger_format::memwriter::MemJournal;
use vramledger_format::{preamble, Event, Kind};

/// Where a benchmark writes its scratch journals: `$BENCH_SCRATCH` when set, else this
/// checkout's `target/`, else (the binary copied to another machine, where that `target/` does
/// not exist) the system's temporary folder.
pub fn scratch_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("BENCH_SCRATCH") {
        return PathBuf::from(dir);
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    if target.is_dir() {
        target
    } else {
        std::env::temp_dir()
    }
}

fn frame(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let start = out.len();
    out.resize(start + frame_len(payload.len()), 0);
    encode_frame(kind, payload, &mut out[start..]);
}

/// The run of `n` records as a format-1 journal (one CRC-sealed frame per record), handed to
/// `sink` in pieces of about 1 MiB (the first holds the preamble and header).
pub fn format1(n: usize, seed: u64, pid: u32, sink: &mut dyn FnMut(&[u8])) {
    let mut buf = preamble().to_vec();
    frame(&mut buf, Kind::Header as u16, &run::header(pid).encode());
    run::generate(n, seed, &mut |e: &Event| {
        frame(&mut buf, e.kind, &e.encode());
        if buf.len() >= 1 << 20 {
            sink(&buf);
            buf.clear();
        }
    });
    sink(&buf);
}

/// The run of `n` records as format-1 journal bytes in memory.
pub fn format1_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 104 + 4096);
    format1(n, seed, 1, &mut |b| out.extend_from_slice(b));
    out
}

/// The run of `n` records as format-2 journal bytes (blocks, compact records), as the shim
/// writes it today.
pub fn format2_bytes(n: usize, seed: u64, pid: u32) -> Vec<u8> {
    let mut w = MemJournal::new(&run::header(pid));
    run::generate(n, seed, &mut |e: &Event| w.event(e));
    w.finish(true)
}

/// Writes the run of `n` records to `path` as a journal of `format` (1 or 2); its size in
/// bytes.
pub fn write_journal(path: &Path, format: u8, n: usize, seed: u64, pid: u32) -> u64 {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("bench journal"));
    let mut len = 0u64;
    let mut sink = |b: &[u8]| {
        f.write_all(b).expect("bench journal write");
        len += b.len() as u64;
    };
    if format == 1 {
        format1(n, seed, pid, &mut sink);
    } else {
        sink(&format2_bytes(n, seed, pid));
    }
    f.flush().expect("bench journal flush");
    len
}
