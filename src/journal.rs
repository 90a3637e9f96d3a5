//! Reading journals: strict at the head, forgiving at the tail, one policy for every verb
//! (written down in docs/journal.md, "Damaged journals").
//!
//! A file that is not a journal (not a regular file, shorter than the 16-byte preamble, no
//! magic), or a journal of a newer format, is an error that says which. Inside a journal, a
//! record that was in flight when the process was killed (a zero head word followed by
//! committed records) is skipped with a warning and is not damage: `kill -9` loses at most
//! the records in flight. A torn or corrupt record, a file cut in the middle of a record, or
//! a journal without its header record is damage ([`Journal::corrupt`]): reading resumes at
//! the next committed record and what can be read is returned, but every verb exits 2.
//! [`load`] applies this to a run folder for every verb. Format 2 (the shim's today,
//! [`blocks`]) checks one CRC per 64 KiB block: a block whose seal does not match is skipped
//! whole (damage); format 1 (older journals) checks one per record.

pub(crate) mod blocks;
mod find;
mod secrets;

pub use blocks::BlockViews;
pub use find::{find, find_all, once_per_process, Found, HasWarnings};
pub mod follow;
mod follow_blocks;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use vramledger_format::frame::{
    decode_frame, frame_len, FrameError, FRAME_MAGIC, MAX_PAYLOAD, PADDING_KIND,
};
use vramledger_format::{
    check_preamble, Event, Header, Kind, PreambleCheck, FORMAT_VERSION, PREAMBLE_LEN,
};

/// One process's journal, decoded.
#[derive(Debug, Clone, Default)]
pub struct Journal {
    /// Where it was read from.
    pub path: PathBuf,
    /// Process facts.
    pub header: Header,
    /// Every record but the header, in file order.
    pub events: Vec<Event>,
    /// Module id → path.
    pub modules: BTreeMap<u32, String>,
    /// Stage id → name.
    pub stage_names: BTreeMap<u32, String>,
    /// What could not be read, for humans.
    pub warnings: Vec<String>,
    /// Part of the file is corrupt or cut off mid-record (a record merely lost in flight at a
    /// kill is not corruption).
    pub corrupt: bool,
}

