//! Test support shared by the integration tests (`mod support;`): find the build outputs,
//! prepare a driver directory where libcuda.so.1 and libnvidia-ml.so.1 are the fake driver,
//! compile the C clients of tests/clients with `cc`, and run programs with a given environment.
//!
//! Everything is built once per test binary into `<CARGO_TARGET_TMPDIR>/clients-<binary>-<pid>`:
//!   driver/  libcuda.so.1, libnvidia-ml.so.1 -> target/<profile>/libfakecuda.so
//!   bin/     libcudart.so.13, libc10_cuda.so, libcublas.so.13, libnccl.so.2, libthirdparty.so
//!            and the executables (rpath $ORIGIN; libcuda comes from LD_LIBRARY_PATH).
#![allow(dead_code)] // each test binary uses a different part of this module

pub mod skip;
pub mod synth;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The CLI under test.
pub fn cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vramledger"))
}

/// An empty folder of this test binary's own, `<prefix>-<test>-<pid>`, made afresh.
pub fn fresh_dir(prefix: &str, test: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{prefix}-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The shared libraries, in build order: (source, file name, extra link inputs).
const LIBRARIES: &[(&str, &str, &[&str])] = &[
    ("cudart.c", "libcudart.so.13", &[]),
    ("c10_cuda.c", "libc10_cuda.so", &["bin:libcudart.so.13"]),
    ("cublas.c", "libcublas.so.13", &[]),
    ("nccl.c", "libnccl.so.2", &[]),
    ("thirdparty.c", "libthirdparty.so", &["driver:libcuda.so.1"]),
];

/// The executables: (name, libraries they link).
pub const EXECUTABLES: &[(&str, &[&str])] = &[
    ("torch_like", &["libc10_cuda.so", "libcudart.so.13"]),
    ("rt_mix", &["libc10_cuda.so", "libcudart.so.13"]),
    ("two_devices", &["libcudart.so.13"]),
    ("cublas_like", &["libcublas.so.13", "libcudart.so.13"]),
    ("nccl_like", &["libnccl.so.2", "libcudart.so.13"]),
    ("direct_like", &["libthirdparty.so", "libcudart.so.13"]),
    ("threads", &["libcudart.so.13"]),
    ("fork_child", &["libcudart.so.13"]),
    ("oom", &["libcudart.so.13"]),
    ("sigkill", &["libcudart.so.13"]),
    ("bad_args", &[]),
    ("procaddr_walk", &[]),
    ("tap_writer", &[]),
    ("faults", &["libcudart.so.13"]),
    ("hostile_write", &[]),
    ("dlsym_probe", &[]),
    ("fork_driver", &[]),
    ("stdio_lines", &[]),
    ("printf_custom", &[]),
    ("sig_write", &[]),
    ("sig_semantics", &[]),
    ("context_cycles", &[]),
    (
        "vllm_tp_like",
        &[
            "libc10_cuda.so",
            "libcudart.so.13",
            "libnccl.so.2",
            "libcublas.so.13",
        ],
    ),
    (
        "server_like",
        &[
            "libc10_cuda.so",
            "libcudart.so.13",
            "libcublas.so.13",
            "libnccl.so.2",
            "libthirdparty.so",
        ],
    ),
];

/// Executables built from another source or with other flags: (name, source, compiler, flags).
/// `stdio_lines_chk` is built the way distributions build C (-O2 -D_FORTIFY_SOURCE=2), so its
/// printf-family calls are the `__*_chk` forms; the C++ ones use iostreams.
pub const VARIANTS: &[(&str, &str, Compiler, &[&str])] = &[
    (
        "stdio_lines_chk",
        "stdio_lines.c",
        Compiler::C,
        &["-O2", "-D_FORTIFY_SOURCE=2"],
    ),
    ("iostream_lines", "iostream_lines.cpp", Compiler::Cxx, &[]),
];

/// Which compiler builds a variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiler {
    C,
    Cxx,
}

/// Debug info for unwinding; frame pointers and no sibling calls so every module keeps its frame.
const CFLAGS: &[&str] = &[
    "-g",
    "-O1",
    "-fno-omit-frame-pointer",
    "-fno-optimize-sibling-calls",
    "-Wall",
];

pub fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// CARGO_TARGET_DIR, else <workspace>/target.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir().join("target"))
}

/// target/<profile>: the test binary lives in target/<profile>/deps/.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    match exe.parent().and_then(Path::parent) {
        Some(dir) if exe.parent().is_some_and(|d| d.ends_with("deps")) => dir.to_path_buf(),
        _ => target_dir().join("debug"),
    }
}

/// target/<profile>/libfakecuda.so; panics with a hint when it has not been built.
pub fn fakecuda_lib() -> PathBuf {
    let lib = profile_dir().join("libfakecuda.so");
    assert!(
        lib.is_file(),
        "{} is missing: run `cargo build --workspace` (or `cargo build -p fakecuda`) before the tests",
        lib.display()
    );
    lib
}

