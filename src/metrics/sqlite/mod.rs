//! `vramledger export --sqlite DB RUN...`: runs appended to a SQLite history.
//!
//! A run is the journals sharing one header `run_id` (journals without one, or with the
//! shim's `adhoc` of a process started by hand, are a run per path given). Its identity is
//! the set of its processes (host, pid, journal start); the content hash adds what was read
//! of each. Appending a run whose identity is already in the database is idempotent when
//! the content is the same (nothing is written, the run is named), refused when it differs
//! (it was exported while still running) unless `replace`; a process that belongs to
//! another stored run is refused, unless that run has the same `run_id` (an export made
//! before all of the run's processes had started) and `replace`, which replaces it. One
//! transaction per export: all runs are added or none.

pub mod schema;

use std::path::PathBuf;

use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde_json::Value;

use super::labels;
use super::view::{self, ProcessView};
use crate::journal::Journal;
use crate::ledger::process::{self, ProcessBooks};
use crate::ledger::REPORT_OWNERS;

/// Whether a header `run_id` names a run: not empty, and not the shim's
/// [`NO_RUN_ID`](vramledger_format::header::NO_RUN_ID) (`VRAMLEDGER_RUN_ID` unset).
pub fn names_a_run(run_id: &str) -> bool {
    !run_id.is_empty() && run_id != vramledger_format::header::NO_RUN_ID
}

/// One run to append: its journals and where they came from.
pub struct RunInput {
    pub run_id: String,
    pub sources: Vec<PathBuf>,
    pub journals: Vec<Journal>,
    /// A `vramledger size --json` report of exactly these journals, when sizing succeeded.
    pub sizing: Option<Sizing>,
}

/// What `size` found, as stored.
pub struct Sizing {
    pub fits: bool,
    pub json: Value,
}

/// What happened to one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Added { run_key: i64, processes: usize },
    AlreadyThere { run_key: i64 },
    Replaced { run_key: i64, old_key: i64 },
}

/// FNV-1a, 64 bits: identities and content hashes (not a security boundary: the UNIQUE
/// constraint on processes backs it).
fn fnv(parts: &[String]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0u8]) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

fn identity_of(j: &Journal) -> String {
    let h = |k: &str| j.header.get(k).unwrap_or("").to_string();
    format!("{}/{}/{}", h("host"), h("pid"), h("start_unix_ns"))
}

fn hashes(run: &RunInput) -> (String, String) {
    let mut ids: Vec<String> = run.journals.iter().map(identity_of).collect();
    ids.sort();
    let mut content: Vec<String> = run
        .journals
        .iter()
        .map(|j| {
            let last = j.events.last().map_or(0, |e| e.t_ns);
            format!(
                "{}/{}/{}/{}",
                identity_of(j),
                j.events.len(),
                last,
                j.corrupt
            )
        })
        .collect();
    content.sort();
    (fnv(&ids), fnv(&content))
}

fn i(v: impl TryInto<i64>) -> i64 {
    v.try_into().unwrap_or(i64::MAX)
}

