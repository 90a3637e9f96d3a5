//! How `vramledger diff` pairs what it compares: processes by rank, then identical command
//! line, then order; stages, devices and modules by key and occurrence; and the labels that
//! name a pair.

use crate::report_input::Process;

/// Pairs the processes of A and B: `(index in A, index in B, how)`, A's order first, then
/// what only B has.
pub fn pair_processes(
    a: &[Process],
    b: &[Process],
) -> Vec<(Option<usize>, Option<usize>, &'static str)> {
    let mut partner: Vec<Option<(usize, &'static str)>> = vec![None; a.len()];
    let mut taken = vec![false; b.len()];
    // 1. By rank: the k-th process of rank r on each side.
    for (i, pa) in a.iter().enumerate() {
        let Some(r) = pa.rank else { continue };
        let k = a[..i].iter().filter(|p| p.rank == Some(r)).count();
        if let Some(j) = b
            .iter()
            .enumerate()
            .filter(|(_, pb)| pb.rank == Some(r))
            .nth(k)
            .map(|(j, _)| j)
        {
            partner[i] = Some((j, "rank"));
            taken[j] = true;
        }
    }
    // 2. What is left: by identical command line.
    for (i, pa) in a.iter().enumerate() {
        if partner[i].is_some() {
            continue;
        }
        if let Some(j) = (0..b.len()).find(|&j| !taken[j] && b[j].cmdline == pa.cmdline) {
            partner[i] = Some((j, "cmdline"));
            taken[j] = true;
        }
    }
    // 3. By order, among processes that both have (or both lack) device memory.
    for (i, pa) in a.iter().enumerate() {
        if partner[i].is_some() {
            continue;
        }
        if let Some(j) =
            (0..b.len()).find(|&j| !taken[j] && pa.devices.is_empty() == b[j].devices.is_empty())
        {
            partner[i] = Some((j, "order"));
            taken[j] = true;
        }
    }
    let mut out: Vec<(Option<usize>, Option<usize>, &'static str)> = partner
        .iter()
        .enumerate()
        .map(|(i, p)| match p {
            Some((j, how)) => (Some(i), Some(*j), *how),
            None => (Some(i), None, "none"),
        })
        .collect();
    out.extend(
        (0..b.len())
            .filter(|&j| !taken[j])
            .map(|j| (None, Some(j), "none")),
    );
    out
}

pub(super) fn label(a: Option<&Process>, b: Option<&Process>, how: &str) -> String {
    let who = |p: &Process| match p.rank {
        Some(r) => format!("rank {r}"),
        None => format!("pid {}", p.pid),
    };
    match (a, b) {
        (Some(pa), Some(_)) if how == "rank" => who(pa),
        (Some(pa), Some(pb)) if pa.rank.is_some() && pb.rank.is_some() => {
            format!("rank {}/{}", pa.rank.unwrap_or(0), pb.rank.unwrap_or(0))
        }
        (Some(pa), Some(pb)) => format!("pid {}/{}", pa.pid, pb.pid),
        (Some(pa), None) => format!("{} (A only)", who(pa)),
        (None, Some(pb)) => format!("{} (B only)", who(pb)),
        (None, None) => String::new(),
    }
}

/// Pairs items by key and occurrence of that key: A's order, then what only B has. Linear:
/// a report may list tens of thousands of stages or modules.
pub(super) fn pair_by_key<'x, T, K: Eq + std::hash::Hash>(
    a: &'x [T],
    b: &'x [T],
    key: impl Fn(&T) -> K,
) -> Vec<(Option<&'x T>, Option<&'x T>, usize)> {
    use std::collections::HashMap;
    let mut in_b: HashMap<K, Vec<usize>> = HashMap::new();
    for (j, y) in b.iter().enumerate() {
        in_b.entry(key(y)).or_default().push(j);
    }
    let mut count_a: HashMap<K, usize> = HashMap::new();
    let mut out = Vec::with_capacity(a.len() + b.len());
    for x in a {
        let k = key(x);
        let partner = in_b.get(&k).map(Vec::as_slice).unwrap_or_default();
        let occ = count_a.entry(k).or_insert(0);
        out.push((Some(x), partner.get(*occ).map(|&j| &b[j]), *occ));
        *occ += 1;
    }
    let mut count_b: HashMap<K, usize> = HashMap::new();
    for y in b {
        let k = key(y);
        let in_a = count_a.get(&k).copied().unwrap_or(0);
        let occ = count_b.entry(k).or_insert(0);
        if *occ >= in_a {
            out.push((None, Some(y), *occ));
        }
        *occ += 1;
    }
    out
}

/// `1st`, `2nd`, `3rd`, `11th`, `23rd`.
pub(super) fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report_input::Device;

    fn proc(pid: u64, rank: Option<u64>, cmd: &str, devices: usize) -> Process {
        Process {
            pid,
            rank,
            cmdline: cmd.into(),
            devices: (0..devices)
                .map(|d| Device {
                    device: d as i64,
                    ..Device::default()
                })
                .collect(),
            ..Process::default()
        }
    }

    #[test]
    fn processes_pair_by_rank_then_cmdline_then_order() {
        let a = vec![
            proc(1, Some(0), "w", 1),
            proc(2, Some(1), "w", 1),
            proc(3, None, "launcher", 0),
            proc(4, None, "x", 1),
        ];
        let b = vec![
            proc(11, Some(1), "w", 1),
            proc(12, None, "y", 1),
            proc(13, None, "launcher", 0),
            proc(14, Some(2), "w", 1),
        ];
        let pairs = pair_processes(&a, &b);
        assert_eq!(
            pairs,
            vec![
                (Some(0), Some(3), "cmdline"),
                (Some(1), Some(0), "rank"),
                (Some(2), Some(2), "cmdline"),
                (Some(3), Some(1), "order"),
            ]
        );
        // Ranks first: rank 1 of A finds rank 1 of B even though rank 0 is missing in B.
        let b2 = vec![proc(11, Some(1), "w", 1)];
        assert_eq!(
            pair_processes(&a[..2], &b2),
            vec![(Some(0), None, "none"), (Some(1), Some(0), "rank")]
        );
    }
}
