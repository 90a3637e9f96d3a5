//! Reading `VRAMLEDGER_RULES` without ever blocking or slowing the target.
//!
//! The file is opened non-blocking (a FIFO with no writer must not stop the program's first
//! write), must be a regular file of at most [`MAX_RULES_BYTES`], and is read once, when the
//! library is loaded (before the program prints anything, so a warning about it never lands
//! inside one of the program's own lines).

use std::ffi::CString;

/// A rule file larger than this is refused (a real one is a few lines).
pub const MAX_RULES_BYTES: u64 = 1 << 20;

/// The text of the rule file at `path`, or why it is refused.
pub fn read(path: &str) -> Result<String, String> {
    let c = CString::new(path).map_err(|_| "the path has a NUL byte".to_string())?;
    // SAFETY: open with a NUL-terminated path; O_NONBLOCK so a FIFO cannot block.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(format!(
            "cannot read it: {}",
            std::io::Error::last_os_error()
        ));
    }
    let out = read_fd(fd);
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(fd) };
    out
}

fn read_fd(fd: i32) -> Result<String, String> {
    // SAFETY: fstat on our descriptor into a zeroed struct.
    let st = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return Err(format!(
                "cannot read it: {}",
                std::io::Error::last_os_error()
            ));
        }
        st
    };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err("it is not a regular file".into());
    }
    if st.st_size as u64 > MAX_RULES_BYTES {
        return Err(format!(
            "it is larger than {} KiB ({} bytes)",
            MAX_RULES_BYTES >> 10,
            st.st_size
        ));
    }
    // Files that grow while read, or that report no size (/proc), are still cut at the limit.
    let mut buf = vec![0u8; MAX_RULES_BYTES as usize + 1];
    let mut len = 0;
    while len < buf.len() {
        // SAFETY: reading into the unfilled part of our buffer.
        let n = unsafe { libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("cannot read it: {e}"));
        }
        if n == 0 {
            break;
        }
        len += n as usize;
    }
    if len > MAX_RULES_BYTES as usize {
        return Err(format!("it is larger than {} KiB", MAX_RULES_BYTES >> 10));
    }
    buf.truncate(len);
    String::from_utf8(buf).map_err(|_| "it is not UTF-8 text".to_string())
}
