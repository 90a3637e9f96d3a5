//! `vramledger run` hands every Python process of the run vramledger's Python bootstrap:
//! python-boot/sitecustomize.py and vramledger_pools.py, built into this binary, written to a
//! private folder for the run and put first on `PYTHONPATH` (spawned workers inherit it). The
//! bootstrap runs whatever sitecustomize it shadows, so the user's own still runs.
//!
//! The folder is new (never reused: a planted file cannot be picked up), 0700, its files 0600
//! and created without following links; it is removed when the command has finished. Nothing
//! is injected with `VRAMLEDGER_PYTHON_HOOKS=0` or `VRAMLEDGER_DISABLE=1`, and a folder that
//! cannot be written costs the hooks, never the run.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The bootstrap files, as the repository has them.
const FILES: [(&str, &str); 2] = [
    (
        "sitecustomize.py",
        include_str!("../../python-boot/sitecustomize.py"),
    ),
    (
        "vramledger_pools.py",
        include_str!("../../python-boot/vramledger_pools.py"),
    ),
];

/// The run's bootstrap folder (removed on drop); empty when nothing is injected.
#[derive(Debug, Default)]
pub struct BootDir {
    path: Option<PathBuf>,
}

fn off(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| off_value(&v))
}

fn on(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| !v.trim().is_empty() && !off_value(&v))
}

fn off_value(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "0" | "false" | "no" | "off"
    )
}

/// `dir` first, then what `old` (the inherited `PYTHONPATH`) holds; never an empty entry,
/// which Python would read as the current directory.
pub fn python_path(dir: &Path, old: Option<OsString>) -> OsString {
    let mut out = OsString::from(dir.as_os_str());
    if let Some(old) = old.filter(|o| !o.is_empty()) {
        out.push(":");
        out.push(old);
    }
    out
}

fn write_files(dir: &Path) -> std::io::Result<()> {
    for (name, text) in FILES {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(dir.join(name))?;
        f.write_all(text.as_bytes())?;
    }
    Ok(())
}

fn create(parent: &Path, run_id: &str) -> std::io::Result<PathBuf> {
    let mut last = None;
    for n in 0..16 {
        let dir = parent.join(format!("vramledger-python-{run_id}-{n}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {
                if let Err(e) = write_files(&dir) {
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(e);
                }
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free folder name")))
}

/// Writes the bootstrap for run `run_id` (unless switched off).
pub fn prepare(run_id: &str) -> BootDir {
    if off("VRAMLEDGER_PYTHON_HOOKS") || on("VRAMLEDGER_DISABLE") {
        return BootDir::default();
    }
    match create(&std::env::temp_dir(), run_id) {
        Ok(dir) => BootDir { path: Some(dir) },
        Err(e) => {
            crate::stderr::line(
                "vramledger",
                format_args!("cannot write the Python hooks ({e}); PyTorch pools outside capture windows will not be named"),
            );
            BootDir::default()
        }
    }
}

impl BootDir {
    /// The variables the command gets: `PYTHONPATH` with the folder first (none when empty).
    pub fn env(&self) -> Vec<(&'static str, OsString)> {
        match &self.path {
            Some(dir) => vec![(
                "PYTHONPATH",
                python_path(dir, std::env::var_os("PYTHONPATH")),
            )],
            None => Vec::new(),
        }
    }

    /// The folder, if one was written.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

impl Drop for BootDir {
    fn drop(&mut self) {
        if let Some(dir) = self.path.take() {
            for (name, _) in FILES {
                let _ = std::fs::remove_file(dir.join(name));
            }
            let _ = std::fs::remove_dir_all(dir.join("__pycache__"));
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_folder_goes_first_and_empty_entries_never_appear() {
        let d = Path::new("/tmp/boot");
        assert_eq!(python_path(d, None), OsString::from("/tmp/boot"));
        assert_eq!(
            python_path(d, Some(OsString::new())),
            OsString::from("/tmp/boot")
        );
        assert_eq!(
            python_path(d, Some(OsString::from("/a:/b"))),
            OsString::from("/tmp/boot:/a:/b")
        );
    }

    #[test]
    fn the_folder_is_private_new_and_removed() {
        let parent = std::env::temp_dir().join(format!("vl-boot-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&parent);
        std::fs::create_dir_all(&parent).unwrap();
        // A name already taken (by anyone) is skipped, never reused.
        std::fs::create_dir(parent.join("vramledger-python-r1-0")).unwrap();
        let dir = create(&parent, "r1").unwrap();
        assert_eq!(dir, parent.join("vramledger-python-r1-1"));
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        for (name, text) in FILES {
            let p = dir.join(name);
            assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{name}");
        }
        drop(BootDir {
            path: Some(dir.clone()),
        });
        assert!(!dir.exists());
        std::fs::remove_dir_all(&parent).unwrap();
    }
}
