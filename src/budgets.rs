//! Memory budgets for `vramledger check --budgets FILE` (format: docs/budgets.md).
//!
//! ```json
//! {"budgets": [
//!   {"owner": "nccl", "max": "1.5GiB"},
//!   {"stage": "graph_capture", "max": "2GiB"},
//!   {"owner": "torch_graph_pool", "stage": "graph_capture", "max": "512MiB", "device": 0},
//!   {"peak": true, "max": "130GiB"}
//! ]}
//! ```
//!
//! With `stage`, a budget limits what the stage took: its device delta, or the owner's share
//! of it. Without `stage`, it limits the peak (the default, or `"peak": true`), or with
//! `"live": true` what is held at the end — of the owner, or of every hooked owner plus the
//! context. `device` and `rank` narrow it to one device ordinal or one rank; otherwise every
//! process and device is held to it separately. Parsing is strict: an unknown key, owner or
//! size is an error that names the entry.

use serde_json::Value;
use vramledger_format::Owner;

use crate::ledger::REPORT_OWNERS;
use crate::report_input::{owner_index, Run};
use crate::size_arg::parse_size;

/// The largest `max` a budget may give (1 EiB): larger is a typo, and would not survive the
/// signed comparison with a figure.
pub const MAX_BUDGET_BYTES: u64 = crate::report_input::MAX_FIGURE_BYTES;
/// The most budgets a file may hold.
pub const MAX_BUDGETS: usize = 10_000;

/// The keys a budget entry may have.
pub const KEYS: &[&str] = &[
    "owner", "stage", "device", "rank", "peak", "live", "max", "note",
];

/// What a budget limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// What a stage took (device delta, or the owner's part).
    StageDelta,
    /// The highest bytes held.
    Peak,
    /// Bytes held at the end.
    Live,
}

/// One budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// 1-based position in the file.
    pub number: usize,
    /// The entry as written (compact JSON), to name it in messages.
    pub entry: String,
    pub owner: Option<Owner>,
    pub stage: Option<String>,
    pub device: Option<i64>,
    pub rank: Option<u64>,
    pub measure: Measure,
    pub max: u64,
}

impl Budget {
    /// What the budget limits, for humans: `graph_capture delta of torch_graph_pool`.
    pub fn what(&self) -> String {
        let owner = self.owner.map_or("", |o| o.name());
        match (self.measure, &self.stage) {
            (Measure::StageDelta, Some(s)) if self.owner.is_some() => {
                format!("{owner} in stage {s}")
            }
            (Measure::StageDelta, Some(s)) => format!("device delta of stage {s}"),
            (Measure::Peak, _) if self.owner.is_some() => format!("peak of {owner}"),
            (Measure::Peak, _) => "peak (hooked + context)".to_string(),
            (Measure::Live, _) if self.owner.is_some() => format!("{owner} live at end"),
            (_, _) => "live at end (hooked + context)".to_string(),
        }
    }
}

/// A budget that was exceeded on one device.
#[derive(Debug, Clone, PartialEq)]
pub struct Exceeded {
    /// Index into the budgets.
    pub budget: usize,
    /// The process, as `rank 0` or `pid 4242`.
    pub process: String,
    pub device: i64,
    /// `graph_capture`, `graph_capture (2nd)` for a stage budget.
    pub stage: Option<String>,
    pub bytes: i64,
}

/// What the budgets said about a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    pub exceeded: Vec<Exceeded>,
    /// Figures compared against some budget.
    pub checked: usize,
    /// Budgets (indices) that matched no figure (e.g. a stage the run did not have).
    pub unmatched: Vec<usize>,
}

fn entry_error(file: &str, number: usize, entry: &Value, why: impl std::fmt::Display) -> String {
    format!("{file}: budget #{number} {entry}: {why}")
}