/// Why a journal could not be read at all.
#[derive(Debug)]
pub enum ReadError {
    /// The file could not be opened or read.
    Io(PathBuf, std::io::Error),
    /// The file is not a vramledger journal.
    NotAJournal(PathBuf),
    /// The journal was written by a newer format.
    NewerVersion(PathBuf, u32),
    /// Shorter than the preamble: not a journal (an empty file, or one cut at its start).
    TooShort(PathBuf, usize),
    /// Not a regular file, too large, unreadable: the message says which.
    Input(String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io(p, e) => write!(f, "cannot read {}: {e}", p.display()),
            ReadError::NotAJournal(p) => write!(
                f,
                "{} is not a vramledger journal (it does not start with the journal magic)",
                p.display()
            ),
            ReadError::NewerVersion(p, v) => write!(
                f,
                "{} was written by a newer vramledger (journal format {v}; this reader knows format {FORMAT_VERSION}); upgrade the vramledger CLI",
                p.display()
            ),
            ReadError::TooShort(p, n) => write!(
                f,
                "{} is not a vramledger journal: it is {n} bytes long, shorter than the {PREAMBLE_LEN}-byte journal preamble{}",
                p.display(),
                if *n == 0 { " (an empty file)" } else { "" }
            ),
            ReadError::Input(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for ReadError {}

impl Journal {
    /// The module file name of id `id` (empty when unknown).
    pub fn module_name(&self, id: u32) -> &str {
        self.modules
            .get(&id)
            .map(|p| p.rsplit('/').next().unwrap_or(p))
            .unwrap_or("")
    }

    /// The name of stage `id`.
    pub fn stage_name(&self, id: u32) -> &str {
        self.stage_names
            .get(&id)
            .map(String::as_str)
            .unwrap_or(if id == 0 { "startup" } else { "?" })
    }

    /// The process id from the header.
    pub fn pid(&self) -> Option<u32> {
        self.header.get("pid")?.parse().ok()
    }

    /// How the driver named CUDA device `device` (its `device` record, written once per
    /// device the process used), if the journal holds it.
    pub fn device_identity(&self, device: i32) -> Option<DeviceIdentity> {
        let e = self
            .events
            .iter()
            .find(|e| e.kind() == Some(Kind::Device) && e.device == device)?;
        let field = |key: &str| {
            e.text
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(str::to_string)
                .filter(|v| !v.is_empty())
        };
        Some(DeviceIdentity {
            uuid: field("uuid="),
            pci_bus_id: field("pci_bus_id="),
        })
    }

    /// The engine's own log lines the journal keeps, in file order: the line of each stage
    /// record the tap wrote, and each engine line that carries sizing numbers without
    /// changing the stage (vLLM's `GPU KV cache size`, `Maximum concurrency`, the
    /// `--kv-cache-memory=` summary).
    pub fn engine_lines(&self) -> impl Iterator<Item = &str> {
        self.events.iter().filter_map(|e| match e.kind() {
            Some(Kind::Stage) => e.text.split_once('\n').map(|(_, l)| l),
            Some(Kind::Warning) if e.api == vramledger_format::Api::VramledgerEngineLine as u16 => {
                Some(e.text.as_str())
            }
            _ => None,
        })
    }
}

/// A device as the driver names it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceIdentity {
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as `nvidia-smi -L` prints it.
    pub uuid: Option<String>,
    /// `0000:19:00.0`, as NVML and `nvidia-smi` spell it.
    pub pci_bus_id: Option<String>,
}

/// Reads a journal file.
pub fn read(path: &Path) -> Result<Journal, ReadError> {
    parse(path, &read_bytes(path)?)
}

/// The bytes of a journal file, read under the input rules (a regular file, within the
/// journal size limit).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, ReadError> {
    crate::infile::read(path, crate::infile::Kind::Journal).map_err(ReadError::Input)
}

/// The chunk size of the shim's writer (4 MiB).
const OLD_WRITER_CHUNK: usize = 4 << 20;

/// Decodes journal bytes.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Journal, ReadError> {
    // Most records are 104 bytes on disk in format 1, 24 in format 2: reserve once instead
    // of growing.
    let per = match check_preamble(bytes) {
        PreambleCheck::Ok(1) => 104,
        _ => 28,
    };
    let mut events = Vec::with_capacity(bytes.len() / per);
    let mut j = parse_each(path, bytes, &mut |e: &mut Event| {
        events.push(std::mem::take(e));
        ControlFlow::Continue(())
    })?;
    j.events = events;
    Ok(j)
}

/// Where a walk of journal bytes hands its records: every event whole, or first, for a compact
/// record (format 2) whose kind and time may say all a walk needs, just those.
pub trait Each {
    /// A compact record of kind `kind` at `t_ns` (never a module or stage record, nor one
    /// naming an implausible device): `None` when its event is wanted whole (then
    /// [`Each::event`] gets it); else this took it, and no event is made.
    #[inline]
    fn brief(&mut self, _kind: u16, _t_ns: u64) -> Option<ControlFlow<()>> {
        None
    }
    /// A record's event. Breaking ends the walk.
    fn event(&mut self, e: &mut Event) -> ControlFlow<()>;
}

impl<F: FnMut(&mut Event) -> ControlFlow<()> + ?Sized> Each for F {
    #[inline]
    fn event(&mut self, e: &mut Event) -> ControlFlow<()> {
        self(e)
    }
}

/// Decodes journal bytes, handing each event to `each` in file order instead of keeping it
/// (the same events [`parse`] keeps, under the same policy); stops where `each` breaks. The
/// journal returned holds the header, modules, stage names, warnings and damage, no events.
pub fn parse_each<F: Each + ?Sized>(
    path: &Path,
    bytes: &[u8],
    each: &mut F,
) -> Result<Journal, ReadError> {
    parse_each_in(path, bytes, &BlockViews::default(), each)
}

