//! What the live outputs ask of this machine: its host name, and whether the process behind a
//! journal still runs.

/// This machine's host name, as the shim records it (`gethostname`).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into the buffer we own.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Boot time (unix s) and clock ticks per second, to read /proc/PID/stat start times.
fn boot_and_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let btime = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then_some((btime, ticks as u64))
}

/// The start time (unix s) of process `pid` on this machine, if it exists.
fn start_unix_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let starttime: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    let (btime, ticks) = boot_and_ticks()?;
    Some(btime as f64 + starttime as f64 / ticks as f64)
}

/// Whether the process of a journal (`host`, `pid`, its journal opened at `start_unix_ns`)
/// still runs: `None` for another host (cannot be told from here). A pid in use by a process
/// that started after the journal was opened is another process (the pid was reused).
pub fn running(host: &str, pid: u32, start_unix_ns: u64, local_host: &str) -> Option<bool> {
    if pid == 0 || host.is_empty() || host != local_host {
        return None;
    }
    let Some(started) = start_unix_s(pid) else {
        return Some(false);
    };
    // /proc start times have clock-tick resolution and the boot time whole seconds.
    let journal_opened = start_unix_ns as f64 / 1e9;
    Some(start_unix_ns == 0 || started <= journal_opened + 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_runs_and_a_reused_pid_does_not_count() {
        let host = hostname();
        assert!(!host.is_empty());
        let pid = std::process::id();
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert_eq!(running(&host, pid, now_ns, &host), Some(true));
        // A journal opened an hour before this process started was another process's.
        assert_eq!(
            running(
                &host,
                pid,
                now_ns - 3600 * 1_000_000_000 - start_age_ns(),
                &host
            ),
            Some(false)
        );
        assert_eq!(running("elsewhere", pid, now_ns, &host), None);
        assert_eq!(running(&host, u32::MAX - 1, now_ns, &host), Some(false));
    }

    fn start_age_ns() -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        ((now - start_unix_s(std::process::id()).unwrap()).max(0.0) * 1e9) as u64
    }
}
