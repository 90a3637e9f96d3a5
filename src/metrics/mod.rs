//! The ledger where fleets look: Prometheus / OpenMetrics exposition (`metrics`, `serve`), a
//! live terminal view (`top`) and a SQLite history across runs (`export`).
//!
//! - [`view`]: one process's books cut to a low-cardinality shape (the report's own replay);
//! - [`labels`]: command, model name, GPU index / UUID and a redacted command line;
//! - [`exposition`]: the text formats; [`http`]: a small `std::net` server for `/metrics`;
//! - [`watch`]: a run folder followed as its journals grow ([`crate::journal::follow`]);
//! - [`system`]: host name, monotonic clock, whether a process still runs;
//! - [`sqlite`]: the export schema and writer; [`top`]: the terminal view.

pub mod exposition;
pub mod http;
pub mod labels;
pub mod sqlite;
pub mod system;
pub mod top;
pub mod view;
pub mod watch;

use crate::journal::Journal;
use crate::ledger::process;

pub use view::ProcessView;

/// The views of finished reading (`metrics`, `export`): every journal replayed as `report`
/// replays it, ordered as reports order processes, model names filled across each run. The
/// notes say what was left out.
pub fn views_of(journals: &[Journal], model_name: Option<&str>) -> (Vec<ProcessView>, Vec<String>) {
    let host = system::hostname();
    let mut views: Vec<ProcessView> = journals
        .iter()
        .map(|j| {
            let books = process::replay(j);
            let running = system::running(&books.host, books.pid, books.start_unix_ns, &host);
            view::build(j, &books, running)
        })
        .collect();
    let notes = view::arrange(&mut views, model_name);
    (views, notes)
}
