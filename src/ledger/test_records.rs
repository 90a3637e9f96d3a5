//! What the ledger's unit tests share: records built by hand.

use vramledger_format::{Api, Event, Kind};

/// Appends a record of `kind` made through `api` on device 0, 1 µs after the one before it
/// (the first at 1 µs); returns it for the caller to fill in.
pub fn push(events: &mut Vec<Event>, kind: Kind, api: Api) -> &mut Event {
    let t_ns = (events.len() as u64 + 1) * 1_000;
    events.push(Event {
        kind: kind as u16,
        api: api as u16,
        t_ns,
        device: 0,
        ..Event::default()
    });
    events.last_mut().expect("just pushed")
}
