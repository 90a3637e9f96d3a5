//! The text exposition: Prometheus text format 0.0.4, or OpenMetrics 1.0.0 (what Prometheus
//! asks for first). Names, types and labels are documented in docs/metrics.md.
//!
//! Conventions kept: base units (bytes, seconds), `_bytes` / `_seconds` suffixes, counters end
//! in `_total`, an `_info` metric of value 1 for descriptive labels, one family per name with
//! every sample of it together, no timestamps (the scrape's time is the right one). Labels
//! never hold an address, a stage history or a command's arguments.

use std::fmt::Write;

use vramledger_format::Owner;

use super::view::{hooked_owners, ProcessLabels, ProcessView};

/// Which text format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`.
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Format {
    /// The HTTP Content-Type of the format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// The reader's clock, for the journal lag.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub unix_s: f64,
}

impl Clock {
    /// Now.
    pub fn now() -> Clock {
        let unix_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        Clock { unix_s }
    }

    /// Seconds since the newest record of `v` was written (never negative). Record times are
    /// monotonic; the header's pair of start clocks puts them on the wall clock, so journals
    /// of other hosts (or of a host of the same name) compare as well as the clocks agree.
    pub fn lag_s(&self, v: &ProcessView) -> Option<f64> {
        Some((self.unix_s - v.last_record_unix_s?).max(0.0))
    }
}

/// What the reader itself knows.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReaderState {
    /// Journals followed.
    pub journals: usize,
    /// Journal files that could not be read (not a journal, a newer format, I/O).
    pub unreadable: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Type {
    Gauge,
    Counter,
    Info,
}

struct Family {
    name: &'static str,
    kind: Type,
    unit: Option<&'static str>,
    help: &'static str,
}

const fn gauge(name: &'static str, unit: Option<&'static str>, help: &'static str) -> Family {
    Family {
        name,
        kind: Type::Gauge,
        unit,
        help,
    }
}

const LIVE: Family = gauge(
    "vramledger_live_bytes",
    Some("bytes"),
    "Device memory held now, by physical owner (what the hooks saw).",
);
const PEAK: Family = gauge(
    "vramledger_peak_bytes",
    Some("bytes"),
    "Highest device memory held by the owner so far.",
);
const HOOKED_PEAK: Family = gauge(
    "vramledger_hooked_peak_bytes",
    Some("bytes"),
    "Highest device memory held by all owners together so far.",
);
const UNATTRIBUTED: Family = gauge(
    "vramledger_unattributed_bytes",
    Some("bytes"),
    "Device memory that left the free pool but no hook saw (sum over the stages).",
);
const FREE: Family = gauge(
    "vramledger_free_bytes",
    Some("bytes"),
    "Free device memory at the newest record (a reading, or derived from one and the hooks).",
);
const TOTAL: Family = gauge(
    "vramledger_device_total_bytes",
    Some("bytes"),
    "Device memory capacity from the newest reading.",
);
const STAGE_DELTA: Family = gauge(
    "vramledger_stage_delta_bytes",
    Some("bytes"),
    "Net device memory taken during the stage, by owner (unattributed included); summed over repeats of the stage.",
);
const STAGE_DEVICE_DELTA: Family = gauge(
    "vramledger_stage_device_delta_bytes",
    Some("bytes"),
    "Free memory at the stage start minus at its end; summed over repeats of the stage.",
);
const OOM: Family = Family {
    name: "vramledger_oom",
    kind: Type::Counter,
    unit: None,
    help: "Device allocations that failed with out-of-memory.",
};
const FAILURES: Family = Family {
    name: "vramledger_alloc_failures",
    kind: Type::Counter,
    unit: None,
    help: "Allocations that failed, any error and any kind of memory.",
};
const STAGE: Family = Family {
    name: "vramledger_current_stage",
    kind: Type::Info,
    unit: None,
    help: "The stage the process is in now.",
};
const STAGE_START: Family = gauge(
    "vramledger_current_stage_start_timestamp_seconds",
    None,
    "Unix time the current stage began.",
);
const LAG: Family = gauge(
    "vramledger_journal_lag_seconds",
    Some("seconds"),
    "Seconds since the newest record of the journal was written.",
);
const RECORDS: Family = Family {
    name: "vramledger_journal_records",
    kind: Type::Counter,
    unit: None,
    help: "Journal records read.",
};
const RUNNING: Family = gauge(
    "vramledger_process_running",
    None,
    "1 while the process runs, 0 once it ended (absent when it cannot be told: another host).",
);
const PROCESS: Family = Family {
    name: "vramledger_process",
    kind: Type::Info,
    unit: None,
    help: "A process with a journal: descriptive labels.",
};
const JOURNALS: Family = gauge(
    "vramledger_journals",
    None,
    "Journals followed by this reader.",
);
const UNREADABLE: Family = gauge(
    "vramledger_unreadable_journals",
    None,
    "Journal files this reader cannot read (not a journal, a newer format, an I/O error).",
);

