//! Which SGLang sizing code a version runs.
//!
//! SGLang's KV sizing was rewritten several times; the research note (`sglang-memory.md`) read five
//! released wheels, and every other version is mapped to the nearest one at or below it. A
//! [`Layout`] is only a name for one of those code shapes: the formulas live in `cell`,
//! `defaults`, `tokens` and `post_capture`, each of which matches on it.

use std::fmt;

/// One released SGLang sizing layout (the release that was read, and everything up to the next).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[allow(non_camel_case_types)]
pub enum Layout {
    /// L1, 0.4.6.post5: monolithic `ModelRunner.profile_max_num_token`, float `//` on the cell,
    /// hard-coded default `mem_fraction_static` table.
    V0_4_6,
    /// L2, 0.5.5: as L1 plus hybrid SWA/Mamba, FP4 MLA, PP MIN, reserved-MB default formula.
    V0_5_5,
    /// L3, 0.5.12: `_profile_available_bytes` + `DefaultPoolConfigurator`, integer bytes,
    /// K and V with their own head dims, piecewise-graph reserve in the default.
    V0_5_12,
    /// L4a, 0.5.18: `KVCacheConfigurator`, `rest <= 0` error with a suggested fraction,
    /// multimodal reservation, draft layers in the target cell, post-capture sizing.
    V0_5_18,
    /// L4, 0.5.23 (newest read): as L4a plus sampling/canary post-capture terms, 0.95 fallback.
    V0_5_23,
}

impl Layout {
    /// Every layout, oldest first.
    pub const ALL: [Layout; 5] = [
        Layout::V0_4_6,
        Layout::V0_5_5,
        Layout::V0_5_12,
        Layout::V0_5_18,
        Layout::V0_5_23,
    ];

    /// The release that was read for this layout.
    pub fn release(self) -> &'static str {
        match self {
            Layout::V0_4_6 => "0.4.6.post5",
            Layout::V0_5_5 => "0.5.5",
            Layout::V0_5_12 => "0.5.12",
            Layout::V0_5_18 => "0.5.18",
            Layout::V0_5_23 => "0.5.23",
        }
    }

    /// The research note's short name: L1, L2, L3, L4a, L4.
    pub fn label(self) -> &'static str {
        match self {
            Layout::V0_4_6 => "L1",
            Layout::V0_5_5 => "L2",
            Layout::V0_5_12 => "L3",
            Layout::V0_5_18 => "L4a",
            Layout::V0_5_23 => "L4",
        }
    }

    fn key(self) -> (u32, u32, u32) {
        match self {
            Layout::V0_4_6 => (0, 4, 6),
            Layout::V0_5_5 => (0, 5, 5),
            Layout::V0_5_12 => (0, 5, 12),
            Layout::V0_5_18 => (0, 5, 18),
            Layout::V0_5_23 => (0, 5, 23),
        }
    }

    /// The layout of the nearest read release at or below `version` (`"0.5.7"` → 0.5.5,
    /// `"v0.5.8.post1"` → 0.5.5, `"0.5.12rc1"` → 0.5.5 since a pre-release precedes its release).
    /// `None` when the version does not parse or is older than 0.4.6.
    pub fn for_version(version: &str) -> Option<Layout> {
        let (nums, pre) = parse_version(version)?;
        Layout::ALL
            .iter()
            .rev()
            .copied()
            .find(|l| (nums, !pre) >= (l.key(), true))
    }

    /// Like [`Layout::for_version`], but a parseable version older than 0.4.6 maps to the oldest
    /// layout. The 0.4.x sizing code kept the same shape from 0.4.0 to 0.4.6 as far as the logs in
    /// `shared/logs` show (0.4.1 and 0.4.3 reproduce with it), but that is an extrapolation.
    pub fn for_version_or_oldest(version: &str) -> Option<Layout> {
        parse_version(version)?;
        Some(Layout::for_version(version).unwrap_or(Layout::V0_4_6))
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.label(), self.release())
    }
}

