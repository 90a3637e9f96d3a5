//! The fault matrix: what happens to the target, never to the journal alone. libvramledger.so
//! is preloaded into C clients over the fake driver, and the journal is made to fail (a full
//! disk, the file-size limit, a truncation by another process), the program hands `write`
//! hostile buffers, forks from a thread, is killed at random points, runs long, and points
//! the shim at hostile files and folders. In every case the program's results are those of a
//! run without the preload, and a journal failure is one warning on stderr.
//!
//! Needs `cargo build --workspace` first. `VRAMLEDGER_TEST_SHIM` points the tests at another
//! build of the library (to show that the previous one failed them).

mod support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{clients, profile_dir, RunOutput};
use vramledger::journal::{self, Journal};
use vramledger_format::{Kind, LiveBooks};

fn shim() -> PathBuf {
    if let Some(p) = std::env::var_os("VRAMLEDGER_TEST_SHIM") {
        return PathBuf::from(p);
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
        .join(format!("faults-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A client under the preload, journals in `out`, plus `env`.
fn hooked(name: &str, args: &[&str], out: &Path, env: &[(&str, &str)]) -> Command {
    let (lib, out) = (s(&shim()), s(out));
    let mut full = vec![
        ("LD_PRELOAD", lib.as_str()),
        ("VRAMLEDGER_OUT", out.as_str()),
    ];
    full.extend_from_slice(env);
    clients().command(name, args, &full)
}

fn journals(dir: &Path) -> Vec<Journal> {
    if !dir.exists() {
        return Vec::new();
    }
    journal::find(dir)
        .unwrap()
        .iter()
        .map(|p| journal::read(p).unwrap())
        .collect()
}

fn vramledger_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("vramledger["))
        .collect()
}

/// Exactly one line from vramledger on stderr, containing `what`.
fn one_warning(out: &RunOutput, what: &str) {
    let lines = vramledger_lines(&out.stderr);
    assert_eq!(lines.len(), 1, "one warning expected\n{}", out.dump());
    assert!(lines[0].contains(what), "{:?} lacks {what:?}", lines[0]);
}

fn count(j: &Journal, kind: Kind) -> usize {
    j.events.iter().filter(|e| e.kind() == Some(kind)).count()
}

/// The books of a journal replayed: nothing unknown freed.
fn replay(j: &Journal) -> LiveBooks {
    let mut b = LiveBooks::new();
    for e in &j.events {
        b.apply(e);
    }
    b
}

/// A journal that failed mid-run: readable, nothing corrupt, some records, and every record
/// it holds whole.
fn cut_but_readable(dir: &Path) -> Journal {
    let js = journals(dir);
    assert_eq!(js.len(), 1, "one journal expected");
    let j = js.into_iter().next().unwrap();
    assert!(!j.corrupt, "{:?}", j.warnings);
    assert!(j.pid().is_some());
    assert!(count(&j, Kind::Alloc) > 0);
    j
}

fn pairs_output_ok(out: &RunOutput, n: &str) {
    assert!(out.success(), "{}", out.dump());
    out.assert_line(&format!("pairs: {n} ok"));
}

/// Mounts a tmpfs of `size` at `at`, directly (root with CAP_SYS_ADMIN) or not at all.
fn mount_tmpfs(at: &Path, size: &str) -> Result<(), String> {
    std::fs::create_dir_all(at).unwrap();
    let out = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size},mode=0700"),
            "tmpfs",
        ])
        .arg(at)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Runs `faults ARGS` under the preload with its journal folder on a tmpfs of `size`: mounted
/// directly (root with CAP_SYS_ADMIN), else inside a private mount namespace of an
/// unprivileged user namespace. Returns the run and a folder holding copies of its journals,
/// or why no small file system could be had.
fn on_small_tmpfs(dir: &Path, size: &str, args: &[&str]) -> Result<(RunOutput, PathBuf), String> {
    on_small_tmpfs_with(dir, size, 0, args)
}

/// [`on_small_tmpfs`], with `ballast_kib` KiB of another file on the tmpfs before the run.
fn on_small_tmpfs_with(
    dir: &Path,
    size: &str,
    ballast_kib: u64,
    args: &[&str],
) -> Result<(RunOutput, PathBuf), String> {
    let mnt = dir.join("small");
    let copied = dir.join("copied");
    std::fs::create_dir_all(&copied).unwrap();
    let copy = |from: &Path| {
        for f in journal::find(from).unwrap_or_default() {
            std::fs::copy(&f, copied.join(f.file_name().unwrap())).unwrap();
        }
    };
    match mount_tmpfs(&mnt, size) {
        Ok(()) => {
            std::fs::write(mnt.join("ballast"), vec![0u8; ballast_kib as usize * 1024]).unwrap();
            let out = support::run(hooked("faults", args, &mnt, &[]));
            copy(&mnt);
            let _ = Command::new("umount").arg("-l").arg(&mnt).status();
            Ok((out, copied))
        }
        Err(direct) => {
            let script = "mount -t tmpfs -o size=\"$1\",mode=0700 tmpfs \"$2\" || exit 97; \
                          mnt=$2; copied=$3; ballast=$4; shift 4; \
                          head -c \"${ballast}K\" /dev/zero >\"$mnt/ballast\" || exit 97; \
                          \"$@\"; rc=$?; \
                          cp \"$mnt\"/*.vlj \"$copied\"/ 2>/dev/null; exit $rc";
            let exe = s(&clients().exe("faults"));
            let mut argv = vec!["-rm", "sh", "-c", script, "sh", size];
            let (mnt_s, copied_s, ballast) = (s(&mnt), s(&copied), ballast_kib.to_string());
            argv.extend([
                mnt_s.as_str(),
                copied_s.as_str(),
                ballast.as_str(),
                exe.as_str(),
            ]);
            argv.extend_from_slice(args);
            let (lib, out_s) = (s(&shim()), s(&mnt));
            let cmd = support::command(
                Path::new("unshare"),
                &argv,
                &clients().driver_dir,
                &[("LD_PRELOAD", &lib), ("VRAMLEDGER_OUT", &out_s)],
            );
            let out = support::run(cmd);
            if out.status.code() == Some(97)
                || vramledger_lines(&out.stderr).is_empty() && !out.success()
            {
                return Err(format!(
                    "mount: {direct}; unshare -rm: {}",
                    out.stderr.trim()
                ));
            }
            Ok((out, copied))
        }
    }
}

