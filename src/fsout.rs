//! Every file the CLI writes (`report -o`, `report --html -o`, `snapshot -o`) goes through
//! here, so one set of rules holds for all of them:
//!
//! - `-` is stdout (a closed pipe is not an error);
//! - the bytes go to a temporary file first, created in the destination's own folder with
//!   `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600 and a name nobody can guess, then moved into
//!   place, so a reader never sees half a file and nothing is ever written through a link;
//! - the destination is replaced only when it is absent, or a regular file and `--force` was
//!   given: a symbolic link, a directory, a device node, a FIFO or a socket at the destination
//!   is refused (exit 2) and left as it was, even with `--force`;
//! - without `--force` the move is a hard link, which fails when the name exists, so a file
//!   created meanwhile is never replaced either.
//!
//! Left open on purpose: someone able to create device nodes (root) could swap one in
//! between the final check and the rename; the check is for the user's own mistakes
//! (`-o /dev/null --force`), which it catches.

use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{ErrorKind, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where the bytes went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Stdout,
    File,
}

/// Whether `path` means stdout.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Whether stdout refused a write of nothing when first looked at ([`note_stdout`]).
static STDOUT_BAD: OnceLock<bool> = OnceLock::new();

/// Looks at stdout once, before any file is opened. std reports a write to a descriptor open
/// only for reading (`vramledger report RUN 1<file`) as done (EBADF is taken for a closed
/// stdout), so the verb exited 0 having shown nothing. (A closed stdout, `>&-`, is another
/// case: std's runtime reopens it on /dev/null before `main`, as if `>/dev/null` were given.
/// It opens it read-write, but so does Python's `subprocess.DEVNULL`, a way scripts discard
/// an answer on purpose: the two cannot be told apart, and the second must keep working.)
pub fn note_stdout() {
    STDOUT_BAD.get_or_init(stdout_bad);
}

fn stdout_bad() -> bool {
    // A write of nothing: EBADF when not open for writing; on a pipe or a terminal it costs
    // nothing and never raises SIGPIPE.
    let probe = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| File::from(fd).write(&[]));
    matches!(probe, Err(e) if e.raw_os_error() == Some(libc::EBADF))
}

/// An error when stdout cannot take an answer.
pub fn stdout_usable() -> std::io::Result<()> {
    if *STDOUT_BAD.get_or_init(stdout_bad) {
        return Err(std::io::Error::other("stdout is not open for writing"));
    }
    Ok(())
}

/// What sits at a destination, in words (`None`: nothing, or a regular file).
fn refused_kind(meta: &fs::Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    Some(if t.is_file() {
        return None;
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    })
}

/// The folder and file name of a destination.
fn split(path: &Path) -> Result<(PathBuf, &std::ffi::OsStr), String> {
    let name = path
        .file_name()
        .ok_or_else(|| format!("{} does not name a file", path.display()))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name))
}

/// Says whether `path` may be written, before the (possibly long) work that produces the
/// bytes. [`write`] checks again: this is only the early answer.
pub fn check(path: &Path, force: bool) -> Result<(), String> {
    if is_stdout(path) {
        return Ok(());
    }
    let (dir, _) = split(path)?;
    match fs::symlink_metadata(path) {
        Ok(meta) => {
            if let Some(kind) = refused_kind(&meta) {
                return Err(refusal(path, kind));
            }
            if !force {
                return Err(exists(path));
            }
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot write {}: {e}", path.display())),
    }
    match fs::metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!(
            "cannot write {}: {} is not a folder",
            path.display(),
            dir.display()
        )),
        Err(e) => Err(format!(
            "cannot write {}: the folder {}: {e}",
            path.display(),
            dir.display()
        )),
    }
}

fn refusal(path: &Path, kind: &str) -> String {
    format!(
        "{} is {kind}; vramledger writes only new files or, with --force, over regular files (remove it or choose another name)",
        path.display()
    )
}

fn exists(path: &Path) -> String {
    format!(
        "{} already exists; pass --force to overwrite it",
        path.display()
    )
}

/// A name nobody can predict: std's hasher keys come from the OS's random source.
fn random_name() -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(d) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(d.as_nanos());
    }
    format!(".vramledger-{:016x}.tmp", h.finish())
}

