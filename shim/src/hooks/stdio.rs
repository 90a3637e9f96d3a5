//! stdio output reaches the tap (see `shim/csrc/stdio_tap.c`).

/// The libc stdio functions vramledger exports in place of libc's.
pub const HOOKED: &[&str] = &[];

/// True for the name of a stdio function vramledger exports.
pub fn is_hooked(name: &[u8]) -> bool {
    HOOKED.iter().any(|h| h.as_bytes() == name)
}