struct Out {
    text: String,
    format: Format,
}

fn escape(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
}

impl Out {
    fn sample_name(f: &Family) -> String {
        match f.kind {
            Type::Gauge => f.name.to_string(),
            Type::Counter => format!("{}_total", f.name),
            Type::Info => format!("{}_info", f.name),
        }
    }

    fn family(&mut self, f: &Family) {
        let (name, kind) = match (self.format, f.kind) {
            (Format::OpenMetrics, Type::Gauge) => (f.name.to_string(), "gauge"),
            (Format::OpenMetrics, Type::Counter) => (f.name.to_string(), "counter"),
            (Format::OpenMetrics, Type::Info) => (f.name.to_string(), "info"),
            (Format::Prometheus, Type::Counter) => (Self::sample_name(f), "counter"),
            (Format::Prometheus, _) => (Self::sample_name(f), "gauge"),
        };
        let _ = writeln!(self.text, "# HELP {name} {}", f.help);
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
        if let (Format::OpenMetrics, Some(unit)) = (self.format, f.unit) {
            let _ = writeln!(self.text, "# UNIT {name} {unit}");
        }
    }

    fn sample(&mut self, f: &Family, labels: &[(&str, String)], value: impl std::fmt::Display) {
        self.text.push_str(&Self::sample_name(f));
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                self.text.push_str(k);
                self.text.push_str("=\"");
                escape(v, &mut self.text);
                self.text.push('"');
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }
}

/// The labels every series of a process carries.
fn process_labels(p: &ProcessLabels) -> Vec<(&'static str, String)> {
    let mut l = vec![
        ("host", p.host.clone()),
        ("pid", p.pid.to_string()),
        ("run_id", p.run_id.clone()),
    ];
    if let Some(r) = p.rank {
        l.push(("rank", r.to_string()));
    }
    if let Some(r) = p.tp_rank {
        l.push(("tp_rank", r.to_string()));
    }
    l.push(("command", p.command.clone()));
    if let Some(m) = &p.model_name {
        l.push(("model_name", m.clone()));
    }
    l
}

/// Process labels plus the device's `device`, `gpu` and `UUID`.
fn device_labels(p: &ProcessLabels, d: &super::view::DeviceView) -> Vec<(&'static str, String)> {
    let mut l = process_labels(p);
    l.push(("device", d.device.to_string()));
    if let Some(g) = &d.gpu {
        l.push(("gpu", g.clone()));
    }
    if let Some(u) = &d.uuid {
        l.push(("UUID", u.clone()));
    }
    l
}