fn owner_names() -> String {
    REPORT_OWNERS
        .iter()
        .map(|o| o.name())
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse_entry(file: &str, number: usize, v: &Value) -> Result<Budget, String> {
    let bad = |why: String| entry_error(file, number, v, why);
    let Some(obj) = v.as_object() else {
        return Err(bad("a budget is a JSON object".into()));
    };
    if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(bad(format!(
            "unknown key \"{k}\" (keys: {})",
            KEYS.join(", ")
        )));
    }
    let owner = match obj.get("owner") {
        None => None,
        Some(Value::String(s)) => match Owner::from_name(s).filter(|o| owner_index(*o).is_some()) {
            Some(o) => Some(o),
            None => {
                return Err(bad(format!(
                    "unknown owner \"{s}\" (owners: {})",
                    owner_names()
                )))
            }
        },
        Some(_) => {
            return Err(bad(format!(
                "\"owner\" is a string: one of {}",
                owner_names()
            )))
        }
    };
    let stage = match obj.get("stage") {
        None => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(_) => return Err(bad("\"stage\" is a stage name (a non-empty string)".into())),
    };
    let index = |key: &str| -> Result<Option<u64>, String> {
        match obj.get(key) {
            None => Ok(None),
            Some(x) => x
                .as_u64()
                .map(Some)
                .ok_or_else(|| bad(format!("\"{key}\" is a whole number ≥ 0"))),
        }
    };
    let device = match index("device")? {
        Some(d) if d > crate::journal::MAX_DEVICE as u64 => {
            return Err(bad(format!(
                "\"device\" {d} is not a device ordinal (0 to {})",
                crate::journal::MAX_DEVICE
            )))
        }
        d => d.map(|d| d as i64),
    };
    let rank = match index("rank")? {
        Some(r) if r > u32::MAX as u64 => {
            return Err(bad(format!(
                "\"rank\" {r} is not a rank (0 to {})",
                u32::MAX
            )))
        }
        r => r,
    };
    let flag = |key: &str| -> Result<bool, String> {
        match obj.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(bad(format!("\"{key}\" is true or false"))),
        }
    };
    let (peak, live) = (flag("peak")?, flag("live")?);
    if let Some(n) = obj.get("note") {
        if !n.is_string() {
            return Err(bad("\"note\" is a string".into()));
        }
    }
    let max = match obj.get("max") {
        None => {
            return Err(bad(
                "no \"max\" (a size such as \"512MiB\", or a number of bytes)".into(),
            ))
        }
        Some(Value::String(s)) => parse_size(s).map_err(|e| bad(format!("bad size \"{s}\": {e}")))?,
        Some(Value::Number(n)) => n.as_u64().ok_or_else(|| {
            bad(format!(
                "bad size {n}: a number of bytes is a whole number ≥ 0 (or write a size such as \"512MiB\")"
            ))
        })?,
        Some(other) => {
            return Err(bad(format!(
                "bad size {other}: write a size such as \"512MiB\" or a number of bytes"
            )))
        }
    };
    if max > MAX_BUDGET_BYTES {
        return Err(bad(format!(
            "\"max\" {max} bytes is more than any device holds ({MAX_BUDGET_BYTES} bytes at most)"
        )));
    }
    let measure = match (&stage, peak, live) {
        (_, true, true) => return Err(bad("\"peak\" and \"live\" cannot both be true".into())),
        (Some(_), true, _) | (Some(_), _, true) => {
            return Err(bad(
                "\"peak\"/\"live\" apply to the whole run; a budget with \"stage\" limits the stage's delta"
                    .into(),
            ))
        }
        (Some(_), false, false) => Measure::StageDelta,
        (None, _, true) => Measure::Live,
        (None, _, false) => Measure::Peak,
    };
    if owner == Some(Owner::Unattributed) && measure != Measure::StageDelta {
        return Err(bad(
            "unattributed bytes exist only per stage: give a \"stage\"".into(),
        ));
    }
    Ok(Budget {
        number,
        entry: v.to_string(),
        owner,
        stage,
        device,
        rank,
        measure,
        max,
    })
}