#[test]
fn a_full_disk_turns_the_shim_into_pass_through() {
    let dir = out_dir("fulldisk");
    // 6 MiB: the first 4 MiB chunk fits, the second cannot be reserved (200,000 pairs are
    // about 9.6 MB of journal at 24 bytes a record).
    let n = "200000";
    let (out, copied) = match on_small_tmpfs(&dir, "6m", &["pairs", n]) {
        Ok(v) => v,
        Err(why) => {
            support::skip_test(&format!(
                "no small file system can be mounted here ({why}); the file-size-limit test \
                 covers the same path"
            ));
            return;
        }
    };
    pairs_output_ok(&out, n);
    one_warning(&out, "no space left for the journal");
    let j = cut_but_readable(&copied);
    assert!(
        count(&j, Kind::Alloc) < 200000,
        "the journal cannot hold them all"
    );
}

#[test]
fn the_journal_never_takes_the_last_of_the_disk() {
    // 8 MiB with 3.7 MiB of the program's own: a 4 MiB chunk would leave it ~300 KiB, under
    // the 5% (409 KiB) the shim keeps free for it. The shim gives up before taking any (the
    // last build took the chunk and left the program ~300 KiB).
    let dir = out_dir("lowspace");
    let n = "20000";
    let (out, copied) = match on_small_tmpfs_with(&dir, "8m", 3800, &["pairs", n]) {
        Ok(v) => v,
        Err(why) => {
            support::skip_test(&format!("no small file system can be mounted here ({why})"));
            return;
        }
    };
    pairs_output_ok(&out, n);
    one_warning(&out, "kept free for the program on its file system");
    let held: usize = journal::find(&copied)
        .unwrap_or_default()
        .iter()
        .filter_map(|f| journal::read(f).ok())
        .map(|j| count(&j, Kind::Alloc))
        .sum();
    assert_eq!(held, 0, "no chunk may be taken");
}

/// Pairs that need more than one 4 MiB chunk of journal (24 bytes a record).
const PAIRS_PAST_A_CHUNK: &str = "200000";

fn with_file_size_limit(dir: &Path, limit: u64) -> RunOutput {
    let mut cmd = hooked("faults", &["pairs", PAIRS_PAST_A_CHUNK], dir, &[]);
    // SAFETY: setrlimit in the child before exec; async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            Ok(())
        });
    }
    let out = support::run(cmd);
    assert_eq!(
        out.status.signal(),
        None,
        "killed by a signal\n{}",
        out.dump()
    );
    pairs_output_ok(&out, PAIRS_PAST_A_CHUNK);
    out
}

#[test]
fn the_file_size_limit_never_sends_sigxfsz() {
    // Room for the first chunk only: recording stops at the second.
    let dir = out_dir("fsize");
    let out = with_file_size_limit(&dir, 6 << 20);
    one_warning(&out, "file-size limit (RLIMIT_FSIZE 6291456 bytes)");
    let j = cut_but_readable(&dir);
    assert!(count(&j, Kind::Alloc) < 200000);
    // Not even room for the first: nothing recorded, no empty journal left behind.
    let dir = out_dir("fsize-tiny");
    let out = with_file_size_limit(&dir, 1 << 20);
    one_warning(&out, "file-size limit (RLIMIT_FSIZE 1048576 bytes)");
    assert!(journal::find(&dir).unwrap().is_empty());
}

/// Starts `faults wait N`, waits for READY, lets `during` act on the journal, then lets the
/// program finish.
fn while_waiting(
    test: &str,
    n: &str,
    args_extra: &[&str],
    during: impl FnOnce(&Path),
) -> (RunOutput, PathBuf) {
    let dir = out_dir(test);
    let mut args = vec!["wait", n];
    args.extend_from_slice(args_extra);
    let mut cmd = hooked("faults", &args, &dir, &[]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    let mut line = String::new();
    while stdout.read_line(&mut line).unwrap() > 0 {
        first.push_str(&line);
        if line.trim() == "READY" {
            break;
        }
        line.clear();
    }
    assert!(first.contains("READY"), "{first}");
    let files = journal::find(&dir).unwrap();
    assert_eq!(files.len(), 1);
    during(&files[0]);
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    let run = RunOutput {
        status: out.status,
        stdout: first + &rest,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        description: format!("faults {args:?}"),
    };
    (run, dir)
}

#[test]
fn a_journal_truncated_by_another_process_cannot_kill_the_target() {
    // Cut to nothing, and cut inside the page being written: the next store into the mapping
    // faults; the target carries on.
    for (test, len, how) in [
        ("trunc0", 0u64, &[][..]),
        ("trunc4k", 4096, &[][..]),
        ("trunc-threads", 0, &["threads"][..]),
    ] {
        let (out, _) = while_waiting(test, "20000", how, |path| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .unwrap()
                .set_len(len)
                .unwrap();
        });
        assert_eq!(
            out.status.signal(),
            None,
            "killed by a signal\n{}",
            out.dump()
        );
        assert!(out.success(), "{}", out.dump());
        out.assert_line("wait: 40000 ok");
        one_warning(&out, "the journal was truncated by another process");
    }
}

#[test]
fn a_truncation_passed_on_by_the_programs_own_handler_is_still_absorbed() {
    // A handler installed after the journal opened that prints, restores the previous one and
    // raises again (Python's faulthandler does this): the target still survives.
    let (out, _) = while_waiting("relay", "20000", &["relay"], |path| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(0)
            .unwrap();
    });
    assert_eq!(
        out.status.signal(),
        None,
        "killed by a signal\n{}",
        out.dump()
    );
    assert!(out.success(), "{}", out.dump());
    out.assert_line("wait: 40000 ok");
    assert!(
        out.stderr.contains("relay: SIGBUS passed on"),
        "{}",
        out.dump()
    );
    one_warning(&out, "the journal was truncated by another process");
}

