//! The reader's side of the secrets rules (`vramledger_engines::redact`): the shim redacts
//! everything it writes, but a journal may come from an older shim, another writer or a hand,
//! and whatever a verb shows or writes (text, JSON, HTML, SQLite, metrics) starts here. So the
//! header and every record's text are redacted again as they are read, by the same rules;
//! on what the shim wrote, that changes nothing.

use std::borrow::Cow;

use vramledger_engines::redact;
use vramledger_format::{Event, Header, Kind};

/// `h` with its secrets replaced: the command line as the shim redacts it, an `env.` value
/// (or any other value) whose name looks secret, and secret shapes in any value.
pub(crate) fn header(mut h: Header) -> Header {
    for (k, v) in &mut h.pairs {
        let clean = if k == "cmdline" {
            Cow::Owned(redact::cmdline(v))
        } else if let Some(name) = k.strip_prefix("env.") {
            redact::env_value_kept(name, v)
        } else if redact::is_secret_name(k) && !v.is_empty() {
            // No key the shim writes looks secret: another writer's `password` is named, not
            // shown.
            Cow::Borrowed(redact::REDACTED)
        } else {
            redact::shapes(v)
        };
        if clean != v.as_str() {
            *v = clean.into_owned();
        }
    }
    h
}

/// `e`'s text with its secrets replaced (a module's path: secret shapes only, as the rules
/// for a line would read `key=` in a folder name as a setting).
#[cold]
pub(crate) fn text(e: &mut Event) {
    let clean = if e.kind == Kind::Module as u16 {
        redact::shapes(&e.text)
    } else {
        redact::text(&e.text)
    };
    if let Cow::Owned(s) = clean {
        e.text = s;
    }
}
