//! What `vramledger diff` and `vramledger check` compare: a run folder, one journal, or a
//! report written by `vramledger report --json`, all read into the same figures.
//!
//! The kind of a file is found from its content, not its name: a JSON object whose `schema`
//! is `vramledger.report/1` is a report; a JSON object with another schema is refused by
//! name; anything else goes to the journal reader (which says when it is not a journal).
//! Journals are replayed into the books and rendered as the report JSON, so both kinds of
//! input pass through one parser of the documented schema (docs/report-schema.md).

use std::path::Path;

use serde_json::Value;
use vramledger_format::Owner;

use crate::ledger::{self, REPORT_OWNERS};
use crate::output::report_json::SCHEMA;
use crate::{infile, run_replay};

/// Bytes per report owner, in [`REPORT_OWNERS`] order.
pub type Owners = [i64; 7];

/// The index of `owner` in [`REPORT_OWNERS`].
pub fn owner_index(owner: Owner) -> Option<usize> {
    REPORT_OWNERS.iter().position(|&o| o == owner)
}

/// One stage row of one device.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stage {
    pub name: String,
    pub start_t_ns: u64,
    pub end_t_ns: u64,
    pub device_delta: i64,
    pub by_owner: Owners,
}

impl Stage {
    /// How long the stage ran; unknown when its start was not recorded.
    pub fn duration_ns(&self) -> Option<i64> {
        (self.start_t_ns > 0 && self.end_t_ns >= self.start_t_ns)
            .then(|| (self.end_t_ns - self.start_t_ns) as i64)
    }
}

/// A peak: bytes and the stage it happened in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeakFig {
    pub bytes: i64,
    pub stage: String,
}

/// One module's memory on a device.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Module {
    pub module: String,
    pub owner: String,
    pub live: i64,
    pub peak: i64,
}

/// One device of one process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Device {
    pub device: i64,
    pub stages: Vec<Stage>,
    /// Bytes held at the end per owner (`unattributed` is 0).
    pub live: Owners,
    pub peak_total: PeakFig,
    /// Peaks per owner index (owners never seen are absent).
    pub peak_by_owner: Vec<(usize, PeakFig)>,
    pub start_free: Option<i64>,
    pub end_free: Option<i64>,
    pub balanced: bool,
    pub modules: Vec<Module>,
}

impl Device {
    /// Σ live bytes over the owners.
    pub fn live_total(&self) -> i64 {
        self.live.iter().fold(0i64, |a, &v| a.saturating_add(v))
    }
    /// The peak of owner index `o` (0 when it never held anything).
    pub fn peak_of(&self, o: usize) -> Option<&PeakFig> {
        self.peak_by_owner
            .iter()
            .find(|(i, _)| *i == o)
            .map(|(_, p)| p)
    }
}

/// One process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Process {
    pub host: String,
    pub pid: u64,
    pub rank: Option<u64>,
    pub cmdline: String,
    pub devices: Vec<Device>,
}

/// A whole run as figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    pub processes: Vec<Process>,
}

/// A loaded input: the figures, where they came from, and what could not be read.
#[derive(Debug, Clone)]
pub struct Input {
    /// The path as given.
    pub source: String,
    /// `report` or `journals`.
    pub kind: &'static str,
    pub run: Run,
    /// Problems worth a warning (the figures are still usable).
    pub warnings: Vec<String>,
    /// Some journal was corrupt or cut off: the figures cover what could be read.
    pub damaged: bool,
}

fn field<'a>(v: &'a Value, key: &str, what: &str) -> Result<&'a Value, String> {
    v.get(key)
        .ok_or_else(|| format!("{what} has no \"{key}\" field"))
}

fn int(v: &Value, key: &str) -> i64 {
    v.get(key).and_then(Value::as_i64).unwrap_or(0)
}

fn owners(v: Option<&Value>) -> Owners {
    let mut out = [0i64; 7];
    if let Some(m) = v {
        for (i, o) in REPORT_OWNERS.iter().enumerate() {
            out[i] = m.get(o.name()).and_then(Value::as_i64).unwrap_or(0);
        }
    }
    out
}

fn peak(v: Option<&Value>) -> PeakFig {
    v.map(|p| PeakFig {
        bytes: int(p, "bytes"),
        stage: p
            .get("stage")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    })
    .unwrap_or_default()
}

fn array<'a>(v: &'a Value, key: &str, what: &str) -> Result<&'a Vec<Value>, String> {
    field(v, key, what)?
        .as_array()
        .ok_or_else(|| format!("{what}: \"{key}\" is not an array"))
}

