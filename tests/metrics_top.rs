//! `vramledger top` driven in tmux (Debian's tmux): started on an empty run folder, then a
//! client under the preload moves memory and stages; the screen is read back with
//! `capture-pane` after each step; `q` quits with exit code 0.

mod metrics_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use metrics_support::{cli, scratch, skip, text, tool, vramledger, wait_for, Live};

struct Tmux {
    bin: PathBuf,
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.bin)
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("run tmux")
    }

    fn screen(&self) -> String {
        text(&self.run(&["capture-pane", "-p", "-t", "top"]).stdout)
    }

    /// Waits until the screen shows every one of `want`; panics with the screen otherwise.
    fn wait_for_screen(&self, want: &[&str]) -> String {
        wait_for(Duration::from_secs(15), || {
            let s = self.screen();
            want.iter().all(|w| s.contains(w)).then_some(s)
        })
        .unwrap_or_else(|| panic!("no {want:?} on the screen:\n{}", self.screen()))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn start(bin: PathBuf, run: &Path, status: &Path) -> Tmux {
    let t = Tmux {
        bin,
        socket: format!("vramledger-top-{}", std::process::id()),
    };
    let cmd = format!(
        "'{}' top '{}' --interval 200 --window 3; echo \"exit=$?\" > '{}'",
        cli().display(),
        run.display(),
        status.display()
    );
    let out = t.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "150",
        "-y",
        "45",
        &cmd,
    ]);
    assert!(out.status.success(), "tmux: {}", text(&out.stderr));
    t
}

#[test]
fn top_in_tmux_follows_a_run_that_starts_empty_and_quits_on_q() {
    let Some(bin) = tool("tmux") else {
        skip(
            "metrics_top::tmux",
            "tmux is not installed (Debian's tmux package)",
        );
        return;
    };
    let dir = scratch("top");
    let run = dir.join("run");
    std::fs::create_dir_all(&run).unwrap();
    let status = dir.join("status");
    let t = start(bin, &run, &status);
    t.wait_for_screen(&["vramledger top", "waiting for journals", "q quits"]);

    let mut live = Live::start(&run, &[]);
    let pid = format!("pid {}", live.child.id());
    live.send("stage weight_load");
    live.send("torch 0 300");
    let s = t.wait_for_screen(&[
        &pid,
        "[running]",
        "stage weight_load",
        "dev 0 gpu 0",
        "300.0 MiB",
    ]);
    println!("after weight_load:\n{s}");
    live.send("stage kv_pool");
    live.send("torch 0 100");
    live.send("oom 0");
    let s = t.wait_for_screen(&[
        "stage kv_pool",
        "400.0 MiB",
        "+100.0 MiB",
        "weight_load -> kv_pool",
        "1 failed",
    ]);
    println!("after kv_pool:\n{s}");
    live.quit();
    t.wait_for_screen(&["ended in stage kv_pool", "[exited]"]);

    t.run(&["send-keys", "-t", "top", "q"]);
    // The shell's `>` makes the file before `echo` writes it: wait for the line, not the file.
    let rc = wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&status)
            .ok()
            .filter(|s| s.ends_with('\n'))
    });
    assert_eq!(
        rc.as_deref().map(str::trim),
        Some("exit=0"),
        "top did not quit on q:\n{}",
        t.screen()
    );
}

#[test]
fn top_needs_a_terminal_and_a_folder_that_can_exist() {
    let dir = scratch("top-noterm");
    let out = vramledger(&["top", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("not one"),
        "{}",
        text(&out.stderr)
    );
    let out = vramledger(&["top", "/nonexistent/parent/run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("neither it nor its parent"));
}