#[test]
fn the_programs_own_sigbus_handler_still_gets_its_own_faults() {
    for when in ["first", "late"] {
        let args = ["ownbus", "3", when];
        let plain = clients().run("faults", &args, &[]);
        let dir = out_dir(&format!("ownbus-{when}"));
        let out = support::run(hooked("faults", &args, &dir, &[]));
        assert!(plain.success(), "{}", plain.dump());
        assert_eq!(out.status.code(), plain.status.code(), "{}", out.dump());
        assert_eq!(out.stdout, plain.stdout);
        out.assert_line("ownbus: caught 3 of 3 ok");
        assert!(vramledger_lines(&out.stderr).is_empty(), "{}", out.dump());
        let js = journals(&dir);
        assert_eq!(js.len(), 1);
        assert_eq!(count(&js[0], Kind::Alloc), 20);
    }
    // A SIGBUS the program raises itself, with no handler, ends it as it would without us.
    let plain = clients().run("faults", &["raise", "5"], &[]);
    let dir = out_dir("raise");
    let out = support::run(hooked("faults", &["raise", "5"], &dir, &[]));
    assert_eq!(plain.status.signal(), Some(libc::SIGBUS));
    assert_eq!(out.status.signal(), Some(libc::SIGBUS), "{}", out.dump());
    assert_eq!(out.stdout, plain.stdout);
}

#[test]
fn hostile_write_buffers_get_the_kernels_answer() {
    let plain = clients().run("hostile_write", &[], &[]);
    let dir = out_dir("hostile");
    let out = support::run(hooked("hostile_write", &[], &dir, &[]));
    assert!(plain.success(), "{}", plain.dump());
    assert_eq!(out.status.code(), plain.status.code(), "{}", out.dump());
    assert_eq!(out.stdout, plain.stdout, "what reached stdout changed");
    assert_eq!(out.stderr, plain.stderr, "a result or errno changed");
    // The kernel's own answers, for the record.
    assert!(
        plain.stderr.contains("tiny address: rc=-1 errno=14"),
        "{}",
        plain.stderr
    );
    assert!(
        plain.stderr.contains("NULL: rc=-1 errno=14"),
        "{}",
        plain.stderr
    );
    let page = 4096;
    assert!(
        plain
            .stderr
            .contains(&format!("unmapped second page: rc={page} errno=0")),
        "{}",
        plain.stderr
    );
}

#[test]
fn sixty_four_threads_lose_and_duplicate_nothing() {
    let dir = out_dir("t64");
    let out = support::run(hooked("threads", &["64", "10000"], &dir, &[]));
    assert!(out.success(), "{}", out.dump());
    out.assert_line("threads: N=64 M=10000 allocs=640000 frees=640000 failures=0 used_delta=0MiB");
    let js = journals(&dir);
    assert_eq!(js.len(), 1);
    let j = &js[0];
    // Over 24 MiB of journal (24 bytes a record): many chunk and block boundaries, and not
    // one false warning.
    assert!(std::fs::metadata(&j.path).unwrap().len() > 24 << 20);
    // Strictly: every block sealed (its checksum right) but the last one, closed by its final
    // seal, and inside them every record follows the one before it (no slot left empty, no
    // gap the reader would have to step over).
    use vramledger_format::walk::{self, BlockState, Item, Step};
    let raw = std::fs::read(&j.path).unwrap();
    let (mut blocks, mut records, mut holes, mut last) = (0usize, 0usize, Vec::new(), false);
    walk::walk(&raw, |step| match step {
        Step::Block(b) => {
            assert_eq!(b.state, BlockState::Sealed, "block at {}", b.start);
            blocks += 1;
            last = b.last;
        }
        Step::Item(Item::Frame { .. } | Item::Compact { .. }) => records += 1,
        Step::Item(other) => holes.push(other),
    });
    assert!(
        holes.is_empty(),
        "{:?} after {records} records",
        &holes[..holes.len().min(3)]
    );
    assert!(last, "the journal ends with its final seal");
    assert!(blocks > 380, "{blocks} blocks");
    assert!(
        j.warnings.is_empty(),
        "{:?}",
        &j.warnings[..j.warnings.len().min(5)]
    );
    assert_eq!(
        (count(j, Kind::Alloc), count(j, Kind::Free)),
        (640000, 640000)
    );
    let books = replay(j);
    assert_eq!(books.unknown_frees, 0);
    assert_eq!(books.totals().count(), 0);
    let tids: std::collections::BTreeSet<u32> = j
        .events
        .iter()
        .filter(|e| e.kind() == Some(Kind::Alloc))
        .map(|e| e.tid)
        .collect();
    assert_eq!(tids.len(), 64);
}

#[test]
fn fork_from_a_thread_gives_the_child_its_own_journal() {
    let dir = out_dir("forkthread");
    let out = support::run(hooked("faults", &["forkthread", "8", "2000"], &dir, &[]));
    assert!(out.success(), "{}", out.dump());
    out.assert_line("child: cudaMalloc rc=3");
    out.assert_line("forkthread: 8 x 2000 child=0");
    let js = journals(&dir);
    assert_eq!(js.len(), 2, "parent and child");
    let (parent, child): (Vec<&Journal>, Vec<&Journal>) =
        js.iter().partition(|j| count(j, Kind::Alloc) > 0);
    let (parent, child) = (parent[0], child[0]);
    assert_eq!(child.header.get("ppid"), parent.header.get("pid"));
    for j in [parent, child] {
        assert!(j.warnings.is_empty(), "{:?}", j.warnings);
        assert!(!j.corrupt);
    }
    assert_eq!(
        (count(parent, Kind::Alloc), count(parent, Kind::Free)),
        (16000, 16000)
    );
    assert_eq!(replay(parent).unknown_frees, 0);
    let failed: Vec<i32> = child
        .events
        .iter()
        .filter(|e| e.kind() == Some(Kind::AllocFailed))
        .map(|e| e.result)
        .collect();
    assert_eq!(failed, vec![3]);
}