fn device(v: &Value, what: &str) -> Result<Device, String> {
    let ordinal = field(v, "device", what)?
        .as_i64()
        .ok_or_else(|| format!("{what}: \"device\" is not an integer"))?;
    let what = format!("{what} device {ordinal}");
    let mut stages = Vec::new();
    for (i, s) in array(v, "stages", &what)?.iter().enumerate() {
        let sw = format!("{what} stage #{}", i + 1);
        stages.push(Stage {
            name: field(s, "name", &sw)?
                .as_str()
                .ok_or_else(|| format!("{sw}: \"name\" is not a string"))?
                .to_string(),
            start_t_ns: s.get("start_t_ns").and_then(Value::as_u64).unwrap_or(0),
            end_t_ns: s.get("end_t_ns").and_then(Value::as_u64).unwrap_or(0),
            device_delta: int(s, "device_delta_bytes"),
            by_owner: owners(Some(field(s, "by_owner", &sw)?)),
        });
    }
    let mut peak_by_owner = Vec::new();
    if let Some(m) = v.pointer("/peak/by_owner").and_then(Value::as_object) {
        for (name, p) in m {
            if let Some(i) = Owner::from_name(name).and_then(owner_index) {
                peak_by_owner.push((i, peak(Some(p))));
            }
        }
        peak_by_owner.sort_by_key(|(i, _)| *i);
    }
    let modules = v
        .get("modules")
        .and_then(Value::as_array)
        .map(|ms| {
            ms.iter()
                .map(|m| Module {
                    module: m
                        .get("module")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    owner: m
                        .get("owner")
                        .and_then(Value::as_str)
                        .unwrap_or("-")
                        .to_string(),
                    live: int(m, "live_bytes"),
                    peak: int(m, "peak_bytes"),
                })
                .collect()
        })
        .unwrap_or_default();
    let mut live = owners(v.pointer("/live_at_end/by_owner"));
    live[6] = 0;
    Ok(Device {
        device: ordinal,
        stages,
        live,
        peak_total: peak(v.pointer("/peak/total")),
        peak_by_owner,
        start_free: v
            .pointer("/reconciliation/start_free_bytes")
            .and_then(Value::as_i64),
        end_free: v
            .pointer("/reconciliation/end_free_bytes")
            .and_then(Value::as_i64),
        balanced: v
            .pointer("/reconciliation/balanced")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        modules,
    })
}

/// Reads the figures out of a report (schema `vramledger.report/1`).
pub fn from_report_json(v: &Value) -> Result<Run, String> {
    let mut processes = Vec::new();
    for (i, p) in array(v, "processes", "the report")?.iter().enumerate() {
        let what = format!("process #{}", i + 1);
        let mut devices = Vec::new();
        for d in array(p, "devices", &what)? {
            devices.push(device(d, &what)?);
        }
        processes.push(Process {
            host: p
                .get("host")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            pid: p.get("pid").and_then(Value::as_u64).unwrap_or(0),
            rank: p.get("rank").and_then(Value::as_u64),
            cmdline: p
                .get("cmdline")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            devices,
        });
    }
    Ok(Run { processes })
}

/// A report file larger than this is refused (reports are kilobytes; the parsed tree takes
/// several times the text).
pub const MAX_REPORT_JSON_BYTES: usize = 256 << 20;
/// The largest byte figure a report may carry, either sign (1 EiB: no device comes close).
pub const MAX_FIGURE_BYTES: u64 = 1 << 60;
/// The largest timestamp (ns) a report may carry.
pub const MAX_T_NS: u64 = 1 << 62;
/// The most processes, devices per process, and stages or modules per device a report may list.
pub const MAX_PROCESSES: usize = 1 << 14;
pub const MAX_ENTRIES: usize = 1 << 16;