/// Reads a budgets file's text (`file` names it in messages).
pub fn parse(file: &str, text: &str) -> Result<Vec<Budget>, String> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| format!("{file}: not valid JSON: {e} (see docs/budgets.md)"))?;
    let Some(obj) = v.as_object() else {
        return Err(format!(
            "{file}: a budgets file is a JSON object {{\"budgets\": [...]}}"
        ));
    };
    if let Some(k) = obj.keys().find(|k| k.as_str() != "budgets") {
        return Err(format!(
            "{file}: unknown key \"{k}\" at the top level (only \"budgets\")"
        ));
    }
    let Some(list) = obj.get("budgets").and_then(Value::as_array) else {
        return Err(format!(
            "{file}: \"budgets\" must be a list of budgets: {{\"budgets\": [{{\"owner\": \"nccl\", \"max\": \"1.5GiB\"}}]}}"
        ));
    };
    if list.len() > MAX_BUDGETS {
        return Err(format!(
            "{file}: {} budgets, more than the {MAX_BUDGETS} a file may hold",
            list.len()
        ));
    }
    list.iter()
        .enumerate()
        .map(|(i, e)| parse_entry(file, i + 1, e))
        .collect()
}

/// Reads a budgets file.
pub fn load(path: &std::path::Path) -> Result<Vec<Budget>, String> {
    let text = crate::infile::read_text(path, crate::infile::Kind::Budgets)?;
    parse(&path.display().to_string(), &text)
}

