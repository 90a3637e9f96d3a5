//! Fuzzing on the stable toolchain with no dependency: a deterministic, seeded mutator
//! (AFL-style havoc on bytes, plus structure-aware edits each harness adds) over seeds taken
//! from the real files in tests/data, run as ordinary `cargo test`s.
//!
//! Why not cargo-fuzz (nightly only), proptest or bolero: input `i` of a harness is a pure
//! function of (harness, i), so any failure is replayed exactly by name and number
//! (`VRAMLEDGER_FUZZ_REPLAY=harness:i` writes the input to target/); there is no shrinking
//! machinery, strategy tree or corpus database to pay for per input, which matters for
//! millions of inputs in a debug build on two cores; and the byte formats under test
//! (journal frames, JSON, log lines) want byte and token mutations more than typed values.
//!
//! Every harness checks what `cargo test` cannot see by itself:
//! - panics: caught per input; the input is written to target/fuzz-crashes/ and the test
//!   fails naming the harness, the input number and how to replay it;
//! - aborts from huge allocations: [`Guard`], the test binary's allocator, refuses any one
//!   allocation over 512 MiB (inputs are kilobytes, so such a size came from a number in the
//!   input) and names the harness and input on stderr before the abort;
//! - hangs: a watchdog aborts (naming the input) when one input runs past 60 seconds.
//!
//! Scale: `VRAMLEDGER_FUZZ_SCALE` multiplies every harness's input count (default 1: the CI
//! budget; e.g. 20 for a long local run). Crashes found are kept as regression inputs in
//! tests/data/fuzz-regressions/<harness>/, which every run reads first.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The largest single allocation a harness may make.
pub const MAX_ALLOCATION: usize = 512 << 20;
/// One input running longer than this is a hang.
pub const HANG_SECS: u64 = 60;

/// Set when a shard found a crash: the other shards stop early.
static STOP: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The harness and input this thread is running (read by the allocator: no allocation).
    static AT: Cell<(&'static str, u64)> = const { Cell::new(("", 0)) };
}

/// The test binary's allocator: the system's, refusing absurd single allocations.
pub struct Guard;

fn put_u64(buf: &mut [u8], mut at: usize, v: u64) -> usize {
    let mut digits = [0u8; 20];
    let mut n = 0;
    let mut x = v;
    loop {
        digits[n] = b'0' + (x % 10) as u8;
        n += 1;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    while n > 0 && at < buf.len() {
        n -= 1;
        buf[at] = digits[n];
        at += 1;
    }
    at
}

fn put(buf: &mut [u8], mut at: usize, s: &[u8]) -> usize {
    for &b in s {
        if at < buf.len() {
            buf[at] = b;
            at += 1;
        }
    }
    at
}

// SAFETY: every call is forwarded to the system allocator unchanged, except that an
// over-large request returns null, which the GlobalAlloc contract allows (allocation failure).
unsafe impl GlobalAlloc for Guard {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOCATION {
            let (name, i) = AT.with(|c| c.get());
            let mut buf = [0u8; 256];
            let mut n = put(&mut buf, 0, b"fuzz: refused an allocation of ");
            n = put_u64(&mut buf, n, layout.size() as u64);
            n = put(&mut buf, n, b" bytes in harness ");
            n = put(&mut buf, n, name.as_bytes());
            n = put(&mut buf, n, b", input ");
            n = put_u64(&mut buf, n, i);
            n = put(
                &mut buf,
                n,
                b" (replay: VRAMLEDGER_FUZZ_REPLAY=<harness>:<input>)\n",
            );
            let _ = std::io::stderr().write_all(&buf[..n]);
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOCATION {
            // SAFETY: same contract as `alloc`.
            return unsafe { self.alloc(layout) };
        }
        // SAFETY: forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > MAX_ALLOCATION {
            // SAFETY: a layout of the new size with the old alignment, as realloc's contract.
            let l = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
            // SAFETY: same contract as `alloc`, with that layout.
            return unsafe { self.alloc(l) };
        }
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// splitmix64: small, fast, and every seed gives a full-period stream.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    /// True with probability 1/n.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// Integers at the edges of every width and of the ranges the readers bound.
pub const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    7,
    8,
    16,
    0x7f,
    0x80,
    0xff,
    0x100,
    0xfff,
    0x1000,
    0x7fff,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 32,
    1 << 40,
    1 << 44,
    (1 << 44) + 1,
    1 << 53,
    (1 << 53) + 1,
    1 << 60,
    (1 << 60) + 1,
    1 << 62,
    i64::MAX as u64,
    1 << 63,
    u64::MAX - 1,
    u64::MAX,
    2 << 20,
    4 << 20,
    1 << 30,
];

/// Numbers as text, for text formats.
pub const INTERESTING_TEXT: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "2",
    "0.5",
    "1.0",
    "1e3",
    "1e308",
    "-1e308",
    "1e-308",
    "4.9e-324",
    "NaN",
    "Infinity",
    "-Infinity",
    "4095",
    "4096",
    "65536",
    "4294967295",
    "4294967296",
    "9007199254740992",
    "9007199254740993",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999999999999",
    "1152921504606846976",
    "17592186044416",
];

