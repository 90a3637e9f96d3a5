//! The report's PyTorch pool lines (text) and `torch_pools` object (JSON): bytes per pool id
//! and torch's own snapshot against the books (see [`crate::ledger::pools`]).

use std::fmt::Write;

use serde_json::{json, Value};
use vramledger_format::record::flags;
use vramledger_format::{Event, Kind, PoolScope, POOL_UNKNOWN};

use crate::ledger::pools::{Mismatch, PoolKey, TorchPools};
use crate::output::terminal_text::escaped;

/// How many disagreements the text report lists (the JSON lists all).
const SHOWN: usize = 8;

fn label(k: Option<PoolKey>) -> String {
    k.map_or_else(|| "-".to_string(), PoolKey::label)
}

fn mismatch_text(m: &Mismatch, amount: &dyn Fn(i64) -> String) -> String {
    let torch = match m.torch_pool {
        Some(p) => format!("torch pool {}", p.label()),
        None => "not in torch's snapshot".to_string(),
    };
    let books = match m.books_owner {
        Some(o) if m.books_pool.is_some() && m.torch_pool.is_some() => format!(
            "books {} pool {} {}",
            o.name(),
            label(m.books_pool),
            amount(m.books_bytes as i64)
        ),
        Some(o) => format!("books {} {}", o.name(), escaped(&m.module)),
        None => "books: nothing".to_string(),
    };
    format!(
        "dev {} {:#x} {} {torch}, {books}",
        m.device,
        m.address,
        amount(m.bytes as i64)
    )
}

/// The text lines (nothing when there is nothing beyond the owner columns).
pub fn text(out: &mut String, p: &TorchPools, amount: &dyn Fn(i64) -> String) {
    if !p.has_news() {
        return;
    }
    let source = match &p.hooks {
        Some(v) if v.is_empty() => format!("Python hook; pool windows: {}", p.windows),
        Some(v) => format!(
            "Python hook, torch {}; pool windows: {}",
            escaped(v),
            p.windows
        ),
        None => "no Python hook: graph pools by stream capture only".to_string(),
    };
    let rows: Vec<String> = p
        .rows
        .iter()
        .filter(|r| r.live != 0 || r.peak != 0 || r.torch_bytes.unwrap_or(0) != 0)
        .map(|r| {
            let torch = r
                .torch_bytes
                .map_or_else(String::new, |b| format!(" (torch {})", amount(b as i64)));
            format!(
                "dev {} {} {}{torch} peak {}",
                r.device,
                r.pool().label(),
                amount(r.live),
                amount(r.peak)
            )
        })
        .collect();
    let _ = writeln!(out, "  torch pools ({source}): {}", rows.join("; "));
    if let Some(c) = &p.check {
        if c.agree() {
            let plugged = if c.pluggable > 0 {
                format!(" ({} made by pluggable allocators)", c.pluggable)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "  torch's snapshot #{} ({} segments, {}): agrees with the books{plugged}",
                c.snapshot,
                c.segments,
                amount(c.bytes as i64)
            );
        } else {
            let shown: Vec<String> = c
                .mismatches
                .iter()
                .take(SHOWN)
                .map(|m| mismatch_text(m, amount))
                .collect();
            let more = c.mismatches.len().saturating_sub(SHOWN);
            let _ = writeln!(
                out,
                "  torch's snapshot #{} ({} segments, {}): {} DIFFER: {}{}",
                c.snapshot,
                c.segments,
                amount(c.bytes as i64),
                c.mismatches.len(),
                shown.join("; "),
                if more > 0 {
                    format!("; {more} more in --json")
                } else {
                    String::new()
                }
            );
        }
    }
}

/// The `torch_pools` object of a process.
pub fn json(p: &TorchPools) -> Value {
    json!({
        "hooks": p.hooks.as_ref().map(|v| json!({ "torch_version": v })),
        "windows": p.windows,
        "pools": p.rows.iter().map(|r| json!({
            "device": r.device,
            "pool": r.pool().label(),
            "live_bytes": r.live,
            "peak_bytes": r.peak,
            "blocks": r.blocks,
            "torch_snapshot_bytes": r.torch_bytes,
            "torch_snapshot_segments": r.torch_segments,
        })).collect::<Vec<_>>(),
        "snapshot_check": p.check.as_ref().map(|c| json!({
            "snapshot": c.snapshot,
            "t_ns": c.t_ns,
            "segments": c.segments,
            "bytes": c.bytes,
            "agree": c.agree(),
            "pluggable_segments": c.pluggable,
            "mismatches": c.mismatches.iter().map(|m| json!({
                "device": m.device,
                "address": m.address,
                "bytes": m.bytes,
                "torch_pool": m.torch_pool.map(PoolKey::label),
                "books_owner": m.books_owner.map(|o| o.name()),
                "books_pool": m.books_pool.map(PoolKey::label),
                "books_bytes": m.books_bytes,
                "module": m.module,
            })).collect::<Vec<_>>(),
        })),
    })
}