/// Make `dir` a driver directory: libcuda.so.1 and libnvidia-ml.so.1 -> libfakecuda.so.
pub fn prepare_driver_dir(dir: &Path) -> PathBuf {
    let lib = fakecuda_lib();
    std::fs::create_dir_all(dir).expect("create driver dir");
    for name in ["libcuda.so.1", "libnvidia-ml.so.1"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&lib, &link).expect("symlink the fake driver");
    }
    dir.to_path_buf()
}

fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

fn cxx() -> String {
    std::env::var("CXX").unwrap_or_else(|_| "c++".into())
}

fn run_cc(args: &[String]) {
    run_compiler(&cc(), args)
}

fn run_compiler(compiler: &str, args: &[String]) {
    let out = Command::new(compiler)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {compiler} (are gcc and g++ installed?): {e}"));
    assert!(
        out.status.success(),
        "{compiler} {}\nfailed with {}:\n{}{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn clients_src() -> PathBuf {
    manifest_dir().join("tests/clients")
}

/// Compile a shared library (-fPIC -shared -Wl,-soname,<file name>) from a client source.
pub fn compile_shared(source: &Path, out: &Path, link: &[PathBuf]) {
    let soname = out.file_name().unwrap().to_string_lossy().into_owned();
    let mut args: Vec<String> = CFLAGS.iter().map(|s| s.to_string()).collect();
    args.extend([
        "-fPIC".into(),
        "-shared".into(),
        format!("-Wl,-soname,{soname}"),
        "-Wl,-rpath,$ORIGIN".into(),
    ]);
    args.push(format!("-I{}", clients_src().display()));
    args.push("-o".into());
    args.push(out.display().to_string());
    args.push(source.display().to_string());
    args.extend(link.iter().map(|p| p.display().to_string()));
    args.extend(["-ldl".into(), "-lpthread".into()]);
    run_cc(&args);
}

/// Compile an executable linked against `link` (paths), with rpath $ORIGIN and `rpath_link`.
pub fn compile_executable(source: &Path, out: &Path, link: &[PathBuf], rpath_link: &Path) {
    let mut args: Vec<String> = CFLAGS.iter().map(|s| s.to_string()).collect();
    args.push("-Wl,-rpath,$ORIGIN".into());
    args.push(format!("-Wl,-rpath-link,{}", rpath_link.display()));
    args.push(format!("-I{}", clients_src().display()));
    args.push("-o".into());
    args.push(out.display().to_string());
    args.push(source.display().to_string());
    args.extend(link.iter().map(|p| p.display().to_string()));
    args.extend(["-ldl".into(), "-lpthread".into()]);
    run_cc(&args);
}

/// Compile a variant executable (no fake libraries linked).
pub fn compile_variant(source: &Path, out: &Path, compiler: Compiler, flags: &[&str]) {
    let mut args: Vec<String> = CFLAGS.iter().map(|s| s.to_string()).collect();
    args.extend(flags.iter().map(|s| s.to_string()));
    args.push(format!("-I{}", clients_src().display()));
    args.push("-o".into());
    args.push(out.display().to_string());
    args.push(source.display().to_string());
    args.extend(["-ldl".into(), "-lpthread".into()]);
    match compiler {
        Compiler::C => run_cc(&args),
        Compiler::Cxx => run_compiler(&cxx(), &args),
    }
}

/// The built clients of one test binary.
pub struct Clients {
    pub root: PathBuf,
    /// libcuda.so.1 / libnvidia-ml.so.1 symlinks to the fake driver: put it on LD_LIBRARY_PATH.
    pub driver_dir: PathBuf,
    /// The fake libraries and the executables.
    pub bin_dir: PathBuf,
}

/// Remove build folders left by earlier runs of this test binary whose process is gone.
fn remove_stale(parent: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(prefix) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn build_all() -> Clients {
    let parent = option_env!("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let exe = std::env::current_exe().expect("current_exe");
    let stem = exe.file_stem().unwrap().to_string_lossy().into_owned();
    let prefix = format!("clients-{stem}-");
    remove_stale(&parent, &prefix);
    let root = parent.join(format!("{prefix}{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let driver_dir = prepare_driver_dir(&root.join("driver"));
    let bin_dir = root.join("bin");
    std::fs::create_dir_all(&bin_dir).expect("create bin dir");
    let src = clients_src();
    for (source, file, extra) in LIBRARIES {
        let link: Vec<PathBuf> = extra
            .iter()
            .map(|e| match e.split_once(':') {
                Some(("bin", f)) => bin_dir.join(f),
                Some(("driver", f)) => driver_dir.join(f),
                _ => unreachable!(),
            })
            .collect();
        compile_shared(&src.join(source), &bin_dir.join(file), &link);
    }
    for (name, libs) in EXECUTABLES {
        let link: Vec<PathBuf> = libs.iter().map(|l| bin_dir.join(l)).collect();
        compile_executable(
            &src.join(format!("{name}.c")),
            &bin_dir.join(name),
            &link,
            &driver_dir,
        );
    }
    for (name, source, compiler, flags) in VARIANTS {
        compile_variant(&src.join(source), &bin_dir.join(name), *compiler, flags);
    }
    Clients {
        root,
        driver_dir,
        bin_dir,
    }
}

/// Build the clients once per test binary (tests run in parallel threads).
/// `metrics_steps` (tests/clients/metrics_steps.c: a program whose memory moves and whose stages
/// change one stdin command at a time), built once per test binary.
pub fn steps_exe() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let c = clients();
            let exe = c.bin_dir.join("metrics_steps");
            compile_executable(
                &manifest_dir().join("tests/clients/metrics_steps.c"),
                &exe,
                &[
                    c.bin_dir.join("libc10_cuda.so"),
                    c.bin_dir.join("libcudart.so.13"),
                ],
                &c.driver_dir,
            );
            exe
        })
        .clone()
}

pub fn clients() -> &'static Clients {
    static CLIENTS: OnceLock<Clients> = OnceLock::new();
    CLIENTS.get_or_init(build_all)
}

/// What a finished program left behind.
pub struct RunOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub description: String,
}