/// How many inputs: `base` × `VRAMLEDGER_FUZZ_SCALE`.
pub fn count(base: u64) -> u64 {
    let scale: f64 = std::env::var("VRAMLEDGER_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|s: &f64| s.is_finite() && *s > 0.0)
        .unwrap_or(1.0);
    ((base as f64) * scale).round().max(1.0) as u64
}

pub fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every regular file under `dir` (sorted), read.
pub fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(b) = std::fs::read(&p) {
                out.push((p, b));
            }
        }
    }
    out.sort();
    out
}

/// Byte-level havoc: 1 to 16 random edits. `splice` is another input to take pieces from;
/// `dict` holds tokens of the format.
pub fn havoc(rng: &mut Rng, data: &mut Vec<u8>, splice: &[u8], dict: &[&[u8]], max_len: usize) {
    let edits = 1 << rng.below(5);
    for _ in 0..edits {
        let len = data.len();
        match rng.below(14) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = rng.next() as u8;
            }
            2 if len > 0 => {
                let i = rng.below(len);
                data[i] = *rng.pick(&[0u8, 0xff, 0x7f, 0x80, b'0', b'9', b'-', b'.', b'"']);
            }
            3 if len >= 8 => {
                let w = *rng.pick(&[2usize, 4, 8]);
                let i = rng.below(len - w + 1) & !(w - 1).min(7);
                let v = rng.pick(INTERESTING).to_le_bytes();
                let i = i.min(len - w);
                data[i..i + w].copy_from_slice(&v[..w]);
            }
            4 if len >= 4 => {
                let i = rng.below(len - 3);
                let mut v = u32::from_le_bytes(data[i..i + 4].try_into().unwrap());
                let d = rng.below(35) as u32 + 1;
                v = if rng.one_in(2) {
                    v.wrapping_add(d)
                } else {
                    v.wrapping_sub(d)
                };
                data[i..i + 4].copy_from_slice(&v.to_le_bytes());
            }
            5 if len > 1 => {
                let a = rng.below(len);
                let n = rng.below((len - a).min(256)) + 1;
                data.drain(a..a + n);
            }
            6 => {
                let at = rng.below(len + 1);
                let n = rng.below(32) + 1;
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                data.splice(at..at, bytes);
            }
            7 if len > 0 => {
                let a = rng.below(len);
                let n = rng.below((len - a).min(512)) + 1;
                let chunk = data[a..a + n].to_vec();
                let at = rng.below(len + 1);
                data.splice(at..at, chunk);
            }
            8 if !splice.is_empty() => {
                let a = rng.below(splice.len());
                let n = rng.below((splice.len() - a).min(1024)) + 1;
                let at = rng.below(len + 1);
                let cut = rng.below(len - at + 1).min(n);
                data.splice(at..at + cut, splice[a..a + n].iter().copied());
            }
            9 if !dict.is_empty() => {
                let at = rng.below(len + 1);
                data.splice(at..at, rng.pick(dict).iter().copied());
            }
            10 if len > 0 => data.truncate(rng.below(len)),
            11 => replace_number(rng, data),
            12 if !dict.is_empty() && len > 0 => {
                // Overwrite in place with a token.
                let t = rng.pick(dict);
                let at = rng.below(len);
                let end = (at + t.len()).min(len);
                data.splice(at..end, t.iter().copied());
            }
            _ => {
                let at = rng.below(len + 1);
                let t = rng.pick(INTERESTING_TEXT).as_bytes();
                data.splice(at..at, t.iter().copied());
            }
        }
    }
    data.truncate(max_len);
}