fn pool_text(a: u64, b: u64) -> String {
    if a == POOL_UNKNOWN && b == POOL_UNKNOWN {
        "?".into()
    } else {
        format!("{a},{b}")
    }
}

/// `vramledger dump --text` for the pool records.
pub fn dump_text(e: &Event) -> String {
    let scope = PoolScope::from_u64(e.arg2).map_or("?", PoolScope::name);
    match e.kind() {
        Some(Kind::PoolBegin) => format!(
            "pool window {} opens: pool {} ({scope})",
            e.handle,
            pool_text(e.arg0, e.arg1)
        ),
        Some(Kind::PoolEnd) => format!(
            "pool window {} closes: pool {} ({scope})",
            e.handle,
            pool_text(e.arg0, e.arg1)
        ),
        Some(Kind::TorchSegment) => format!(
            "torch snapshot {}: segment {:#x} {:.2} MiB pool {}",
            e.handle,
            e.addr,
            e.size as f64 / (1u64 << 20) as f64,
            pool_text(e.arg0, e.arg1)
        ),
        _ => format!(
            "pool hooks installed ({} functions), torch {}",
            e.arg0, e.text
        ),
    }
}

/// ` pool a,b` for an allocation made inside a pool window (empty otherwise).
pub fn pool_suffix(e: &Event) -> String {
    match e.torch_pool() {
        Some((a, b)) => format!(" pool {a},{b}"),
        None if e.flags & flags::TORCH_POOL_PENDING != 0 => {
            format!(" pool of window {}", e.arg1)
        }
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::pools::{PoolRow, SnapshotCheck};
    use vramledger_format::Owner;

    fn mib(v: i64) -> String {
        format!("{}M", v >> 20)
    }

    fn pools(check: Option<SnapshotCheck>) -> TorchPools {
        TorchPools {
            hooks: Some("2.11.0".into()),
            windows: 3,
            rows: vec![
                PoolRow {
                    device: 0,
                    key: Some(PoolKey::Default),
                    live: 256 << 20,
                    peak: 300 << 20,
                    blocks: 9,
                    torch_bytes: Some(256 << 20),
                    torch_segments: Some(9),
                },
                PoolRow {
                    device: 0,
                    key: Some(PoolKey::Id(0, 1)),
                    live: 58 << 20,
                    peak: 58 << 20,
                    blocks: 5,
                    torch_bytes: Some(58 << 20),
                    torch_segments: Some(5),
                },
            ],
            check,
        }
    }

    #[test]
    fn pool_lines_say_what_torch_says_and_where_it_differs() {
        let mut out = String::new();
        let agree = SnapshotCheck {
            snapshot: 1,
            t_ns: 5,
            segments: 14,
            bytes: 314 << 20,
            pluggable: 0,
            mismatches: vec![],
        };
        text(&mut out, &pools(Some(agree.clone())), &mib);
        assert_eq!(
            out,
            "  torch pools (Python hook, torch 2.11.0; pool windows: 3): dev 0 0,0 256M (torch 256M) peak 300M; dev 0 0,1 58M (torch 58M) peak 58M\n  torch's snapshot #1 (14 segments, 314M): agrees with the books\n"
        );
        let differ = SnapshotCheck {
            mismatches: vec![Mismatch {
                device: 0,
                address: 0x7f00_0000_0000,
                bytes: 64 << 20,
                torch_pool: None,
                books_owner: Some(Owner::Torch),
                books_pool: Some(PoolKey::Default),
                books_bytes: 64 << 20,
                module: "libtorch_cuda.so".into(),
            }],
            ..agree
        };
        let mut out = String::new();
        text(&mut out, &pools(Some(differ.clone())), &mib);
        assert!(
            out.ends_with("1 DIFFER: dev 0 0x7f0000000000 64M not in torch's snapshot, books torch libtorch_cuda.so\n"),
            "{out}"
        );
        let v = json(&pools(Some(differ)));
        assert_eq!(v["snapshot_check"]["agree"], false);
        assert_eq!(
            v["snapshot_check"]["mismatches"][0]["torch_pool"],
            Value::Null
        );
        assert_eq!(v["pools"][1]["pool"], "0,1");
        // Nothing to say: no line at all (reports of programs without torch stay as they were).
        let mut out = String::new();
        text(&mut out, &TorchPools::default(), &mib);
        assert!(out.is_empty());
    }
}
