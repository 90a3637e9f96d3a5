//! One process's books: its journal replayed into stages × owners per device, balanced
//! against device free memory.
//!
//! A stage runs from its stage record to the next one. Its device delta is the free memory
//! at its start minus the free memory at its end (boundary samples, see [`super::samples`]);
//! the hooks explain that delta by owner (allocated minus freed within the stage, the
//! context as measured around its creation), and what they cannot explain is `unattributed`.
//! Because every boundary has one free value, the deltas telescope: start free = Σ deltas +
//! end free, to the byte.

use vramledger_engines::log;
use vramledger_format::Header;

use super::books::Books;
pub use super::device::{DeviceBooks, EngineNumbers, LivePeak, ModuleRow, Peak, StageRow};
use super::index::Index;
use super::records::Records;
use super::replay::Observer;
use crate::journal::Journal;

/// Where a process stands in a run: by host, rank (unranked last), start time, then pid, so
/// journals copied from several hosts into one folder read as one run. The report's books and
/// the snapshot order their processes by it.
pub fn run_order(
    host: &str,
    rank: Option<u32>,
    start_unix_ns: u64,
    pid: u32,
) -> (&str, u32, u64, u32) {
    (host, rank.unwrap_or(u32::MAX), start_unix_ns, pid)
}

/// One process.
#[derive(Debug, Clone)]
pub struct ProcessBooks {
    pub path: String,
    pub host: String,
    pub pid: u32,
    pub ppid: u32,
    pub run_id: String,
    pub cmdline: String,
    pub start_unix_ns: u64,
    pub rank: Option<u32>,
    pub rank_tag: Option<log::RankTag>,
    pub devices: Vec<DeviceBooks>,
    pub host_pinned: LivePeak,
    pub managed: LivePeak,
    pub virtual_reserved: LivePeak,
    /// Peer memory mapped here (IPC opens, VMM imports: another process's or device's bytes).
    pub peer_imported: LivePeak,
    pub events: usize,
    /// PyTorch's pools by id, and torch's own snapshot against the books.
    pub torch_pools: super::pools::TorchPools,
    /// Every stage in order, by name and start time (ns): the index's boundaries, stage
    /// records and API events alike, whether or not a device was read in it.
    pub stages: Vec<(String, u64)>,
}

impl ProcessBooks {
    /// No device memory, no context and nothing pinned, managed or reserved: a helper process
    /// (an inductor compile worker, a tokenizer) that loaded the preload but never used CUDA.
    pub fn never_touched_gpu(&self) -> bool {
        self.devices.is_empty()
            && self
                .apart()
                .iter()
                .all(|(_, lp)| lp.peak == 0 && lp.live == 0)
    }

    /// The books kept apart from VRAM, named as reports show them.
    pub fn apart(&self) -> [(&'static str, LivePeak); 4] {
        [
            ("host pinned", self.host_pinned),
            ("managed", self.managed),
            ("VA reserved (virtual only)", self.virtual_reserved),
            ("peer memory mapped (IPC/VMM imports)", self.peer_imported),
        ]
    }
}

/// Replays one journal.
pub fn replay(j: &Journal) -> ProcessBooks {
    replay_records(j)
}

/// Replays one journal read from any source: its index, then its books in one walk.
pub fn replay_records<R: Records>(r: &R) -> ProcessBooks {
    let ix = Index::scan(r);
    replay_indexed(r, &ix, &mut ())
}

/// The books of a journal indexed as `ix`, with `extra` kept in the same walk (a timeline).
pub fn replay_indexed<R: Records, O: Observer>(r: &R, ix: &Index, extra: &mut O) -> ProcessBooks {
    let mut obs = ((Books::new(ix), super::pools::Pools::new(ix)), extra);
    super::replay::run(r, ix, &mut obs);
    let ((books, pools), _) = obs;
    assemble(r, ix, books, pools.finish())
}

/// The process's books from its index and what the replay kept.
pub fn assemble<R: Records>(
    r: &R,
    ix: &Index,
    books: Books<'_>,
    torch_pools: super::pools::TorchPools,
) -> ProcessBooks {
    let header = r.header();
    let h = |k: &str| header.get(k).unwrap_or("").to_string();
    let (rank_tag, rank) = rank(ix, header);
    ProcessBooks {
        path: r.path().display().to_string(),
        host: h("host"),
        pid: h("pid").parse().unwrap_or(0),
        ppid: h("ppid").parse().unwrap_or(0),
        run_id: h("run_id"),
        cmdline: h("cmdline").replace('\0', " "),
        start_unix_ns: h("start_unix_ns").parse().unwrap_or(0),
        rank,
        rank_tag,
        devices: books.devices,
        host_pinned: books.host,
        managed: books.managed,
        virtual_reserved: books.virtual_reserved,
        peer_imported: books.peer,
        events: ix.records,
        torch_pools,
        stages: ix
            .boundaries
            .iter()
            .map(|b| (b.name.clone(), b.t_ns))
            .collect(),
    }
}

/// The process's rank: the TP rank its engine printed, else the `rank=` of the distributed
/// init line, else the `RANK` it was started with; and the engine's rank tag.
pub fn rank(ix: &Index, header: &Header) -> (Option<log::RankTag>, Option<u32>) {
    let tag = ix.rank.tag;
    let rank = tag
        .and_then(|t| t.tp)
        .or(ix.rank.dist_rank)
        .or_else(|| header.get("env.RANK").and_then(|v| v.parse().ok()));
    (tag, rank)
}

#[cfg(test)]
mod tests {
    use super::run_order;

    #[test]
    fn a_run_reads_by_host_then_rank_with_the_unranked_last_then_start_then_pid() {
        // (host, rank, start, pid)
        let mut ps = [
            ("b", Some(0), 1, 1),
            ("a", None, 0, 2),
            ("a", Some(1), 0, 3),
            ("a", Some(0), 9, 4),
            ("a", Some(0), 5, 6),
            ("a", Some(0), 5, 5),
        ];
        ps.sort_by(|x, y| run_order(x.0, x.1, x.2, x.3).cmp(&run_order(y.0, y.1, y.2, y.3)));
        let pids: Vec<u32> = ps.iter().map(|p| p.3).collect();
        assert_eq!(pids, [5, 6, 4, 3, 2, 1]);
    }
}
