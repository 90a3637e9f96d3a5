//! The live books' running totals: bytes per (device, owner, memory kind). Changed at every
//! allocation and free, so the common keys (devices −1 to 6) are dense slots found by index;
//! a lookup through a list with a hint per owner mispredicted about half a time a record on a
//! random churn of owners and devices.

use crate::record::{MemKind, Owner};

/// Dense slots: 8 devices (−1 to 6) × 8 owners × 8 memory kinds.
const DENSE: usize = 8 * 8 * 8;

/// A total's key.
pub(super) type Key = (i32, Owner, MemKind);

#[derive(Debug, Default, Clone)]
pub(super) struct Totals {
    /// By [`dense_slot`]; empty until the first change.
    dense: Vec<u64>,
    /// Every other device's, in first-change order.
    list: Vec<(Key, u64)>,
}

impl Totals {
    /// The total of `(device, owner, mem)`, made (zero) when it has none.
    #[inline(always)]
    pub(super) fn slot(&mut self, device: i32, owner: Owner, mem: MemKind) -> &mut u64 {
        match dense_slot(device, owner, mem) {
            Some(i) if !self.dense.is_empty() => &mut self.dense[i],
            _ => self.slot_slow(device, owner, mem),
        }
    }

    /// [`Totals::slot`] outside the dense slots, or the first change of any.
    #[cold]
    fn slot_slow(&mut self, device: i32, owner: Owner, mem: MemKind) -> &mut u64 {
        if let Some(i) = dense_slot(device, owner, mem) {
            self.dense.resize(DENSE, 0);
            return &mut self.dense[i];
        }
        let key = (device, owner, mem);
        let i = match self.list.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.list.push((key, 0));
                self.list.len() - 1
            }
        };
        &mut self.list[i].1
    }

    /// The total of `(device, owner, mem)` (0 when it has none).
    pub(super) fn get(&self, device: i32, owner: Owner, mem: MemKind) -> u64 {
        match dense_slot(device, owner, mem) {
            Some(i) => self.dense.get(i).copied().unwrap_or(0),
            None => self
                .list
                .iter()
                .find(|(k, _)| *k == (device, owner, mem))
                .map_or(0, |&(_, v)| v),
        }
    }

    /// Every total above zero, in key order.
    pub(super) fn sorted(&self) -> Vec<(Key, u64)> {
        let dense = self
            .dense
            .iter()
            .enumerate()
            .map(|(i, &v)| (dense_key(i), v));
        let mut out: Vec<(Key, u64)> = dense
            .chain(self.list.iter().map(|&(k, v)| (Some(k), v)))
            .filter_map(|(k, v)| Some((k?, v)).filter(|_| v > 0))
            .collect();
        out.sort_by_key(|&(k, _)| k);
        out
    }
}

/// The dense slot of a key (devices −1 to 6; owners and kinds are below 8).
#[inline(always)]
fn dense_slot(device: i32, owner: Owner, mem: MemKind) -> Option<usize> {
    let d = device.wrapping_add(1) as u32;
    (d < 8).then_some((d as usize) << 6 | (owner as usize & 7) << 3 | (mem as usize & 7))
}

/// The key of dense slot `i` (`None` where no owner or kind has that number).
fn dense_key(i: usize) -> Option<Key> {
    let owner = Owner::from_repr((i >> 3 & 7) as u8)?;
    let mem = MemKind::from_repr((i & 7) as u8)?;
    Some(((i >> 6) as i32 - 1, owner, mem))
}