fn with(
    mut l: Vec<(&'static str, String)>,
    k: &'static str,
    v: &str,
) -> Vec<(&'static str, String)> {
    l.push((k, v.to_string()));
    l
}

/// Renders every process (in the order given) and the reader's own state.
pub fn render(views: &[ProcessView], reader: ReaderState, clock: &Clock, format: Format) -> String {
    let mut o = Out {
        text: String::with_capacity(4096 + views.len() * 8192),
        format,
    };
    let devices = || {
        views
            .iter()
            .flat_map(|p| p.devices.iter().map(move |d| (p, d)))
    };
    let owners: Vec<Owner> = hooked_owners().collect();

    o.family(&LIVE);
    for (p, d) in devices() {
        for &ow in &owners {
            o.sample(
                &LIVE,
                &with(device_labels(&p.labels, d), "owner", ow.name()),
                d.live.get(ow),
            );
        }
    }
    o.family(&PEAK);
    for (p, d) in devices() {
        for &ow in &owners {
            o.sample(
                &PEAK,
                &with(device_labels(&p.labels, d), "owner", ow.name()),
                d.peak.get(ow),
            );
        }
    }
    o.family(&HOOKED_PEAK);
    for (p, d) in devices() {
        o.sample(&HOOKED_PEAK, &device_labels(&p.labels, d), d.hooked_peak);
    }
    o.family(&UNATTRIBUTED);
    for (p, d) in devices() {
        o.sample(&UNATTRIBUTED, &device_labels(&p.labels, d), d.unattributed);
    }
    o.family(&FREE);
    for (p, d) in devices() {
        if let Some(f) = d.free {
            o.sample(&FREE, &device_labels(&p.labels, d), f);
        }
    }
    o.family(&TOTAL);
    for (p, d) in devices() {
        if let Some(t) = d.total {
            o.sample(&TOTAL, &device_labels(&p.labels, d), t);
        }
    }
    o.family(&STAGE_DELTA);
    for (p, d) in devices() {
        for s in &d.stages {
            let l = with(device_labels(&p.labels, d), "stage", &s.name);
            for (ow, v) in s.by_owner.iter() {
                o.sample(&STAGE_DELTA, &with(l.clone(), "owner", ow.name()), v);
            }
        }
    }
    o.family(&STAGE_DEVICE_DELTA);
    for (p, d) in devices() {
        for s in &d.stages {
            o.sample(
                &STAGE_DEVICE_DELTA,
                &with(device_labels(&p.labels, d), "stage", &s.name),
                s.device_delta,
            );
        }
    }
    o.family(&OOM);
    for (p, d) in devices() {
        o.sample(&OOM, &device_labels(&p.labels, d), d.oom);
    }
    o.family(&FAILURES);
    for (p, d) in devices() {
        o.sample(&FAILURES, &device_labels(&p.labels, d), d.alloc_failures);
    }
    o.family(&STAGE);
    for p in views {
        o.sample(
            &STAGE,
            &with(process_labels(&p.labels), "stage", &p.current_stage),
            1,
        );
    }
    o.family(&STAGE_START);
    for p in views {
        if let Some(t) = p.stage_started_unix_s {
            o.sample(&STAGE_START, &process_labels(&p.labels), format!("{t:.3}"));
        }
    }
    o.family(&LAG);
    for p in views {
        if let Some(lag) = clock.lag_s(p) {
            o.sample(&LAG, &process_labels(&p.labels), format!("{lag:.3}"));
        }
    }
    o.family(&RECORDS);
    for p in views {
        o.sample(&RECORDS, &process_labels(&p.labels), p.records);
    }
    o.family(&RUNNING);
    for p in views {
        if let Some(r) = p.running {
            o.sample(&RUNNING, &process_labels(&p.labels), u8::from(r));
        }
    }
    o.family(&PROCESS);
    for p in views {
        let mut l = process_labels(&p.labels);
        for (k, v) in [("pp_rank", p.labels.pp_rank), ("dp_rank", p.labels.dp_rank)] {
            if let Some(v) = v {
                l.push((k, v.to_string()));
            }
        }
        l.push(("journal", p.journal.clone()));
        l.push(("corrupt", if p.corrupt { "true" } else { "false" }.into()));
        o.sample(&PROCESS, &l, 1);
    }
    o.family(&JOURNALS);
    o.sample(&JOURNALS, &[], reader.journals);
    o.family(&UNREADABLE);
    o.sample(&UNREADABLE, &[], reader.unreadable);
    if format == Format::OpenMetrics {
        o.text.push_str("# EOF\n");
    }
    o.text
}