impl RunOutput {
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Everything, for assertion messages.
    pub fn dump(&self) -> String {
        format!(
            "--- {}\n--- status: {}\n--- stdout:\n{}\n--- stderr:\n{}",
            self.description, self.status, self.stdout, self.stderr
        )
    }

    /// Panic (printing everything) unless stdout has a line equal to `line`.
    pub fn assert_line(&self, line: &str) {
        assert!(
            self.stdout.lines().any(|l| l == line),
            "no line {line:?} in the output\n{}",
            self.dump()
        );
    }

    /// The first stdout line starting with `prefix`.
    pub fn line_starting(&self, prefix: &str) -> &str {
        match self.stdout.lines().find(|l| l.starts_with(prefix)) {
            Some(l) => l,
            None => panic!("no line starting with {prefix:?}\n{}", self.dump()),
        }
    }
}

impl Clients {
    pub fn exe(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }

    /// A Command for a client with the fake driver first on LD_LIBRARY_PATH, no inherited
    /// FAKECUDA_* or LD_PRELOAD (tests set what they need), then `env` applied.
    pub fn command(&self, name: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
        command(&self.exe(name), args, &self.driver_dir, env)
    }

    pub fn run(&self, name: &str, args: &[&str], env: &[(&str, &str)]) -> RunOutput {
        run(self.command(name, args, env))
    }

    /// Run and require exit status 0 (printing everything otherwise).
    pub fn run_ok(&self, name: &str, args: &[&str], env: &[(&str, &str)]) -> RunOutput {
        let out = self.run(name, args, env);
        assert!(out.success(), "{name} failed\n{}", out.dump());
        out
    }
}

/// A Command for any program, with `driver_dir` prepended to LD_LIBRARY_PATH.
pub fn command(program: &Path, args: &[&str], driver_dir: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("FAKECUDA_") {
            cmd.env_remove(&key);
        }
    }
    cmd.env_remove("LD_PRELOAD");
    let ld = match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", driver_dir.display()),
        _ => driver_dir.display().to_string(),
    };
    cmd.env("LD_LIBRARY_PATH", ld);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// Run to completion, capturing output; a failure is printed to stderr (shown by the harness).
pub fn run(mut cmd: Command) -> RunOutput {
    let description = format!("{cmd:?}");
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {description}: {e}"));
    let result = RunOutput {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        description,
    };
    if !result.success() {
        eprintln!("{}", result.dump());
    }
    result
}

/// Runs `cmd`, killing it after `secs`: `None` when it had to be killed (it hung).
pub fn run_within(mut cmd: Command, secs: u64) -> Option<Output> {
    use std::io::Read;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drained while it runs, so a large output cannot block it.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = r.read_to_end(&mut b);
            b
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(Output {
                status,
                stdout: out.join().unwrap(),
                stderr: err.join().unwrap(),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Says that the running test is skipped and why, where a test run can count it: a line
/// `SKIPPED: <test>: <reason>` on stdout and, when `VRAMLEDGER_TEST_SKIPS` names a file, the
/// same line appended to it (the convention of tests/size.rs). A test that returns after this
/// call has said so.
pub fn skip_test(reason: &str) {
    let thread = std::thread::current();
    let line = format!("SKIPPED: {}: {reason}\n", thread.name().unwrap_or("?"));
    print!("{line}");
    if let Some(path) = std::env::var_os("VRAMLEDGER_TEST_SKIPS") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}
