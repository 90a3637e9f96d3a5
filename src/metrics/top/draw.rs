//! Drawing one frame of `vramledger top` (ratatui): a title line, a table of devices × owners
//! (live, peak, change over the window) under each process's current stage, and the stage
//! changes of the window. Rows that changed are highlighted. Names from the journals (stages,
//! commands, hosts, GPUs) are escaped: ratatui drops control characters but not bidi ones.

use std::time::Instant;

use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table};
use ratatui::Frame;
use vramledger_format::Owner;

use super::{row_names, RowKey, TopState, HOOKED};
use crate::metrics::view::{DeviceView, ProcessView};
use crate::output::terminal_text::escaped;

/// Bytes for people: `0 B`, `512.0 KiB`, `24.0 MiB`, `12.50 GiB` (signed when `signed`).
pub fn human(bytes: i64, signed: bool) -> String {
    let sign = if bytes < 0 {
        "-"
    } else if signed && bytes > 0 {
        "+"
    } else {
        ""
    };
    let b = bytes.unsigned_abs() as f64;
    const K: f64 = 1024.0;
    let body = if b >= K * K * K {
        format!("{:.2} GiB", b / (K * K * K))
    } else if b >= K * K {
        format!("{:.1} MiB", b / (K * K))
    } else if b >= K {
        format!("{:.1} KiB", b / K)
    } else {
        format!("{b} B")
    };
    format!("{sign}{body}")
}

/// A duration for people: `45 s`, `3 min 12 s`, `2 h 05 min`.
pub fn duration(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}

fn owner_bytes(d: &DeviceView, name: &str) -> (i64, Option<i64>) {
    match name {
        "free" => (d.free.map_or(0, |f| f as i64), None),
        HOOKED => (d.live.hooked(), Some(d.hooked_peak)),
        "unattributed" => (d.unattributed, None),
        _ => {
            let o = Owner::from_name(name).unwrap_or(Owner::None);
            (d.live.get(o), Some(d.peak.get(o)))
        }
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A process's row: who, whether it runs, and its stage (the widest column).
fn process_row(p: &ProcessView) -> Row<'static> {
    let rank = p
        .labels
        .rank
        .map_or_else(String::new, |r| format!(" rank {r}"));
    let state = match p.running {
        Some(true) => "running",
        Some(false) => "exited",
        None => "remote",
    };
    let current = escaped(&p.current_stage);
    let stage = match (p.running, p.stage_started_unix_s) {
        (Some(false), _) => format!("ended in stage {current}"),
        (_, Some(t)) => format!("stage {current} for {}", duration(unix_now() - t)),
        _ => format!("stage {current}"),
    };
    Row::new(vec![
        Cell::from(format!("pid {}{rank}", p.labels.pid)),
        Cell::from(format!("[{state}]")),
        Cell::from(""),
        Cell::from(""),
        Cell::from(""),
        Cell::from(format!(
            "{stage}  {} on {}",
            escaped(&p.labels.command),
            escaped(&p.labels.host)
        )),
    ])
    .style(Style::default().add_modifier(Modifier::BOLD))
}

fn rows(st: &TopState) -> Vec<Row<'static>> {
    let mut out = Vec::new();
    for p in &st.views {
        out.push(process_row(p));
        for d in &p.devices {
            let gpu = d
                .gpu
                .as_deref()
                .or(d.uuid.as_deref())
                .map_or_else(|| "-".into(), |g| escaped(g).into_owned());
            for name in row_names() {
                let (live, peak) = owner_bytes(d, name);
                let key: RowKey = (p.journal.clone(), d.device, name);
                let change = st.change(&key);
                let hooked = !matches!(name, "free" | "unattributed" | HOOKED);
                if hooked && live == 0 && peak.unwrap_or(0) == 0 {
                    continue; // an owner that never held anything here
                }
                let changed = change.is_some_and(|c| c != 0);
                let style = if changed {
                    Style::default()
                        .fg(Color::Yellow)
                        .add_modifier(Modifier::BOLD)
                } else {
                    Style::default()
                };
                out.push(
                    Row::new(vec![
                        Cell::from(format!("  dev {} gpu {gpu}", d.device)),
                        Cell::from(name),
                        Cell::from(human(live, false)),
                        Cell::from(peak.map_or_else(|| "-".into(), |p| human(p, false))),
                        Cell::from(change.map_or_else(|| "-".into(), |c| human(c, true))),
                    ])
                    .style(style),
                );
            }
            if d.oom > 0 {
                out.push(
                    Row::new(vec![
                        Cell::from(format!("  dev {} gpu {gpu}", d.device)),
                        Cell::from("out of memory"),
                        Cell::from(format!("{} failed", d.oom)),
                    ])
                    .style(Style::default().fg(Color::Red)),
                );
            }
        }
    }
    out
}

