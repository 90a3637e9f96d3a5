//! `vramledger export --sqlite`: the H200 runs appended and read back with SQL to the byte of
//! the report; the same run twice is idempotent, a changed run refused (or replaced with
//! --replace), a process of another run refused, all or nothing; unsafe and foreign database
//! files refused.

mod metrics_support;
mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use metrics_support::{data, report_json, scratch, text, vramledger};
use rusqlite::Connection;
use serde_json::Value;
use support::synth::{Synth, MIB};
use vramledger_format::header::NO_RUN_ID;
use vramledger_format::Owner;

fn export(db: &Path, runs: &[&Path], extra: &[&str]) -> (i32, String) {
    let mut args = vec!["export", "--sqlite", db.to_str().unwrap()];
    args.extend(extra);
    args.extend(runs.iter().map(|p| p.to_str().unwrap()));
    let out = vramledger(&args);
    (out.status.code().unwrap_or(-1), text(&out.stderr))
}

fn count(c: &Connection, table: &str) -> i64 {
    c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn recorded_runs_are_appended_and_read_back_as_the_report() {
    let dir = scratch("export");
    let db = dir.join("history.db");
    let shape = data("h200-sglang-shape");
    let (rc, err) = export(
        &db,
        &[&shape, &data("h200-graph-bs/a"), &data("h200-graph-bs/b")],
        &[],
    );
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        std::fs::metadata(&db).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let c = Connection::open(&db).unwrap();
    let meta: Vec<(String, String)> = c
        .prepare("SELECT key, value FROM meta ORDER BY key")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(
        meta.contains(&("schema".into(), "vramledger.sqlite".into())),
        "{meta:?}"
    );
    assert!(meta.contains(&("schema_version".into(), "1".into())));
    assert_eq!(count(&c, "owners"), Owner::ALL.len() as i64);
    assert_eq!(count(&c, "runs"), 3);
    assert_eq!(count(&c, "processes"), 9);

    // Every stage × owner figure, live and peak of the sglang-shape run, to the byte.
    let report = report_json(&shape);
    let run_id = report["processes"][0]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut compared = 0;
    for p in report["processes"].as_array().unwrap() {
        let pid = p["pid"].as_i64().unwrap();
        for d in p["devices"].as_array().unwrap() {
            let dev = d["device"].as_i64().unwrap();
            for (seq, s) in d["stages"].as_array().unwrap().iter().enumerate() {
                for (owner, bytes) in s["by_owner"].as_object().unwrap() {
                    let got: i64 = c
                        .query_row(
                            "SELECT bytes FROM stage_owner_bytes WHERE run_id = ?1 AND pid = ?2 AND device = ?3 AND seq = ?4 AND owner = ?5",
                            rusqlite::params![run_id, pid, dev, seq as i64, owner],
                            |r| r.get(0),
                        )
                        .unwrap();
                    assert_eq!(Some(got), bytes.as_i64(), "pid {pid} stage {seq} {owner}");
                    compared += 1;
                }
            }
            for (owner, live) in d["live_at_end"]["by_owner"].as_object().unwrap() {
                if owner == "unattributed" {
                    continue;
                }
                let (l, pk): (i64, i64) = c
                    .query_row(
                        "SELECT o.live_at_end_bytes, o.peak_bytes FROM device_owners o JOIN devices d USING (device_key) JOIN processes p USING (process_key) JOIN runs r USING (run_key) WHERE r.run_id = ?1 AND p.pid = ?2 AND d.device = ?3 AND o.owner = ?4",
                        rusqlite::params![run_id, pid, dev, owner],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .unwrap();
                assert_eq!(Some(l), live.as_i64());
                assert_eq!(
                    pk,
                    d["peak"]["by_owner"][owner]["bytes"].as_i64().unwrap_or(0)
                );
                compared += 2;
            }
            let (free, unattributed, balanced, peak): (Option<i64>, i64, bool, i64) = c
                .query_row(
                    "SELECT d.end_free_bytes, d.unattributed_bytes, d.balanced, d.peak_bytes FROM devices d JOIN processes p USING (process_key) JOIN runs r USING (run_key) WHERE r.run_id = ?1 AND p.pid = ?2 AND d.device = ?3",
                    rusqlite::params![run_id, pid, dev],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .unwrap();
            let rec = &d["reconciliation"];
            assert_eq!(free, rec["end_free_bytes"].as_i64());
            assert_eq!(unattributed, rec["unattributed_bytes"].as_i64().unwrap());
            assert_eq!(balanced, rec["balanced"].as_bool().unwrap());
            assert_eq!(peak, d["peak"]["total"]["bytes"].as_i64().unwrap());
            compared += 4;
        }
    }
    assert!(compared > 100, "{compared}");

    // The run folder has the model's config.json: its sizing is stored as `size --json` says.
    let size = vramledger(&["size", shape.to_str().unwrap(), "--json"]);
    let size: Value = serde_json::from_slice(&size.stdout).unwrap();
    let (tokens, engine, json): (Option<i64>, String, String) = c
        .query_row(
            "SELECT s.tokens, s.engine, s.report_json FROM sizing s JOIN runs r USING (run_key) WHERE r.run_id = ?1",
            [&run_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(tokens, size["tokens"].as_i64());
    assert_eq!(engine, "sglang");
    assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), size);
    assert_eq!(
        count(&c, "sizing"),
        1,
        "the graph-bs runs have no config.json: no sizing rows"
    );
}

#[test]
fn the_same_run_twice_is_idempotent_a_changed_one_refused_or_replaced() {
    let dir = scratch("export-twice");
    let db = dir.join("h.db");
    let run = dir.join("run");
    copy_dir(&data("h200-graph-bs/a"), &run);
    assert_eq!(export(&db, &[&run], &[]).0, 0);
    let (rc, err) = export(&db, &[&run], &[]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        err.contains("already stored as run_key 1 with the same content"),
        "{err}"
    );
    let c = Connection::open(&db).unwrap();
    let rows = |c: &Connection| {
        let events: i64 = c
            .query_row("SELECT sum(events) FROM processes", [], |r| r.get(0))
            .unwrap();
        (count(c, "runs"), count(c, "processes"), events)
    };
    let before = rows(&c);
    assert_eq!(before.0, 1);

    // The same run read while it was still being written: fewer records.
    let journal: PathBuf = std::fs::read_dir(&run)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "vlj"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let bytes = std::fs::read(&journal).unwrap();
    std::fs::write(&journal, &bytes[..bytes.len() / 2]).unwrap();
    let (rc, err) = export(&db, &[&run], &[]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("different content") && err.contains("--replace"),
        "{err}"
    );
    assert_eq!(rows(&c), before, "nothing written");
    let (rc, err) = export(&db, &[&run], &["--replace"]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("replaced run_key 1 by run_key 2"), "{err}");
    let after = rows(&c);
    assert_eq!((after.0, after.1), (1, before.1));
    assert!(
        after.2 < before.2,
        "the shorter journal's records replaced the longer one's"
    );
}

fn synth_run(dir: &Path, run_id: &str, pids: &[u32]) {
    std::fs::create_dir_all(dir).unwrap();
    for &pid in pids {
        let mut s = Synth::new(pid, run_id);
        s.stage("weight_load", None, 10 << 30);
        s.alloc(0x1000 + pid as u64 * 0x100_0000, 4 * MIB, Owner::Torch, 0);
        s.write(&dir.join(format!("{run_id}.{pid}.vlj")));
    }
}

#[test]
fn a_process_of_another_run_is_refused_and_nothing_of_the_export_is_written() {
    let dir = scratch("export-overlap");
    let db = dir.join("h.db");
    synth_run(&dir.join("x"), "runX", &[1, 2]);
    assert_eq!(export(&db, &[&dir.join("x")], &[]).0, 0);
    // runZ is fine on its own; runY claims process 2 of runX (same host, pid, start).
    synth_run(&dir.join("z"), "runZ", &[7]);
    synth_run(&dir.join("y"), "runY", &[2]);
    let (rc, err) = export(&db, &[&dir.join("z"), &dir.join("y")], &[]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("belongs to run_key 1"), "{err}");
    // --replace never takes another run's process.
    let (rc, err) = export(&db, &[&dir.join("z"), &dir.join("y")], &["--replace"]);
    assert_eq!(rc, 2, "{err}");
    assert!(err.contains("holds other processes"), "{err}");
    let c = Connection::open(&db).unwrap();
    assert_eq!(count(&c, "runs"), 1, "runZ was not written either");
    // Two runs in one folder are two runs.
    let both = dir.join("both");
    synth_run(&both, "runA", &[11, 12]);
    synth_run(&both, "runB", &[13]);
    let (rc, err) = export(&db, &[&both], &[]);
    assert_eq!(rc, 0, "{err}");
    let ids: Vec<(String, i64)> = c
        .prepare("SELECT run_id, processes FROM runs ORDER BY run_key")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        ids,
        vec![("runX".into(), 2), ("runA".into(), 2), ("runB".into(), 1)]
    );
}

#[test]
fn a_run_exported_before_all_its_processes_started_is_replaced_only_when_asked() {
    let dir = scratch("export-grown");
    let db = dir.join("h.db");
    let run = dir.join("run");
    synth_run(&run, "runG", &[1]);
    assert_eq!(export(&db, &[&run], &[]).0, 0);
    // A second process of the same run started after that export.
    synth_run(&run, "runG", &[2]);
    let (rc, err) = export(&db, &[&run], &[]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("belongs to run_key 1") && err.contains("--replace"),
        "{err}"
    );
    let c = Connection::open(&db).unwrap();
    assert_eq!((count(&c, "runs"), count(&c, "processes")), (1, 1));
    let (rc, err) = export(&db, &[&run], &["--replace"]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("replaced run_key 1 by run_key 2"), "{err}");
    assert_eq!((count(&c, "runs"), count(&c, "processes")), (1, 2));
    // And exporting it again is idempotent.
    let (rc, err) = export(&db, &[&run], &[]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("already stored as run_key 2"), "{err}");
}

#[test]
fn a_model_config_given_that_is_none_is_refused_before_anything_is_stored() {
    let dir = scratch("export-bad-config");
    let run = data("h200-sglang-shape");
    let not_json = dir.join("notes.txt");
    std::fs::write(&not_json, "not a config").unwrap();
    for cfg in [
        dir.join("missing.json"),
        PathBuf::from("/dev/null"),
        not_json,
        run.join("pid2090.vlj"),
    ] {
        let db = dir.join("h.db");
        let (rc, err) = export(&db, &[&run], &["--model-config", cfg.to_str().unwrap()]);
        assert_eq!(rc, 2, "{}: {err}", cfg.display());
        assert!(err.contains("--model-config"), "{err}");
        assert!(!db.exists(), "{}: a database was written", cfg.display());
    }
    // The run's own config, given: sized and stored.
    let db = dir.join("ok.db");
    let (rc, err) = export(
        &db,
        &[&run],
        &["--model-config", run.join("config.json").to_str().unwrap()],
    );
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("sizing"), "{err}");
}

#[test]
fn journals_of_processes_started_by_hand_are_a_run_per_folder() {
    // Without VRAMLEDGER_RUN_ID (`LD_PRELOAD=... VRAMLEDGER_OUT=DIR CMD`) the shim records the
    // run id `adhoc`: it names no run, so two such folders exported together are two runs.
    let dir = scratch("export-adhoc");
    let db = dir.join("h.db");
    let (p, q) = (dir.join("p"), dir.join("q"));
    synth_run(&p, NO_RUN_ID, &[21, 22]);
    synth_run(&q, NO_RUN_ID, &[23]);
    let (rc, err) = export(&db, &[&p, &q], &[]);
    assert_eq!(rc, 0, "{err}");
    assert!(!err.contains("run adhoc"), "{err}");
    let c = Connection::open(&db).unwrap();
    let runs: Vec<(String, String, i64)> = c
        .prepare("SELECT run_id, source, processes FROM runs ORDER BY run_key")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let src = |d: &Path| d.to_str().unwrap().to_string();
    assert_eq!(
        runs,
        vec![
            (NO_RUN_ID.into(), src(&p), 2),
            (NO_RUN_ID.into(), src(&q), 1)
        ]
    );
}

#[test]
fn unsafe_and_foreign_databases_are_refused() {
    let dir = scratch("export-refuse");
    let run = dir.join("run");
    synth_run(&run, "r", &[3]);
    let real = dir.join("real.db");
    std::fs::write(&real, b"").unwrap();
    let link = dir.join("link.db");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let (rc, err) = export(&link, &[&run], &[]);
    assert_eq!((rc, err.contains("symbolic link")), (2, true), "{err}");
    assert_eq!(
        std::fs::metadata(&real).unwrap().len(),
        0,
        "nothing written through the link"
    );

    // A link where SQLite writes its rollback journal beside a good database: named, never
    // followed.
    let good = dir.join("good.db");
    assert_eq!(export(&good, &[&run], &[]).0, 0);
    let target = dir.join("elsewhere");
    std::fs::write(&target, b"keep").unwrap();
    let side = dir.join("good.db-journal");
    std::os::unix::fs::symlink(&target, &side).unwrap();
    let run2 = dir.join("run2");
    synth_run(&run2, "r2", &[4]);
    let (rc, err) = export(&good, &[&run2], &[]);
    assert_eq!(
        (rc, err.contains("good.db-journal is a symbolic link")),
        (2, true),
        "{err}"
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    std::fs::remove_file(&side).unwrap();

    let text_file = dir.join("notes.db");
    std::fs::write(&text_file, "some notes, not a database\n".repeat(100)).unwrap();
    let (rc, err) = export(&text_file, &[&run], &[]);
    assert_eq!(
        (rc, err.contains("not a vramledger database")),
        (2, true),
        "{err}"
    );

    let other = dir.join("other.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x);")
        .unwrap();
    let (rc, err) = export(&other, &[&run], &[]);
    assert_eq!(
        (rc, err.contains("not a vramledger database")),
        (2, true),
        "{err}"
    );

    let newer = dir.join("newer.db");
    assert_eq!(export(&newer, &[&run], &[]).0, 0);
    Connection::open(&newer)
        .unwrap()
        .execute(
            "UPDATE meta SET value = '99' WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
    let (rc, err) = export(&newer, &[&run], &[]);
    assert_eq!((rc, err.contains("schema version 99")), (2, true), "{err}");

    let (rc, err) = export(&dir.join("x.db"), &[&dir.join("missing")], &[]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        !dir.join("x.db").exists(),
        "no database is created for bad input"
    );
}

#[test]
fn two_journals_of_one_process_are_named_not_a_constraint() {
    // A copy of a journal beside the original (journals gathered twice): the export ended
    // on "UNIQUE constraint failed: processes.host, processes.pid, processes.start_unix_ns".
    // As every verb, it reads the process once, from the original, and names the copy.
    let dir = scratch("export-one-process");
    let run = dir.join("run");
    synth_run(&run, "runT", &[5]);
    std::fs::create_dir_all(run.join("again")).unwrap();
    std::fs::copy(run.join("runT.5.vlj"), run.join("again/runT.5.vlj")).unwrap();
    let db = dir.join("h.db");
    let (rc, err) = export(&db, &[&run], &[]);
    assert_eq!(rc, 0, "{err}");
    assert!(err.contains("are journals of one process"), "{err}");
    assert!(
        err.contains(&format!(
            "read once, from {}",
            run.join("runT.5.vlj").display()
        )),
        "{err}"
    );
    assert!(!err.contains("UNIQUE"), "{err}");
    let c = Connection::open(&db).unwrap();
    assert_eq!((count(&c, "runs"), count(&c, "processes")), (1, 1));
}
