//! Where a journal lives: a private folder of this user and a private file whose name cannot
//! leave it.
//!
//! - folders vramledger creates are 0700 and the file is 0600, whatever the umask (`chmod`
//!   after creation: a umask can only take bits away);
//! - a folder owned by another user is refused (someone else could read, replace or remove
//!   the journals in it), and so is a path through another user's symbolic link;
//! - the file is created with `O_EXCL | O_NOFOLLOW` relative to the folder's descriptor, so a
//!   symlink planted under the journal's name is never followed and a reused pid never
//!   overwrites an older journal;
//! - every part of the name (run id, host) is reduced to `[A-Za-z0-9._-]`, so `../x`, `/` or
//!   control bytes cannot take it outside the folder.

use std::ffi::CString;

use vramledger_format::JOURNAL_SUFFIX;

use crate::config::name_part;

/// The journal's file name (no folder).
pub fn file_name(run_id: &str, host: &str, pid: i32, start_unix_ns: u64) -> String {
    format!(
        "{}.{}.{pid}.{start_unix_ns}{JOURNAL_SUFFIX}",
        name_part(run_id, vramledger_format::header::NO_RUN_ID),
        name_part(host, "host")
    )
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn os_error(code: i32) -> std::io::Error {
    std::io::Error::from_raw_os_error(code)
}

/// Refuses a path that goes through a symbolic link owned by another user (root's own links
/// aside): that user could point it anywhere, and the journal folder would be created and
/// written where they chose, with this user's rights.
fn foreign_links(dir: &str, path: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    for p in path.ancestors().filter(|p| !p.as_os_str().is_empty()) {
        let Ok(m) = std::fs::symlink_metadata(p) else {
            continue;
        };
        if m.file_type().is_symlink() && m.uid() != euid && m.uid() != 0 {
            return Err(format!(
                "the journal folder {dir} goes through {}, a symbolic link of uid {}, not of this user (uid {euid}): refused",
                p.display(),
                m.uid()
            ));
        }
    }
    Ok(())
}

/// Creates the missing folders of `dir` (0700 each) and opens it; refuses a folder that is
/// not this user's. Returns the folder's descriptor.
fn open_folder(dir: &str) -> Result<i32, String> {
    let path = std::path::Path::new(dir);
    foreign_links(dir, path)?;
    // Outermost missing folder first.
    let mut missing: Vec<&std::path::Path> = path
        .ancestors()
        .take_while(|p| !p.as_os_str().is_empty() && std::fs::symlink_metadata(p).is_err())
        .collect();
    missing.reverse();
    for p in missing {
        let Ok(c) = CString::new(p.as_os_str().as_encoded_bytes()) else {
            return Err(format!(
                "the journal folder {dir} has a NUL byte in its name"
            ));
        };
        // SAFETY: mkdir/chmod on a NUL-terminated path.
        if unsafe { libc::mkdir(c.as_ptr(), 0o700) } == 0 {
            // SAFETY: as above.
            unsafe { libc::chmod(c.as_ptr(), 0o700) };
        } else if errno() != libc::EEXIST {
            return Err(format!(
                "cannot create the journal folder {}: {}",
                p.display(),
                os_error(errno())
            ));
        }
    }
    let Ok(c) = CString::new(dir) else {
        return Err(format!(
            "the journal folder {dir} has a NUL byte in its name"
        ));
    };
    // SAFETY: open with a NUL-terminated path; the descriptor is ours.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(format!(
            "cannot open the journal folder {dir}: {}",
            os_error(errno())
        ));
    }
    let fd = above_stdio(fd).map_err(|e| format!("cannot open the journal folder {dir}: {e}"))?;
    // SAFETY: fstat on our descriptor into a zeroed stat; geteuid has no preconditions.
    let (st, euid) = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        let rc = libc::fstat(fd, &mut st);
        (if rc == 0 { Some(st) } else { None }, libc::geteuid())
    };
    let refuse = match st {
        None => Some(format!("cannot inspect the journal folder {dir}")),
        Some(st) if st.st_uid != euid => Some(format!(
            "the journal folder {dir} belongs to uid {}, not to this user (uid {euid}): refused, so nobody else can read or replace the journals",
            st.st_uid
        )),
        Some(_) => None,
    };
    if let Some(why) = refuse {
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(fd) };
        return Err(why);
    }
    Ok(fd)
}

/// `fd` moved to a number above the standard streams. A program that closed its stdout or
/// stderr gets the lowest free numbers back for our files, and its own `write(2, …)` would then
/// land in them (and succeed) instead of failing with EBADF as it does without the preload.
fn above_stdio(fd: i32) -> Result<i32, String> {
    if fd > 2 {
        return Ok(fd);
    }
    // SAFETY: fcntl and close on a descriptor this module just opened.
    let (moved, err) = unsafe {
        let moved = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
        let err = errno();
        libc::close(fd);
        (moved, err)
    };
    if moved < 0 {
        return Err(format!(
            "no descriptor above the standard streams ({})",
            os_error(err)
        ));
    }
    Ok(moved)
}

/// Creates the journal file `name` in `dir`: 0600, never through a symlink, never over an
/// existing file. Returns its descriptor and its path (for messages).
pub fn create(dir: &str, name: &str) -> Result<(i32, String), String> {
    let path = format!("{dir}/{name}");
    let dirfd = open_folder(dir)?;
    let Ok(cname) = CString::new(name) else {
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(dirfd) };
        return Err(format!("cannot create journal {path}: bad name"));
    };
    // SAFETY: openat relative to our folder descriptor with a NUL-terminated name.
    let fd = unsafe {
        libc::openat(
            dirfd,
            cname.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    };
    let err = errno();
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(dirfd) };
    if fd < 0 {
        return Err(format!("cannot create journal {path}: {}", os_error(err)));
    }
    let fd = match above_stdio(fd) {
        Ok(fd) => fd,
        Err(e) => {
            if let Ok(c) = CString::new(path.as_str()) {
                // SAFETY: unlink of the file created a moment ago, in our own folder.
                unsafe { libc::unlink(c.as_ptr()) };
            }
            return Err(format!("cannot create journal {path}: {e}"));
        }
    };
    // SAFETY: fchmod on the descriptor just created (the umask may have taken bits away).
    unsafe { libc::fchmod(fd, 0o600) };
    Ok((fd, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_parts_cannot_leave_the_folder() {
        for hostile in [
            "../x",
            "/",
            "..",
            ".",
            "a/b",
            "a\0b",
            "x\ny",
            "/etc/passwd",
            "",
        ] {
            let part = name_part(hostile, "adhoc");
            assert!(!part.contains('/'), "{hostile:?} -> {part:?}");
            assert!(!part.starts_with('.'), "{hostile:?} -> {part:?}");
            assert!(!part.is_empty());
            assert!(part.bytes().all(|b| b.is_ascii_graphic()), "{part:?}");
        }
        assert_eq!(name_part("../x", "adhoc"), "_._x");
        assert_eq!(name_part("", "adhoc"), "adhoc");
        assert_eq!(name_part("run1700000000-42", "adhoc"), "run1700000000-42");
        assert_eq!(name_part(&"y".repeat(500), "adhoc").len(), 64);
        let n = file_name("../../etc", "host/evil", 7, 9);
        assert_eq!(n, "_._.._etc.host_evil.7.9.vlj");
    }
}