fn insert_process(
    tx: &Transaction,
    run_key: i64,
    j: &Journal,
    b: &ProcessBooks,
    v: &ProcessView,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO processes (run_key, journal, host, pid, ppid, start_unix_ns, rank, tp_rank,
             pp_rank, dp_rank, command, cmdline, model_name, cuda_visible_devices, events, corrupt,
             host_pinned_peak_bytes, managed_peak_bytes, virtual_reserved_peak_bytes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
        params![
            run_key,
            b.path,
            b.host,
            b.pid,
            b.ppid,
            i(b.start_unix_ns),
            v.labels.rank,
            v.labels.tp_rank,
            v.labels.pp_rank,
            v.labels.dp_rank,
            v.labels.command,
            labels::redacted_cmdline(j.header.get("cmdline").unwrap_or("")),
            v.labels.model_name,
            j.header.get("cuda_visible_devices"),
            i(b.events),
            j.corrupt,
            b.host_pinned.peak,
            b.managed.peak,
            b.virtual_reserved.peak,
        ],
    )?;
    let process_key = tx.last_insert_rowid();
    for d in &b.devices {
        let dv = v.devices.iter().find(|x| x.device == d.device);
        tx.execute(
            "INSERT INTO devices (process_key, device, gpu, uuid, start_free_bytes, end_free_bytes,
                 total_bytes, sum_stage_deltas_bytes, unattributed_bytes, balanced, peak_bytes,
                 peak_stage, peak_t_ns, oom_count, alloc_failures)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            params![
                process_key,
                d.device,
                dv.and_then(|x| x.gpu.clone()),
                dv.and_then(|x| x.uuid.clone()),
                d.start_free.map(i),
                d.end_free.map(i),
                dv.and_then(|x| x.total).map(i),
                d.sum_deltas(),
                d.unattributed(),
                d.balanced(),
                d.peak_total.bytes,
                d.peak_total.stage,
                i(d.peak_total.t_ns),
                i(dv.map_or(0, |x| x.oom)),
                i(dv.map_or(0, |x| x.alloc_failures)),
            ],
        )?;
        let device_key = tx.last_insert_rowid();
        for o in view::hooked_owners() {
            let p = d.peak_by_owner.get(&o);
            tx.execute(
                "INSERT INTO device_owners (device_key, owner, live_at_end_bytes, peak_bytes,
                     peak_stage, peak_t_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    device_key,
                    o.name(),
                    d.live_at_end.get(o),
                    p.map_or(0, |p| p.bytes),
                    p.map(|p| p.stage.clone()),
                    p.map(|p| i(p.t_ns)),
                ],
            )?;
        }
        for (seq, s) in d.stages.iter().enumerate() {
            tx.execute(
                "INSERT INTO stages (device_key, seq, name, start_t_ns, end_t_ns, start_free_bytes,
                     start_free_source, end_free_bytes, end_free_source, device_delta_bytes,
                     engine_event, engine_avail_mem_gib, engine_mem_usage_gib)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    device_key,
                    i(seq),
                    s.name,
                    i(s.start_t_ns),
                    i(s.end_t_ns),
                    s.start_free.map(i),
                    s.start_source.name(),
                    s.end_free.map(i),
                    s.end_source.name(),
                    s.device_delta,
                    s.engine.event,
                    s.engine.avail_mem_gib_at_start,
                    s.engine.mem_usage_gib,
                ],
            )?;
            let stage_key = tx.last_insert_rowid();
            for &o in REPORT_OWNERS.iter() {
                tx.execute(
                    "INSERT INTO stage_owners (stage_key, owner, bytes) VALUES (?1, ?2, ?3)",
                    params![stage_key, o.name(), s.by_owner.get(o)],
                )?;
            }
        }
        for m in &d.modules {
            tx.execute(
                "INSERT INTO modules (device_key, module, owner, live_bytes, peak_bytes,
                     allocated_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    device_key,
                    m.module,
                    m.owner.map(|o| o.name()),
                    m.live,
                    m.peak,
                    i(m.allocated),
                ],
            )?;
        }
    }
    Ok(())
}

fn insert_sizing(tx: &Transaction, run_key: i64, s: &Sizing) -> rusqlite::Result<()> {
    let v = &s.json;
    let num = |p: &str| v.pointer(p).and_then(Value::as_i64);
    let real = |p: &str| v.pointer(p).and_then(Value::as_f64);
    tx.execute(
        "INSERT INTO sizing (run_key, engine, fits, tokens, observed_tokens, reproduced,
             mem_fraction_static, recommended_mem_fraction_static, report_json)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            run_key,
            v.get("engine").and_then(Value::as_str).unwrap_or(""),
            s.fits,
            num("/tokens"),
            num("/observed_tokens"),
            v.get("reproduced").and_then(Value::as_bool),
            real("/mem_fraction_static/value"),
            real("/recommended_mem_fraction_static/value"),
            serde_json::to_string(v).unwrap_or_default(),
        ],
    )?;
    Ok(())
}