/// Checks that every figure of a report file is a whole number in its range and that no
/// list is absurdly long, before anything is computed from it: a figure out of range is an
/// error naming it, never a silent 0 or a wrapped sum.
pub fn check_report_json(v: &Value) -> Result<(), String> {
    /// A figure: absent, or (where `nullable`: a report writes null for what it does not
    /// know) null, or a whole number in `[lo, hi]`.
    fn figure(
        v: &Value,
        key: &str,
        what: &str,
        (lo, hi): (i128, i128),
        nullable: bool,
    ) -> Result<(), String> {
        match v.get(key) {
            None => Ok(()),
            Some(Value::Null) if nullable => Ok(()),
            Some(x) => {
                let n = x.as_i64().map(i128::from).or(x.as_u64().map(i128::from));
                match n {
                    Some(n) if (lo..=hi).contains(&n) => Ok(()),
                    _ => Err(format!(
                        "{what}: \"{key}\" is {x}, not a whole number in [{lo}, {hi}]"
                    )),
                }
            }
        }
    }
    fn num(v: &Value, key: &str, what: &str, lo: i128, hi: i128) -> Result<(), String> {
        figure(v, key, what, (lo, hi), true)
    }
    fn list<'a>(v: &'a Value, key: &str, what: &str, max: usize) -> Result<&'a [Value], String> {
        match v.get(key) {
            None => Ok(&[]),
            Some(Value::Array(a)) if a.len() > max => Err(format!(
                "{what}: \"{key}\" lists {} entries, more than the {max} a report may have",
                a.len()
            )),
            Some(Value::Array(a)) => Ok(a),
            Some(x) => Err(format!("{what}: \"{key}\" is {}, not a list", kind(x))),
        }
    }
    /// The object at `key`, when there is one (anything else there is an error).
    fn object<'a>(v: &'a Value, key: &str, what: &str) -> Result<Option<&'a Value>, String> {
        match v.get(key) {
            None => Ok(None),
            Some(o @ Value::Object(_)) => Ok(Some(o)),
            Some(x) => Err(format!("{what}: \"{key}\" is {}, not an object", kind(x))),
        }
    }
    fn kind(x: &Value) -> &'static str {
        match x {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "a list",
            Value::Object(_) => "an object",
        }
    }
    let range = (-(MAX_FIGURE_BYTES as i128), MAX_FIGURE_BYTES as i128);
    let bytes = |v: &Value, key: &str, what: &str| figure(v, key, what, range, false);
    // Free memory and peaks (they start at 0 and only rise) are never below 0 in a report;
    // net bytes of a stage, and live bytes, are sums of signed moves.
    let unsigned = |v: &Value, key: &str, what: &str| {
        figure(v, key, what, (0, MAX_FIGURE_BYTES as i128), false)
    };
    let free = |v: &Value, key: &str, what: &str| num(v, key, what, 0, MAX_FIGURE_BYTES as i128);
    // Bytes per owner: every value a figure (never null: each owner's bytes are known).
    let by_owner = |m: Option<&Value>, what: &str| -> Result<(), String> {
        let Some(m) = m else { return Ok(()) };
        m.as_object()
            .into_iter()
            .flat_map(|o| o.keys())
            .try_for_each(|k| bytes(m, k, what))
    };
    for (i, p) in list(v, "processes", "the report", MAX_PROCESSES)?
        .iter()
        .enumerate()
    {
        let what = format!("process #{}", i + 1);
        num(p, "pid", &what, 0, u32::MAX as i128)?;
        num(p, "rank", &what, 0, u32::MAX as i128)?;
        for d in list(p, "devices", &what, crate::journal::MAX_DEVICE as usize + 2)? {
            num(d, "device", &what, -1, crate::journal::MAX_DEVICE as i128)?;
            let what = format!("{what} device {}", d.get("device").unwrap_or(&Value::Null));
            for (k, s) in list(d, "stages", &what, MAX_ENTRIES)?.iter().enumerate() {
                let sw = format!("{what} stage #{}", k + 1);
                num(s, "start_t_ns", &sw, 0, MAX_T_NS as i128)?;
                num(s, "end_t_ns", &sw, 0, MAX_T_NS as i128)?;
                free(s, "start_free_bytes", &sw)?;
                free(s, "end_free_bytes", &sw)?;
                bytes(s, "device_delta_bytes", &sw)?;
                by_owner(object(s, "by_owner", &sw)?, &sw)?;
            }
            for m in list(d, "modules", &what, MAX_ENTRIES)? {
                bytes(m, "live_bytes", &what)?;
                unsigned(m, "peak_bytes", &what)?;
            }
            if let Some(live) = object(d, "live_at_end", &what)? {
                by_owner(object(live, "by_owner", &what)?, &what)?;
            }
            if let Some(peak) = object(d, "peak", &what)? {
                let pw = format!("{what} peak");
                if let Some(t) = object(peak, "total", &pw)? {
                    unsigned(t, "bytes", &what)?;
                }
                if let Some(m) = object(peak, "by_owner", &pw)? {
                    for owner in m.as_object().into_iter().flat_map(|o| o.keys()) {
                        if let Some(p) = object(m, owner, &pw)? {
                            unsigned(p, "bytes", &format!("{pw} of {owner}"))?;
                        }
                    }
                }
            }
            if let Some(r) = object(d, "reconciliation", &what)? {
                free(r, "start_free_bytes", &what)?;
                free(r, "end_free_bytes", &what)?;
            }
        }
    }
    Ok(())
}

