//! What `vramledger diff` and `vramledger check` compare: a run folder, one journal, or a
//! report written by `vramledger report --json`, all read into the same figures.
//!
//! The kind of a file is found from its content, not its name: a JSON object whose `schema`
//! is `vramledger.report/1` is a report; a JSON object with another schema is refused by
//! name; anything else goes to the journal reader (which says when it is not a journal).
//! Journals are replayed into the books and rendered as the report JSON, so both kinds of
//! input pass through one parser of the documented schema (docs/report-schema.md).

use std::io::Write;
use std::path::Path;

use serde_json::Value;
use vramledger_format::Owner;

use crate::journal;
use crate::ledger::{self, REPORT_OWNERS};
use crate::output::report_json::SCHEMA;

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

/// What a file is, from its first bytes and, for JSON, its schema.
fn read_json_report(path: &Path, bytes: &[u8]) -> Option<Result<Run, String>> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace())?;
    if *first != b'{' {
        return None;
    }
    let p = path.display();
    let v: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            return Some(Err(format!(
                "{p} is neither a vramledger report nor a journal: it starts like JSON but does not parse ({e})"
            )))
        }
    };
    Some(match v.get("schema") {
        Some(Value::String(s)) if s == SCHEMA => {
            from_report_json(&v).map_err(|e| format!("{p}: the report is malformed: {e}"))
        }
        Some(Value::String(s)) => Err(format!("{p} is a {s} file, not a vramledger report")),
        _ => Err(format!(
            "{p} is a JSON file without a \"schema\" field, not a vramledger report (write one with `vramledger report --json`)"
        )),
    })
}

/// Replays journals into the figures.
fn from_journals(journals: &[journal::Journal]) -> Result<Run, String> {
    let books = ledger::build(journals);
    let v = crate::output::report_json::render(&books);
    from_report_json(&v)
}

/// Loads a run folder, a journal or a report JSON file. An error is one message for humans.
pub fn load(path: &Path) -> Result<Input, String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let source = path.display().to_string();
    let mut journals = Vec::new();
    if meta.is_file() {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if let Some(report) = read_json_report(path, &bytes) {
            return Ok(Input {
                source,
                kind: "report",
                run: report?,
                warnings: Vec::new(),
                damaged: false,
            });
        }
        journals.push(journal::parse(path, &bytes).map_err(|e| e.to_string())?);
    } else {
        for f in journal::find(path).map_err(|e| e.to_string())? {
            journals.push(journal::read(&f).map_err(|e| e.to_string())?);
        }
        if journals.is_empty() {
            return Err(format!(
                "no journals (*.vlj) found in {} (give a run folder, a journal, or a report from `vramledger report --json`)",
                path.display()
            ));
        }
    }
    let warnings = journals
        .iter()
        .flat_map(|j| j.warnings.iter().cloned())
        .collect();
    let damaged = journals.iter().any(|j| j.corrupt);
    Ok(Input {
        source,
        kind: "journals",
        run: from_journals(&journals)?,
        warnings,
        damaged,
    })
}

/// Writes to stdout; a closed pipe is not an error. Returns the exit code.
pub(crate) fn emit(text: &str) -> i32 {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("vramledger: cannot write output: {e}");
            crate::cli::EXIT_BAD_INPUT
        }
        _ => 0,
    }
}
