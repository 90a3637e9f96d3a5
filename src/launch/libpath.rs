//! Where `vramledger run` finds `libvramledger.so`, in this order:
//!
//! 1. `--lib PATH`, then the `VRAMLEDGER_LIB` environment variable: that file, or an error;
//! 2. `libvramledger.so` beside the CLI binary (`target/release/`, the Python package);
//! 3. the copy carried inside the CLI (`build.rs` builds it in), written out on first use to
//!    `$XDG_CACHE_HOME/vramledger/lib/<content id>/libvramledger.so` (else `~/.cache/...`, else
//!    the temporary folder's `vramledger-<uid>/...`). Folders are made 0700 and must be real
//!    folders owned by this user; the file is written 0700 under a fresh name (never through a
//!    symlink) and renamed into place, so concurrent runs and two versions never clash. A file
//!    already there is used only if its bytes are the carried ones; anything else is replaced.
//!    Folders on a `noexec` mount are passed over (the loader could not map the library).
//!
//! A path with a space or a colon cannot be preloaded (the loader splits `LD_PRELOAD` there,
//! with no escape): given, it is refused; found beside the CLI or as a cache folder, it is
//! passed over for the next place.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file name of the preload library.
pub const LIB_NAME: &str = "libvramledger.so";

/// The library carried inside this binary, and its content id (a folder name).
#[cfg(vl_embedded_shim)]
pub const EMBEDDED: Option<(&[u8], &str)> = Some((
    include_bytes!(env!("VRAMLEDGER_EMBEDDED_SHIM")),
    env!("VRAMLEDGER_EMBEDDED_SHIM_ID"),
));
#[cfg(not(vl_embedded_shim))]
pub const EMBEDDED: Option<(&[u8], &str)> = None;

/// Whether the loader can take `p` from `LD_PRELOAD`, which it splits at spaces and colons
/// with no escape: `/opt/my tools/libvramledger.so` was read as two missing files, and the run
/// recorded nothing while vramledger said the command made no CUDA call.
pub fn preloadable(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    !p.as_os_str()
        .as_bytes()
        .iter()
        .any(|b| matches!(b, b' ' | b':'))
}

const NOT_PRELOADABLE: &str =
    "LD_PRELOAD cannot hold a path with a space or a colon (the loader splits its list there)";

/// Where the library was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--lib PATH`.
    Flag,
    /// `VRAMLEDGER_LIB`.
    Env,
    /// Beside the CLI binary.
    BesideCli,
    /// The carried copy, written out (or found intact) at this path.
    Carried,
}

/// Finds the library: `flag` is `--lib`, `env` the value of `VRAMLEDGER_LIB`, `exe` the CLI's
/// own path.
pub fn find(
    flag: Option<&Path>,
    env: Option<&str>,
    exe: Option<&Path>,
) -> Result<(PathBuf, Source), String> {
    if let Some(p) = flag {
        return given(p, "--lib").map(|p| (p, Source::Flag));
    }
    if let Some(v) = env.filter(|v| !v.is_empty()) {
        return given(Path::new(v), "VRAMLEDGER_LIB").map(|p| (p, Source::Env));
    }
    let beside = exe.and_then(Path::parent).map(|d| d.join(LIB_NAME));
    let found = beside.as_deref().filter(|b| b.is_file());
    if let Some(b) = found.filter(|b| preloadable(b)) {
        return Ok((b.to_path_buf(), Source::BesideCli));
    }
    let Some((bytes, id)) = EMBEDDED else {
        let looked = match found {
            Some(b) => format!(
                " that can be preloaded ({}: {NOT_PRELOADABLE})",
                b.display()
            ),
            None => beside.map_or_else(String::new, |b| format!(" (looked for {})", b.display())),
        };
        return Err(format!(
            "cannot find {LIB_NAME}{looked}, and this vramledger was built without a copy of it. \
             Give its path with --lib PATH or VRAMLEDGER_LIB=PATH; it is built by \
             `cargo build --release -p vramledger-shim` into target/release/"
        ));
    };
    let mut errors = Vec::new();
    for base in cache_bases() {
        if !preloadable(&base) {
            errors.push(format!("{}: {NOT_PRELOADABLE}", base.display()));
            continue;
        }
        match write_out(&base, id, bytes) {
            Ok(p) => return Ok((p, Source::Carried)),
            Err(e) => errors.push(format!("{}: {e}", base.display())),
        }
    }
    Err(format!(
        "cannot write out the {LIB_NAME} this vramledger carries ({}); give the path of one with \
         --lib PATH or VRAMLEDGER_LIB=PATH",
        errors.join("; ")
    ))
}

/// [`find`] for this process: `--lib`, then `VRAMLEDGER_LIB`, then beside this binary, then the
/// carried copy.
pub fn for_this_cli(flag: Option<&Path>) -> Result<PathBuf, String> {
    let env = std::env::var("VRAMLEDGER_LIB").ok();
    let exe = std::env::current_exe().ok();
    find(flag, env.as_deref(), exe.as_deref()).map(|(p, _)| p)
}

fn given(p: &Path, what: &str) -> Result<PathBuf, String> {
    if p.is_file() {
        // An absolute path: the command may change its working directory.
        let p = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        if !preloadable(&p) {
            return Err(format!(
                "{what} {}: {NOT_PRELOADABLE}; copy or link the library to a path without them",
                p.display()
            ));
        }
        Ok(p)
    } else {
        Err(format!("{what} {}: no such file", p.display()))
    }
}

