//! The verbs on a large run: the synthetic run of `benches/support/run.rs` (10,000,000
//! records unless given) written as a journal, then `report`, `report --json`,
//! `report --html`, `snapshot --at-peak` and `diff` run on it by the release CLI under
//! `/usr/bin/time -v`: wall-clock seconds and peak resident memory of each. Targets: each
//! under 2 s and 512 MiB at 10^7 records.
//!
//!     cargo bench --bench report [-- EVENTS] [--format1] [--keep DIR] [--cli PATH]
//!
//! The journal is written in format 2, as the shim writes it (`--format1`: format 1), under
//! `target/` and removed afterwards (`--keep DIR`: written to, or reused from, DIR and left
//! there). `--cli PATH` measures another build of the CLI (an older commit's, for a before).

mod support;

use std::path::PathBuf;
use std::process::Command;

fn measure(cli: &str, label: &str, args: &[&str]) {
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(cli)
        .args(args)
        .output()
        .expect("/usr/bin/time -v (Debian package `time`)");
    let err = String::from_utf8_lossy(&out.stderr);
    let field = |name: &str| {
        err.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .map(str::trim)
            .unwrap_or("?")
            .to_string()
    };
    let wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss):");
    let rss_kib: f64 = field("Maximum resident set size (kbytes):")
        .parse()
        .unwrap_or(f64::NAN);
    let code = out.status.code().unwrap_or(-1);
    println!(
        "{label:<22} {wall:>9} wall  {:>8.1} MiB peak RSS  exit {code}  (user {} s, sys {} s)",
        rss_kib / 1024.0,
        field("User time (seconds):"),
        field("System time (seconds):"),
    );
    if code != 0 && code != 2 {
        eprintln!("{err}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args
        .iter()
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let keep = args
        .iter()
        .position(|a| a == "--keep")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let dir = keep.clone().unwrap_or_else(|| {
        support::scratch_dir().join(format!("bench-report-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).expect("bench folder");
    let format = if args.iter().any(|a| a == "--format1") {
        1
    } else {
        2
    };
    let journal = dir.join(format!("run-{n}-f{format}.vlj"));
    if !journal.is_file() {
        let t = std::time::Instant::now();
        let len = support::write_journal(&journal, format, n, 0x5EED, 4242);
        println!(
            "wrote {n} records, {:.1} MiB ({:.1} bytes/record, format {format}) in {:.1} s",
            len as f64 / (1 << 20) as f64,
            len as f64 / n as f64,
            t.elapsed().as_secs_f64()
        );
    }
    let cli = args
        .iter()
        .position(|a| a == "--cli")
        .and_then(|i| args.get(i + 1))
        .map_or(env!("CARGO_BIN_EXE_vramledger"), String::as_str);
    let measure = |label: &str, args: &[&str]| measure(cli, label, args);
    let j = journal.to_str().expect("utf-8 path");
    let out = |name: &str| dir.join(name).to_str().expect("utf-8 path").to_string();
    measure("report", &["report", j, "-o", &out("r.txt"), "--force"]);
    measure(
        "report --json",
        &["report", "--json", j, "-o", &out("r.json"), "--force"],
    );
    measure(
        "report --html",
        &["report", "--html", j, "-o", &out("r.html"), "--force"],
    );
    measure(
        "snapshot --at-peak",
        &["snapshot", "--at-peak", j, "-o", &out("s.json"), "--force"],
    );
    measure("diff", &["diff", j, j]);
    for f in ["r.txt", "r.json", "r.html", "s.json"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
