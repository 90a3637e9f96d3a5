//! `vramledger run` as a user meets it: the SGLang-shaped demo program on the fake driver,
//! `--json` (stdout is the JSON alone), a command that writes no journal (one line), and where
//! the preload library comes from (`--lib`, `VRAMLEDGER_LIB`, beside the CLI, or the carried
//! copy written out privately, see src/launch/libpath.rs).

mod support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use support::cli;

fn dir(test: &str) -> PathBuf {
    support::fresh_dir("run", test)
}

fn run_cli(args: &[&str], env: &[(&str, &str)]) -> support::RunOutput {
    let c = support::clients();
    support::run(support::command(&cli(), args, &c.driver_dir, env))
}

#[test]
fn json_keeps_the_programs_stdout_out_of_stdout() {
    let c = support::clients();
    let d = dir("json");
    let out = d.join("out");
    let exe = c.exe("server_like");
    let r = run_cli(
        &[
            "run",
            "--json",
            "--out",
            out.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
        ],
        &[],
    );
    assert!(r.success(), "{}", r.dump());
    // stdout is one JSON document; the program's log lines went to stderr.
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}\n{}", r.dump()));
    assert!(r.stderr.contains("] Load weight begin."), "{}", r.dump());
    assert!(r.stdout.starts_with('{'), "{}", r.dump());
    // The demo program: one process, eight stages, six owners.
    let p = &v["processes"][0];
    let dev = &p["devices"][0];
    let stages: Vec<&str> = dev["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        [
            "startup",
            "dist_init",
            "weight_load",
            "kv_pool",
            "post_kv_init",
            "graph_capture",
            "post_capture",
            "serving"
        ]
    );
    let live = &dev["live_at_end"]["by_owner"];
    for owner in [
        "torch",
        "torch_graph_pool",
        "nccl",
        "direct",
        "vmm",
        "context",
    ] {
        assert!(live[owner].as_i64().unwrap() > 0, "{owner}: {live}");
    }
}

#[test]
fn a_command_without_a_journal_gets_one_line() {
    let d = dir("nojournal");
    let out = d.join("out");
    let r = run_cli(&["run", "--out", out.to_str().unwrap(), "--", "true"], &[]);
    assert!(r.success(), "{}", r.dump());
    let lines: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("vramledger:"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", r.dump());
    assert!(lines[0].contains("wrote no journal"), "{}", lines[0]);
    assert!(!r.stderr.contains("report again"), "{}", r.dump());
    // Journals of an earlier run in the same folder are not this run's.
    let c = support::clients();
    let exe = c.exe("cublas_like");
    let first = run_cli(
        &[
            "run",
            "--out",
            out.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
        ],
        &[],
    );
    assert!(first.success(), "{}", first.dump());
    let again = run_cli(&["run", "--out", out.to_str().unwrap(), "--", "true"], &[]);
    assert!(
        again.stderr.contains("wrote no journal"),
        "{}",
        again.dump()
    );
    assert_eq!(again.stdout, "");
}

#[test]
fn the_library_is_found_or_the_error_says_how() {
    let d = dir("lib");
    let out = d.join("out");
    let o = out.to_str().unwrap();
    // --lib and VRAMLEDGER_LIB name a file that must exist.
    let r = run_cli(
        &[
            "run",
            "--lib",
            "/nonexistent/libvramledger.so",
            "--out",
            o,
            "--",
            "true",
        ],
        &[],
    );
    assert_eq!(r.status.code(), Some(2), "{}", r.dump());
    assert!(
        r.stderr
            .contains("--lib /nonexistent/libvramledger.so: no such file"),
        "{}",
        r.dump()
    );
    let r = run_cli(
        &["run", "--out", o, "--", "true"],
        &[("VRAMLEDGER_LIB", "/nonexistent/x.so")],
    );
    assert_eq!(r.status.code(), Some(2), "{}", r.dump());
    assert!(
        r.stderr.contains("VRAMLEDGER_LIB /nonexistent/x.so"),
        "{}",
        r.dump()
    );
    // --lib is what the command gets in LD_PRELOAD (first, before an inherited one).
    let beside = cli().with_file_name("libvramledger.so");
    let r = run_cli(
        &[
            "run",
            "--lib",
            beside.to_str().unwrap(),
            "--out",
            o,
            "--",
            "sh",
            "-c",
            "echo \"$LD_PRELOAD\"",
        ],
        &[("LD_PRELOAD", "")],
    );
    assert!(r.success(), "{}", r.dump());
    assert_eq!(r.stdout.lines().next(), Some(beside.to_str().unwrap()));
    // Without either: the one beside the CLI.
    let r = run_cli(&["lib-path"], &[]);
    assert_eq!(r.stdout.trim(), beside.to_str().unwrap(), "{}", r.dump());
}

/// A copy of the CLI alone in a folder uses the library it carries, written out privately
/// under XDG_CACHE_HOME, once per content.
#[test]
fn a_cli_alone_writes_out_the_library_it_carries() {
    let d = dir("carried");
    let lone = d.join("bin").join("vramledger");
    std::fs::create_dir_all(lone.parent().unwrap()).unwrap();
    std::fs::copy(cli(), &lone).unwrap();
    let cache = d.join("cache");
    let c = support::clients();
    let env = [("XDG_CACHE_HOME", cache.to_str().unwrap())];
    let r = support::run(support::command(&lone, &["lib-path"], &c.driver_dir, &env));
    assert!(r.success(), "{}", r.dump());
    let lib = PathBuf::from(r.stdout.trim());
    assert!(
        lib.starts_with(cache.join("vramledger/lib")),
        "{}",
        lib.display()
    );
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&lib), 0o700);
    for dir in [
        lib.parent().unwrap(),
        &cache.join("vramledger/lib"),
        &cache.join("vramledger"),
    ] {
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
    }
    let bytes = std::fs::read(&lib).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF");
    // The same content is reused as it is (same inode); a run preloads it.
    let ino = std::fs::metadata(&lib).unwrap().ino();
    let r = run_cublas_like(&lone, &d.join("out"), &env);
    assert!(r.success(), "{}", r.dump());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["processes"].as_array().unwrap().len(), 1);
    assert_eq!(std::fs::metadata(&lib).unwrap().ino(), ino);
}

