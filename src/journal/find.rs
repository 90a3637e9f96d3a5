//! Which journals a run folder holds: every `*.vlj` under it, each file once, each process
//! once.
//!
//! A folder is walked recursively (journals copied from several hosts sit in sub-folders),
//! following links but never into a loop; a file reached twice (a `latest.vlj` link, a hard
//! link) is listed once, by its own name where one path is not a link. What cannot be looked
//! at (a sub-folder without permission, a path longer than the system takes) is named, never
//! skipped in silence. A process whose journal is there twice (a copy in a backup folder) is
//! read once: [`once_per_process`].

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
    let mut by_file: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    let mut keep: Vec<Option<PathBuf>> = Vec::with_capacity(files.len());
    for p in files {
        let Ok(m) = std::fs::metadata(&p) else {
            keep.push(Some(p)); // reading it says why it cannot be read
            continue;
        };
        let is_link = || std::fs::symlink_metadata(&p).is_ok_and(|l| l.file_type().is_symlink());
        match by_file.get(&(m.dev(), m.ino())) {
            None => {
                by_file.insert((m.dev(), m.ino()), keep.len());
                keep.push(Some(p));
            }
            Some(&i) => {
                let first_is_link = keep[i].as_ref().is_some_and(|f| {
                    std::fs::symlink_metadata(f).is_ok_and(|l| l.file_type().is_symlink())
                });
                if first_is_link && !is_link() {
                    keep[i] = Some(p);
                }
            }
        }
    }
    keep.into_iter().flatten().collect()
}

/// Which process a journal's header says wrote it: host, pid and the time its journal was
/// opened; `None` when the header does not say all three (a damaged or foreign header).
pub fn process_identity(h: &Header) -> Option<(String, String, String)> {
    let get = |k: &str| h.get(k).filter(|v| !v.is_empty()).map(str::to_string);
    Some((get("host")?, get("pid")?, get("start_unix_ns")?))
}

/// `journals` with each process once: of several journals of one process (a copy beside the
/// original), the one with the most records (of those, the one nearest the top of the folder,
/// then the first), with a warning that names the others. `of` gives a journal's header and record count.
pub fn once_per_process<T>(journals: Vec<T>, of: impl Fn(&T) -> (&Header, usize)) -> Vec<T>
where
    T: HasWarnings,
{
    let mut best: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    let mut dropped: Vec<(usize, usize)> = Vec::new();
    for (i, j) in journals.iter().enumerate() {
        let (h, records) = of(j);
        let Some(id) = process_identity(h) else {
            continue;
        };
        match best.get(&id) {
            None => {
                best.insert(id, i);
            }
            Some(&b) => {
                // More records first; of as many, the shallower path (the original, not a
                // copy in a sub-folder); then path order.
                let depth = |t: &T| t.path().components().count();
                let better = (records, std::cmp::Reverse(depth(j)))
                    > (of(&journals[b]).1, std::cmp::Reverse(depth(&journals[b])));
                if better {
                    dropped.push((b, i));
                    best.insert(id, i);
                } else {
                    dropped.push((i, b));
                }
            }
        }
    }
    if dropped.is_empty() {
        return journals;
    }
    let gone: BTreeSet<usize> = dropped.iter().map(|&(d, _)| d).collect();
    let notes: Vec<(usize, String)> = dropped
        .iter()
        .map(|&(d, _)| {
            let id = process_identity(of(&journals[d]).0).unwrap_or_default();
            let kept = best[&id];
            let note = format!(
                "{} and {} are journals of one process (host {}, pid {}, start {}): it is read once, from {}",
                journals[kept].path().display(),
                journals[d].path().display(),
                id.0,
                id.1,
                id.2,
                journals[kept].path().display()
            );
            (kept, note)
        })
        .collect();
    let mut journals: Vec<Option<T>> = journals.into_iter().map(Some).collect();
    for (kept, note) in notes {
        if let Some(j) = journals[kept].as_mut() {
            j.warnings_mut().push(note);
        }
    }
    journals
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !gone.contains(i))
        .filter_map(|(_, j)| j)
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
