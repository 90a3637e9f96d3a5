//! Files the CLI writes (`report -o`, `report --html -o`, `snapshot -o`): never through a
//! link, never over anything but a regular file, private, `-` is stdout, and a temporary
//! file nobody can plant in advance.

mod support;

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vramledger"))
}

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200-sglang-shape")
}

fn dir(test: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("files-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `vramledger ARGS` (20 s at most): (exit code, stdout, stderr).
fn vl(args: &[&dyn AsRef<std::ffi::OsStr>]) -> (i32, Vec<u8>, String) {
    let mut cmd = Command::new(cli());
    cmd.args(args);
    let out = support::run_within(cmd, 20)
        .unwrap_or_else(|| panic!("hung: vramledger {:?}", args_text(args)));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    (out.status.code().unwrap_or(-1), out.stdout, err)
}

fn args_text(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<String> {
    args.iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect()
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().unwrap();
    assert!(st.success(), "mkfifo {}", p.display());
}

fn is_symlink(p: &Path) -> bool {
    std::fs::symlink_metadata(p)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false)
}

fn temp_leftovers(d: &Path) -> Vec<String> {
    std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

/// The verbs that write a file, each writing to `out` with `--force`.
fn writers(out: &Path) -> Vec<Vec<PathBuf>> {
    let o = out.to_path_buf();
    let p = |s: &str| PathBuf::from(s);
    vec![
        vec![p("report"), data(), p("-o"), o.clone(), p("--force")],
        vec![
            p("report"),
            data(),
            p("--html"),
            p("-o"),
            o.clone(),
            p("--force"),
        ],
        vec![p("snapshot"), data(), p("-o"), o, p("--force")],
    ]
}

fn run_args(args: &[PathBuf]) -> (i32, Vec<u8>, String) {
    let refs: Vec<&dyn AsRef<std::ffi::OsStr>> = args
        .iter()
        .map(|a| a as &dyn AsRef<std::ffi::OsStr>)
        .collect();
    vl(&refs)
}

#[test]
fn force_never_writes_through_or_replaces_a_symlink() {
    let d = dir("symlink");
    let victim = d.join("victim.txt");
    let link = d.join("out");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    std::fs::write(&victim, b"precious").unwrap();
    for args in writers(&link) {
        let (rc, _, err) = run_args(&args);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.contains("is a symbolic link"), "{err}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "{args:?}");
        assert!(is_symlink(&link), "{args:?} replaced the link");
    }
    // A dangling link is refused as well: following it would create the file it names.
    let dangling = d.join("dangling");
    std::os::unix::fs::symlink(d.join("created-through-link"), &dangling).unwrap();
    for args in writers(&dangling) {
        let (rc, _, err) = run_args(&args);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(!d.join("created-through-link").exists(), "{args:?}");
    }
    assert_eq!(temp_leftovers(&d), Vec::<String>::new());
}

#[test]
fn fifos_and_device_nodes_are_never_replaced_even_with_force() {
    let d = dir("special");
    let fifo = d.join("out.fifo");
    mkfifo(&fifo);
    for args in writers(&fifo) {
        let (rc, _, err) = run_args(&args);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.contains("is a FIFO"), "{err}");
        let t = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert!(t.is_fifo(), "{args:?} replaced the FIFO");
    }
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    for args in writers(&sub) {
        let (rc, _, err) = run_args(&args);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.contains("is a directory"), "{err}");
    }
    // A null device of our own (`-o /dev/null --force` as root must not destroy it). Creating
    // one takes root (or CAP_MKNOD); elsewhere the FIFO above covers the rule.
    let null = d.join("null");
    let made = Command::new("mknod")
        .arg(&null)
        .args(["c", "1", "3"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if made {
        for args in writers(&null) {
            let (rc, _, err) = run_args(&args);
            assert_eq!(rc, 2, "{args:?}: {err}");
            assert!(err.contains("is a character device"), "{err}");
            let t = std::fs::symlink_metadata(&null).unwrap().file_type();
            assert!(t.is_char_device(), "{args:?} replaced the device node");
        }
    } else {
        eprintln!("note: mknod is not permitted here; the device-node case was not run");
    }
    assert_eq!(temp_leftovers(&d), Vec::<String>::new());
}

#[test]
fn a_planted_temporary_file_is_never_followed() {
    // The old snapshot wrote `.<name>.tmp-<pid>` with a plain create, which follows a link.
    // `exec` keeps the shell's pid, so the link sits at exactly the name it would have used.
    let d = dir("planted");
    let victim = d.join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let script = format!(
        "ln -s {victim} .out.json.tmp-$$ && exec {cli} snapshot {data} -o out.json",
        victim = victim.display(),
        cli = cli().display(),
        data = data().display()
    );
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script).current_dir(&d);
    let out = support::run_within(cmd, 20).expect("snapshot hung");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    let out_json = d.join("out.json");
    assert!(!is_symlink(&out_json));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out_json).unwrap()).unwrap();
    assert_eq!(v["schema"], "vramledger.snapshot/1");
}

