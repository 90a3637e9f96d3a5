//! `vramledger diff A B`: two runs compared figure by figure.
//!
//! Processes are matched by rank when both have one (the k-th process of rank r in A with the
//! k-th of rank r in B); what is left by identical command line, then by order (processes that
//! both have, or both lack, device memory); devices by ordinal (a pair of processes with one
//! device each compares those two, whatever their ordinals); stages by name and occurrence
//! (the second `graph_capture` of A with the second of B). What exists on one side only is
//! compared with nothing (its figures against 0).
//!
//! Pure: [`compare`] takes two loaded inputs ([`crate::report_input`]) and returns the
//! [`Diff`]; `crate::output::{diff_text, diff_json}` write it, `crate::check` judges it.

mod pair;

use vramledger_format::Owner;

use crate::ledger::REPORT_OWNERS;
use crate::report_input::{Device, Input, Module, PeakFig, Process, Run, Stage};
pub use pair::pair_processes;
use pair::{label, ordinal, pair_by_key};

/// Which side(s) something exists on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    Both,
    OnlyA,
    OnlyB,
}

impl Presence {
    /// The name used in JSON: `both`, `a`, `b`.
    pub fn name(self) -> &'static str {
        match self {
            Presence::Both => "both",
            Presence::OnlyA => "a",
            Presence::OnlyB => "b",
        }
    }
    fn of<T>(a: &Option<T>, b: &Option<T>) -> Presence {
        match (a.is_some(), b.is_some()) {
            (true, false) => Presence::OnlyA,
            (false, true) => Presence::OnlyB,
            _ => Presence::Both,
        }
    }
}

/// A figure on both sides (`None`: absent on that side or unknown).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Change {
    pub a: Option<i64>,
    pub b: Option<i64>,
}

impl Change {
    /// B − A, an absent side counting as 0.
    pub fn change(&self) -> i64 {
        self.b.unwrap_or(0).saturating_sub(self.a.unwrap_or(0))
    }
    /// Whether the figure moved (or appeared, or vanished).
    pub fn changed(&self) -> bool {
        self.a != self.b
    }
}

/// A process as the diff names it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcRef {
    pub pid: u64,
    pub rank: Option<u64>,
    pub host: String,
    pub cmdline: String,
}

/// One process of A and/or B.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcPair {
    /// Unique within the diff: `rank 0`, `pid 2046/3046`, `pid 2046 (A only)`.
    pub label: String,
    /// `rank`, `cmdline`, `order`, or `none` for a process on one side only.
    pub matched_by: &'static str,
    pub a: Option<ProcRef>,
    pub b: Option<ProcRef>,
}

/// One owner × stage × device figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Index into [`Diff::processes`].
    pub process: usize,
    /// Index into [`Diff::devices`].
    pub device: usize,
    pub stage: String,
    /// 0 for the first stage of this name on the device, 1 for the second, …
    pub occurrence: usize,
    pub owner: Owner,
    pub bytes: Change,
}

/// One stage of one device: its device delta and its duration.
#[derive(Debug, Clone, PartialEq)]
pub struct StageDiff {
    pub process: usize,
    /// Index into [`Diff::devices`].
    pub device: usize,
    pub stage: String,
    pub occurrence: usize,
    pub presence: Presence,
    pub device_delta: Change,
    pub duration_ns: Change,
}

/// A peak on both sides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeakDiff {
    pub a: Option<PeakFig>,
    pub b: Option<PeakFig>,
}

impl PeakDiff {
    /// The bytes as a [`Change`].
    pub fn bytes(&self) -> Change {
        Change {
            a: self.a.as_ref().map(|p| p.bytes),
            b: self.b.as_ref().map(|p| p.bytes),
        }
    }
}

/// A module that appeared, vanished or changed on a device.
#[derive(Debug, Clone, PartialEq)]
pub struct ModuleDiff {
    pub module: String,
    pub owner: String,
    pub presence: Presence,
    pub live: Change,
    pub peak: Change,
}

/// One device of a process pair.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceDiff {
    pub process: usize,
    /// The ordinal in A and in B (they differ only when each process of a pair has one
    /// device: those are compared whatever their ordinals).
    pub a_device: Option<i64>,
    pub b_device: Option<i64>,
    pub presence: Presence,
    /// Live at end per hooked owner (`unattributed` left out: it is never held).
    pub live: Vec<(Owner, Change)>,
    pub live_total: Change,
    pub peak_total: PeakDiff,
    pub peak_by_owner: Vec<(Owner, PeakDiff)>,
    pub start_free: Change,
    pub end_free: Change,
    /// Appeared, vanished or changed modules, largest peak change first.
    pub modules: Vec<ModuleDiff>,
}

