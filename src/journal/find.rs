//! Which journals a run folder holds: every `*.vlj` under it, each file once, each process
//! once.
//!
//! A folder is walked recursively (journals copied from several hosts sit in sub-folders),
//! following links but never into a loop; a file reached twice (a `latest.vlj` link, a hard
//! link) is listed once, by its own name where one path is not a link. What cannot be looked
//! at (a sub-folder without permission, a path longer than the system takes) is named, never
//! skipped in silence. A process whose journal is there twice (a copy in a backup folder) is
//! read once: [`once_per_process`].

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use vramledger_format::Header;

use super::{Journal, ReadError};

/// The journal files under a path, and what could not be looked at.
#[derive(Debug, Default)]
pub struct Found {
    /// In path order.
    pub files: Vec<PathBuf>,
    /// One message for each folder or entry that could not be read.
    pub unreadable: Vec<String>,
}

/// The journal files of a run: `path` itself if it is not a folder, else every `*.vlj`
/// entry under it. Entries that are not regular files are listed too: reading them says why
/// they are refused. What could not be looked at is left out here; [`find_all`] names it.
pub fn find(path: &Path) -> Result<Vec<PathBuf>, ReadError> {
    find_all(path).map(|f| f.files)
}

/// [`find`], with a message for each sub-folder or entry that could not be read. An error
/// only when `path` itself cannot be.
pub fn find_all(path: &Path) -> Result<Found, ReadError> {
    let meta = std::fs::metadata(path).map_err(|e| ReadError::Io(path.to_path_buf(), e))?;
    if !meta.is_dir() {
        return Ok(Found {
            files: vec![path.to_path_buf()],
            unreadable: Vec::new(),
        });
    }
    let mut seen = BTreeSet::new();
    seen.insert((meta.dev(), meta.ino()));
    let mut found = Found::default();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if dir == path => return Err(ReadError::Io(dir, e)),
            Err(e) => {
                found.unreadable.push(ReadError::Io(dir, e).to_string());
                continue;
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    found
                        .unreadable
                        .push(ReadError::Io(dir.clone(), e).to_string());
                    continue;
                }
            };
            let p = entry.path();
            let journal_name = p.extension().is_some_and(|x| x == "vlj");
            // Follows links (a linked folder of journals is read), never into a loop.
            match std::fs::metadata(&p) {
                Ok(m) if m.is_dir() => {
                    if seen.insert((m.dev(), m.ino())) {
                        stack.push(p);
                    }
                }
                _ if journal_name => found.files.push(p),
                Ok(_) => {}
                // Gone since it was listed, or a link to nothing: no journal there.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                // It may be a folder of journals: say that it could not be looked at.
                Err(e) => found.unreadable.push(ReadError::Io(p, e).to_string()),
            }
        }
    }
    found.files = once_per_file(found.files);
    Ok(found)
}

/// `files` sorted, each file once: of the paths that reach one file, the first that is not a
/// link (else the first).
fn once_per_file(mut files: Vec<PathBuf>) -> Vec<PathBuf> {
    files.sort();
    let is_link = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|l| l.file_type().is_symlink());
    let mut by_file: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    let mut keep: Vec<PathBuf> = Vec::with_capacity(files.len());
    for p in files {
        // A path that cannot be looked at is kept: reading it says why.
        let Ok(m) = std::fs::metadata(&p) else {
            keep.push(p);
            continue;
        };
        match by_file.get(&(m.dev(), m.ino())) {
            None => {
                by_file.insert((m.dev(), m.ino()), keep.len());
                keep.push(p);
            }
            Some(&i) if is_link(&keep[i]) && !is_link(&p) => keep[i] = p,
            Some(_) => {}
        }
    }
    keep
}

/// Which process a journal's header says wrote it: host, pid and the time its journal was
/// opened; `None` when the header does not say all three (a damaged or foreign header).
fn process_identity(h: &Header) -> Option<(String, String, String)> {
    let get = |k: &str| h.get(k).filter(|v| !v.is_empty()).map(str::to_string);
    Some((get("host")?, get("pid")?, get("start_unix_ns")?))
}

/// `journals` with each process once: of several journals of one process (a copy beside the
/// original), the one with the most records (of those, the one nearest the top of the
/// folder, then the first), with a warning that names the others. `of` gives a journal's
/// header and record count.
pub fn once_per_process<T>(journals: Vec<T>, of: impl Fn(&T) -> (&Header, usize)) -> Vec<T>
where
    T: HasWarnings,
{
    let mut by_process: BTreeMap<(String, String, String), Vec<usize>> = BTreeMap::new();
    for (i, j) in journals.iter().enumerate() {
        if let Some(id) = process_identity(of(j).0) {
            by_process.entry(id).or_default().push(i);
        }
    }
    // More records first; of as many, the shallower path (the original, not a copy in a
    // sub-folder); then path order.
    let rank = |i: usize| {
        let depth = journals[i].path().components().count();
        (of(&journals[i]).1, Reverse(depth), Reverse(i))
    };
    let mut gone = BTreeSet::new();
    let mut notes = Vec::new();
    for ((host, pid, start), group) in by_process.iter().filter(|(_, g)| g.len() > 1) {
        let kept = group
            .iter()
            .copied()
            .max_by_key(|&i| rank(i))
            .unwrap_or(group[0]);
        let kept_path = journals[kept].path().display();
        for &d in group.iter().filter(|&&d| d != kept) {
            gone.insert(d);
            notes.push((
                kept,
                format!(
                    "{kept_path} and {} are journals of one process (host {host}, pid {pid}, start {start}): it is read once, from {kept_path}",
                    journals[d].path().display(),
                ),
            ));
        }
    }
    let mut journals = journals;
    for (kept, note) in notes {
        journals[kept].warnings_mut().push(note);
    }
    journals
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !gone.contains(i))
        .map(|(_, j)| j)
        .collect()
}

/// A journal (or a journal's books) that carries its path and warnings.
pub trait HasWarnings {
    fn path(&self) -> &Path;
    fn warnings_mut(&mut self) -> &mut Vec<String>;
}

impl HasWarnings for Journal {
    fn path(&self) -> &Path {
        &self.path
    }
    fn warnings_mut(&mut self) -> &mut Vec<String> {
        &mut self.warnings
    }
}