/// A small deterministic generator (no dependency): the kill points are reproducible.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

#[test]
fn sigkill_at_twenty_random_points_leaves_a_readable_journal() {
    let seed = 0x5eed_1234u64;
    let mut rng = Lcg(seed);
    for round in 0..20 {
        let dir = out_dir(&format!("kill{round}"));
        let mut cmd = hooked("threads", &["4", "1000000"], &dir, &[]);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let delay = 30 + rng.next(400);
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "round {round} (seed {seed:#x})"
        );
        let js = journals(&dir);
        if js.is_empty() {
            continue; // killed before the first event
        }
        assert_eq!(js.len(), 1);
        let j = &js[0];
        let msg = format!(
            "round {round}, killed after {delay} ms (seed {seed:#x}): {:?}",
            j.warnings
        );
        if j.events.is_empty() && j.header.pairs.is_empty() {
            continue; // killed while the journal was being opened: it reads as empty
        }
        assert!(!j.corrupt, "{msg}");
        assert!(j.pid().is_some(), "{msg}");
        // Only records still in flight at the kill (at most one per thread) may be missing.
        assert!(
            j.warnings.iter().all(|w| w.contains("in flight")) && j.warnings.len() <= 5,
            "{msg}"
        );
        let books = replay(j);
        assert!(books.unknown_frees <= 4, "{msg}");
        assert!(count(j, Kind::Alloc) + 4 >= count(j, Kind::Free), "{msg}");
    }
}

fn hwm_kb(out: &RunOutput) -> u64 {
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with("mem: "))
        .unwrap_or_else(|| panic!("no mem line\n{}", out.dump()));
    line.split("hwm_kb=")
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn the_targets_memory_stays_flat_however_long_it_runs() {
    let small_dir = out_dir("rss-small");
    let large_dir = out_dir("rss-large");
    let small = support::run(hooked("faults", &["pairs", "5000"], &small_dir, &[]));
    let large = support::run(hooked("faults", &["pairs", "500000"], &large_dir, &[]));
    pairs_output_ok(&small, "5000");
    pairs_output_ok(&large, "500000");
    let (a, b) = (hwm_kb(&small), hwm_kb(&large));
    let js = journals(&large_dir);
    let journal_kb = std::fs::metadata(&js[0].path).unwrap().len() / 1024;
    // 24 bytes a record: more than five 4 MiB chunks came and went.
    assert!(
        journal_kb > 20_000,
        "10^6 events: {journal_kb} KiB of journal"
    );
    assert_eq!(count(&js[0], Kind::Alloc), 500000);
    // At most two 4 MiB chunks mapped at a time, whatever the journal's size.
    assert!(
        b <= a + 12 * 1024,
        "VmHWM {a} KiB after 10^4 events, {b} KiB after 10^6 (journal {journal_kb} KiB)"
    );
}

/// Runs `cmd`, killing it after `limit` (a blocked target fails the test instead of hanging it).
fn run_with_limit(mut cmd: Command, limit: Duration) -> RunOutput {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let description = format!("{cmd:?}");
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "blocked for {limit:?}: {description}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    RunOutput {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        description,
    }
}

const SGLANG_LINES: &str = "\
[2025-06-01 10:00:00 TP0] Init torch distributed begin.
[2025-06-01 10:00:01 TP0] Load weight begin. avail mem=78.68 GB
";

#[test]
fn a_rule_file_that_is_a_fifo_or_huge_is_refused_at_once() {
    let dir = out_dir("rules");
    let input = dir.join("input.log");
    std::fs::write(&input, SGLANG_LINES).unwrap();
    let fifo = dir.join("rules.fifo");
    let c = std::ffi::CString::new(s(&fifo)).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let huge = dir.join("huge.rules");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    for (rules, why) in [
        (s(&fifo), "not a regular file"),
        ("/dev/zero".to_string(), "not a regular file"),
        (s(&huge), "larger than 1024 KiB"),
    ] {
        let journals_dir = dir.join(format!("j{}", why.len()));
        let _ = std::fs::remove_dir_all(&journals_dir);
        let cmd = hooked(
            "tap_writer",
            &[&s(&input), "7", "1"],
            &journals_dir,
            &[("VRAMLEDGER_RULES", &rules)],
        );
        let out = run_with_limit(cmd, Duration::from_secs(20));
        assert!(out.success(), "{}", out.dump());
        assert_eq!(out.stdout, SGLANG_LINES, "the output is unchanged");
        one_warning(&out, why);
        // The grammar still marks the stages.
        let js = journals(&journals_dir);
        assert_eq!(
            count(&js[0], Kind::Stage),
            3,
            "startup, dist_init, weight_load"
        );
    }
}

#[test]
fn a_rule_file_warning_never_lands_inside_a_program_line() {
    let dir = out_dir("rules-warning");
    let input = dir.join("input.log");
    std::fs::write(&input, SGLANG_LINES).unwrap();
    let rules = dir.join("bad.rules");
    std::fs::write(&rules, "lonely_stage_without_text\n").unwrap();
    // The program writes its lines to stderr 5 bytes at a time.
    let cmd = hooked(
        "tap_writer",
        &[&s(&input), "5", "2"],
        &dir.join("j"),
        &[("VRAMLEDGER_RULES", &s(&rules))],
    );
    let out = run_with_limit(cmd, Duration::from_secs(20));
    assert!(out.success(), "{}", out.dump());
    one_warning(&out, "the rule file is ignored");
    let others: String = out
        .stderr
        .lines()
        .filter(|l| !l.starts_with("vramledger["))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        others,
        SGLANG_LINES,
        "a program line was split\n{}",
        out.dump()
    );
}