/// One side of the diff.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    pub source: String,
    pub kind: &'static str,
    pub processes: usize,
}

/// Everything that differs (and the figures that do not, for `check`).
#[derive(Debug, Clone, PartialEq)]
pub struct Diff {
    pub a: Side,
    pub b: Side,
    pub processes: Vec<ProcPair>,
    pub devices: Vec<DeviceDiff>,
    pub stages: Vec<StageDiff>,
    /// Every owner × stage × device figure, changed or not, largest absolute change first.
    pub figures: Vec<Figure>,
}

fn proc_ref(p: &Process) -> ProcRef {
    ProcRef {
        pid: p.pid,
        rank: p.rank,
        host: p.host.clone(),
        cmdline: p.cmdline.clone(),
    }
}

fn change<T>(a: Option<&T>, b: Option<&T>, f: impl Fn(&T) -> i64) -> Change {
    Change {
        a: a.map(&f),
        b: b.map(&f),
    }
}

fn opt_change<T>(a: Option<&T>, b: Option<&T>, f: impl Fn(&T) -> Option<i64>) -> Change {
    Change {
        a: a.and_then(&f),
        b: b.and_then(&f),
    }
}

fn modules(a: Option<&Device>, b: Option<&Device>) -> Vec<ModuleDiff> {
    let empty: Vec<Module> = Vec::new();
    let ma = a.map_or(&empty, |d| &d.modules);
    let mb = b.map_or(&empty, |d| &d.modules);
    let mut out: Vec<ModuleDiff> = pair_by_key(ma, mb, |m| (m.module.clone(), m.owner.clone()))
        .into_iter()
        .map(|(x, y, _)| {
            let m = x.or(y).expect("one side");
            ModuleDiff {
                module: m.module.clone(),
                owner: m.owner.clone(),
                // A module is "present" where its device is: a device that exists on both
                // sides shows a module that only one has as appeared or vanished.
                presence: Presence::of(&x, &y),
                live: change(x, y, |m| m.live),
                peak: change(x, y, |m| m.peak),
            }
        })
        .filter(|m| m.presence != Presence::Both || m.live.changed() || m.peak.changed())
        .collect();
    out.sort_by_key(|m| std::cmp::Reverse(m.peak.change().unsigned_abs()));
    out
}

fn device_diff(process: usize, a: Option<&Device>, b: Option<&Device>) -> DeviceDiff {
    let hooked = &REPORT_OWNERS[..6];
    let peak_of = |d: Option<&Device>, o: usize| d.and_then(|d| d.peak_of(o)).cloned();
    DeviceDiff {
        process,
        a_device: a.map(|d| d.device),
        b_device: b.map(|d| d.device),
        presence: Presence::of(&a, &b),
        live: hooked
            .iter()
            .enumerate()
            .map(|(i, &o)| (o, change(a, b, |d| d.live[i])))
            .collect(),
        live_total: change(a, b, Device::live_total),
        peak_total: PeakDiff {
            a: a.map(|d| d.peak_total.clone()),
            b: b.map(|d| d.peak_total.clone()),
        },
        peak_by_owner: hooked
            .iter()
            .enumerate()
            .map(|(i, &o)| {
                (
                    o,
                    PeakDiff {
                        a: peak_of(a, i),
                        b: peak_of(b, i),
                    },
                )
            })
            .filter(|(_, p)| p.a.is_some() || p.b.is_some())
            .collect(),
        start_free: opt_change(a, b, |d| d.start_free),
        end_free: opt_change(a, b, |d| d.end_free),
        modules: modules(a, b),
    }
}

fn side(input: &Input) -> Side {
    Side {
        source: input.source.clone(),
        kind: input.kind,
        processes: input.run.processes.len(),
    }
}

/// Compares two runs.
pub fn compare(a: &Input, b: &Input) -> Diff {
    compare_runs(side(a), &a.run, side(b), &b.run)
}

