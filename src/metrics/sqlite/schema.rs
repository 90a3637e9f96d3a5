//! The SQLite schema of `vramledger export --sqlite` (docs/sqlite-schema.md), versioned the way
//! Nsight Systems versions its export: a `meta` table names the schema and its version, and
//! enum tables spell out the coded values. Version 1.
//!
//! Opening a database: a new file is created private (0600) and never through a symlink; an
//! existing one must carry this schema at this version or an older one this reader migrates
//! (none yet), else it is refused with a message saying which.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension};
use vramledger_format::Owner;

/// The schema's name in `meta`.
pub const SCHEMA_NAME: &str = "vramledger.sqlite";
/// The schema version written (and the newest read).
pub const SCHEMA_VERSION: u32 = 1;

const DDL: &str = "
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE owners (
    owner       TEXT PRIMARY KEY,
    id          INTEGER NOT NULL UNIQUE,
    description TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE runs (
    run_key          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id           TEXT NOT NULL,
    source           TEXT NOT NULL,
    identity         TEXT NOT NULL UNIQUE,
    content_hash     TEXT NOT NULL,
    exported_unix_ns INTEGER NOT NULL,
    exported_by      TEXT NOT NULL,
    start_unix_ns    INTEGER,
    processes        INTEGER NOT NULL,
    model_name       TEXT
);

CREATE TABLE processes (
    process_key                 INTEGER PRIMARY KEY,
    run_key                     INTEGER NOT NULL REFERENCES runs(run_key) ON DELETE CASCADE,
    journal                     TEXT NOT NULL,
    host                        TEXT NOT NULL,
    pid                         INTEGER NOT NULL,
    ppid                        INTEGER,
    start_unix_ns               INTEGER NOT NULL,
    rank                        INTEGER,
    tp_rank                     INTEGER,
    pp_rank                     INTEGER,
    dp_rank                     INTEGER,
    command                     TEXT NOT NULL,
    cmdline                     TEXT NOT NULL,
    model_name                  TEXT,
    cuda_visible_devices        TEXT,
    events                      INTEGER NOT NULL,
    corrupt                     INTEGER NOT NULL,
    host_pinned_peak_bytes      INTEGER NOT NULL,
    managed_peak_bytes          INTEGER NOT NULL,
    virtual_reserved_peak_bytes INTEGER NOT NULL,
    UNIQUE (host, pid, start_unix_ns)
);
CREATE INDEX processes_run ON processes(run_key);

CREATE TABLE devices (
    device_key             INTEGER PRIMARY KEY,
    process_key            INTEGER NOT NULL REFERENCES processes(process_key) ON DELETE CASCADE,
    device                 INTEGER NOT NULL,
    gpu                    TEXT,
    uuid                   TEXT,
    start_free_bytes       INTEGER,
    end_free_bytes         INTEGER,
    total_bytes            INTEGER,
    sum_stage_deltas_bytes INTEGER NOT NULL,
    unattributed_bytes     INTEGER NOT NULL,
    balanced               INTEGER NOT NULL,
    peak_bytes             INTEGER NOT NULL,
    peak_stage             TEXT,
    peak_t_ns              INTEGER,
    oom_count              INTEGER NOT NULL,
    alloc_failures         INTEGER NOT NULL,
    UNIQUE (process_key, device)
);

CREATE TABLE device_owners (
    device_key        INTEGER NOT NULL REFERENCES devices(device_key) ON DELETE CASCADE,
    owner             TEXT NOT NULL REFERENCES owners(owner),
    live_at_end_bytes INTEGER NOT NULL,
    peak_bytes        INTEGER NOT NULL,
    peak_stage        TEXT,
    peak_t_ns         INTEGER,
    PRIMARY KEY (device_key, owner)
) WITHOUT ROWID;

CREATE TABLE stages (
    stage_key            INTEGER PRIMARY KEY,
    device_key           INTEGER NOT NULL REFERENCES devices(device_key) ON DELETE CASCADE,
    seq                  INTEGER NOT NULL,
    name                 TEXT NOT NULL,
    start_t_ns           INTEGER NOT NULL,
    end_t_ns             INTEGER NOT NULL,
    start_free_bytes     INTEGER,
    start_free_source    TEXT NOT NULL,
    end_free_bytes       INTEGER,
    end_free_source      TEXT NOT NULL,
    device_delta_bytes   INTEGER NOT NULL,
    engine_event         TEXT,
    engine_avail_mem_gib REAL,
    engine_mem_usage_gib REAL,
    UNIQUE (device_key, seq)
);

CREATE TABLE stage_owners (
    stage_key INTEGER NOT NULL REFERENCES stages(stage_key) ON DELETE CASCADE,
    owner     TEXT NOT NULL REFERENCES owners(owner),
    bytes     INTEGER NOT NULL,
    PRIMARY KEY (stage_key, owner)
) WITHOUT ROWID;

CREATE TABLE modules (
    device_key      INTEGER NOT NULL REFERENCES devices(device_key) ON DELETE CASCADE,
    module          TEXT NOT NULL,
    owner           TEXT,
    live_bytes      INTEGER NOT NULL,
    peak_bytes      INTEGER NOT NULL,
    allocated_bytes INTEGER NOT NULL
);
CREATE INDEX modules_device ON modules(device_key);

CREATE TABLE sizing (
    run_key                        INTEGER PRIMARY KEY REFERENCES runs(run_key) ON DELETE CASCADE,
    engine                         TEXT NOT NULL,
    fits                           INTEGER NOT NULL,
    tokens                         INTEGER,
    observed_tokens                INTEGER,
    reproduced                     INTEGER,
    mem_fraction_static            REAL,
    recommended_mem_fraction_static REAL,
    report_json                    TEXT NOT NULL
);

CREATE VIEW stage_owner_bytes AS
SELECT r.run_key, r.run_id, r.model_name, p.host, p.pid, p.rank, d.device, d.gpu, s.seq,
       s.name AS stage, o.owner, o.bytes
FROM stage_owners o
JOIN stages s USING (stage_key)
JOIN devices d USING (device_key)
JOIN processes p USING (process_key)
JOIN runs r USING (run_key);
";

/// What each owner is (the `owners` enum table).
fn owner_description(o: Owner) -> &'static str {
    match o {
        Owner::None => "no owner (records that hold no memory)",
        Owner::Torch => "PyTorch's caching allocator, normal pools",
        Owner::TorchGraphPool => {
            "allocated by PyTorch inside a stream capture: a CUDA-graph private pool"
        }
        Owner::Nccl => "NCCL: internal buffers and ncclMemAlloc",
        Owner::Direct => "cuMemAlloc / cudaMalloc by any other module",
        Owner::Vmm => "cuMemCreate by any other module",
        Owner::Context => "the CUDA context (measured around its creation)",
        Owner::Unattributed => "device memory that moved but no hook saw",
    }
}