/// Holds a run to its budgets.
pub fn evaluate(budgets: &[Budget], run: &Run) -> Verdict {
    let mut v = Verdict::default();
    for (bi, b) in budgets.iter().enumerate() {
        let before = v.checked;
        for p in &run.processes {
            if b.rank.is_some() && p.rank != b.rank {
                continue;
            }
            let who = p
                .rank
                .map_or_else(|| format!("pid {}", p.pid), |r| format!("rank {r}"));
            for d in &p.devices {
                if b.device.is_some_and(|x| x != d.device) {
                    continue;
                }
                let oi = b.owner.and_then(owner_index);
                let mut figures: Vec<(Option<String>, i64)> = Vec::new();
                match b.measure {
                    Measure::StageDelta => {
                        let name = b.stage.as_deref().unwrap_or("");
                        for (k, s) in d.stages.iter().filter(|s| s.name == name).enumerate() {
                            let bytes = oi.map_or(s.device_delta, |i| s.by_owner[i]);
                            figures.push((Some(crate::diff::Diff::stage_label(&s.name, k)), bytes));
                        }
                    }
                    Measure::Peak => figures.push((
                        None,
                        match oi {
                            Some(i) => d.peak_of(i).map_or(0, |p| p.bytes),
                            None => d.peak_total.bytes,
                        },
                    )),
                    Measure::Live => {
                        figures.push((None, oi.map_or_else(|| d.live_total(), |i| d.live[i])))
                    }
                }
                for (stage, bytes) in figures {
                    v.checked += 1;
                    if bytes > b.max as i64 {
                        v.exceeded.push(Exceeded {
                            budget: bi,
                            process: who.clone(),
                            device: d.device,
                            stage,
                            bytes,
                        });
                    }
                }
            }
        }
        if v.checked == before {
            v.unmatched.push(bi);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report_input::{Device, PeakFig, Process, Stage};

    const MIB: i64 = 1 << 20;
    const GIB: i64 = 1 << 30;

    #[test]
    fn the_documented_example_parses() {
        let b = parse(
            "b.json",
            r#"{"budgets": [{"owner": "nccl", "max": "1.5GiB"}, {"stage": "graph_capture", "max": "2GiB"},
              {"owner": "torch_graph_pool", "stage": "graph_capture", "max": "512MiB", "device": 0},
              {"peak": true, "max": "130GiB"}, {"live": true, "owner": "torch", "max": 1024, "rank": 1, "note": "kv"}]}"#,
        )
        .unwrap();
        assert_eq!(b.len(), 5);
        assert_eq!(
            (b[0].measure, b[0].max),
            (Measure::Peak, 3 * GIB as u64 / 2)
        );
        assert_eq!(b[1].measure, Measure::StageDelta);
        assert_eq!(
            (b[2].owner, b[2].device),
            (Some(Owner::TorchGraphPool), Some(0))
        );
        assert_eq!((b[3].owner, b[3].measure), (None, Measure::Peak));
        assert_eq!(
            (b[4].measure, b[4].rank, b[4].max),
            (Measure::Live, Some(1), 1024)
        );
        assert_eq!(b[2].what(), "torch_graph_pool in stage graph_capture");
    }

    #[test]
    fn bad_entries_are_named() {
        for (text, why) in [
            (
                r#"{"budgets": [{"owner": "ncl", "max": "1GiB"}]}"#,
                "unknown owner \"ncl\"",
            ),
            (
                r#"{"budgets": [{"owner": "nccl", "max": "1.5 GiB"}]}"#,
                "bad size \"1.5 GiB\"",
            ),
            (
                r#"{"budgets": [{"owner": "nccl", "max": "5%"}]}"#,
                "percentage",
            ),
            (
                r#"{"budgets": [{"owner": "nccl", "max": -3}]}"#,
                "bad size -3",
            ),
            (
                r#"{"budgets": [{"owner": "nccl", "limit": "1GiB"}]}"#,
                "unknown key \"limit\"",
            ),
            (r#"{"budgets": [{"owner": "nccl"}]}"#, "no \"max\""),
            (
                r#"{"budgets": [{"stage": "x", "peak": true, "max": 1}]}"#,
                "apply to the whole run",
            ),
            (
                r#"{"budgets": [{"owner": "unattributed", "max": 1}]}"#,
                "give a \"stage\"",
            ),
            (r#"{"budgets": [{"device": -1, "max": 1}]}"#, "whole number"),
            (
                r#"{"budgets": [{"device": 18446744073709551615, "max": 1}]}"#,
                "not a device ordinal",
            ),
            (
                r#"{"budgets": [{"rank": 4294967296, "max": 1}]}"#,
                "not a rank",
            ),
            (
                r#"{"budgets": [{"max": 18446744073709551615}]}"#,
                "more than any device holds",
            ),
            (
                r#"{"budgets": [{"max": "8000000TiB"}]}"#,
                "more than any device holds",
            ),
        ] {
            let e = parse("b.json", text).unwrap_err();
            assert!(e.starts_with("b.json: budget #1 {"), "{e}");
            assert!(e.contains(why), "{text}: {e}");
        }
        for (text, why) in [
            ("[]", "JSON object"),
            (r#"{"budget": []}"#, "unknown key \"budget\""),
            (r#"{"budgets": 3}"#, "must be a list"),
            ("{", "not valid JSON"),
        ] {
            let e = parse("b.json", text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn budgets_hold_each_device_separately() {
        let mut by_owner = [0i64; 7];
        by_owner[1] = 600 * MIB; // torch_graph_pool
        let dev = |device: i64| Device {
            device,
            stages: vec![Stage {
                name: "graph_capture".into(),
                device_delta: 700 * MIB,
                by_owner,
                ..Stage::default()
            }],
            peak_total: PeakFig {
                bytes: 10 * GIB,
                stage: "graph_capture".into(),
            },
            ..Device::default()
        };
        let run = Run {
            processes: vec![Process {
                pid: 9,
                rank: Some(0),
                devices: vec![dev(0), dev(1)],
                ..Process::default()
            }],
        };
        let b = parse(
            "b",
            r#"{"budgets": [{"owner": "torch_graph_pool", "stage": "graph_capture", "max": "512MiB", "device": 1},
                {"stage": "graph_capture", "max": "1GiB"}, {"peak": true, "max": "8GiB"},
                {"stage": "nope", "max": 0}]}"#,
        )
        .unwrap();
        let v = evaluate(&b, &run);
        assert_eq!(v.checked, 1 + 2 + 2);
        assert_eq!(v.unmatched, [3]);
        let hits: Vec<(usize, i64, i64)> = v
            .exceeded
            .iter()
            .map(|e| (e.budget, e.device, e.bytes))
            .collect();
        assert_eq!(
            hits,
            [(0, 1, 600 * MIB), (2, 0, 10 * GIB), (2, 1, 10 * GIB)]
        );
        assert_eq!(v.exceeded[0].stage.as_deref(), Some("graph_capture"));
        assert_eq!(v.exceeded[0].process, "rank 0");
    }
}
