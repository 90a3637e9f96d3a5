//! `vramledger top`: what the live terminal view knows between two frames.
//!
//! [`TopState`] keeps, for each process × device × owner, the held bytes of recent refreshes
//! so a row can say how much it changed in the last `window` seconds, and the stage changes
//! of that window. Pure apart from the clock passed in: [`draw`] renders it, the CLI loop
//! feeds it from a [`super::watch::RunWatch`].

pub mod draw;

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use vramledger_format::Owner;

use super::view::{hooked_owners, ProcessView};

/// One row's key: journal, device, owner name (`unattributed`, `free` included).
pub type RowKey = (String, i32, &'static str);

/// A stage change seen while watching.
#[derive(Debug, Clone, PartialEq)]
pub struct StageChange {
    pub at: Instant,
    pub pid: u32,
    pub from: String,
    pub to: String,
}

/// The view between frames.
#[derive(Debug)]
pub struct TopState {
    pub window: Duration,
    pub views: Vec<ProcessView>,
    /// Refreshes, oldest first: when, and each row's bytes then.
    history: VecDeque<(Instant, BTreeMap<RowKey, i64>)>,
    stages: BTreeMap<String, String>,
    /// Stage changes within the window, newest last.
    pub changes: VecDeque<StageChange>,
    /// Rows scrolled past.
    pub scroll: usize,
    /// When the views were last refreshed.
    pub refreshed: Option<Instant>,
}

/// The row that sums the hooked owners.
pub const HOOKED: &str = "all hooked";

/// The owner names a device row shows, in order: the hooked owners, their sum,
/// `unattributed`, `free`.
pub fn row_names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = hooked_owners().map(Owner::name).collect();
    v.push(HOOKED);
    v.push(Owner::Unattributed.name());
    v.push("free");
    v
}

/// Every row's bytes now.
fn rows_of(views: &[ProcessView]) -> BTreeMap<RowKey, i64> {
    let mut m = BTreeMap::new();
    for p in views {
        for d in &p.devices {
            for o in hooked_owners() {
                m.insert((p.journal.clone(), d.device, o.name()), d.live.get(o));
            }
            m.insert((p.journal.clone(), d.device, HOOKED), d.live.hooked());
            m.insert(
                (p.journal.clone(), d.device, Owner::Unattributed.name()),
                d.unattributed,
            );
            if let Some(f) = d.free {
                m.insert((p.journal.clone(), d.device, "free"), f as i64);
            }
        }
    }
    m
}

impl TopState {
    /// An empty state that reports changes over `window`.
    pub fn new(window: Duration) -> TopState {
        TopState {
            window,
            views: Vec::new(),
            history: VecDeque::new(),
            stages: BTreeMap::new(),
            changes: VecDeque::new(),
            scroll: 0,
            refreshed: None,
        }
    }

    /// Takes the views of one refresh made at `now`; ended processes go below the others.
    pub fn update(&mut self, mut views: Vec<ProcessView>, now: Instant) {
        views.sort_by_key(|v| v.running == Some(false));
        for p in &views {
            let old = self
                .stages
                .insert(p.journal.clone(), p.current_stage.clone());
            if let Some(from) = old.filter(|o| *o != p.current_stage) {
                self.changes.push_back(StageChange {
                    at: now,
                    pid: p.labels.pid,
                    from,
                    to: p.current_stage.clone(),
                });
            }
        }
        self.history.push_back((now, rows_of(&views)));
        // Keep the newest refresh at least `window` old as the baseline, drop older ones.
        while self.history.len() > 1 && now.duration_since(self.history[1].0) >= self.window {
            self.history.pop_front();
        }
        while self
            .changes
            .front()
            .is_some_and(|c| now.duration_since(c.at) > self.window)
        {
            self.changes.pop_front();
        }
        self.views = views;
        self.refreshed = Some(now);
    }

    /// How much a row changed over the window (`None`: the row is new within the window, or
    /// there is no refresh old enough yet).
    pub fn change(&self, key: &RowKey) -> Option<i64> {
        let (_, now) = self.history.back()?;
        let (_, base) = self.history.front()?;
        if self.history.len() < 2 {
            return None;
        }
        Some(now.get(key)?.saturating_sub(*base.get(key)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::OwnerBytes;
    use crate::metrics::view::{DeviceView, ProcessLabels};

    fn view(stage: &str, torch: i64) -> ProcessView {
        let mut live = OwnerBytes::default();
        live.set(Owner::Torch, torch);
        ProcessView {
            labels: ProcessLabels {
                pid: 42,
                ..ProcessLabels::default()
            },
            journal: "j".into(),
            start_unix_ns: 0,
            devices: vec![DeviceView {
                device: 0,
                gpu: None,
                uuid: None,
                live,
                peak: live,
                hooked_peak: torch,
                stages: Vec::new(),
                unattributed: 0,
                free: Some(1000),
                total: None,
                oom: 0,
                alloc_failures: 0,
            }],
            current_stage: stage.into(),
            stage_started_unix_s: None,
            last_record_unix_s: None,
            records: 0,
            running: Some(true),
            corrupt: false,
        }
    }

    #[test]
    fn changes_are_measured_over_the_window() {
        let t0 = Instant::now();
        let s = |secs: u64| t0 + Duration::from_secs(secs);
        let key: RowKey = ("j".into(), 0, "torch");
        let mut st = TopState::new(Duration::from_secs(5));
        st.update(vec![view("startup", 100)], s(0));
        assert_eq!(st.change(&key), None, "nothing to compare with yet");
        st.update(vec![view("weight_load", 300)], s(2));
        assert_eq!(st.change(&key), Some(200));
        assert_eq!(st.changes.len(), 1);
        assert_eq!(
            (st.changes[0].from.as_str(), st.changes[0].to.as_str()),
            ("startup", "weight_load")
        );
        st.update(vec![view("weight_load", 300)], s(6));
        assert_eq!(
            st.change(&key),
            Some(200),
            "the baseline is the newest refresh >= 5 s old"
        );
        st.update(vec![view("weight_load", 350)], s(8));
        assert_eq!(st.change(&key), Some(50));
        assert!(st.changes.is_empty(), "the stage change left the window");
        st.update(vec![view("weight_load", 350)], s(14));
        assert_eq!(st.change(&key), Some(0));
    }
}