fn create(c: &Connection) -> rusqlite::Result<()> {
    let tx = c.unchecked_transaction()?;
    tx.execute_batch(DDL)?;
    for (k, v) in [
        ("schema", SCHEMA_NAME.to_string()),
        ("schema_version", SCHEMA_VERSION.to_string()),
        (
            "created_by",
            format!("vramledger {}", env!("CARGO_PKG_VERSION")),
        ),
    ] {
        tx.execute("INSERT INTO meta (key, value) VALUES (?1, ?2)", (k, v))?;
    }
    for &o in Owner::ALL {
        tx.execute(
            "INSERT INTO owners (owner, id, description) VALUES (?1, ?2, ?3)",
            (o.name(), o as u8, owner_description(o)),
        )?;
    }
    tx.commit()
}

fn meta(c: &Connection, key: &str) -> Result<Option<String>, String> {
    let has_meta: bool = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map_err(|e| e.to_string())?
        > 0;
    if !has_meta {
        return Ok(None);
    }
    c.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .optional()
        .map_err(|e| e.to_string())
}

/// The file beside `path` that SQLite writes while it changes the database (rollback
/// journal, write-ahead log, its index) and that is a symbolic link, if any.
fn linked_sidecar(path: &Path) -> Option<std::path::PathBuf> {
    ["-journal", "-wal", "-shm"].into_iter().find_map(|suffix| {
        let mut side = path.as_os_str().to_os_string();
        side.push(suffix);
        let side = std::path::PathBuf::from(side);
        std::fs::symlink_metadata(&side)
            .is_ok_and(|m| m.file_type().is_symlink())
            .then_some(side)
    })
}

/// Opens (creating when missing) a vramledger database at `path`.
pub fn open(path: &Path) -> Result<Connection, String> {
    let p = path.display();
    let link = std::fs::symlink_metadata(path);
    let mut made_here = false;
    let fresh = match &link {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(format!(
                "{p} is a symbolic link; give the database file itself"
            ))
        }
        Ok(m) if !m.is_file() => return Err(format!("{p} is not a regular file")),
        Ok(m) => m.len() == 0,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Private from the first byte; O_EXCL and O_NOFOLLOW: never through a link.
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
                .map_err(|e| format!("cannot create {p}: {e}"))?;
            made_here = true;
            true
        }
        Err(e) => return Err(format!("cannot read {p}: {e}")),
    };
    if let Some(side) = linked_sidecar(path) {
        // SQLite would refuse it too, as "unable to open database file", which says not why.
        return Err(format!(
            "{} is a symbolic link; SQLite writes there beside {p}: remove it",
            side.display()
        ));
    }
    let c = Connection::open(path).map_err(|e| format!("cannot open {p}: {e}"))?;
    c.busy_timeout(std::time::Duration::from_secs(10))
        .and_then(|_| c.execute_batch("PRAGMA foreign_keys = ON;"))
        .map_err(|e| format!("{p}: {e}"))?;
    if fresh {
        if let Err(e) = create(&c) {
            drop(c);
            if made_here {
                // Nothing of it is usable: leave no empty database behind.
                let _ = std::fs::remove_file(path);
            }
            return Err(format!("cannot create the schema in {p}: {e}"));
        }
        return Ok(c);
    }
    let not_ours = || {
        format!("{p} is not a vramledger database (no meta table naming schema {SCHEMA_NAME}); give a new file or one written by vramledger export")
    };
    let name = meta(&c, "schema").map_err(|e| {
        if e.contains("not a database") {
            not_ours()
        } else {
            format!("{p}: {e}")
        }
    })?;
    if name.as_deref() != Some(SCHEMA_NAME) {
        return Err(not_ours());
    }
    let version: u32 = meta(&c, "schema_version")?
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{p}: the meta table has no readable schema_version"))?;
    if version > SCHEMA_VERSION {
        return Err(format!(
            "{p} has schema version {version}; this vramledger writes version {SCHEMA_VERSION}: upgrade vramledger"
        ));
    }
    Ok(c)
}
