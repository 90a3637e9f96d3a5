//! Frames the journal reader's and the follower's tests build journals from.

use vramledger_format::frame::{encode_frame, frame_len};
use vramledger_format::{Api, Event, Kind, Owner};

/// One format-1 frame of `kind` around `payload`.
pub fn frame(kind: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; frame_len(payload.len())];
    encode_frame(kind, payload, &mut b);
    b
}

/// A 2 MiB torch allocation at `addr` on device 0, as one frame.
pub fn alloc(addr: u64) -> Vec<u8> {
    let e = Event {
        kind: Kind::Alloc as u16,
        addr,
        size: 2 << 20,
        owner: Owner::Torch as u8,
        api: Api::cuMemAlloc_v2 as u16,
        device: 0,
        ..Event::default()
    };
    frame(e.kind, &e.encode())
}
