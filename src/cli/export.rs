//! `vramledger export --sqlite DB RUN...`: append runs to a SQLite history
//! (docs/sqlite-schema.md). Idempotent for a run already stored with the same content;
//! refused (exit 2, nothing written) when its content changed, unless `--replace`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::Args;

use super::say;
use crate::exit;
use crate::journal::{self, Journal};
use crate::metrics::sqlite::{self, Outcome, RunInput, Sizing};
use crate::sizing::{self, SizeRequest, DEFAULT_MARGIN_GIB};

/// Arguments of `vramledger export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The SQLite database to append to (created, private, when missing).
    #[arg(long, value_name = "DB")]
    pub sqlite: PathBuf,
    /// Run folders or journals; journals sharing a run id are one run.
    #[arg(value_name = "RUN", required = true)]
    pub runs: Vec<PathBuf>,
    /// The model's config.json for the sizing rows (default: a config.json in the run folder).
    #[arg(long, value_name = "FILE")]
    pub model_config: Option<PathBuf>,
    /// The `model_name` of every process (default: from the launch command line).
    #[arg(long, value_name = "NAME")]
    pub model_name: Option<String>,
    /// Replace a stored run whose content changed since it was exported.
    #[arg(long)]
    pub replace: bool,
}

/// Every journal of `path` under the journal policy ([`journal::load`]); an unreadable one is
/// an error (a history must not silently miss a process), a corrupt one is kept with a warning
/// and flagged. A journal already `seen` (a folder and a journal inside it) is left out.
fn read_all(path: &Path, seen: &mut BTreeSet<PathBuf>) -> Result<Vec<Journal>, String> {
    let loaded = journal::load(path)?;
    let mut keep = BTreeSet::new();
    for file in say::in_file_order(path, &loaded) {
        let j = file.map_err(String::clone)?;
        let canonical = std::fs::canonicalize(&j.path).unwrap_or_else(|_| j.path.clone());
        if seen.insert(canonical) {
            say::warnings(&j.warnings);
            keep.insert(j.path.clone());
        }
    }
    let mut journals = loaded.journals;
    journals.retain(|j| keep.contains(&j.path));
    Ok(journals)
}

/// `vramledger size` on one run folder; `None` when it cannot size it (said on stderr).
fn size(path: &Path, model_config: Option<&Path>) -> Option<Sizing> {
    let request = SizeRequest {
        run: Some(path.to_path_buf()),
        model_config: model_config.map(Path::to_path_buf),
        margin_gib: DEFAULT_MARGIN_GIB,
        ..SizeRequest::default()
    };
    match sizing::build(&request) {
        Ok(report) => Some(Sizing {
            fits: report.exit_code() == exit::OK,
            json: crate::output::size_json::render(&report),
        }),
        Err(e) => {
            say::line(format_args!(
                "note: no sizing rows for {}: {e}",
                path.display()
            ));
            None
        }
    }
}

/// Runs `vramledger export`; returns the exit code.
pub fn main(args: ExportArgs) -> i32 {
    // A config the user named must be one, before anything is stored: a run that merely holds
    // none gets a note below, a bad `--model-config` is bad input (as for `vramledger size`).
    if let Some(cfg) = &args.model_config {
        if let Err(e) = crate::sizing::model_config::read(cfg) {
            return say::fail(format_args!("--model-config: {e}"));
        }
    }
    let mut seen = BTreeSet::new();
    // run id (or, without one or with the shim's `adhoc`, the path) → sources and journals
    let mut groups: BTreeMap<String, RunInput> = BTreeMap::new();
    let mut whole: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    for path in &args.runs {
        let journals = match read_all(path, &mut seen) {
            Ok(j) => j,
            Err(e) => return say::fail(e),
        };
        for j in journals {
            let run_id = j.header.get("run_id").unwrap_or("").to_string();
            let key = if !sqlite::names_a_run(&run_id) {
                format!("\0{}", path.display())
            } else {
                run_id.clone()
            };
            whole.entry(path.clone()).or_default().insert(key.clone());
            let g = groups.entry(key).or_insert_with(|| RunInput {
                run_id,
                sources: Vec::new(),
                journals: Vec::new(),
                sizing: None,
            });
            if !g.sources.contains(path) {
                g.sources.push(path.clone());
            }
            g.journals.push(j);
        }
    }
    // Sizing reads a whole folder: only for a run that is exactly one folder's journals.
    for (key, g) in groups.iter_mut() {
        if let [only] = g.sources.as_slice() {
            if only.is_dir()
                && whole
                    .get(only)
                    .is_some_and(|k| k.len() == 1 && k.contains(key))
            {
                g.sizing = size(only, args.model_config.as_deref());
            }
        }
    }
    let mut db = match sqlite::schema::open(&args.sqlite) {
        Ok(c) => c,
        Err(e) => return say::fail(e),
    };
    let runs: Vec<RunInput> = groups.into_values().collect();
    // The journal policy (docs/journal.md): a damaged journal is stored, flagged, and the
    // export exits 2.
    let damaged = runs.iter().flat_map(|r| &r.journals).any(|j| j.corrupt);
    let outcomes = match sqlite::append(&mut db, &runs, args.replace, args.model_name.as_deref()) {
        Ok(o) => o,
        Err(e) => return say::fail(e),
    };
    for (run, o) in runs.iter().zip(outcomes) {
        let name = if !sqlite::names_a_run(&run.run_id) {
            run.sources
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            format!("run {}", run.run_id)
        };
        let line = match o {
            Outcome::Added { run_key, processes } => format!(
                "{name}: added as run_key {run_key} ({processes} processes{})",
                if run.sizing.is_some() { ", sizing" } else { "" }
            ),
            Outcome::AlreadyThere { run_key } => {
                format!("{name}: already stored as run_key {run_key} with the same content; nothing added")
            }
            Outcome::Replaced { run_key, old_key } => {
                format!("{name}: replaced run_key {old_key} by run_key {run_key}")
            }
        };
        say::line(line);
    }
    if damaged {
        say::line("some journal was corrupt or cut off (see above); it was stored flagged (processes.corrupt = 1)");
        return exit::BAD_INPUT;
    }
    0
}
