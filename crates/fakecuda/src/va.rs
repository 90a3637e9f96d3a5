//! First-fit virtual address allocator: freed ranges are reused, so address reuse happens as it
//! does on a real GPU (the interposer must cope with a new allocation at an old address).
use std::collections::BTreeMap;

pub struct VaSpace {
    base: u64,
    end: u64,
    /// start -> length of every range in use
    used: BTreeMap<u64, u64>,
}

fn align_up(n: u64, align: u64) -> u64 {
    n.div_ceil(align) * align
}

impl VaSpace {
    pub fn new(base: u64, len: u64) -> Self {
        VaSpace {
            base,
            end: base + len,
            used: BTreeMap::new(),
        }
    }

    /// Lowest free range of `size` bytes aligned to `align`.
    pub fn alloc(&mut self, size: u64, align: u64) -> Option<u64> {
        let mut cursor = align_up(self.base, align);
        for (&start, &len) in &self.used {
            if cursor.checked_add(size)? <= start {
                break;
            }
            cursor = align_up(cursor.max(start + len), align);
        }
        if cursor.checked_add(size)? > self.end {
            return None;
        }
        self.used.insert(cursor, size);
        Some(cursor)
    }

    /// Take exactly [addr, addr+size) if it is inside this space and free.
    pub fn alloc_at(&mut self, addr: u64, size: u64) -> bool {
        let Some(end) = addr.checked_add(size) else {
            return false;
        };
        if addr < self.base || end > self.end {
            return false;
        }
        let before = self.used.range(..end).next_back();
        if matches!(before, Some((&s, &l)) if s + l > addr) {
            return false;
        }
        self.used.insert(addr, size);
        true
    }

    pub fn free(&mut self, addr: u64) -> Option<u64> {
        self.used.remove(&addr)
    }
}