#[test]
fn a_warning_shows_control_characters_of_its_path_escaped() {
    let dir = out_dir("rules-escaped");
    let input = dir.join("input.log");
    std::fs::write(&input, SGLANG_LINES).unwrap();
    // A rule file path (never created) that would retitle the terminal and forge a log line.
    let rules = format!("{}/x\x1b]0;pwned\x07\nforged line.rules", s(&dir));
    let cmd = hooked(
        "tap_writer",
        &[&s(&input), "7", "1"],
        &dir.join("j"),
        &[("VRAMLEDGER_RULES", &rules)],
    );
    let out = run_with_limit(cmd, Duration::from_secs(20));
    assert!(out.success(), "{}", out.dump());
    one_warning(&out, "x\\x1b]0;pwned\\x07\\nforged line.rules");
    assert!(
        !out.stderr.contains('\x1b') && !out.stderr.contains('\x07'),
        "{}",
        out.dump()
    );
    assert!(
        out.stderr.lines().all(|l| !l.starts_with("forged")),
        "{}",
        out.dump()
    );
}

#[test]
fn a_journal_folder_through_another_users_link_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: no link of another user can be made here; nothing to check");
        return;
    }
    let dir = out_dir("foreign-link");
    let target = dir.join("chosen");
    std::fs::create_dir_all(&target).unwrap();
    let link = dir.join("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let c = std::ffi::CString::new(s(&link)).unwrap();
    // SAFETY: lchown of the link just made, with a NUL-terminated path.
    assert_eq!(unsafe { libc::lchown(c.as_ptr(), 65534, 65534) }, 0);
    let out = support::run(hooked("faults", &["pairs", "3"], &link.join("sub"), &[]));
    pairs_output_ok(&out, "3");
    one_warning(&out, "a symbolic link of uid 65534");
    assert!(
        !target.join("sub").exists(),
        "the folder was made where the link points"
    );
}

#[test]
fn a_journal_folder_that_is_not_utf8_is_refused_not_replaced() {
    use std::os::unix::ffi::OsStrExt;
    let dir = out_dir("non-utf8");
    let mut raw = dir.as_os_str().as_bytes().to_vec();
    raw.extend_from_slice(b"/\xffout");
    let lib = s(&shim());
    let mut cmd = clients().command("faults", &["pairs", "3"], &[("LD_PRELOAD", lib.as_str())]);
    cmd.env("VRAMLEDGER_OUT", std::ffi::OsStr::from_bytes(&raw));
    let out = support::run(cmd);
    pairs_output_ok(&out, "3");
    one_warning(&out, "VRAMLEDGER_OUT is not UTF-8");
    // Neither the folder as named nor a lossy copy of its name.
    let made: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(made.is_empty(), "{made:?}");
}

#[test]
fn a_vfork_childs_line_is_not_the_parents_stage() {
    let dir = out_dir("vfork");
    let out = support::run(hooked("faults", &["vforkline", "3"], &dir, &[]));
    assert!(out.success(), "{}", out.dump());
    out.assert_line("vforkline: ok");
    let js = journals(&dir);
    assert_eq!(
        js.len(),
        1,
        "the child execs nothing and records nothing of its own"
    );
    let stages: Vec<&str> = js[0].stage_names.values().map(String::as_str).collect();
    assert!(!stages.contains(&"dist_init"), "{stages:?}");
    assert_eq!(count(&js[0], Kind::Alloc), 6);
}

#[test]
fn a_warning_never_lands_inside_the_programs_half_written_line() {
    // The journal fails at the first allocation (its folder is a file), while the program's
    // line on stderr is half written: the warning waits for the line's end.
    let dir = out_dir("midline");
    let not_a_folder = dir.join("file");
    std::fs::write(&not_a_folder, "x").unwrap();
    let out = support::run(hooked("faults", &["midline", "3"], &not_a_folder, &[]));
    assert!(out.success(), "{}", out.dump());
    out.assert_line("midline: ok");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.dump());
    assert_eq!(lines[0], "PROGRAM-LINE-START PROGRAM-LINE-END");
    assert!(lines[1].starts_with("vramledger["), "{}", out.dump());
}

#[test]
fn a_rule_file_warning_never_quotes_a_secret() {
    let dir = out_dir("rules-secret");
    let input = dir.join("input.log");
    std::fs::write(&input, SGLANG_LINES).unwrap();
    // Lines the rule file's grammar refuses, quoted by the warning: a token's shape, a
    // secret by its name.
    for (k, (line, secret)) in [
        (
            "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123",
            "hf_abcdefghij",
        ),
        ("db_password=hunter2", "hunter2"),
        ("stage \"x\" password=hunter3", "hunter3"),
    ]
    .into_iter()
    .enumerate()
    {
        let rules = dir.join(format!("bad{k}.rules"));
        std::fs::write(&rules, format!("{line}\n")).unwrap();
        let cmd = hooked(
            "tap_writer",
            &[&s(&input), "7", "1"],
            &dir.join(format!("j{k}")),
            &[("VRAMLEDGER_RULES", &s(&rules))],
        );
        let out = run_with_limit(cmd, Duration::from_secs(20));
        assert!(out.success(), "{}", out.dump());
        one_warning(&out, "the rule file is ignored");
        assert!(!out.stderr.contains(secret), "{}", out.dump());
    }
}

#[test]
fn the_run_id_cannot_leave_the_folder() {
    for (i, id) in ["../escape", "/", "..", "a/../../b", "x\ny"]
        .iter()
        .enumerate()
    {
        let dir = out_dir(&format!("runid{i}"));
        let out_folder = dir.join("out");
        let out = support::run(hooked(
            "faults",
            &["pairs", "3"],
            &out_folder,
            &[("VRAMLEDGER_RUN_ID", id)],
        ));
        pairs_output_ok(&out, "3");
        let everywhere = journal::find(&dir).unwrap();
        assert_eq!(everywhere.len(), 1, "{id:?}: {everywhere:?}");
        assert_eq!(everywhere[0].parent().unwrap(), out_folder, "{id:?}");
        let j = journal::read(&everywhere[0]).unwrap();
        let recorded = j.header.get("run_id").unwrap();
        assert!(
            !recorded.contains('/') && !recorded.starts_with('.'),
            "{recorded:?}"
        );
    }
}