/// Appends `runs` to the database in one transaction; on any refusal nothing is written.
pub fn append(
    c: &mut Connection,
    runs: &[RunInput],
    replace: bool,
    model_name: Option<&str>,
) -> Result<Vec<Outcome>, String> {
    let tx = c.transaction().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for run in runs {
        let (identity, content) = hashes(run);
        let sources: Vec<String> = run
            .sources
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        let name = if !names_a_run(&run.run_id) {
            sources.join(", ")
        } else {
            format!("run {}", run.run_id)
        };
        let stored: Option<(i64, String)> = tx
            .query_row(
                "SELECT run_key, content_hash FROM runs WHERE identity = ?1",
                [&identity],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| e.to_string())?;
        let mut old_key = None;
        match stored {
            Some((key, hash)) if hash == content => {
                out.push(Outcome::AlreadyThere { run_key: key });
                continue;
            }
            Some((key, _)) if replace => {
                tx.execute("DELETE FROM runs WHERE run_key = ?1", [key])
                    .map_err(|e| e.to_string())?;
                old_key = Some(key);
            }
            Some((key, _)) => {
                return Err(format!(
                    "{name} is already in the database (run_key {key}) with different content (exported while it was still running?); nothing was written. Pass --replace to replace it"
                ))
            }
            None => {}
        }
        // A process is stored once: two journals of it (a copy beside the original) would
        // end the export on the table's UNIQUE constraint, in SQLite's words.
        let mut journal_of = std::collections::BTreeMap::new();
        for j in &run.journals {
            let h = |k: &str| j.header.get(k).unwrap_or("").to_string();
            let id = (h("host"), h("pid"), h("start_unix_ns"));
            if let Some(first) = journal_of.insert(id, &j.path) {
                return Err(format!(
                    "{} and {} are journals of one process (host {}, pid {}, start {}): export one of them; nothing was written",
                    first.display(),
                    j.path.display(),
                    h("host"),
                    h("pid"),
                    h("start_unix_ns")
                ));
            }
            let other: Option<i64> = tx
                .query_row(
                    "SELECT run_key FROM processes WHERE host = ?1 AND pid = ?2 AND start_unix_ns = ?3",
                    params![h("host"), h("pid").parse::<i64>().unwrap_or(0), h("start_unix_ns").parse::<i64>().unwrap_or(0)],
                    |r| r.get(0),
                )
                .optional()
                .map_err(|e| e.to_string())?;
            if let Some(k) = other {
                // The same run exported before it had all its processes: replaceable.
                let same_run = names_a_run(&run.run_id)
                    && tx
                        .query_row("SELECT run_id FROM runs WHERE run_key = ?1", [k], |r| {
                            r.get::<_, String>(0)
                        })
                        .map_err(|e| e.to_string())?
                        == run.run_id;
                match (same_run, replace) {
                    (true, true) => {
                        tx.execute("DELETE FROM runs WHERE run_key = ?1", [k])
                            .map_err(|e| e.to_string())?;
                        old_key.get_or_insert(k);
                    }
                    (true, false) => {
                        return Err(format!(
                            "{} belongs to run_key {k} already, {name} as exported with other processes (before all of them had started?); nothing was written. Pass --replace to replace it",
                            j.path.display()
                        ))
                    }
                    (false, _) => {
                        return Err(format!(
                            "{} belongs to run_key {k} already, which holds other processes than {name}; nothing was written",
                            j.path.display()
                        ))
                    }
                }
            }
        }
        let host = super::system::hostname();
        let books: Vec<ProcessBooks> = run.journals.iter().map(process::replay).collect();
        let mut views: Vec<ProcessView> = run
            .journals
            .iter()
            .zip(&books)
            .map(|(j, b)| {
                let running = super::system::running(&b.host, b.pid, b.start_unix_ns, &host);
                view::build(j, b, running)
            })
            .collect();
        view::fill_model_names(&mut views, model_name);
        let start = run
            .journals
            .iter()
            .filter_map(|j| j.header.get("start_unix_ns")?.parse::<i64>().ok())
            .min();
        let run_model = views.iter().find_map(|v| v.labels.model_name.clone());
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        let inserted = tx.execute(
            "INSERT INTO runs (run_id, source, identity, content_hash, exported_unix_ns, exported_by,
                 start_unix_ns, processes, model_name) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                run.run_id,
                sources.join("\n"),
                identity,
                content,
                now_ns,
                format!("vramledger {}", env!("CARGO_PKG_VERSION")),
                start,
                i(run.journals.len()),
                run_model,
            ],
        );
        inserted.map_err(|e| e.to_string())?;
        let run_key = tx.last_insert_rowid();
        for ((j, b), v) in run.journals.iter().zip(&books).zip(&views) {
            insert_process(&tx, run_key, j, b, v)
                .map_err(|e| format!("cannot store {}: {e}", j.path.display()))?;
        }
        if let Some(s) = &run.sizing {
            insert_sizing(&tx, run_key, s).map_err(|e| e.to_string())?;
        }
        out.push(match old_key {
            Some(old_key) => Outcome::Replaced { run_key, old_key },
            None => Outcome::Added {
                run_key,
                processes: run.journals.len(),
            },
        });
    }
    tx.commit().map_err(|e| e.to_string())?;
    Ok(out)
}
