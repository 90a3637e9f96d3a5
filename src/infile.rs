//! Every file the CLI reads (journals, reports, budgets, model configs, engine logs) is read
//! here: only regular files (a FIFO, a device or a socket is refused, so nothing can block
//! the reader or feed it forever), opened without waiting (`O_NONBLOCK`: opening a FIFO
//! would otherwise block until a writer appears), and never more than a limit per kind, with
//! the memory asked for up front so a file too large for this machine is a message, not an
//! abort.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// What a file is expected to be: names it in messages and sets its size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A journal (`*.vlj`).
    Journal,
    /// A journal or a `vramledger report --json` file (`diff`, `check`).
    JournalOrReport,
    /// A budgets file (`check --budgets`).
    Budgets,
    /// A model's `config.json` (`size --model-config`).
    ModelConfig,
    /// An engine log (`size --log`).
    Log,
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

impl Kind {
    /// The largest file of this kind that is read.
    pub fn limit(self) -> u64 {
        match self {
            // 16 GiB is what the shim writes at most (4096 chunks of 4 MiB).
            Kind::Journal | Kind::JournalOrReport => 16 * GIB,
            Kind::Budgets | Kind::ModelConfig => 16 * MIB,
            Kind::Log => 4 * GIB,
        }
    }

    /// For messages.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Journal => "journal",
            Kind::JournalOrReport => "journal or report",
            Kind::Budgets => "budgets file",
            Kind::ModelConfig => "model config",
            Kind::Log => "log",
        }
    }
}

/// What a path is when it is not a regular file, in words.
pub fn special_kind(t: std::fs::FileType) -> Option<&'static str> {
    Some(if t.is_file() {
        return None;
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    })
}

/// Opens `path` for reading if it is a regular file within the limit of `kind`; its length.
pub fn open(path: &Path, kind: Kind) -> Result<(File, u64), String> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            // A socket cannot even be opened: say what it is rather than ENXIO.
            match std::fs::metadata(path)
                .ok()
                .and_then(|m| special_kind(m.file_type()))
            {
                Some(what) => not_regular(path, what, kind),
                None => format!("cannot read {}: {e}", path.display()),
            }
        })?;
    let meta = f
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if let Some(what) = special_kind(meta.file_type()) {
        return Err(not_regular(path, what, kind));
    }
    if meta.len() > kind.limit() {
        return Err(too_large(path, kind, meta.len()));
    }
    Ok((f, meta.len()))
}

fn not_regular(path: &Path, what: &str, kind: Kind) -> String {
    format!(
        "{} is {what}, not a regular file: a {} is read only from a regular file",
        path.display(),
        kind.name()
    )
}

fn too_large(path: &Path, kind: Kind, len: u64) -> String {
    format!(
        "{} is {len} bytes: larger than any {} vramledger reads ({} bytes at most)",
        path.display(),
        kind.name(),
        kind.limit()
    )
}

/// The bytes of a regular file of `kind`; one message for people on any failure.
pub fn read(path: &Path, kind: Kind) -> Result<Vec<u8>, String> {
    let (f, len) = open(path, kind)?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len as usize).map_err(|_| {
        format!(
            "{} is {len} bytes: not enough memory to read it",
            path.display()
        )
    })?;
    // A file still being written (a live journal) may have grown since: never past the limit.
    f.take(kind.limit() + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > kind.limit() {
        return Err(too_large(path, kind, bytes.len() as u64));
    }
    Ok(bytes)
}

/// [`read`] for a text file that must be UTF-8 (budgets, configs).
pub fn read_text(path: &Path, kind: Kind) -> Result<String, String> {
    String::from_utf8(read(path, kind)?).map_err(|e| {
        format!(
            "{} is not UTF-8 text (byte {}), so not a {}",
            path.display(),
            e.utf8_error().valid_up_to(),
            kind.name()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("infile-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn regular_files_are_read_and_others_refused() {
        let d = dir("kinds");
        let p = d.join("b.json");
        std::fs::write(&p, "{}").unwrap();
        assert_eq!(read_text(&p, Kind::Budgets).unwrap(), "{}");
        let e = read(&d, Kind::Journal).unwrap_err();
        assert!(e.contains("is a directory, not a regular file"), "{e}");
        let e = read(Path::new("/dev/zero"), Kind::Log).unwrap_err();
        assert!(e.contains("is a character device"), "{e}");
        let e = read(&d.join("missing"), Kind::Log).unwrap_err();
        assert!(e.starts_with("cannot read "), "{e}");
        let sock = d.join("s.vlj");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = read(&sock, Kind::Journal).unwrap_err();
        assert!(e.contains("is a socket, not a regular file"), "{e}");
    }

    #[test]
    fn sizes_past_the_limit_are_refused_before_reading() {
        let d = dir("large");
        let p = d.join("config.json");
        let f = File::create(&p).unwrap();
        f.set_len(Kind::ModelConfig.limit() + 1).unwrap(); // sparse: costs no disk
        let e = read(&p, Kind::ModelConfig).unwrap_err();
        assert!(e.contains("larger than any model config"), "{e}");
        std::fs::write(&p, [0xff, 0xfe]).unwrap();
        let e = read_text(&p, Kind::ModelConfig).unwrap_err();
        assert!(e.contains("not UTF-8"), "{e}");
    }
}
