//! Every output path reaches the tap: a C program that prints SGLang's startup lines through
//! printf, fprintf, vfprintf, puts, fputs, fwrite, fwrite_unlocked, putc, putchar, fputc and
//! dprintf (and, built with -O2 -D_FORTIFY_SOURCE=2, their `__*_chk` forms), buffered, line
//! buffered or not, to a pipe or a file; and a C++ program through std::cout/std::cerr with and
//! without sync_with_stdio. Each run under the preload marks every stage, and prints exactly
//! what it prints without it (results and errno included).
//!
//! Needs `cargo build --workspace` first (and a C++ compiler for the iostream client).
//! `VRAMLEDGER_TEST_SHIM` points the tests at another build of the library.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use support::{clients, profile_dir, RunOutput};
use vramledger::journal;
use vramledger_format::Kind;

const EXPECTED: &[&str] = &[
    "startup",
    "dist_init",
    "weight_load",
    "kv_pool",
    "post_kv_init",
    "graph_capture",
    "post_capture",
    "serving",
];

fn shim() -> String {
    if let Ok(p) = std::env::var("VRAMLEDGER_TEST_SHIM") {
        return p;
    }
    profile_dir()
        .join("libvramledger.so")
        .to_string_lossy()
        .into_owned()
}

fn out_dir(test: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("stdio-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// (stage name, its line) of every stage record.
fn stages(dir: &Path) -> Vec<(String, String)> {
    let files = journal::find(dir).unwrap();
    assert_eq!(files.len(), 1, "one journal expected in {}", dir.display());
    let j = journal::read(&files[0]).unwrap();
    assert!(j.warnings.is_empty(), "{:?}", j.warnings);
    j.events
        .iter()
        .filter(|e| e.kind() == Some(Kind::Stage))
        .map(|e| {
            let mut l = e.text.lines();
            let name = l.next().unwrap_or("").to_string();
            (name, l.next().unwrap_or("").to_string())
        })
        .collect()
}

/// Runs `name args` plain and hooked (stdout to a pipe, or to a file when `to_file`), checks
/// that both print the same, and returns the hooked run's stages.
fn plain_and_hooked(name: &str, args: &[&str], test: &str, to_file: bool) -> Vec<(String, String)> {
    stages(&same_output(name, args, test, to_file).0)
}

/// `name ARGS` run plainly and under the preload: the same exit code, stdout and stderr. The
/// preloaded run's journal folder, and the plain run.
fn same_output(name: &str, args: &[&str], test: &str, to_file: bool) -> (PathBuf, RunOutput) {
    let dir = out_dir(test);
    let journals = dir.join("journals");
    let journals_s = journals.to_string_lossy().into_owned();
    let shim = shim();
    let run = |env: &[(&str, &str)], tag: &str| -> RunOutput {
        let mut cmd = clients().command(name, args, env);
        if !to_file {
            return support::run(cmd);
        }
        let path = dir.join(format!("{tag}.stdout"));
        cmd.stdout(Stdio::from(std::fs::File::create(&path).unwrap()));
        let mut out = support::run(cmd);
        out.stdout = std::fs::read_to_string(&path).unwrap();
        out
    };
    let plain = run(&[], "plain");
    let hooked = run(
        &[("LD_PRELOAD", &shim), ("VRAMLEDGER_OUT", &journals_s)],
        "hooked",
    );
    assert!(plain.success(), "{}", plain.dump());
    assert_eq!(
        hooked.status.code(),
        plain.status.code(),
        "{}",
        hooked.dump()
    );
    assert_eq!(hooked.stdout, plain.stdout, "stdout changed: {args:?}");
    assert_eq!(hooked.stderr, plain.stderr, "stderr changed: {args:?}");
    (journals, plain)
}

fn names(st: &[(String, String)]) -> Vec<&str> {
    st.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn c_stdio_lines_mark_every_stage_buffered_or_not() {
    for exe in ["stdio_lines", "stdio_lines_chk"] {
        for mode in ["buffered", "line", "unbuffered"] {
            for to_file in [false, true] {
                let test = format!("{exe}-{mode}-{to_file}");
                let st = plain_and_hooked(exe, &[mode], &test, to_file);
                assert_eq!(names(&st), EXPECTED, "{test}");
                // Each boundary keeps its line: printf's formatted text, putc's characters.
                assert!(
                    st[2].1.contains("Load weight begin. avail mem=78.68 GB"),
                    "{st:?}"
                );
                assert!(st[5].1.contains("Capture cuda graph begin."), "{st:?}");
                assert!(st[7].1.contains("available_gpu_mem=7.28 GB"), "{st:?}");
            }
        }
    }
}

#[test]
fn the_fortified_build_calls_the_chk_forms() {
    // Otherwise the test above would not be testing them.
    let exe = clients().exe("stdio_lines_chk");
    let out = std::process::Command::new("nm")
        .args(["-D", "--undefined-only"])
        .arg(&exe)
        .output()
        .expect("nm");
    let text = String::from_utf8_lossy(&out.stdout);
    for f in [
        "__printf_chk",
        "__fprintf_chk",
        "__vfprintf_chk",
        "__dprintf_chk",
    ] {
        assert!(
            text.contains(f),
            "{f} not called by {}:\n{text}",
            exe.display()
        );
    }
}

#[test]
fn cpp_iostreams_mark_every_stage_synced_or_not() {
    for args in [
        &["sync"][..],
        &["unsync"][..],
        &["sync", "long"][..],
        &["unsync", "long"][..],
    ] {
        for to_file in [false, true] {
            let test = format!("cpp-{}-{to_file}", args.join("-"));
            let st = plain_and_hooked("iostream_lines", args, &test, to_file);
            assert_eq!(names(&st), EXPECTED, "{test}");
            assert!(st[3].1.contains("Load weight end."), "{st:?}");
        }
    }
}

#[test]
fn a_conversion_of_the_programs_own_runs_once_and_never_crashes_the_tap() {
    // Formatting a call again ran the handler twice (W1 W3 W5); locking the lockless FILE
    // glibc lends the handler inside dprintf crashed. Outputs must be the plain run's.
    for mode in ["unbuffered", "buffered"] {
        let (_, plain) = same_output("printf_custom", &[mode], &format!("custom-{mode}"), false);
        plain.assert_line("handler called 4 times for 4 conversions");
    }
}

#[test]
fn disabled_stdio_records_nothing() {
    let dir = out_dir("disabled");
    let journals = dir.join("journals");
    let (shim, journals_s) = (shim(), journals.to_string_lossy().into_owned());
    let out = clients().run(
        "stdio_lines",
        &["buffered"],
        &[
            ("LD_PRELOAD", &shim),
            ("VRAMLEDGER_OUT", &journals_s),
            ("VRAMLEDGER_DISABLE", "1"),
        ],
    );
    assert!(out.success(), "{}", out.dump());
    assert!(
        !journals.exists(),
        "a journal was written although disabled"
    );
}
