//! `vramledger run` relays SIGINT, SIGTERM and SIGHUP sent to it to the command, waits for the
//! command, still reaches its report, and exits with the command's status (128 + N when
//! signal N killed it). Signals ignored at start stay ignored.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vramledger"))
}

fn dir(test: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("run-signals-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `vramledger run --out DIR -- sh -c SCRIPT` in its own process group (so the test can clean
/// up whatever is left). `before` is a shell prefix that runs first and `exec`s vramledger.
struct Run {
    child: std::process::Child,
    pgid: u32,
    d: PathBuf,
}

impl Run {
    fn start(d: &Path, before: &str, script: &str) -> Run {
        let line = format!(
            "{before} exec {cli} run --out {out} -- sh -c {script}",
            cli = cli().display(),
            out = d.join("out").display(),
            script = shell_quote(script),
        );
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(line).current_dir(d).process_group(0);
        // The test itself may have been started with these signals ignored (a background job
        // of a non-interactive shell ignores SIGINT, and the disposition is inherited): every
        // run starts from the defaults, and `before` sets up what a test wants ignored.
        // SAFETY: between fork and exec only async-signal-safe calls are made (signal(2)).
        unsafe {
            cmd.pre_exec(|| {
                for sig in [libc::SIGINT, libc::SIGHUP, libc::SIGTERM, libc::SIGQUIT] {
                    libc::signal(sig, libc::SIG_DFL);
                }
                Ok(())
            });
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pgid = child.id();
        Run {
            child,
            pgid,
            d: d.to_path_buf(),
        }
    }

    /// Waits for the command to write `name` in the test folder.
    fn wait_for(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.d.join(name).exists() {
            assert!(Instant::now() < deadline, "the command never wrote {name}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// (exit code, stderr), or `None` if vramledger did not end within 20 s.
    fn finish(mut self) -> Option<(Option<i32>, String)> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // Whatever is left of the group (a command vramledger failed to stop) goes too.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.pgid)])
            .stderr(Stdio::null())
            .status();
        let status = status?;
        let mut err = String::new();
        use std::io::Read;
        let _ = self.child.stderr.take().unwrap().read_to_string(&mut err);
        Some((status.code(), err))
    }
}

/// What `run` says once the command has ended, on its way to the report (the commands here
/// make no CUDA call, so they leave no journal).
fn reached_report(err: &str) -> bool {
    err.contains("journals of run") || err.contains("the command wrote no journal")
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[test]
fn sigterm_is_relayed_and_the_report_still_comes() {
    let d = dir("term");
    let run = Run::start(
        &d,
        "",
        "trap 'echo relayed > got-term; exit 3' TERM; echo > ready; while :; do sleep 0.05; done",
    );
    run.wait_for("ready");
    run.signal("TERM");
    let (code, err) = run
        .finish()
        .expect("vramledger run did not end after SIGTERM");
    assert_eq!(code, Some(3), "{err}");
    assert_eq!(
        std::fs::read_to_string(d.join("got-term")).unwrap(),
        "relayed\n"
    );
    // vramledger lived on past the command to its report step.
    assert!(reached_report(&err), "{err}");
}

#[test]
fn sigint_and_sighup_kill_the_command_and_pass_128_plus_n() {
    for (sig, code) in [("INT", 130), ("HUP", 129), ("TERM", 143)] {
        let d = dir(&format!("kill-{sig}"));
        let run = Run::start(&d, "", "echo > ready; exec sleep 100");
        run.wait_for("ready");
        // The command is `sleep` itself once `ready` exists (exec); give exec a moment.
        std::thread::sleep(Duration::from_millis(100));
        run.signal(sig);
        let (got, err) = run
            .finish()
            .unwrap_or_else(|| panic!("vramledger run did not end after SIG{sig}"));
        assert_eq!(got, Some(code), "SIG{sig}: {err}");
        assert!(reached_report(&err), "SIG{sig}: {err}");
    }
}

#[test]
fn the_commands_own_status_passes_through() {
    let d = dir("status");
    let run = Run::start(&d, "", "exit 7");
    let (code, err) = run.finish().expect("vramledger run did not end");
    assert_eq!(code, Some(7), "{err}");
    let d = dir("killed");
    let run = Run::start(&d, "", "kill -KILL $$");
    let (code, err) = run.finish().expect("vramledger run did not end");
    assert_eq!(code, Some(137), "{err}");
}

#[test]
fn a_signal_ignored_at_start_stays_ignored() {
    // `nohup vramledger run ...`: SIGHUP ignored for vramledger and for the command.
    let d = dir("nohup");
    let run = Run::start(
        &d,
        "trap '' HUP;",
        "kill -HUP $$; echo > ready; while [ ! -e stop ]; do sleep 0.05; done; exit 5",
    );
    run.wait_for("ready");
    run.signal("HUP");
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(d.join("stop"), b"").unwrap();
    let (code, err) = run.finish().expect("vramledger run did not end");
    assert_eq!(code, Some(5), "{err}");
}

/// A command that counts the SIGINTs it is delivered (a handler per delivery, as Python's
/// KeyboardInterrupt machinery sees them) and writes the count after a while.
const COUNTER_C: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <time.h>
static volatile sig_atomic_t n;
static void on_int(int s) { (void)s; n++; }
int main(int argc, char **argv) {
    struct sigaction sa = {0};
    sa.sa_handler = on_int;
    sigaction(SIGINT, &sa, 0);
    fclose(fopen(argv[1], "w"));
    struct timespec step = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 150; i++) nanosleep(&step, 0);
    FILE *f = fopen(argv[2], "w");
    fprintf(f, "%d\n", (int)n);
    fclose(f);
    return 4;
}
"#;

#[test]
fn ctrl_c_at_a_terminal_reaches_the_command_once() {
    // Ctrl-C at a terminal goes to the whole foreground group, the command included: relaying
    // it too would deliver it twice (a second KeyboardInterrupt in a Python server). `script`
    // gives the run a terminal; ETX (^C) written to it becomes SIGINT in its line discipline.
    // `exec`: `script` starts the line with $SHELL -c, and a shell that waits for the run
    // (dash) would die of that SIGINT itself and report 130 for it.
    let d = dir("tty");
    let src = d.join("counter.c");
    std::fs::write(&src, COUNTER_C).unwrap();
    let counter = d.join("counter");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(cc)
        .arg("-o")
        .arg(&counter)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "cc counter.c");
    let (ready, ints) = (d.join("ready"), d.join("ints"));
    let line = format!(
        "exec {cli} run --out {out} -- {counter} {ready} {ints}",
        cli = cli().display(),
        out = d.join("out").display(),
        counter = counter.display(),
        ready = ready.display(),
        ints = ints.display(),
    );
    let mut script = match Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "note: `script` (util-linux) is not available ({e}); the terminal case was not run"
            );
            return;
        }
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    use std::io::Write;
    script.stdin.as_mut().unwrap().write_all(b"\x03").unwrap();
    let status = script.wait().unwrap();
    assert_eq!(std::fs::read_to_string(&ints).unwrap(), "1\n");
    assert_eq!(status.code(), Some(4));
}