/// Replaces one run of digits (with its sign, point and exponent) by an interesting number.
pub fn replace_number(rng: &mut Rng, data: &mut Vec<u8>) {
    let starts: Vec<usize> = (0..data.len())
        .filter(|&i| data[i].is_ascii_digit() && (i == 0 || !data[i - 1].is_ascii_digit()))
        .collect();
    if starts.is_empty() {
        return;
    }
    let mut a = *rng.pick(&starts);
    if a > 0 && data[a - 1] == b'-' {
        a -= 1;
    }
    let mut b = a + 1;
    while b < data.len() && (data[b].is_ascii_digit() || b".eE+-".contains(&data[b])) {
        b += 1;
    }
    data.splice(a..b, rng.pick(INTERESTING_TEXT).bytes());
}

/// What one harness did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    pub inputs: u64,
    pub accepted: u64,
    pub slowest_ms: u128,
}

/// Runs `target` on inputs `shard`, `shard + shards`, … below `total` of harness `name`
/// (`gen` makes input `i` from a generator seeded by (name, i)), after the regression inputs
/// in tests/data/fuzz-regressions/<name>/. `target` returns whether the input was accepted
/// (read as valid); a panic fails the test with the input saved.
pub fn run(
    name: &'static str,
    total: u64,
    shard: u64,
    shards: u64,
    gen: impl Fn(&mut Rng) -> Vec<u8>,
    target: impl Fn(&[u8]) -> bool,
) -> Stats {
    let seed = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let input_of = |i: u64| gen(&mut Rng::new(seed ^ i.wrapping_mul(0xD1B5_4A32_D192_ED03)));
    if let Ok(replay) = std::env::var("VRAMLEDGER_FUZZ_REPLAY") {
        if let Some((h, i)) = replay.split_once(':') {
            if h == name && shard == 0 {
                let i: u64 = i.parse().expect("VRAMLEDGER_FUZZ_REPLAY=harness:input");
                let input = input_of(i);
                let out = manifest_dir().join(format!("target/fuzz-replay-{name}-{i}.bin"));
                std::fs::write(&out, &input).unwrap();
                eprintln!("fuzz: input {i} of {name} written to {}", out.display());
                AT.with(|c| c.set((name, i)));
                target(&input);
            }
        }
        return Stats::default();
    }
    let progress = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (progress, done) = (progress.clone(), done.clone());
        std::thread::spawn(move || {
            let mut last = u64::MAX;
            let mut since = Instant::now();
            while !done.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(200));
                let now = progress.load(Ordering::Acquire);
                if now != last {
                    last = now;
                    since = Instant::now();
                } else if since.elapsed() > Duration::from_secs(HANG_SECS) {
                    eprintln!(
                        "fuzz: harness {name} input {} ran past {HANG_SECS} s: a hang (replay: VRAMLEDGER_FUZZ_REPLAY={name}:{})",
                        now >> 1,
                        now >> 1
                    );
                    std::process::abort();
                }
            }
        })
    };
    let mut stats = Stats::default();
    let check = |label: String, input: &[u8], stats: &mut Stats, i: u64| {
        AT.with(|c| c.set((name, i)));
        // Odd while an input runs, so an input that never ends never looks like progress.
        progress.store((i << 1) | 1, Ordering::Release);
        let t = Instant::now();
        match catch_unwind(AssertUnwindSafe(|| target(input))) {
            Ok(accepted) => {
                stats.inputs += 1;
                stats.accepted += accepted as u64;
                stats.slowest_ms = stats.slowest_ms.max(t.elapsed().as_millis());
            }
            Err(_) => {
                let dir = manifest_dir().join("target/fuzz-crashes");
                let _ = std::fs::create_dir_all(&dir);
                let out = dir.join(format!("{name}-{i}.bin"));
                let _ = std::fs::write(&out, input);
                done.store(true, Ordering::Release);
                STOP.store(true, Ordering::Release);
                panic!(
                    "fuzz: harness {name} panicked on {label} (saved to {}; replay: VRAMLEDGER_FUZZ_REPLAY={name}:{i}; keep it in tests/data/fuzz-regressions/{name}/)",
                    out.display()
                );
            }
        }
        progress.store(i << 1, Ordering::Release);
    };
    if shard == 0 {
        let dir = manifest_dir()
            .join("tests/data/fuzz-regressions")
            .join(name);
        for (p, bytes) in files(&dir) {
            check(
                format!("regression {}", p.display()),
                &bytes,
                &mut stats,
                u64::MAX >> 1,
            );
        }
    }
    let mut i = shard;
    while i < total && !STOP.load(Ordering::Relaxed) {
        let input = input_of(i);
        check(format!("input {i}"), &input, &mut stats, i);
        i += shards;
    }
    done.store(true, Ordering::Release);
    let _ = watchdog.join();
    stats
}