#[test]
fn written_files_are_private() {
    let d = dir("private");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for (i, args) in writers(&d.join("x")).into_iter().enumerate() {
        let out = d.join(format!("new-{i}"));
        let mut args = args;
        let n = args.len();
        args[n - 2] = out.clone();
        args.pop(); // no --force: a new file
        let (rc, _, err) = run_args(&args);
        assert_eq!(rc, 0, "{args:?}: {err}");
        assert_eq!(mode(&out), 0o600, "{args:?}");
        // Replacing a world-readable file leaves a private one.
        let old = d.join(format!("old-{i}"));
        std::fs::write(&old, b"old").unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
        args[n - 2] = old.clone();
        args.push(PathBuf::from("--force"));
        let (rc, _, err) = run_args(&args);
        assert_eq!(rc, 0, "{args:?}: {err}");
        assert_eq!(mode(&old), 0o600, "{args:?}");
        assert_ne!(std::fs::read(&old).unwrap(), b"old");
    }
    assert_eq!(temp_leftovers(&d), Vec::<String>::new());
}

#[test]
fn an_existing_file_needs_force() {
    let d = dir("exists");
    let out = d.join("out.json");
    std::fs::write(&out, b"keep").unwrap();
    for args in writers(&out) {
        let mut args = args;
        args.pop();
        let (rc, _, err) = run_args(&args);
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.contains("already exists; pass --force"), "{err}");
        assert_eq!(std::fs::read(&out).unwrap(), b"keep");
    }
}

#[test]
fn dash_is_stdout() {
    let d = dir("dash");
    let mut cmd = Command::new(cli());
    cmd.args(["snapshot", data().to_str().unwrap(), "-o", "-"])
        .current_dir(&d);
    let out = support::run_within(cmd, 20).expect("snapshot hung");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "vramledger.snapshot/1");
    assert!(
        !d.join("-").exists(),
        "snapshot -o - wrote a file named '-'"
    );

    let mut cmd = Command::new(cli());
    cmd.args(["report", data().to_str().unwrap(), "--html", "-o", "-"])
        .current_dir(&d);
    let out = support::run_within(cmd, 20).expect("report hung");
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("<!DOCTYPE html>"));
    assert!(!d.join("-").exists());
}

/// `vramledger ARGS` run by `sh` with stdout redirected as `redirect` says (`1</dev/null`).
fn with_stdout(args: &[String], redirect: &str) -> (i32, String) {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!("exec '{}' {} {redirect}", cli().display(), quoted.join(" "));
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script);
    let out = support::run_within(cmd, 20).unwrap_or_else(|| panic!("hung: {args:?}"));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    (out.status.code().unwrap_or(-1), err)
}

#[test]
fn a_stdout_open_only_for_reading_is_an_error_not_silence() {
    // std takes EBADF for a closed stdout and reports the write as done: every verb exited
    // 0 having shown nothing. (`>&-` itself is std's runtime's /dev/null, as `>/dev/null`.)
    let d = dir("readonly");
    let held = d.join("held.txt");
    std::fs::write(&held, b"keep").unwrap();
    let dat = data().display().to_string();
    let journal = data().join("pid2090.vlj").display().to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    for args in [
        s(&["report", &dat]),
        s(&["report", &dat, "--json"]),
        s(&["report", &dat, "-o", "-"]),
        s(&["dump", &journal]),
        s(&["diff", &dat, &dat]),
        s(&["check", "--baseline", &dat, &dat]),
        s(&["metrics", &dat]),
        s(&["lib-path"]),
        s(&["snapshot", &dat, "-o", "-"]),
        s(&["--help"]),
        s(&["--version"]),
        s(&["report", "--help"]),
    ] {
        for redirect in ["1</dev/null".to_string(), format!("1<'{}'", held.display())] {
            let (rc, err) = with_stdout(&args, &redirect);
            assert_eq!(rc, 2, "{args:?} {redirect}: {err}");
            assert!(
                err.contains("stdout is not open for writing"),
                "{args:?}: {err}"
            );
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        }
    }
    // Help and version went unwritten with exit 0 on a full disk.
    for args in [s(&["--help"]), s(&["--version"]), s(&["report", &dat])] {
        let (rc, err) = with_stdout(&args, ">/dev/full");
        assert_eq!(rc, 2, "{args:?}: {err}");
        assert!(err.contains("cannot write output"), "{args:?}: {err}");
    }
    // A verb that writes a file needs no stdout.
    let out = d.join("snap.json").display().to_string();
    let (rc, err) = with_stdout(&s(&["snapshot", &dat, "-o", &out]), "1</dev/null");
    assert_eq!(rc, 0, "{err}");
    assert!(d.join("snap.json").is_file());
    assert_eq!(std::fs::read(&held).unwrap(), b"keep");
}

#[test]
fn a_stderr_that_cannot_take_a_line_never_turns_an_answer_into_a_crash() {
    // eprintln! panics when stderr fails (exit 101): a full disk under `2>log` or a closed
    // log reader turned exit 2 into a crash, and a verb that wrote its file and said so
    // exited 101 too.
    let d = dir("stderr-full");
    let dat = data().display().to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    for redirect in ["2>/dev/full", "2>&-"] {
        let (rc, _) = with_stdout(&s(&["report", "/nonexistent/run"]), redirect);
        assert_eq!(rc, 2, "report of nothing {redirect}");
        let (rc, _) = with_stdout(&s(&["size", "--no-such-flag"]), redirect);
        assert_eq!(rc, 2, "size with a bad flag {redirect}");
        let out = d.join(format!("snap{}.json", redirect.len()));
        let o = out.display().to_string();
        let (rc, _) = with_stdout(&s(&["snapshot", &dat, "-o", &o]), redirect);
        assert_eq!(rc, 0, "snapshot {redirect}");
        assert!(out.is_file(), "snapshot {redirect} wrote nothing");
    }
}
