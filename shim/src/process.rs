//! Facts about this process: the host and the journal header.

use vramledger_engines::redact;
use vramledger_format::Header;

use crate::config;

/// The host name.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return "unknown-host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The header of a new journal, started at `start_unix_ns` / `start_mono_ns`. Secrets never
/// get in (`vramledger_engines::redact`): the command line has its secret values replaced
/// and the environment is recorded for an allow-list of names only.
pub fn header(
    driver_version: Option<i32>,
    start_unix_ns: u64,
    start_mono_ns: u64,
    clock: &str,
) -> Header {
    let mut h = Header::default();
    // SAFETY: getpid/getppid have no preconditions.
    let (pid, ppid) = unsafe { (libc::getpid(), libc::getppid()) };
    h.push("pid", pid.to_string());
    h.push("ppid", ppid.to_string());
    h.push("run_id", config::get().run_id.clone());
    h.push("host", hostname());
    h.push("start_unix_ns", start_unix_ns.to_string());
    h.push("start_mono_ns", start_mono_ns.to_string());
    h.push("clock", clock);
    h.push("shim_version", env!("CARGO_PKG_VERSION"));
    if let Ok(cmd) = std::fs::read("/proc/self/cmdline") {
        let cmd = cmd.strip_suffix(&[0]).unwrap_or(&cmd);
        let args: Vec<String> = cmd
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        // Secret values by their flag's name, and anything shaped like a token or a URL
        // password whatever its flag.
        h.push("cmdline", redact::args(&args).join("\0"));
    }
    if let Ok(exe) = std::fs::read_link("/proc/self/exe") {
        h.push("exe", exe.to_string_lossy().into_owned());
    }
    h.push(
        "cuda_visible_devices",
        config::var(c"CUDA_VISIBLE_DEVICES").unwrap_or_default(),
    );
    if let Some(v) = driver_version {
        h.push("driver_version", v.to_string());
    }
    for (k, v) in std::env::vars_os() {
        let (Some(k), Some(v)) = (k.to_str(), v.to_str()) else {
            continue;
        };
        if let Some(v) = redact::env_value(k, v) {
            h.push(format!("env.{k}"), v.into_owned());
        }
    }
    for (name, path) in cuda_libraries() {
        h.push(format!("lib.{name}"), path);
    }
    fit(&mut h, MAX_HEADER);
    h
}

/// A header's payload must fit in one journal block: past this, the last pairs are dropped.
const MAX_HEADER: usize = 60 << 10;

/// Drops pairs from the end until the encoded header is at most `max` bytes.
fn fit(h: &mut Header, max: usize) {
    while h.encode().len() > max && h.pairs.len() > 1 {
        h.pairs.pop();
    }
}

/// CUDA-related libraries mapped now, from /proc/self/maps (no loader lock taken).
fn cuda_libraries() -> Vec<(String, String)> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        let name = path.rsplit('/').next().unwrap_or(path);
        let interesting = [
            "libcuda",
            "libcudart",
            "libnccl",
            "libcublas",
            "libc10_cuda",
            "libtorch_cuda",
            "libnvidia-ml",
        ]
        .iter()
        .any(|p| name.starts_with(p));
        if interesting && !out.iter().any(|(n, _)| n == name) {
            out.push((name.to_string(), path.to_string()));
        }
    }
    out
}