/// Runs a harness on every core the machine offers (at least 2 shards), and reports.
pub fn run_sharded<G, T>(name: &'static str, total: u64, gen: G, target: T) -> Stats
where
    G: Fn(&mut Rng) -> Vec<u8> + Sync,
    T: Fn(&[u8]) -> bool + Sync,
{
    if std::env::var_os("VRAMLEDGER_FUZZ_REPLAY").is_some() {
        // A replay runs one input of one harness (`run` writes it to target/ and runs it: a
        // panic fails the test) and nothing else, so the caller's checks of a full run's
        // counts would fail every harness of the binary: the replay stands in for the full
        // run there, and target/fuzz-counts.txt is left alone.
        run(name, total, 0, 1, &gen, &target);
        return Stats {
            inputs: total,
            accepted: total,
            slowest_ms: 0,
        };
    }
    let shards = std::thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(2)
        .clamp(2, 16);
    let t = Instant::now();
    let all: Vec<Stats> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..shards)
            .map(|k| {
                let (gen, target) = (&gen, &target);
                std::thread::Builder::new()
                    .name(format!("{name}-{k}"))
                    .stack_size(16 << 20)
                    .spawn_scoped(s, move || run(name, total, k, shards, gen, target))
                    .unwrap()
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(s) => s,
                Err(e) => std::panic::resume_unwind(e),
            })
            .collect()
    });
    let sum = all.iter().fold(Stats::default(), |a, s| Stats {
        inputs: a.inputs + s.inputs,
        accepted: a.accepted + s.accepted,
        slowest_ms: a.slowest_ms.max(s.slowest_ms),
    });
    eprintln!(
        "fuzz {name}: {} inputs ({} accepted as valid) in {:.1} s on {shards} threads, slowest input {} ms, 0 panics, 0 aborts, 0 hangs",
        sum.inputs,
        sum.accepted,
        t.elapsed().as_secs_f64(),
        sum.slowest_ms
    );
    let log = manifest_dir().join("target/fuzz-counts.txt");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = writeln!(
            f,
            "{name}\t{}\t{}\t{:.1}s\t{}ms",
            sum.inputs,
            sum.accepted,
            t.elapsed().as_secs_f64(),
            sum.slowest_ms
        );
    }
    sum
}