#[test]
fn folders_and_files_are_private_whatever_the_umask() {
    for mask in [0o000, 0o077, 0o222] {
        let dir = out_dir(&format!("umask{mask:o}"));
        let nested = dir.join("a").join("b");
        let mut cmd = hooked("faults", &["pairs", "3"], &nested, &[]);
        // SAFETY: umask in the child before exec; async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                libc::umask(mask);
                Ok(())
            });
        }
        let out = support::run(cmd);
        pairs_output_ok(&out, "3");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&dir.join("a")), 0o700, "umask {mask:o}");
        assert_eq!(mode(&nested), 0o700, "umask {mask:o}");
        let files = journal::find(&nested).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(mode(&files[0]), 0o600, "umask {mask:o}");
    }
}

#[test]
fn a_folder_of_another_user_is_refused() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let run_id = format!("foreign{}", std::process::id());
    let folder = if euid == 0 {
        let d = out_dir("foreign").join("theirs");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let c = std::ffi::CString::new(s(&d)).unwrap();
        // SAFETY: chown with a NUL-terminated path, to an unused uid/gid.
        assert_eq!(unsafe { libc::chown(c.as_ptr(), 12345, 12345) }, 0);
        d
    } else {
        // Not root: /tmp is a folder of another user (root) that anyone may write into.
        let tmp = PathBuf::from("/tmp");
        use std::os::unix::fs::MetadataExt;
        assert_ne!(std::fs::metadata(&tmp).unwrap().uid(), euid);
        tmp
    };
    let plain = clients().run("faults", &["pairs", "3"], &[]);
    let out = support::run(hooked(
        "faults",
        &["pairs", "3"],
        &folder,
        &[("VRAMLEDGER_RUN_ID", &run_id)],
    ));
    assert_eq!(out.stdout, plain.stdout);
    pairs_output_ok(&out, "3");
    one_warning(&out, "belongs to uid");
    let mine = std::fs::read_dir(&folder)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&run_id))
        .count();
    assert_eq!(mine, 0, "a journal was written into {}", folder.display());
}

#[test]
fn disabled_dlsym_answers_as_without_the_preload() {
    let plain = clients().run("dlsym_probe", &[], &[]);
    assert!(plain.success(), "{}", plain.dump());
    let dir = out_dir("dlsym");
    let disabled = support::run(hooked(
        "dlsym_probe",
        &[],
        &dir,
        &[("VRAMLEDGER_DISABLE", "1")],
    ));
    assert!(disabled.success(), "{}", disabled.dump());
    assert_eq!(disabled.stdout, plain.stdout, "{}", disabled.dump());
    plain.assert_line("before cuInit: NULL");
    plain.assert_line("after cuInit: libcuda.so.1");
    // Enabled, the hooks answer (so the comparison above is not vacuous).
    let enabled = support::run(hooked("dlsym_probe", &[], &dir, &[]));
    enabled.assert_line("after cuInit: libvramledger.so");
}

#[test]
fn hooks_leave_errno_as_the_driver_left_it() {
    let plain = clients().run("faults", &["errno", "2000"], &[]);
    let dir = out_dir("errno");
    let out = support::run(hooked("faults", &["errno", "2000"], &dir, &[]));
    assert!(out.success(), "{}", out.dump());
    assert_eq!(out.stdout, plain.stdout);
    out.assert_line("errno: 2000 pairs, changed 0 times");
}

#[test]
fn a_program_that_closes_the_journals_descriptor_keeps_its_own_files_whole() {
    // A daemon closes every descriptor from 3 up and opens files of its own: they get the
    // journal's old number. The journal must never grow, map or cut them.
    for pairs in ["10", "120000"] {
        let dir = out_dir(&format!("closeall{pairs}"));
        let data = dir.join("data");
        std::fs::create_dir_all(&data).unwrap();
        let out = support::run(hooked(
            "faults",
            &["closeall", pairs, &s(&data)],
            &dir.join("j"),
            &[],
        ));
        assert!(out.success(), "{}", out.dump());
        out.assert_line("closeall: ok");
        for f in ["a.dat", "b.dat"] {
            let bytes = std::fs::read(data.join(f)).unwrap();
            assert_eq!(bytes.len(), 1 << 20, "{f} {pairs} pairs\n{}", out.dump());
            assert!(
                bytes.iter().all(|&b| b == b'D'),
                "{f} was written into ({pairs} pairs)"
            );
        }
        // What was recorded before stays readable.
        let js = journals(&dir.join("j"));
        assert_eq!(js.len(), 1);
        assert!(!js[0].corrupt, "{:?}", js[0].warnings);
        if pairs != "10" {
            one_warning(&out, "closed the journal's descriptor");
        }
    }
}

#[test]
fn with_stdout_and_stderr_closed_the_program_still_gets_ebadf() {
    // The lowest free numbers are 1 and 2: the journal (or its folder) must not take them, or
    // the program's own write(2, ...) lands in the journal and succeeds.
    let dir = out_dir("nostdio");
    let result = dir.join("result.txt");
    let run = |preload: bool| {
        let mut cmd = if preload {
            hooked(
                "faults",
                &["nostdio", "20", &s(&result)],
                &dir.join("j"),
                &[],
            )
        } else {
            clients().command("faults", &["nostdio", "20", &s(&result)], &[])
        };
        // SAFETY: between fork and exec, only close(2) calls (async-signal-safe).
        unsafe {
            cmd.pre_exec(|| {
                libc::close(1);
                libc::close(2);
                Ok(())
            });
        }
        let status = cmd.status().unwrap();
        assert!(status.success(), "{status}");
        std::fs::read_to_string(&result).unwrap()
    };
    let plain = run(false);
    assert_eq!(plain.trim(), "write=-1 errno=9");
    assert_eq!(run(true), plain);
    let js = journals(&dir.join("j"));
    assert_eq!(js.len(), 1);
    assert!(
        !js[0].corrupt && js[0].warnings.is_empty(),
        "{:?}",
        js[0].warnings
    );
    assert!(js[0].events.len() >= 40, "{} records", js[0].events.len());
}