/// [`parse_each`] of bytes walked before: `views` keeps their blocks' seals as checked by
/// the first walk through them all (the same bytes, always).
pub fn parse_each_in<F: Each + ?Sized>(
    path: &Path,
    bytes: &[u8],
    views: &BlockViews,
    each: &mut F,
) -> Result<Journal, ReadError> {
    let mut j = Journal {
        path: path.to_path_buf(),
        ..Journal::default()
    };
    match check_preamble(bytes) {
        PreambleCheck::Ok(1) => {}
        PreambleCheck::Ok(_) => {
            blocks::parse(path, bytes, views, &mut j, each);
            return Ok(j);
        }
        // Version 0 was never written: a damaged preamble, not a newer format.
        PreambleCheck::NotAJournal | PreambleCheck::NewerVersion(0) => {
            return Err(ReadError::NotAJournal(path.to_path_buf()))
        }
        PreambleCheck::NewerVersion(v) => {
            return Err(ReadError::NewerVersion(path.to_path_buf(), v))
        }
        PreambleCheck::Truncated => {
            return Err(ReadError::TooShort(path.to_path_buf(), bytes.len()))
        }
    }
    let mut at = PREAMBLE_LEN;
    let mut header_seen = false;
    // Earlier writers padded only up to a 4 MiB chunk boundary and left the tail of the
    // straddling reservation as zeros: those zeros right after such a padding are no loss.
    let mut padded_to_chunk = false;
    while at + 8 <= bytes.len() {
        match decode_frame(&bytes[at..]) {
            Ok((PADDING_KIND, _, used)) => {
                at += used;
                padded_to_chunk = at.is_multiple_of(OLD_WRITER_CHUNK);
            }
            Ok((kind, payload, used)) => {
                at += used;
                padded_to_chunk = false;
                if kind == Kind::Header as u16 {
                    match Header::decode(payload) {
                        Some(h) if !header_seen => {
                            j.header = secrets::header(h);
                            header_seen = true;
                        }
                        Some(_) => j.warnings.push(format!(
                            "{}: a second header at offset {} was ignored",
                            path.display(),
                            at - used
                        )),
                        None => j.warnings.push(format!(
                            "{}: the header record is malformed",
                            path.display()
                        )),
                    }
                    continue;
                }
                match Event::decode(kind, payload) {
                    Some(mut e) => {
                        j.admit(&mut e);
                        if each.event(&mut e).is_break() {
                            return Ok(j);
                        }
                    }
                    None => j.warnings.push(format!(
                        "{}: record at offset {} is too short for its kind",
                        path.display(),
                        at - used
                    )),
                }
            }
            Err(err) => {
                let after_padding = std::mem::take(&mut padded_to_chunk);
                if err != FrameError::Empty {
                    j.corrupt = true;
                }
                let next = resync(bytes, at + 8);
                if let (true, FrameError::Empty, Some(n)) = (after_padding, err, next) {
                    if n - at < frame_len(MAX_PAYLOAD) {
                        at = n;
                        continue;
                    }
                }
                let Some(next) = next else {
                    let rest = bytes.get(at..).unwrap_or_default();
                    if err == FrameError::Empty && rest.iter().any(|&b| b != 0) {
                        // Written but for its head word (stored last), and nothing after it:
                        // the last record was in flight, as one before others would be.
                        j.warnings.push(format!(
                            "{}: a record in flight when the process stopped was lost at offset {at}",
                            path.display()
                        ));
                    } else if err != FrameError::Empty && err != FrameError::Truncated {
                        j.warnings.push(format!(
                            "{}: a corrupt record at offset {at} ends the readable part",
                            path.display()
                        ));
                    } else if err == FrameError::Truncated {
                        j.warnings.push(cut_off(path, at));
                    }
                    break;
                };
                j.warnings.push(match err {
                    FrameError::Empty => format!(
                        "{}: a record in flight when the process stopped was lost at offset {at}",
                        path.display()
                    ),
                    _ => format!(
                        "{}: a corrupt record at offset {at} was skipped",
                        path.display()
                    ),
                });
                at = next;
            }
        }
    }
    if cut_in_head(bytes, at) {
        j.corrupt = true;
        j.warnings.push(cut_off(path, at));
    }
    if !header_seen {
        j.corrupt = true;
        j.warnings.push(format!(
            "{}: the journal has no header record",
            path.display()
        ));
    }
    Ok(j)
}

/// Whether `bytes[at..]`, where a walk of format-1 frames stopped, is a record cut inside its
/// head: frames start 8-byte aligned and are longer than that, so a shorter tail that is not
/// zeros is one.
pub(crate) fn cut_in_head(bytes: &[u8], at: usize) -> bool {
    let tail = bytes.get(at..).unwrap_or_default();
    tail.len() < 8 && tail.iter().any(|&b| b != 0)
}

