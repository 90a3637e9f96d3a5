//! Bytes per owner: a small fixed array indexed by [`Owner`], cheap to add on every event.

use vramledger_format::Owner;

/// The owners the hooks name, and the measured context, in report order.
pub const MEASURED_OWNERS: [Owner; 6] = [
    Owner::Torch,
    Owner::TorchGraphPool,
    Owner::Nccl,
    Owner::Direct,
    Owner::Vmm,
    Owner::Context,
];

/// The owner keys a report shows, in order (exactly these, always all of them): the measured
/// owners, then what they leave unexplained.
pub const REPORT_OWNERS: [Owner; 7] = {
    let mut all = [Owner::Unattributed; 7];
    let mut i = 0;
    while i < MEASURED_OWNERS.len() {
        all[i] = MEASURED_OWNERS[i];
        i += 1;
    }
    all
};

/// Signed bytes per owner.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OwnerBytes([i64; 8]);

impl OwnerBytes {
    /// Adds `bytes` to `owner`.
    pub fn add(&mut self, owner: Owner, bytes: i64) {
        let slot = &mut self.0[owner as usize];
        *slot = slot.saturating_add(bytes);
    }
    /// The bytes of `owner`.
    pub fn get(&self, owner: Owner) -> i64 {
        self.0[owner as usize]
    }
    /// Sets the bytes of `owner`.
    pub fn set(&mut self, owner: Owner, bytes: i64) {
        self.0[owner as usize] = bytes;
    }
    /// The sum over every owner but `unattributed`.
    pub fn hooked(&self) -> i64 {
        self.total().saturating_sub(self.get(Owner::Unattributed))
    }
    /// The sum over every owner (saturating: only damaged journals come near the limits).
    pub fn total(&self) -> i64 {
        self.0.iter().fold(0i64, |a, &v| a.saturating_add(v))
    }
    /// `(owner, bytes)` for the report owners.
    pub fn iter(&self) -> impl Iterator<Item = (Owner, i64)> + '_ {
        REPORT_OWNERS.iter().map(|&o| (o, self.get(o)))
    }
}