#[test]
fn a_signal_handler_that_writes_never_hangs_the_program() {
    // write(2) is async-signal-safe: a handler may call it while the thread it interrupted is
    // inside malloc. The tap's path for a partial line must then allocate nothing.
    // 4 s: the partial line grows past 16 KiB one byte a signal, so every size of its buffer
    // is asked for once (the large ones take the arena's lock).
    let dir = out_dir("sigwrite");
    let cmd = hooked("sig_write", &["4000"], &dir, &[]);
    let out = run_with_limit(cmd, Duration::from_secs(40));
    assert!(out.success(), "{}", out.dump());
    out.assert_line("sig_write: ok");
}

#[test]
fn handlers_behave_and_read_back_as_without_vramledger() {
    // The shim puts handlers behind trampolines (so that the tap knows it runs in one): what
    // sigaction and signal return, what a handler receives and the masks it runs under are
    // the same as in a plain run, and with VRAMLEDGER_DISABLE=1.
    let dir = out_dir("sigsemantics");
    let run = |cmd: Command| {
        let out = run_with_limit(cmd, Duration::from_secs(30));
        assert!(out.success(), "{}", out.dump());
        out.stdout
    };
    let plain = run(clients().command("sig_semantics", &[], &[]));
    let hooked_out = run(hooked("sig_semantics", &[], &dir, &[]));
    let disabled = run(hooked(
        "sig_semantics",
        &[],
        &dir,
        &[("VRAMLEDGER_DISABLE", "1")],
    ));
    for needed in [
        "read back info: rc=0 handler=on_info",
        "value=42 ctx=1 usr2_blocked=1 self_blocked=1",
        "signal second: prev=on_plain",
        "read back resethand: rc=0 handler=SIG_DFL",
        "nodefer: max depth=2 depth now=0",
        "same struct old: handler=on_plain",
        "after a vfork child's handler: plain=0 plain2=1",
        "child: exit=0",
        "bsd_signal second: prev=on_plain",
        "read back sysv_signal after one: rc=0 handler=SIG_DFL",
        "sigset after hold: prev=SIG_HOLD pending ran: plain=0 plain2=1",
        "sigset released: blocked=0",
        "sig_semantics: done",
    ] {
        assert!(plain.contains(needed), "{needed}\n{plain}");
    }
    assert_eq!(hooked_out, plain);
    assert_eq!(disabled, plain);
}

#[test]
fn python_signal_handlers_and_faulthandler_work_as_without_vramledger() {
    // CPython installs its C handlers with sigaction: a Python handler still runs (after the
    // C one returned, outside it: the line it prints marks its stage), getsignal names it, and
    // faulthandler still dumps the traceback on SIGSEGV and dies of the signal.
    let script = "import faulthandler, os, signal\n\
                  faulthandler.enable()\n\
                  def h(sig, frame):\n    \
                  print('[2025-03-08 12:29:21 TP0] Load weight begin. avail mem=21.63 GB', flush=True)\n\
                  signal.signal(signal.SIGUSR1, h)\n\
                  assert signal.getsignal(signal.SIGUSR1) is h\n\
                  os.kill(os.getpid(), signal.SIGUSR1)\n\
                  print('python handler ran', flush=True)\n\
                  os.kill(os.getpid(), signal.SIGSEGV)\n";
    let dir = out_dir("sigpython");
    let run = |preload: bool| {
        let mut cmd = Command::new("python3");
        cmd.args(["-c", script]);
        if preload {
            cmd.env("LD_PRELOAD", shim()).env("VRAMLEDGER_OUT", &dir);
        }
        run_with_limit(cmd, Duration::from_secs(60))
    };
    for out in [run(false), run(true)] {
        assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{}", out.dump());
        out.assert_line("python handler ran");
        assert!(
            out.stderr
                .contains("Fatal Python error: Segmentation fault"),
            "{}",
            out.dump()
        );
        assert!(out.stderr.contains("File \"<string>\""), "{}", out.dump());
    }
    let js = journals(&dir);
    assert_eq!(js.len(), 1);
    let names: Vec<&str> = js[0].stage_names.values().map(String::as_str).collect();
    assert!(names.contains(&"weight_load"), "{names:?}");
}

#[test]
fn engine_lines_a_signal_handler_writes_never_hang_the_program() {
    // A handler may write whole lines while the thread it interrupted holds the allocator's
    // lock (Python's faulthandler dumping a traceback after an abort inside malloc): the tap
    // must not classify them there (that allocates and reads the driver). They are passed on
    // and nothing else.
    handler_lines_pass_through("sigaction", 3000);
}

#[test]
fn engine_lines_from_a_handler_installed_the_older_ways_pass_through_too() {
    // bsd_signal, sysv_signal (and __sysv_signal, a strict-standard C program's signal) and
    // sigset install handlers without the program's sigaction: unwrapped, such a handler's
    // lines were classified inside malloc and the program aborted in glibc's allocator
    // within a second.
    for how in ["bsd_signal", "sysv_signal", "__sysv_signal", "sigset"] {
        handler_lines_pass_through(how, 2000);
    }
}