/// Structure-aware edits of a JSON document (a tree edit, then sometimes a text edit that
/// writes numbers no JSON library would: 1e400, 2^64, -0). `keys` and `words` are the
/// format's member names and string values.
pub fn json_mutate(rng: &mut Rng, seed: &[u8], keys: &[&str], words: &[&str]) -> Vec<u8> {
    use serde_json::Value;
    let Ok(mut v) = serde_json::from_slice::<Value>(seed) else {
        let mut b = seed.to_vec();
        havoc(rng, &mut b, &[], &[], 1 << 20);
        return b;
    };
    for _ in 0..1 + rng.below(6) {
        let mut paths = Vec::new();
        collect(&v, &mut Vec::new(), &mut paths);
        let path = rng.pick(&paths).clone();
        let replacement = |rng: &mut Rng| -> Value {
            match rng.below(10) {
                0 => Value::from(*rng.pick(INTERESTING)),
                1 => Value::from((*rng.pick(INTERESTING) as i64).wrapping_neg()),
                2 => Value::from(*rng.pick(&[0.5, -1.0, 1e300, -1e300, 1e-300, 0.0, 3.5])),
                3 => Value::from(*rng.pick(words)),
                4 => Value::Null,
                5 => Value::Bool(rng.one_in(2)),
                6 => Value::Array(Vec::new()),
                7 => Value::Object(Default::default()),
                8 => {
                    let mut deep = Value::from(1);
                    for _ in 0..rng.below(300) {
                        deep = Value::Array(vec![deep]);
                    }
                    deep
                }
                _ => Value::from(rng.below(100) as u64),
            }
        };
        let Some(node) = pointer_mut(&mut v, &path) else {
            continue;
        };
        match rng.below(6) {
            0 | 1 => *node = replacement(rng),
            2 => {
                if let Value::Object(m) = node {
                    let value = replacement(rng);
                    m.insert(rng.pick(keys).to_string(), value);
                } else if let Value::Array(a) = node {
                    let value = replacement(rng);
                    a.push(value);
                }
            }
            3 => {
                if let Value::Object(m) = node {
                    if let Some(k) = m.keys().nth(rng.below(m.len().max(1))).cloned() {
                        m.remove(&k);
                    }
                } else if let Value::Array(a) = node {
                    if !a.is_empty() {
                        let i = rng.below(a.len());
                        a.remove(i);
                    }
                }
            }
            4 => {
                if let Value::Array(a) = node {
                    if !a.is_empty() {
                        let item = a[rng.below(a.len())].clone();
                        let most = if rng.one_in(10) { 2000 } else { 4 };
                        for _ in 0..1 + rng.below(most) {
                            a.push(item.clone());
                        }
                    }
                }
            }
            _ => {
                if let Value::Object(m) = node {
                    // Rename a member to another known key.
                    if let Some(k) = m.keys().nth(rng.below(m.len().max(1))).cloned() {
                        if let Some(val) = m.remove(&k) {
                            m.insert(rng.pick(keys).to_string(), val);
                        }
                    }
                }
            }
        }
    }
    let mut b = serde_json::to_vec(&v).unwrap_or_default();
    if b.len() > 8 << 20 {
        b.truncate(8 << 20);
    }
    match rng.below(6) {
        0 | 1 => replace_number(rng, &mut b),
        2 => {
            let dict: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
            havoc(rng, &mut b, seed, &dict, 8 << 20);
        }
        _ => {}
    }
    b
}

fn collect(v: &serde_json::Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(at.clone());
    if out.len() > 4096 {
        return;
    }
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                at.push(k.clone());
                collect(x, at, out);
                at.pop();
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate().take(64) {
                at.push(i.to_string());
                collect(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn pointer_mut<'a>(
    v: &'a mut serde_json::Value,
    path: &[String],
) -> Option<&'a mut serde_json::Value> {
    let mut cur = v;
    for k in path {
        cur = match cur {
            serde_json::Value::Object(m) => m.get_mut(k)?,
            serde_json::Value::Array(a) => a.get_mut(k.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}