/// Whether `version`'s `init_memory_pool` builds `ReqToTokenPool(size=max_num_reqs + 1)`:
/// releases before 0.4.7 (0.4.6.post5 executed; 0.4.7's wheel has `size=max_num_reqs`; the 0.4.1
/// and 0.4.3 logs show the extra slot). `false` for an unparseable version.
pub fn req_pool_extra_slot(version: &str) -> bool {
    parse_version(version).is_some_and(|(nums, _)| nums < (0, 4, 7))
}

/// `"v0.5.8.post1"` → `((0, 5, 8), false)`; `"0.5.0rc2"` → `((0, 5, 0), true)`.
/// Missing components are 0 (`"0.5"` → 0.5.0).
fn parse_version(version: &str) -> Option<((u32, u32, u32), bool)> {
    let v = version.trim();
    let v = v.strip_prefix('v').unwrap_or(v);
    let mut nums = [0u32; 3];
    let mut rest = v;
    for (i, slot) in nums.iter_mut().enumerate() {
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if end == 0 {
            if i == 0 {
                return None;
            }
            break;
        }
        *slot = rest[..end].parse().ok()?;
        rest = &rest[end..];
        match rest.strip_prefix('.') {
            Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) && i < 2 => rest = r,
            _ => break,
        }
    }
    let tail = rest.trim_start_matches('.').to_ascii_lowercase();
    let pre = tail.starts_with("rc")
        || tail.starts_with("dev")
        || tail.starts_with('a')
        || tail.starts_with('b');
    Some(((nums[0], nums[1], nums[2]), pre))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_at_or_below() {
        assert_eq!(Layout::for_version("0.5.7"), Some(Layout::V0_5_5));
        assert_eq!(Layout::for_version("0.5.5"), Some(Layout::V0_5_5));
        assert_eq!(Layout::for_version("0.5.4"), Some(Layout::V0_4_6));
        assert_eq!(Layout::for_version("v0.5.8.post1"), Some(Layout::V0_5_5));
        assert_eq!(Layout::for_version("0.4.6.post5"), Some(Layout::V0_4_6));
        assert_eq!(Layout::for_version("0.4.9"), Some(Layout::V0_4_6));
        assert_eq!(Layout::for_version("0.5.12"), Some(Layout::V0_5_12));
        assert_eq!(Layout::for_version("0.5.17"), Some(Layout::V0_5_12));
        assert_eq!(Layout::for_version("0.5.18"), Some(Layout::V0_5_18));
        assert_eq!(Layout::for_version("0.5.22"), Some(Layout::V0_5_18));
        assert_eq!(Layout::for_version("0.5.23"), Some(Layout::V0_5_23));
        assert_eq!(Layout::for_version("0.6.0"), Some(Layout::V0_5_23));
        assert_eq!(Layout::for_version("1.0"), Some(Layout::V0_5_23));
    }

    #[test]
    fn pre_releases_precede_their_release() {
        assert_eq!(Layout::for_version("0.5.12rc1"), Some(Layout::V0_5_5));
        assert_eq!(Layout::for_version("0.5.12.dev3"), Some(Layout::V0_5_5));
        assert_eq!(Layout::for_version("0.5.13rc1"), Some(Layout::V0_5_12));
        assert_eq!(Layout::for_version("0.5.5.post2"), Some(Layout::V0_5_5));
    }

    #[test]
    fn old_and_bad_versions() {
        assert_eq!(Layout::for_version("0.4.3.post4"), None);
        assert_eq!(
            Layout::for_version_or_oldest("0.4.3.post4"),
            Some(Layout::V0_4_6)
        );
        assert_eq!(Layout::for_version("main"), None);
        assert_eq!(Layout::for_version_or_oldest("main"), None);
        assert_eq!(Layout::for_version(""), None);
    }

    #[test]
    fn names() {
        assert_eq!(Layout::V0_5_18.label(), "L4a");
        assert_eq!(Layout::V0_5_23.to_string(), "L4 (0.5.23)");
        assert!(Layout::V0_4_6 < Layout::V0_5_23);
    }
}