/// `sig_write MS lines HOW`: engine lines written by a SIGALRM handler installed by `how`
/// while the interrupted thread churns malloc, all passed to stderr as they are and none
/// taken as a stage. stderr goes to a file: a pipe nobody reads would fill and block.
fn handler_lines_pass_through(how: &str, ms: u32) {
    let dir = out_dir(&format!("siglines-{how}"));
    std::fs::create_dir_all(&dir).unwrap();
    let err_path = dir.join("stderr.txt");
    let mut cmd = hooked("sig_write", &[&ms.to_string(), "lines", how], &dir, &[]);
    cmd.stderr(std::fs::File::create(&err_path).unwrap());
    cmd.stdout(Stdio::piped());
    let description = format!("{cmd:?}");
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(40) {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("blocked for 40 s: {description}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let done = child.wait_with_output().unwrap();
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert!(done.status.success(), "{how}: {:?}\n{err}", done.status);
    assert!(String::from_utf8_lossy(&done.stdout).contains("sig_write: ok"));
    // Every line reached stderr unchanged (the handler's count says how many were written).
    let written: usize = err
        .lines()
        .find_map(|l| l.strip_prefix("sig_write: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the client's count");
    assert!(
        written > 100,
        "{how}: {written} lines: the timer barely ran"
    );
    let seen = err.lines().filter(|l| l.contains("Load weight")).count()
        + err
            .lines()
            .filter(|l| l.contains("GPU KV cache size"))
            .count();
    assert_eq!(seen, written, "{how}");
    // Lines from a handler mark no stage.
    for j in journals(&dir) {
        let names: Vec<&str> = j.stage_names.values().map(String::as_str).collect();
        assert!(
            !names.iter().any(|n| n.contains("weight")),
            "{how}: {names:?}"
        );
    }
}

#[test]
fn a_stage_name_a_program_gives_is_redacted_like_a_line() {
    let (c, exe) = (clients(), support::steps_exe());
    let dir = out_dir("stage-secret");
    let (lib, out) = (s(&shim()), s(&dir));
    let env = [
        ("LD_PRELOAD", lib.as_str()),
        ("VRAMLEDGER_OUT", out.as_str()),
    ];
    let mut cmd = support::command(&exe, &[], &c.driver_dir, &env);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"stage serving_password=hunter3pw\nstage hf_abcdefghijklmnopqrstuvwxyz\nquit\n")
        .unwrap();
    drop(stdin);
    let done = child.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let files = journal::find(&dir).unwrap();
    // The bytes the shim wrote (the reader redacts again: it would hide a shim that did not).
    let raw = std::fs::read(&files[0]).unwrap();
    for secret in [&b"hunter3pw"[..], b"hf_abcdefghij"] {
        assert!(
            !raw.windows(secret.len()).any(|w| w == secret),
            "{} reached the journal",
            String::from_utf8_lossy(secret)
        );
    }
    let j = journal::read(&files[0]).unwrap();
    let names: Vec<&str> = j.stage_names.values().map(String::as_str).collect();
    assert!(names.contains(&"serving_password=<redacted>"), "{names:?}");
    assert!(names.contains(&"<redacted>"), "{names:?}");
}

#[test]
fn secrets_never_reach_the_journal() {
    let dir = out_dir("secrets");
    let args = [
        "pairs",
        "3",
        "--api-key",
        "sk-SECRET1",
        "--token=SECRET2",
        "HF_TOKEN=SECRET3",
        "--model",
        "llama",
    ];
    let out = support::run(hooked(
        "faults",
        &args,
        &dir,
        &[
            ("VLLM_API_KEY", "SECRET4"),
            ("HF_TOKEN", "SECRET5"),
            ("SGLANG_STORAGE_URL", "s3://user:SECRET6@host/b"),
            ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
        ],
    ));
    pairs_output_ok(&out, "3");
    let files = journal::find(&dir).unwrap();
    let raw = std::fs::read(&files[0]).unwrap();
    assert!(
        !raw.windows(6).any(|w| w == b"SECRET"),
        "a secret reached the journal"
    );
    let j = journal::read(&files[0]).unwrap();
    let cmdline: Vec<&str> = j.header.get("cmdline").unwrap().split('\0').collect();
    assert_eq!(
        &cmdline[1..],
        [
            "pairs",
            "3",
            "--api-key",
            "<redacted>",
            "--token=<redacted>",
            "HF_TOKEN=<redacted>",
            "--model",
            "llama"
        ]
    );
    assert_eq!(j.header.get("env.VLLM_API_KEY"), Some("<redacted>"));
    assert_eq!(j.header.get("env.HF_TOKEN"), None);
    assert_eq!(j.header.get("env.SGLANG_STORAGE_URL"), None);
    assert_eq!(
        j.header.get("env.PYTORCH_CUDA_ALLOC_CONF"),
        Some("expandable_segments:True")
    );
}

#[test]
fn journals_of_the_previous_writer_read_without_false_losses_at_chunk_boundaries() {
    use vramledger_format::frame::{encode_frame, frame_len, head_word, PADDING_KIND};
    use vramledger_format::{preamble, Event, Header};
    const CHUNK: usize = 4 << 20;
    let mut bytes = vec![0u8; 2 * CHUNK + (1 << 20)];
    bytes[..16].copy_from_slice(&preamble());
    let mut at = 16;
    let mut h = Header::default();
    h.push("pid", "1");
    let hp = h.encode();
    encode_frame(
        Kind::Header as u16,
        &hp,
        &mut bytes[at..at + frame_len(hp.len())],
    );
    at += frame_len(hp.len());
    let mut written = 0;
    // Records of 104 bytes, laid out as the writer before this one did it: at a boundary the
    // straddling writer pads to the boundary and leaves the rest of its reservation as zeros.
    while at + 104 <= bytes.len() {
        let first = at / CHUNK;
        let last = (at + 104 - 1) / CHUNK;
        if first != last {
            let rest = (first + 1) * CHUNK - at;
            bytes[at..at + 4].copy_from_slice(&head_word(PADDING_KIND).to_le_bytes());
            bytes[at + 4..at + 8].copy_from_slice(&((rest - 8) as u32).to_le_bytes());
            at += 104; // the reservation's end, past the boundary
            continue;
        }
        let e = Event {
            kind: Kind::Alloc as u16,
            addr: 0x1000 + written as u64,
            size: 1,
            ..Event::default()
        };
        let p = e.encode();
        encode_frame(e.kind, &p, &mut bytes[at..at + frame_len(p.len())]);
        at += frame_len(p.len());
        written += 1;
    }
    let j = journal::parse(Path::new("old.vlj"), &bytes).unwrap();
    assert!(j.warnings.is_empty(), "{:?}", j.warnings);
    assert!(!j.corrupt);
    assert_eq!(j.events.len(), written);
    // A real loss right after a boundary padding is still reported.
    let mut lost = bytes.clone();
    let second = (CHUNK..CHUNK + 4096)
        .step_by(8)
        .find(|&o| u32::from_le_bytes(lost[o..o + 4].try_into().unwrap()) >> 16 == 0x564C)
        .unwrap();
    lost[second..second + 4].fill(0);
    let j = journal::parse(Path::new("old.vlj"), &lost).unwrap();
    assert_eq!(j.events.len(), written - 1);
}