/// Creates a private temporary file in `dir` that did not exist before.
fn create_temp(dir: &Path) -> std::io::Result<(PathBuf, File)> {
    let mut last = None;
    for _ in 0..16 {
        let p = dir.join(random_name());
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&p)
        {
            Ok(f) => return Ok((p, f)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary name")))
}

/// Moves the finished temporary file to `path` under the rules of the module.
fn commit(tmp: &Path, path: &Path, force: bool) -> Result<(), String> {
    if force {
        match fs::symlink_metadata(path) {
            Ok(meta) => {
                if let Some(kind) = refused_kind(&meta) {
                    return Err(refusal(path, kind));
                }
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot write {}: {e}", path.display())),
        }
        return fs::rename(tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()));
    }
    match fs::hard_link(tmp, path) {
        Ok(()) => {
            let _ = fs::remove_file(tmp);
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            if let Ok(meta) = fs::symlink_metadata(path) {
                if let Some(kind) = refused_kind(&meta) {
                    return Err(refusal(path, kind));
                }
            }
            Err(exists(path))
        }
        // A file system without hard links: an exclusive create of the name itself is just
        // as safe (it fails on anything that exists, a link included), only not atomic.
        Err(_) => {
            let bytes =
                fs::read(tmp).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(path)
                .map_err(|e| match e.kind() {
                    ErrorKind::AlreadyExists => exists(path),
                    _ => format!("cannot write {}: {e}", path.display()),
                })?;
            let done = f.write_all(&bytes).and_then(|_| f.sync_all());
            let _ = fs::remove_file(tmp);
            done.map_err(|e| {
                let _ = fs::remove_file(path);
                format!("cannot write {}: {e}", path.display())
            })
        }
    }
}

/// Writes `bytes` to `path` (`-`: stdout); an existing regular file is replaced only with
/// `force`. Errors are one message for people.
pub fn write(path: &Path, bytes: &[u8], force: bool) -> Result<Written, String> {
    if is_stdout(path) {
        stdout_usable().map_err(|e| format!("cannot write to stdout: {e}"))?;
        let mut out = std::io::stdout().lock();
        return match out.write_all(bytes).and_then(|_| out.flush()) {
            Err(e) if e.kind() != ErrorKind::BrokenPipe => {
                Err(format!("cannot write to stdout: {e}"))
            }
            _ => Ok(Written::Stdout),
        };
    }
    check(path, force)?;
    let (dir, _) = split(path)?;
    let (tmp, mut f) = create_temp(&dir).map_err(|e| {
        format!(
            "cannot write {}: cannot create a temporary file in {}: {e}",
            path.display(),
            dir.display()
        )
    })?;
    let filled = f.write_all(bytes).and_then(|_| f.sync_all());
    drop(f);
    let done = filled
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
        .and_then(|_| commit(&tmp, path, force));
    if done.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    done.map(|_| Written::File)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fsout-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn leftovers(d: &Path) -> Vec<String> {
        fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn new_files_are_private_and_existing_ones_need_force() {
        let d = dir("new");
        let p = d.join("out.txt");
        assert_eq!(write(&p, b"one", false), Ok(Written::File));
        assert_eq!(fs::read(&p).unwrap(), b"one");
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let e = write(&p, b"two", false).unwrap_err();
        assert!(e.contains("already exists; pass --force"), "{e}");
        assert_eq!(fs::read(&p).unwrap(), b"one");
        assert_eq!(write(&p, b"two", true), Ok(Written::File));
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert!(leftovers(&d).is_empty(), "{:?}", leftovers(&d));
    }

    #[test]
    fn links_and_special_files_are_never_replaced_or_written_through() {
        let d = dir("special");
        let victim = d.join("victim");
        fs::write(&victim, b"keep").unwrap();
        let link = d.join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let dangling = d.join("dangling");
        std::os::unix::fs::symlink(d.join("nothing"), &dangling).unwrap();
        let sub = d.join("sub");
        fs::create_dir(&sub).unwrap();
        for (p, kind) in [
            (&link, "a symbolic link"),
            (&dangling, "a symbolic link"),
            (&sub, "a directory"),
        ] {
            for force in [false, true] {
                let e = write(p, b"x", force).unwrap_err();
                assert!(e.contains(kind), "{e}");
            }
        }
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(!d.join("nothing").exists());
        assert!(leftovers(&d).is_empty());
    }

    #[test]
    fn a_missing_folder_or_a_nameless_path_is_one_message() {
        let d = dir("missing");
        let e = write(&d.join("no/such/out.json"), b"x", true).unwrap_err();
        assert!(e.contains("the folder"), "{e}");
        let e = write(Path::new("/"), b"x", true).unwrap_err();
        assert!(e.contains("does not name a file"), "{e}");
    }

    #[test]
    fn temporary_names_differ() {
        let a = random_name();
        let b = random_name();
        assert_ne!(a, b);
        assert!(a.starts_with(".vramledger-") && a.ends_with(".tmp"));
    }
}