/// Compares two runs given their figures.
pub fn compare_runs(side_a: Side, a: &Run, side_b: Side, b: &Run) -> Diff {
    let mut processes = Vec::new();
    let mut devices = Vec::new();
    let mut stages = Vec::new();
    let mut figures = Vec::new();
    let mut used_labels = std::collections::HashSet::new();
    let mut next_suffix: std::collections::HashMap<String, usize> =
        std::collections::HashMap::new();
    for (ia, ib, how) in pair_processes(&a.processes, &b.processes) {
        let pa = ia.map(|i| &a.processes[i]);
        let pb = ib.map(|i| &b.processes[i]);
        // Labels are unique: a repeated one gets ` #2`, ` #3`, … (a set, not a scan of every
        // label so far: a report may list thousands of processes).
        let base = label(pa, pb, how);
        let mut name = base.clone();
        if used_labels.contains(&name) {
            let n = next_suffix.entry(base.clone()).or_insert(2);
            loop {
                name = format!("{base} #{n}");
                *n += 1;
                if !used_labels.contains(&name) {
                    break;
                }
            }
        }
        used_labels.insert(name.clone());
        let pi = processes.len();
        processes.push(ProcPair {
            label: name,
            matched_by: how,
            a: pa.map(proc_ref),
            b: pb.map(proc_ref),
        });
        let no_devices: Vec<Device> = Vec::new();
        let da = pa.map_or(&no_devices, |p| &p.devices);
        let db = pb.map_or(&no_devices, |p| &p.devices);
        let device_pairs = if da.len() == 1 && db.len() == 1 {
            vec![(Some(&da[0]), Some(&db[0]), 0)]
        } else {
            pair_by_key(da, db, |d| d.device)
        };
        for (dev_a, dev_b, _) in device_pairs {
            let device = devices.len();
            devices.push(device_diff(pi, dev_a, dev_b));
            let no_stages: Vec<Stage> = Vec::new();
            let sa = dev_a.map_or(&no_stages, |d| &d.stages);
            let sb = dev_b.map_or(&no_stages, |d| &d.stages);
            for (st_a, st_b, occurrence) in pair_by_key(sa, sb, |s| s.name.clone()) {
                let name = st_a.or(st_b).map_or_else(String::new, |s| s.name.clone());
                stages.push(StageDiff {
                    process: pi,
                    device,
                    stage: name.clone(),
                    occurrence,
                    presence: Presence::of(&st_a, &st_b),
                    device_delta: change(st_a, st_b, |s| s.device_delta),
                    duration_ns: opt_change(st_a, st_b, Stage::duration_ns),
                });
                for (i, &owner) in REPORT_OWNERS.iter().enumerate() {
                    figures.push(Figure {
                        process: pi,
                        device,
                        stage: name.clone(),
                        occurrence,
                        owner,
                        bytes: change(st_a, st_b, |s| s.by_owner[i]),
                    });
                }
            }
        }
    }
    // Largest absolute change first; the natural order (process, device, stage, owner) breaks ties.
    figures.sort_by_key(|f| std::cmp::Reverse(f.bytes.change().unsigned_abs()));
    Diff {
        a: side_a,
        b: side_b,
        processes,
        devices,
        stages,
        figures,
    }
}

impl Diff {
    /// A device as the diff names it: `rank 0 dev 0`, or `pid 1/2 dev 0/1` when the ordinals differ.
    pub fn device_label(&self, i: usize) -> String {
        let d = &self.devices[i];
        let p = &self.processes[d.process].label;
        match (d.a_device, d.b_device) {
            (Some(x), Some(y)) if x != y => format!("{p} dev {x}/{y}"),
            (x, y) => format!("{p} dev {}", x.or(y).unwrap_or(0)),
        }
    }

    /// The label of a figure's stage: `graph_capture`, `graph_capture (2nd)`.
    pub fn stage_label(stage: &str, occurrence: usize) -> String {
        if occurrence == 0 {
            stage.to_string()
        } else {
            format!("{stage} ({})", ordinal(occurrence + 1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_pair_by_name_and_occurrence() {
        let s = |n: &str| Stage {
            name: n.into(),
            ..Stage::default()
        };
        let a = vec![s("startup"), s("capture"), s("capture")];
        let b = vec![s("startup"), s("capture"), s("serving")];
        let pairs: Vec<(Option<&str>, Option<&str>, usize)> =
            pair_by_key(&a, &b, |s| s.name.clone())
                .into_iter()
                .map(|(x, y, o)| (x.map(|s| s.name.as_str()), y.map(|s| s.name.as_str()), o))
                .collect();
        assert_eq!(
            pairs,
            vec![
                (Some("startup"), Some("startup"), 0),
                (Some("capture"), Some("capture"), 0),
                (Some("capture"), None, 1),
                (None, Some("serving"), 0),
            ]
        );
        assert_eq!(Diff::stage_label("capture", 1), "capture (2nd)");
        assert_eq!(ordinal(11), "11th");
        assert_eq!(ordinal(23), "23rd");
    }
}
