//! Launching a command under the preload (`vramledger run`): start it, wait for it, pass its
//! exit code through.
//!
//! Sets `LD_PRELOAD` to `libvramledger.so` (found by [`libpath`]; children inherit it, so
//! SGLang's spawned workers are covered), a fresh run id, and the journal folder (created
//! private, 0700); hands Python processes the pool hooks ([`python_boot`]); relays SIGINT,
//! SIGTERM and SIGHUP to the command ([`signals`]), waits for it and passes its exit code
//! through (128 + signal when it was killed).

pub mod libpath;
pub mod python_boot;
pub mod signals;

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What `run` needs.
pub struct RunSpec {
    pub out: PathBuf,
    /// Bytes, as the kernel passes arguments: a file name need not be UTF-8.
    pub command: Vec<OsString>,
    /// `--lib PATH`: the preload library to use (see [`libpath`] for the search).
    pub lib: Option<PathBuf>,
    /// Send the command's stdout to vramledger's stderr (`run --json`: stdout is the report's).
    pub stdout_to_stderr: bool,
}

/// What happened.
pub struct RunOutcome {
    pub exit_code: i32,
    pub run_id: String,
    pub out: PathBuf,
}

fn new_run_id() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("run{t}-{}", std::process::id())
}

/// Runs the command to completion.
pub fn run(spec: &RunSpec) -> Result<RunOutcome, String> {
    let lib = libpath::for_this_cli(spec.lib.as_deref())?;
    let (program, args) = spec.command.split_first().ok_or_else(|| {
        "no command given: use `vramledger run [--out DIR] -- CMD ARGS...`".to_string()
    })?;
    let name = Path::new(program).display();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&spec.out)
        .map_err(|e| {
            format!(
                "cannot create the journal folder {}: {e}",
                spec.out.display()
            )
        })?;
    let out = std::fs::canonicalize(&spec.out).unwrap_or_else(|_| spec.out.clone());
    let run_id = new_run_id();
    // Bytes, not text: a path or an inherited list that is not UTF-8 is kept as it is.
    let mut preload = lib.into_os_string();
    if let Some(old) =
        std::env::var_os("LD_PRELOAD").filter(|o| !o.as_bytes().trim_ascii().is_empty())
    {
        preload.push(":");
        preload.push(old);
    }
    // Python processes load vramledger's pool hooks; the folder lives until the command ends.
    let python_boot = python_boot::prepare(&run_id);
    let mut cmd = Command::new(program);
    if spec.stdout_to_stderr {
        use std::os::fd::AsFd;
        let err = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| format!("cannot pass stderr on to {name}: {e}"))?;
        cmd.stdout(err);
    }
    // Relay SIGINT/SIGTERM/SIGHUP to the command (`signals`); installed before the spawn
    // so no signal finds vramledger with its default action between the two.
    signals::install();
    let mut child = cmd
        .args(args)
        .envs(python_boot.env())
        .env("LD_PRELOAD", preload)
        .env("VRAMLEDGER_OUT", &out)
        .env("VRAMLEDGER_RUN_ID", &run_id)
        .spawn()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    signals::started(child.id());
    signals::wait_exited(child.id()).map_err(|e| format!("lost track of {name}: {e}"))?;
    let status = child
        .wait()
        .map_err(|e| format!("lost track of {name}: {e}"))?;
    Ok(RunOutcome {
        exit_code: exit_code(status),
        run_id,
        out,
    })
}

/// The command's exit code, as a shell reports it: its own code, or 128 + N when signal N
/// killed it.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}
