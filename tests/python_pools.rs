//! The Python pool hooks (python-boot/) in real Python processes: a fake `torch` with PyTorch
//! 2.11's pool-window API (tests/python/fake_torch) allocates through the fake caching
//! allocator (libc10_cuda.so of tests/clients) over the fake driver, with libvramledger.so
//! preloaded. Every allocation the fake torch routes to a private pool must be
//! `torch_graph_pool` with torch's pool id in the journal, the report's pools must match the
//! snapshot torch wrote at exit, and the user's own sitecustomize must still run.
//!
//! Needs `python3` (CI installs it) and `cargo build --workspace` first.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::{clients, profile_dir, RunOutput};
use vramledger::journal::{self, Journal};
use vramledger_format::record::flags;
use vramledger_format::{Kind, Owner};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn boot() -> PathBuf {
    repo().join("python-boot")
}

fn py(dir: &str) -> PathBuf {
    repo().join("tests/python").join(dir)
}

fn python() -> PathBuf {
    let ok = Command::new("python3")
        .arg("-c")
        .arg("import sys; sys.exit(sys.version_info < (3, 6))")
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "python3 (3.6 or newer) is needed for these tests (CI installs it)"
    );
    PathBuf::from("python3")
}

fn out_dir(test: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("pypools-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn join(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// Runs a script with the fake torch importable and the fake driver first; `preload` adds
/// libvramledger.so writing into `out`; `pythonpath` comes before the fake torch.
/// The sitecustomize the test interpreter imports by itself (no PYTHONPATH), if any.
fn interpreters_own_sitecustomize() -> Option<String> {
    let out = std::process::Command::new(python())
        .args([
            "-c",
            "import sitecustomize, sys; sys.stdout.write(sitecustomize.__file__ or '')",
        ])
        .env_remove("PYTHONPATH")
        .env_remove("PYTHONHOME")
        .output()
        .ok()?;
    let file = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !file.is_empty()).then_some(file)
}

fn run_py(
    script: &str,
    args: &[&str],
    pythonpath: &[PathBuf],
    preload: Option<&Path>,
    env: &[(&str, &str)],
) -> RunOutput {
    let c = clients();
    let mut path = pythonpath.to_vec();
    path.push(py("fake_torch"));
    let lib = c.exe("libc10_cuda.so").display().to_string();
    let pp = join(&path);
    let shim = profile_dir().join("libvramledger.so").display().to_string();
    let out = preload.map(|p| p.display().to_string());
    let mut all: Vec<(&str, &str)> = vec![("FAKE_TORCH_LIB", &lib), ("PYTHONPATH", &pp)];
    if let Some(o) = &out {
        all.push(("LD_PRELOAD", &shim));
        all.push(("VRAMLEDGER_OUT", o));
    }
    all.extend_from_slice(env);
    let script = py(".").join(script).display().to_string();
    let mut argv = vec![script.as_str()];
    argv.extend_from_slice(args);
    let mut cmd = support::command(&python(), &argv, &c.driver_dir, &all);
    cmd.env_remove("PYTHONHOME").env_remove("PYTHONSTARTUP");
    support::run(cmd)
}

fn journals(dir: &Path) -> Vec<Journal> {
    journal::find(dir)
        .unwrap()
        .iter()
        .map(|p| journal::read(p).unwrap())
        .collect()
}

/// `PREFIX <address> <a>,<b>` lines: address → pool.
fn expected(out: &RunOutput, prefix: &str) -> BTreeMap<u64, (u64, u64)> {
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|rest| {
            let (addr, pool) = rest.trim().split_once(' ').unwrap();
            let (a, b) = pool.split_once(',').unwrap();
            (
                addr.parse().unwrap(),
                (a.parse().unwrap(), b.parse().unwrap()),
            )
        })
        .collect()
}