/// The warning for a record of `path` cut off at offset `at`.
pub(crate) fn cut_off(path: &Path, at: usize) -> String {
    format!(
        "{}: the last record is cut off at offset {at} (the file was truncated, or copied while it was written)",
        path.display()
    )
}

/// The offset of the next frame that decodes, at or after `from` (8-byte aligned).
fn resync(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from.next_multiple_of(8);
    while at + 8 <= bytes.len() {
        let head = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        if head >> 16 == FRAME_MAGIC && decode_frame(&bytes[at..]).is_ok() {
            return Some(at);
        }
        at += 8;
    }
    None
}

/// The largest device ordinal a journal may name; anything else is damage (or a driver
/// argument vramledger recorded as given) and is read as "unknown" (-1).
pub const MAX_DEVICE: i32 = 4095;

impl Journal {
    pub(crate) fn take(&mut self, mut e: Event) {
        self.admit(&mut e);
        self.events.push(e);
    }

    /// An event as this reader keeps it: an implausible device read as unknown; module and
    /// stage names noted.
    #[inline]
    pub(crate) fn admit(&mut self, e: &mut Event) {
        if !(-1..=MAX_DEVICE).contains(&e.device) {
            self.implausible_device(e);
        }
        if !e.text.is_empty() {
            secrets::text(e);
        }
        // Most records are neither: compare the raw tag before decoding the kind.
        if e.kind == Kind::Module as u16 || e.kind == Kind::Stage as u16 {
            self.note_name(e);
        }
    }

    #[cold]
    fn implausible_device(&mut self, e: &mut Event) {
        if !self
            .warnings
            .iter()
            .any(|w| w.contains("implausible device"))
        {
            self.warnings.push(format!(
                "{}: a record names an implausible device ordinal {}; read as unknown",
                self.path.display(),
                e.device
            ));
        }
        e.device = -1;
    }

    /// A module or stage record's name.
    fn note_name(&mut self, e: &Event) {
        match e.kind() {
            Some(Kind::Module) => {
                self.modules.insert(e.module, e.text.clone());
            }
            Some(Kind::Stage) => {
                let name = e.text.lines().next().unwrap_or("").to_string();
                self.stage_names.insert(e.stage, name);
            }
            _ => {}
        }
    }
}

/// A run read under the one policy: the journals that could be read, and the files that
/// could not (each a message naming the file and why).
#[derive(Debug, Default)]
pub struct Loaded {
    pub journals: Vec<Journal>,
    pub unreadable: Vec<String>,
}

impl Loaded {
    /// Some input was unreadable or damaged: the verb exits 2 (a record merely lost in
    /// flight at a kill is not damage).
    pub fn damaged(&self) -> bool {
        !self.unreadable.is_empty() || self.journals.iter().any(|j| j.corrupt)
    }

    /// The warnings of every journal, then the unreadable files, for stderr.
    pub fn messages(&self) -> impl Iterator<Item = &String> {
        self.journals
            .iter()
            .flat_map(|j| &j.warnings)
            .chain(&self.unreadable)
    }
}

/// Reads a run folder or one journal. An error only when nothing can be read at all (the
/// path is missing, or holds no journal); unreadable files are listed in [`Loaded`].
pub fn load(path: &Path) -> Result<Loaded, String> {
    let found = find_all(path).map_err(|e| e.to_string())?;
    let mut loaded = Loaded {
        unreadable: found.unreadable,
        ..Loaded::default()
    };
    for f in found.files {
        match read(&f) {
            Ok(j) => loaded.journals.push(j),
            Err(e) => loaded.unreadable.push(e.to_string()),
        }
    }
    if loaded.journals.is_empty() && loaded.unreadable.is_empty() {
        return Err(format!("no journals (*.vlj) found in {}", path.display()));
    }
    loaded.journals = find::once_per_process(std::mem::take(&mut loaded.journals), |j| {
        (&j.header, j.events.len())
    });
    Ok(loaded)
}

#[cfg(test)]
mod test_frames;
#[cfg(test)]
mod tests;
