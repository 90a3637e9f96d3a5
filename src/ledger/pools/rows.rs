//! What the pools book holds: pools by key, their rows, and torch's snapshot checked against
//! the books.

use vramledger_format::Owner;

/// Which pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PoolKey {
    /// torch's default pool (0, 0).
    Default,
    /// A private pool.
    Id(u64, u64),
    /// A graph pool whose id nothing told (the stream-capture rule alone).
    Unknown,
}

impl PoolKey {
    /// `a,b` as torch's snapshot writes it (`?` when unknown).
    pub fn label(self) -> String {
        match self {
            PoolKey::Default => "0,0".into(),
            PoolKey::Id(a, b) => format!("{a},{b}"),
            PoolKey::Unknown => "?".into(),
        }
    }

    pub(super) fn of_torch(a: u64, b: u64) -> PoolKey {
        if a == 0 && b == 0 {
            PoolKey::Default
        } else {
            PoolKey::Id(a, b)
        }
    }
}

/// One pool on one device.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolRow {
    pub device: i32,
    pub key: Option<PoolKey>,
    /// Bytes the books hold in it at the end, and their peak.
    pub live: i64,
    pub peak: i64,
    /// Live allocations (segments, or VMM handles of expandable segments) at the end.
    pub blocks: u64,
    /// What torch's last snapshot says: bytes and segments.
    pub torch_bytes: Option<u64>,
    pub torch_segments: Option<u64>,
}

impl PoolRow {
    /// The pool (never `None` in rows [`super::replay`] returns).
    pub fn pool(&self) -> PoolKey {
        self.key.unwrap_or(PoolKey::Unknown)
    }
}

/// A disagreement between torch's snapshot and the books.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub device: i32,
    pub address: u64,
    pub bytes: u64,
    /// torch's pool for the range (`None`: torch does not list it).
    pub torch_pool: Option<PoolKey>,
    /// The books: owner, pool (for PyTorch's owners) and module of what they hold there, and
    /// how many bytes (`None`: the books hold nothing there).
    pub books_owner: Option<Owner>,
    pub books_pool: Option<PoolKey>,
    pub books_bytes: u64,
    pub module: String,
}

/// torch's snapshot against the books.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotCheck {
    /// The snapshot's number in the process (the last one is checked).
    pub snapshot: u64,
    pub t_ns: u64,
    pub segments: u64,
    pub bytes: u64,
    /// Segments of a private pool made by a pluggable allocator (owned by its module).
    pub pluggable: u64,
    pub mismatches: Vec<Mismatch>,
}

impl SnapshotCheck {
    pub fn agree(&self) -> bool {
        self.mismatches.is_empty()
    }
}

/// The pools of one process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TorchPools {
    /// torch's version, when the Python hooks were installed in this process.
    pub hooks: Option<String>,
    /// Pool windows the hooks reported.
    pub windows: u64,
    pub rows: Vec<PoolRow>,
    pub check: Option<SnapshotCheck>,
}

impl TorchPools {
    /// Anything to say beyond the owner columns: hooks, pool ids, or a snapshot.
    pub fn has_news(&self) -> bool {
        self.hooks.is_some()
            || self.check.is_some()
            || self
                .rows
                .iter()
                .any(|r| matches!(r.key, Some(PoolKey::Id(..))))
    }
}