/// What a file is, from its first bytes and, for JSON, its schema.
fn read_json_report(path: &Path, bytes: &[u8]) -> Option<Result<Run, String>> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace())?;
    if *first != b'{' {
        return None;
    }
    let p = path.display();
    if bytes.len() > MAX_REPORT_JSON_BYTES {
        return Some(Err(format!(
            "{p} is {} bytes of JSON: larger than any vramledger report ({MAX_REPORT_JSON_BYTES} bytes at most)",
            bytes.len()
        )));
    }
    let v: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            return Some(Err(format!(
                "{p} is neither a vramledger report nor a journal: it starts like JSON but does not parse ({e})"
            )))
        }
    };
    Some(match v.get("schema") {
        Some(Value::String(s)) if s == SCHEMA => check_report_json(&v)
            .and_then(|_| from_report_json(&v))
            .map_err(|e| format!("{p}: the report is malformed: {e}")),
        Some(Value::String(s)) => Err(format!("{p} is a {s} file, not a vramledger report")),
        _ => Err(format!(
            "{p} is a JSON file without a \"schema\" field, not a vramledger report (write one with `vramledger report --json`)"
        )),
    })
}

/// The figures of a run's books.
fn from_books(books: &ledger::RunBooks) -> Result<Run, String> {
    let v = crate::output::report_json::render(books);
    from_report_json(&v)
}

/// Reads one file: a report, else a journal. Anything else is one message.
fn load_file(path: &Path, source: String) -> Result<Input, String> {
    // A journal of format 2 is read a part at a time, never held whole.
    let (file, _) = infile::open(path, infile::Kind::JournalOrReport)?;
    if let Some(s) = run_replay::Stream::open_format2(path, file) {
        return from_stream(source, &s);
    }
    let bytes = infile::read(path, infile::Kind::JournalOrReport)?;
    from_owned_bytes(path, source, bytes)
}

/// The bytes of one file read as a report, else a journal (`path` names it in messages).
pub fn from_bytes(path: &Path, source: String, bytes: &[u8]) -> Result<Input, String> {
    from_owned_bytes(path, source, bytes.to_vec())
}

/// [`from_bytes`], the bytes given: a journal is replayed as it is decoded.
fn from_owned_bytes(path: &Path, source: String, bytes: Vec<u8>) -> Result<Input, String> {
    if let Some(report) = read_json_report(path, &bytes) {
        return Ok(Input {
            source,
            kind: "report",
            run: report?,
            warnings: Vec::new(),
            damaged: false,
        });
    }
    if bytes.len() < vramledger_format::PREAMBLE_LEN {
        return Err(format!(
            "{} is neither a vramledger report nor a journal: it is {} bytes long{}",
            path.display(),
            bytes.len(),
            if bytes.is_empty() {
                " (an empty file)"
            } else {
                ""
            }
        ));
    }
    let s = run_replay::Stream::from_bytes(path, bytes).map_err(|e| e.to_string())?;
    from_stream(source, &s)
}

/// A journal's books as an input.
fn from_stream(source: String, s: &run_replay::Stream) -> Result<Input, String> {
    let (books, _) = run_replay::replay_stream(s, None);
    let j = s.meta();
    let books = ledger::build_processes(vec![books], j.warnings.clone());
    Ok(Input {
        source,
        kind: "journals",
        run: from_books(&books)?,
        damaged: j.corrupt,
        warnings: j.warnings.clone(),
    })
}

/// Loads a run folder, a journal or a report JSON file. An error is one message for humans.
/// A folder is read under the journal policy ([`crate::journal::load`]'s, replayed by [`run_replay::books`]): unreadable or damaged
/// journals are warnings and mark the input damaged (the verb exits 2 after its output).
pub fn load(path: &Path) -> Result<Input, String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let source = path.display().to_string();
    if !meta.is_dir() {
        return load_file(path, source);
    }
    let hint = "(give a run folder, a journal, or a report from `vramledger report --json`)";
    let read =
        run_replay::books(path, run_replay::Want::default()).map_err(|e| format!("{e} {hint}"))?;
    if read.loaded.journals.is_empty() {
        return Err(format!(
            "no readable journal in {}: {} {hint}",
            path.display(),
            read.loaded.unreadable.join("; ")
        ));
    }
    Ok(Input {
        source,
        kind: "journals",
        run: from_books(&read.books)?,
        warnings: read.loaded.messages().cloned().collect(),
        damaged: read.loaded.damaged(),
    })
}
