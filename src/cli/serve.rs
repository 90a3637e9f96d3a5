//! `vramledger serve RUN --listen 127.0.0.1:9464`: `/metrics` over HTTP, from journals read
//! as they grow. Loopback by default; a busy port or a bad address is one line and exit 2.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;

use super::say;
use crate::exit;
use crate::metrics::exposition::{self, Clock, ReaderState};
use crate::metrics::http;
use crate::metrics::watch::{RunWatch, WatchOptions};

/// Arguments of `vramledger serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A run folder (it may be empty or not exist yet) or one journal.
    pub path: PathBuf,
    /// HOST:PORT to listen on (port 0 picks a free one; the address is printed on stderr).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9464")]
    pub listen: String,
    /// The `model_name` label of every process (default: from the launch command line).
    #[arg(long, value_name = "NAME")]
    pub model_name: Option<String>,
    /// Seconds an ended process stays in the exposition once it has been scraped after its end.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub keep_finished: u64,
}

/// Runs `vramledger serve`; returns the exit code (only on a startup error).
pub fn main(args: ServeArgs) -> i32 {
    if let Err(e) = crate::metrics::watch::check_root(&args.path) {
        return say::fail(e);
    }
    let listener = match http::bind(&args.listen) {
        Ok(l) => l,
        Err(e) => return say::fail(e),
    };
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => return say::fail(format!("cannot read the address listened on: {e}")),
    };
    let mut watch = RunWatch::new(
        &args.path,
        WatchOptions {
            keep_finished: Some(Duration::from_secs(args.keep_finished)),
            model_name: args.model_name.clone(),
            ..WatchOptions::default()
        },
    );
    if !args.path.exists() {
        say::line(format_args!(
            "note: {} does not exist yet; waiting for its journals",
            args.path.display()
        ));
    }
    watch.refresh();
    for n in watch.take_notes() {
        say::line(n);
    }
    if !addr.ip().is_loopback() {
        say::line(format_args!(
            "note: listening beyond loopback ({addr}): anyone who reaches it sees your process and model names"
        ));
    }
    say::line(format_args!(
        "serving {} at http://{addr}/metrics ({} journals so far)",
        args.path.display(),
        watch.journals()
    ));
    let watch = Arc::new(Mutex::new(watch));
    http::run(
        listener,
        Arc::new(move |format| {
            let mut w = watch.lock().unwrap_or_else(|p| p.into_inner());
            w.refresh();
            for n in w.take_notes() {
                say::line(n);
            }
            let views = w.views();
            let reader = ReaderState {
                journals: w.journals(),
                unreadable: w.unreadable(),
            };
            let text = exposition::render(&views, reader, &Clock::now(), format);
            w.mark_shown();
            text
        }),
    );
    exit::OK
}
