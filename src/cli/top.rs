//! `vramledger top RUN`: a live terminal view of a run (devices × owners, current stage,
//! peaks, what changed in the last seconds), reading the journals as they grow. `q` quits.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use super::say;
use crate::exit;
use crate::metrics::top::{draw, TopState};
use crate::metrics::watch::{self, RunWatch, WatchOptions};

/// Arguments of `vramledger top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// A run folder (it may be empty or not exist yet) or one journal.
    pub path: PathBuf,
    /// Milliseconds between refreshes.
    #[arg(long, value_name = "MS", default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(50..=60_000))]
    pub interval: u64,
    /// Seconds over which a row's change is shown.
    #[arg(long, value_name = "SECONDS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub window: u64,
    /// The `model_name` of every process (default: from the launch command line).
    #[arg(long, value_name = "NAME")]
    pub model_name: Option<String>,
}

/// Runs `vramledger top`; returns the exit code.
pub fn main(args: TopArgs) -> i32 {
    if let Err(e) = watch::check_root(&args.path) {
        return say::fail(e);
    }
    if !std::io::stdout().is_terminal() {
        return say::fail(
            "top draws on a terminal and stdout is not one; for text use `vramledger metrics RUN` or `vramledger report RUN`",
        );
    }
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            ratatui::restore();
            return say::fail(format!("cannot set up the terminal: {e}"));
        }
    };
    let mut w = RunWatch::new(
        &args.path,
        WatchOptions {
            keep_finished: None,
            model_name: args.model_name.clone(),
            ..WatchOptions::default()
        },
    );
    let mut state = TopState::new(Duration::from_secs(args.window));
    let interval = Duration::from_millis(args.interval);
    let root = args.path.display().to_string();
    let mut next = Instant::now();
    let result = loop {
        let now = Instant::now();
        if now >= next {
            w.refresh();
            let _ = w.take_notes(); // the screen is the output; warnings would tear it
            state.update(w.views(), now);
            next = now + interval;
        }
        if let Err(e) = terminal.draw(|f| draw::frame(f, &state, &root, Instant::now())) {
            break Err(format!("cannot draw: {e}"));
        }
        let wait = next.saturating_duration_since(Instant::now());
        match event::poll(wait) {
            Ok(true) => match event::read() {
                Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => match k.code {
                    KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc => break Ok(()),
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        break Ok(())
                    }
                    KeyCode::Down | KeyCode::Char('j') => state.scroll += 1,
                    KeyCode::Up | KeyCode::Char('k') => {
                        state.scroll = state.scroll.saturating_sub(1)
                    }
                    KeyCode::PageDown => state.scroll += 20,
                    KeyCode::PageUp => state.scroll = state.scroll.saturating_sub(20),
                    KeyCode::Home => state.scroll = 0,
                    _ => {}
                },
                Ok(_) => {}
                Err(e) => break Err(format!("cannot read the keyboard: {e}")),
            },
            Ok(false) => {}
            Err(e) => break Err(format!("cannot read the keyboard: {e}")),
        }
    };
    ratatui::restore();
    match result {
        Ok(()) => exit::OK,
        Err(e) => say::fail(e),
    }
}