/// Draws one frame.
pub fn frame(f: &mut Frame, st: &TopState, root: &str, now: Instant) {
    let running = st.views.iter().filter(|p| p.running == Some(true)).count();
    let secs = st.window.as_secs_f64();
    let title = Line::from(vec![
        Span::styled(
            "vramledger top ",
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(
            "{root}  {} processes ({running} running)  changes over {secs:.0} s  q quits",
            st.views.len()
        )),
    ]);
    let changes_height = if st.changes.is_empty() {
        0
    } else {
        st.changes.len().min(6) as u16 + 2
    };
    let [top, body, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(changes_height),
    ])
    .areas(f.area());
    f.render_widget(Paragraph::new(title), top);
    if st.views.is_empty() {
        let msg = format!(
            "waiting for journals in {root} (none yet): start the program under `vramledger run --out {root} -- ...`"
        );
        f.render_widget(
            Paragraph::new(msg).block(Block::default().borders(Borders::ALL)),
            body,
        );
    } else {
        let all = rows(st);
        let skip = st.scroll.min(all.len().saturating_sub(1));
        let header = Row::new(vec![
            Cell::from("device"),
            Cell::from("owner"),
            Cell::from("live"),
            Cell::from("peak"),
            Cell::from(format!("change {secs:.0} s")),
            Cell::from("stage"),
        ])
        .style(Style::default().add_modifier(Modifier::UNDERLINED));
        let table = Table::new(
            all.into_iter().skip(skip),
            [
                Constraint::Length(18),
                Constraint::Length(17),
                Constraint::Length(11),
                Constraint::Length(11),
                Constraint::Length(11),
                Constraint::Min(10),
            ],
        )
        .header(header)
        .block(Block::default().borders(Borders::ALL));
        f.render_widget(table, body);
    }
    if changes_height > 0 {
        let lines: Vec<Line> = st
            .changes
            .iter()
            .rev()
            .take(6)
            .map(|c| {
                Line::from(format!(
                    "{:>5.1} s ago  pid {}: {} -> {}",
                    now.duration_since(c.at).as_secs_f64(),
                    c.pid,
                    escaped(&c.from),
                    escaped(&c.to)
                ))
            })
            .collect();
        f.render_widget(
            Paragraph::new(lines).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" stage changes "),
            ),
            bottom,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::OwnerBytes;
    use crate::metrics::view::{DeviceView, ProcessLabels};
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    use std::time::Duration;

    fn screen(st: &TopState) -> String {
        let mut t = Terminal::new(TestBackend::new(120, 24)).unwrap();
        t.draw(|f| frame(f, st, "out/", Instant::now())).unwrap();
        let buf = t.backend().buffer();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn process(torch: i64, stage: &str) -> ProcessView {
        let mut live = OwnerBytes::default();
        live.set(Owner::Torch, torch);
        live.set(Owner::Context, 300 << 20);
        ProcessView {
            labels: ProcessLabels {
                pid: 4242,
                rank: Some(1),
                host: "h1".into(),
                command: "sglang.launch_server".into(),
                ..ProcessLabels::default()
            },
            journal: "j".into(),
            start_unix_ns: 0,
            devices: vec![DeviceView {
                device: 1,
                gpu: Some("5".into()),
                uuid: None,
                live,
                peak: live,
                hooked_peak: torch + (300 << 20),
                stages: Vec::new(),
                unattributed: 12 << 20,
                free: Some(10 << 30),
                total: None,
                oom: 2,
                alloc_failures: 2,
            }],
            current_stage: stage.into(),
            stage_started_unix_s: None,
            last_record_unix_s: None,
            records: 10,
            running: Some(true),
            corrupt: false,
        }
    }

    #[test]
    fn an_empty_run_waits_and_a_run_shows_devices_by_owner() {
        let mut st = TopState::new(Duration::from_secs(5));
        assert!(
            screen(&st).contains("waiting for journals in out/"),
            "{}",
            screen(&st)
        );
        let t0 = Instant::now();
        st.update(vec![process(1 << 30, "weight_load")], t0);
        st.update(
            vec![process(3 << 29, "kv_pool")],
            t0 + Duration::from_secs(1),
        );
        let s = screen(&st);
        for want in [
            "pid 4242 rank 1",
            "[running]",
            "stage kv_pool",
            "dev 1 gpu 5",
            "torch ",
            "1.50 GiB",
            "+512.0 MiB",
            "context",
            "300.0 MiB",
            "all hooked",
            "unattributed",
            "12.0 MiB",
            "10.00 GiB",
            "out of memory",
            "2 failed",
            "pid 4242: weight_load -> kv_pool",
        ] {
            assert!(s.contains(want), "no {want:?} on\n{s}");
        }
        assert!(
            !s.contains("nccl"),
            "owners that never held memory are left out\n{s}"
        );
    }

    #[test]
    fn journal_names_are_drawn_escaped() {
        let mut st = TopState::new(Duration::from_secs(5));
        let mut p = process(1 << 30, "load\u{202e}gnp");
        p.labels.host = "h\x1b[2J".into();
        p.labels.command = "py".into();
        let t0 = Instant::now();
        st.update(vec![p.clone()], t0);
        p.current_stage = "kv\u{2066}".into();
        st.update(vec![p], t0 + Duration::from_secs(1));
        let s = screen(&st);
        for want in [
            "on h\\x1b[2J",
            "stage kv\\u{2066}",
            "load\\u{202e}gnp -> kv\\u{2066}",
        ] {
            assert!(s.contains(want), "no {want:?} on\n{s}");
        }
        assert!(!s.contains(['\u{202e}', '\u{2066}', '\x1b']), "{s}");
    }

    #[test]
    fn tiny_terminals_draw_without_a_panic() {
        let mut st = TopState::new(Duration::from_secs(5));
        st.update(vec![process(1 << 30, "weight_load")], Instant::now());
        st.scroll = 1000;
        for (w, h) in [(1, 1), (10, 3), (40, 2), (200, 4)] {
            let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
            t.draw(|f| frame(f, &st, "out/", Instant::now())).unwrap();
        }
    }

    #[test]
    fn people_units() {
        assert_eq!(human(0, true), "0 B");
        assert_eq!(human(-3 << 20, true), "-3.0 MiB");
        assert_eq!(human(5 << 30, true), "+5.00 GiB");
        assert_eq!(human(1536, false), "1.5 KiB");
        assert_eq!(duration(59.9), "59 s");
        assert_eq!(duration(192.0), "3 min 12 s");
        assert_eq!(duration(7500.0), "2 h 05 min");
    }
}