/// `CLI run --json --out OUT -- cublas_like` on the fake driver.
fn run_cublas_like(cli: &Path, out: &Path, env: &[(&str, &str)]) -> support::RunOutput {
    let c = support::clients();
    let exe = c.exe("cublas_like");
    let args = ["run", "--json", "--out", out.to_str().unwrap(), "--"];
    let mut cmd = support::command(cli, &args, &c.driver_dir, env);
    support::run({
        cmd.arg(exe);
        cmd
    })
}

/// The loader splits LD_PRELOAD at spaces and colons: a CLI installed in `my tools/` preloaded
/// nothing (two missing files) and said the command made no CUDA call.
#[test]
fn a_library_path_the_loader_would_split_is_never_preloaded() {
    let d = dir("split");
    let bin = d.join("my tools:bin");
    std::fs::create_dir_all(&bin).unwrap();
    let lone = bin.join("vramledger");
    std::fs::copy(cli(), &lone).unwrap();
    let beside = bin.join("libvramledger.so");
    std::fs::copy(cli().with_file_name("libvramledger.so"), &beside).unwrap();
    let cache = d.join("cache");
    let c = support::clients();
    let env = [("XDG_CACHE_HOME", cache.to_str().unwrap())];
    // The library beside it is passed over for the carried copy, and the run records.
    let r = support::run(support::command(&lone, &["lib-path"], &c.driver_dir, &env));
    assert!(r.success(), "{}", r.dump());
    assert!(
        Path::new(r.stdout.trim()).starts_with(cache.join("vramledger/lib")),
        "{}",
        r.dump()
    );
    let out = d.join("out");
    let r = run_cublas_like(&lone, &out, &env);
    assert!(r.success(), "{}", r.dump());
    assert!(!r.stderr.contains("cannot be preloaded"), "{}", r.dump());
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["processes"].as_array().unwrap().len(), 1, "{}", r.dump());
    // Given by name, it is refused before the command starts.
    for (flag, env) in [
        (vec!["--lib", beside.to_str().unwrap()], vec![]),
        (vec![], vec![("VRAMLEDGER_LIB", beside.to_str().unwrap())]),
    ] {
        let mut args = vec!["run"];
        args.extend(flag);
        args.extend(["--out", out.to_str().unwrap(), "--", "true"]);
        let r = run_cli(&args, &env);
        assert_eq!(r.status.code(), Some(2), "{}", r.dump());
        assert!(r.stderr.contains("a space or a colon"), "{}", r.dump());
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.dump());
    }
}

/// Arguments are bytes: a file name that is not UTF-8 reaches the command as it is (clap
/// refused it: "invalid UTF-8 was detected in one or more arguments").
#[test]
fn arguments_that_are_not_utf8_reach_the_command() {
    use std::os::unix::ffi::OsStrExt;
    let d = dir("bytes");
    let name = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    let c = support::clients();
    let mut cmd = support::command(
        &cli(),
        &[
            "run",
            "--out",
            d.join("out").to_str().unwrap(),
            "--",
            "touch",
        ],
        &c.driver_dir,
        &[],
    );
    cmd.arg(d.join(name));
    let r = support::run(cmd);
    assert!(r.success(), "{}", r.dump());
    assert!(d.join(name).is_file(), "{}", r.dump());
}