/// Each allocation record: address → (owner, pool id as the journal names it, resolving
/// captures named at their end through their `pool_end` record).
fn recorded(j: &Journal) -> BTreeMap<u64, (Owner, Option<(u64, u64)>)> {
    let named: BTreeMap<u64, (u64, u64)> = j
        .events
        .iter()
        .filter(|e| e.kind() == Some(Kind::PoolEnd))
        .map(|e| (e.handle, (e.arg0, e.arg1)))
        .collect();
    j.events
        .iter()
        .filter(|e| e.kind() == Some(Kind::Alloc))
        .map(|e| {
            let pool = e.torch_pool().or_else(|| {
                (e.flags & flags::TORCH_POOL_PENDING != 0)
                    .then(|| named.get(&e.arg1).copied())
                    .flatten()
            });
            (e.addr, (e.owner(), pool))
        })
        .collect()
}

fn report_json(dir: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_vramledger"))
        .args(["report", "--json"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn every_pool_torch_routes_to_is_named_in_the_journal_and_the_report() {
    every_pool_is_named(&[], &[boot()], "windows");
}

#[test]
fn hooks_installed_after_torch_was_imported_see_the_same() {
    every_pool_is_named(&["--late"], &[], "late");
}

/// Runs pool_windows.py with `args` (BOOT_DIR names the bootstrap folder) and checks every
/// allocation and the report.
fn every_pool_is_named(args: &[&str], pythonpath: &[PathBuf], test: &str) {
    let dir = out_dir(test);
    let boot_s = boot().display().to_string();
    let env = [("BOOT_DIR", boot_s.as_str())];
    let hooked = run_py("pool_windows.py", args, pythonpath, Some(&dir), &env);
    assert!(hooked.success(), "{}", hooked.dump());
    hooked.assert_line("WRAPPED True");
    hooked.assert_line("RAISED True True");
    hooked.assert_line("DONE");
    // The program's own output is the same without the hooks (only the probe line differs).
    let plain = run_py("pool_windows.py", args, pythonpath, None, &env);
    assert!(plain.success(), "{}", plain.dump());
    plain.assert_line("WRAPPED False");
    let strip = |o: &RunOutput| -> Vec<String> {
        o.stdout
            .lines()
            .filter(|l| !l.starts_with("WRAPPED") && !l.starts_with("LATE_INSTALL"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        strip(&plain),
        strip(&hooked),
        "output changed under the hooks"
    );

    let want = expected(&hooked, "EXPECT ");
    assert_eq!(want.len(), 17, "{}", hooked.stdout);
    let js = journals(&dir);
    assert_eq!(js.len(), 1);
    let got = recorded(&js[0]);
    let mut private = 0;
    for (addr, pool) in &want {
        let (owner, id) = got
            .get(addr)
            .unwrap_or_else(|| panic!("no allocation at {addr:#x} in the journal"));
        if *pool == (0, 0) {
            assert_eq!(
                (*owner, *id),
                (Owner::Torch, None),
                "{addr:#x} is torch's default pool"
            );
        } else {
            private += 1;
            assert_eq!(
                (*owner, *id),
                (Owner::TorchGraphPool, Some(*pool)),
                "{addr:#x} is in pool {pool:?}"
            );
        }
    }
    assert_eq!(private, 10);
    // The capture without a pool: its id, printed after capture_end, names its segment.
    let line = hooked.line_starting("CAPTURE_POOL ");
    assert!(
        want.values()
            .any(|p| format!("CAPTURE_POOL {},{}", p.0, p.1) == line),
        "{line}"
    );

    // The report: bytes per pool equal torch's snapshot, which agrees segment by segment.
    let v = report_json(&dir);
    let p = &v["processes"][0];
    let tp = &p["torch_pools"];
    assert_eq!(tp["hooks"]["torch_version"], "2.11.0+fake");
    assert_eq!(tp["windows"], 9);
    assert_eq!(tp["snapshot_check"]["agree"], true, "{tp:#}");
    assert_eq!(tp["snapshot_check"]["segments"], 17);
    let pools = tp["pools"].as_array().unwrap();
    let labels: std::collections::BTreeSet<String> =
        want.values().map(|(a, b)| format!("{a},{b}")).collect();
    let reported: std::collections::BTreeSet<String> = pools
        .iter()
        .map(|r| r["pool"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(reported, labels);
    let mut graph = 0;
    for r in pools {
        assert_eq!(r["live_bytes"], r["torch_snapshot_bytes"], "{r}");
        if r["pool"] != "0,0" {
            graph += r["live_bytes"].as_i64().unwrap();
        }
    }
    let owners = &p["devices"][0]["live_at_end"]["by_owner"];
    assert_eq!(owners["torch_graph_pool"].as_i64().unwrap(), graph);
    let default = pools.iter().find(|r| r["pool"] == "0,0").unwrap();
    assert_eq!(owners["torch"], default["live_bytes"]);
}

#[test]
fn without_the_library_or_when_disabled_nothing_is_wrapped() {
    let out = run_py("site_check.py", &[], &[boot()], None, &[]);
    assert!(out.success(), "{}", out.dump());
    out.assert_line("WRAPPED False");
    let dir = out_dir("disabled");
    let out = run_py(
        "pool_windows.py",
        &[],
        &[boot()],
        Some(&dir),
        &[("VRAMLEDGER_DISABLE", "1")],
    );
    assert!(out.success(), "{}", out.dump());
    out.assert_line("WRAPPED False");
    assert!(journals(&dir).is_empty(), "a journal although disabled");
    let out = run_py(
        "site_check.py",
        &[],
        &[boot()],
        Some(&out_dir("hooks-off")),
        &[("VRAMLEDGER_PYTHON_HOOKS", "0")],
    );
    out.assert_line("WRAPPED False");
}

#[test]
fn a_python_program_without_torch_loads_nothing_and_writes_nothing() {
    let dir = out_dir("notorch");
    let out = run_py(
        "pool_windows.py",
        &["--no-torch"],
        &[boot()],
        Some(&dir),
        &[],
    );
    assert!(out.success(), "{}", out.dump());
    out.assert_line("CTYPES_LOADED False");
    out.assert_line("HOOK_MODULE True");
    assert!(journals(&dir).is_empty());
}

#[test]
fn the_users_own_sitecustomize_still_runs_and_the_path_is_theirs() {
    let boot_s = boot().display().to_string();
    let chain = out_dir("chain");
    let out = run_py(
        "site_check.py",
        &[],
        &[boot(), py("user_site")],
        Some(&chain),
        &[("BOOT_DIR", &boot_s)],
    );
    assert!(out.success(), "{}", out.dump());
    let user = py("user_site").join("sitecustomize.py");
    out.assert_line(&format!("SITECUSTOMIZE {}", user.display()));
    out.assert_line("USER_MARK ran");
    out.assert_line("USER_PATH True");
    out.assert_line("BOOT_ON_PATH False");
    out.assert_line("WRAPPED True");
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    // torch imported, the GPU never used: no journal (the hooks' announcement opens none).
    assert!(journals(&chain).is_empty());

    // No user sitecustomize: the interpreter's own one, if it has one (Debian's python3 ships
    // /usr/lib/python3.X/sitecustomize.py), runs and is registered, as without vramledger;
    // with none, ours stays registered (the import that ran it needs it).
    let out = run_py(
        "site_check.py",
        &[],
        &[boot()],
        Some(&out_dir("alone")),
        &[("BOOT_DIR", &boot_s)],
    );
    let own = interpreters_own_sitecustomize()
        .unwrap_or_else(|| boot().join("sitecustomize.py").display().to_string());
    out.assert_line(&format!("SITECUSTOMIZE {own}"));
    out.assert_line("BOOT_ON_PATH False");
    assert!(out.stderr.is_empty(), "{}", out.stderr);

    // A user's sitecustomize that fails is reported exactly as Python reports it without
    // vramledger; the hooks are in place all the same.
    let with = run_py(
        "site_check.py",
        &[],
        &[boot(), py("broken_site")],
        Some(&out_dir("broken")),
        &[],
    );
    let without = run_py("site_check.py", &[], &[py("broken_site")], None, &[]);
    assert!(with.success() && without.success());
    assert_eq!(with.stderr, without.stderr);
    assert!(
        with.stderr
            .contains("Error in sitecustomize; set PYTHONVERBOSE for traceback:\nValueError: broken on purpose"),
        "{}",
        with.stderr
    );
    with.assert_line("WRAPPED True");
}

#[test]
fn python_dash_capital_s_skips_the_hooks_and_only_captures_are_seen() {
    // -S skips site (so sitecustomize): what the mechanism cannot see. Pool windows outside
    // a stream capture stay `torch`; allocations inside captures are still the graph pool.
    let dir = out_dir("dash-s");
    let c = clients();
    let pp = join(&[boot(), py("fake_torch")]);
    let lib = c.exe("libc10_cuda.so").display().to_string();
    let shim = profile_dir().join("libvramledger.so").display().to_string();
    let d = dir.display().to_string();
    let script = py(".").join("pool_windows.py").display().to_string();
    let out = support::run(support::command(
        &python(),
        &["-S", &script],
        &c.driver_dir,
        &[
            ("FAKE_TORCH_LIB", &lib),
            ("PYTHONPATH", &pp),
            ("LD_PRELOAD", &shim),
            ("VRAMLEDGER_OUT", &d),
        ],
    ));
    assert!(out.success(), "{}", out.dump());
    out.assert_line("WRAPPED False");
    let js = journals(&dir);
    let got = recorded(&js[0]);
    let want = expected(&out, "EXPECT ");
    let owners: Vec<Owner> = want.keys().map(|a| got[a].0).collect();
    assert!(got.values().all(|(_, id)| id.is_none()));
    let graph = owners
        .iter()
        .filter(|o| **o == Owner::TorchGraphPool)
        .count();
    // Only the four allocations made while a stream capture was open (the paused one too).
    assert_eq!(graph, 4, "{owners:?}");
}

#[test]
fn vramledger_run_injects_the_hooks_keeps_the_users_path_and_cleans_up() {
    let c = clients();
    let dir = out_dir("run");
    let lib = c.exe("libc10_cuda.so").display().to_string();
    let ld = c.driver_dir.display().to_string();
    let script = py(".").join("pool_windows.py").display().to_string();
    let fake = py("fake_torch").display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_vramledger"))
        .args(["run", "--json", "--out"])
        .arg(&dir)
        .args(["--", "python3", &script, "--spawn"])
        .env("LD_LIBRARY_PATH", &ld)
        .env("FAKE_TORCH_LIB", &lib)
        .env("PYTHONPATH", &fake)
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    // The spawned child (multiprocessing 'spawn') inherited the hooks. With --json the
    // program's stdout goes to stderr: stdout is the report alone.
    let child = stderr
        .lines()
        .find_map(|l| l.strip_prefix("CHILD_EXPECT "))
        .expect("the child's line");
    let (addr, pool) = child.split_once(' ').unwrap();
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let procs = v["processes"].as_array().unwrap();
    let with_pools: Vec<&Value> = procs
        .iter()
        .filter(|p| p["torch_pools"]["hooks"].is_object())
        .collect();
    assert_eq!(with_pools.len(), 1, "{v:#}");
    let tp = &with_pools[0]["torch_pools"];
    assert_eq!(tp["snapshot_check"]["agree"], true);
    assert_eq!(tp["pools"][0]["pool"], pool);
    let journal = journal::read(Path::new(with_pools[0]["journal"].as_str().unwrap())).unwrap();
    let got = recorded(&journal);
    let (a, b) = pool.split_once(',').unwrap();
    assert_eq!(
        got[&addr.parse::<u64>().unwrap()],
        (
            Owner::TorchGraphPool,
            Some((a.parse().unwrap(), b.parse().unwrap()))
        )
    );
    // The bootstrap folder is gone with the run.
    let run_id = procs[0]["run_id"].as_str().unwrap();
    let left: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("vramledger-python-{run_id}-")))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