/// Candidate cache folders, best first.
fn cache_bases() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").and_then(abs) {
        out.push(x.join("vramledger"));
    }
    if let Some(h) = std::env::var_os("HOME").and_then(abs) {
        out.push(h.join(".cache").join("vramledger"));
    }
    out.push(std::env::temp_dir().join(format!("vramledger-{}", euid())));
    out
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether `dir` is on a filesystem mounted `noexec`.
fn noexec(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path; `st` is a plain struct statvfs fills in.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the pointers are valid for the call.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    rc == 0 && st.f_flag & libc::ST_NOEXEC != 0
}

/// Makes `dir` (0700) if it is missing, and checks it is a real folder (not a symlink) owned
/// by this user and closed to others (tightening the mode of one of ours that is not).
fn private_dir(dir: &Path) -> Result<(), String> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    let m = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !m.file_type().is_dir() {
        return Err(format!("{} is not a folder (a symlink?)", dir.display()));
    }
    if m.uid() != euid() {
        return Err(format!("{} belongs to another user", dir.display()));
    }
    if m.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot make {} private: {e}", dir.display()))?;
    }
    Ok(())
}

/// The carried library at `<base>/lib/<id>/libvramledger.so`, written if it is not there intact.
pub fn write_out(base: &Path, id: &str, bytes: &[u8]) -> Result<PathBuf, String> {
    if let Some(parent) = base.parent() {
        // The parent (~/.cache) is the user's own: made if missing, not inspected.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let lib_dir = base.join("lib");
    let dir = lib_dir.join(id);
    for d in [base, &lib_dir, &dir] {
        private_dir(d)?;
    }
    if noexec(&dir) {
        return Err("mounted noexec".into());
    }
    let path = dir.join(LIB_NAME);
    if intact(&path, bytes) {
        return Ok(path);
    }
    let tmp = dir.join(format!(".{LIB_NAME}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("cannot write {}: {e}", path.display()));
    }
    Ok(path)
}

/// Whether `path` is a regular file of ours (not a symlink) holding exactly `bytes`.
fn intact(path: &Path, bytes: &[u8]) -> bool {
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return false;
    };
    m.file_type().is_file()
        && m.uid() == euid()
        && m.len() == bytes.len() as u64
        && std::fs::read(path).is_ok_and(|b| b == bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vl-libpath-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn writes_privately_and_reuses_only_intact_copies() {
        let d = scratch("write");
        let base = d.join("cache").join("vramledger");
        let p = write_out(&base, "v1-abc", b"library bytes").unwrap();
        assert_eq!(p, base.join("lib/v1-abc").join(LIB_NAME));
        assert_eq!(std::fs::read(&p).unwrap(), b"library bytes");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&p), 0o700);
        for dir in [&base, &base.join("lib"), &base.join("lib/v1-abc")] {
            assert_eq!(mode(dir), 0o700, "{}", dir.display());
        }
        // A tampered copy is replaced; another version gets its own folder.
        std::fs::write(&p, b"something else!").unwrap();
        let again = write_out(&base, "v1-abc", b"library bytes").unwrap();
        assert_eq!(std::fs::read(&again).unwrap(), b"library bytes");
        let other = write_out(&base, "v2-def", b"newer library").unwrap();
        assert_ne!(other, again);
        assert_eq!(std::fs::read(&again).unwrap(), b"library bytes");
        // A folder of ours left open to others is closed.
        std::fs::set_permissions(base.join("lib"), std::fs::Permissions::from_mode(0o755)).unwrap();
        write_out(&base, "v1-abc", b"library bytes").unwrap();
        assert_eq!(mode(&base.join("lib")), 0o700);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn never_writes_through_a_symlink() {
        let d = scratch("symlink");
        let base = d.join("vramledger");
        let elsewhere = d.join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        // The version folder is a symlink to another folder: refused.
        std::fs::create_dir_all(base.join("lib")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, base.join("lib/v1")).unwrap();
        let e = write_out(&base, "v1", b"x").unwrap_err();
        assert!(e.contains("not a folder"), "{e}");
        assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
        // The library's name is a symlink to a victim file: the victim is untouched and the
        // link is replaced by the real library.
        let victim = d.join("victim");
        std::fs::write(&victim, b"keep me").unwrap();
        std::fs::create_dir_all(base.join("lib/v2")).unwrap();
        std::os::unix::fs::symlink(&victim, base.join("lib/v2").join(LIB_NAME)).unwrap();
        let p = write_out(&base, "v2", b"lib").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        assert!(std::fs::symlink_metadata(&p).unwrap().file_type().is_file());
        assert_eq!(std::fs::read(&p).unwrap(), b"lib");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_order_of_places() {
        let d = scratch("order");
        let exe = d.join("vramledger");
        std::fs::write(&exe, b"").unwrap();
        let flag_lib = d.join("flag.so");
        std::fs::write(&flag_lib, b"").unwrap();
        let (p, s) = find(Some(&flag_lib), Some("/nonexistent"), Some(&exe)).unwrap();
        assert_eq!((p, s), (flag_lib.clone(), Source::Flag));
        let e = find(None, Some("/nonexistent/lib.so"), Some(&exe)).unwrap_err();
        assert!(e.contains("VRAMLEDGER_LIB /nonexistent/lib.so"), "{e}");
        let e = find(Some(Path::new("/nonexistent/x.so")), None, Some(&exe)).unwrap_err();
        assert!(e.starts_with("--lib /nonexistent/x.so"), "{e}");
        std::fs::write(d.join(LIB_NAME), b"").unwrap();
        let (p, s) = find(None, Some(""), Some(&exe)).unwrap();
        assert_eq!((p, s), (d.join(LIB_NAME), Source::BesideCli));
        let _ = std::fs::remove_dir_all(&d);
    }
}
