//! What never reaches a journal: secrets in the command line, the environment and the lines an
//! engine prints. The one set of rules, used by the shim for everything it writes.
//!
//! The rules (also in docs/journal.md):
//! - a name *looks secret* ([`is_secret_name`]) when, upper-cased with `-` and `.` read as `_`,
//!   it is `KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `APIKEY` or `API_KEY`, ends with `_KEY`,
//!   `_TOKEN`, `_SECRET` or `APIKEY`, or contains `PASSWORD`, `PASSWD`, `SECRET` or
//!   `CREDENTIAL`; or when one of its words (split at `_`, `-`, `.`) is `token`, `secret(s)`,
//!   `password`, `passwd`, `passphrase`, `credential(s)`, `apikey`, `authorization` or
//!   `cookie`, or `key(s)` after `api`, `access`, `private`, `secret`, `signing` or
//!   `encryption` (`--api-key`, `--hf-token`, `HF_TOKEN`, `VLLM_API_KEY`,
//!   `ssl_keyfile_password`; not `--tokenizer`, `keyfile` or `--max-num-batched-tokens`);
//! - *secret shapes* are secrets whatever their name: Hugging Face, OpenAI and GitHub tokens
//!   (`hf_…`, `sk-…`, `ghp_…`, `github_pat_…` of 20 characters or more) and the password of a
//!   URL (`scheme://user:password@`);
//! - command line ([`args`], [`cmdline`]): the value of a flag whose name looks secret, written
//!   `--flag value` (the next word, unless it is itself a `--flag`) or `--flag=value`, the value
//!   of an environment-style `NAME=value` word whose name looks secret, and secret shapes in any
//!   word, become `<redacted>`;
//! - environment ([`env_value`]): a value is recorded only for a name on the allow-list (the
//!   exact names in [`ENV_EXACT`], and names starting with one of [`ENV_PREFIXES`] that do not
//!   name a location: `URL`, `URI`, `HOST`, `ENDPOINT`, `ADDR`, `AUTH`, `COOKIE`); a listed name
//!   that looks secret is recorded as `<redacted>`, and a value is redacted as a line is
//!   ([`text`]: it may hold settings of its own);
//! - text ([`text`]: settings lines such as SGLang's `server_args=ServerArgs(...)` or vLLM's
//!   `non-default args: {...}`, and every log line a journal keeps): the value after a
//!   secret-looking key followed by `=` or `:` (keys bare or quoted), or after a secret-looking
//!   `--flag` and a space, is replaced, keeping its quotes (`api_key='<redacted>'`); a bare
//!   value runs to the next `,` `)` `]` `}` `>` outside brackets and quotes (a list or a dict is
//!   replaced whole), a quoted one to its closing quote or, in a cut line, to the end; `None`,
//!   `null` and empty values stay as they are (they hold nothing); then secret shapes anywhere.

use std::borrow::Cow;

/// What a secret value is replaced by.
pub const REDACTED: &str = "<redacted>";

/// Environment variables whose values are recorded exactly (they shape allocation or say
/// which rank and device a process is).
pub const ENV_EXACT: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "CUDA_MODULE_LOADING",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "OMP_NUM_THREADS",
];

/// Families of settings whose values are recorded unless the name names a location.
pub const ENV_PREFIXES: &[&str] = &[
    "PYTORCH_",
    "TORCH_",
    "TORCHINDUCTOR_",
    "NCCL_",
    "SGLANG_",
    "VLLM_",
];

fn normalized(name: &str) -> String {
    name.trim_start_matches('-')
        .chars()
        .map(|c| match c {
            '-' | '.' => '_',
            c => c.to_ascii_uppercase(),
        })
        .collect()
}

/// True when a flag, variable or key name looks like it holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let n = normalized(name);
    let n = n.trim_matches('_');
    if matches!(
        n,
        "KEY" | "TOKEN" | "SECRET" | "PASSWORD" | "APIKEY" | "API_KEY"
    ) || n.ends_with("_KEY")
        || n.ends_with("_TOKEN")
        || n.ends_with("_SECRET")
        || n.ends_with("APIKEY")
        || ["PASSWORD", "PASSWD", "SECRET", "CREDENTIAL"]
            .iter()
            .any(|w| n.contains(w))
    {
        return true;
    }
    const SECRET_WORDS: &[&str] = &[
        "TOKEN",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "CREDENTIAL",
        "CREDENTIALS",
        "APIKEY",
        "AUTHORIZATION",
        "COOKIE",
    ];
    const KEY_OWNERS: &[&str] = &[
        "API",
        "ACCESS",
        "PRIVATE",
        "SECRET",
        "SIGNING",
        "ENCRYPTION",
    ];
    let words: Vec<&str> = n.split('_').filter(|w| !w.is_empty()).collect();
    words.iter().any(|w| SECRET_WORDS.contains(w))
        || words
            .windows(2)
            .any(|p| KEY_OWNERS.contains(&p[0]) && (p[1] == "KEY" || p[1] == "KEYS"))
}

fn names_location(name: &str) -> bool {
    let n = normalized(name);
    ["URL", "URI", "HOST", "ENDPOINT", "ADDR", "AUTH", "COOKIE"]
        .iter()
        .any(|w| n.contains(w))
}

/// What the journal records for environment variable `name` holding `value`: `None` to
/// leave it out.
pub fn env_value<'a>(name: &str, value: &'a str) -> Option<Cow<'a, str>> {
    let listed = ENV_EXACT.contains(&name)
        || ENV_PREFIXES.iter().any(|p| name.starts_with(p)) && !names_location_unless_secret(name);
    listed.then(|| env_value_kept(name, value))
}

/// Environment variable `name`'s value as a journal may hold it, whoever wrote the journal:
/// `<redacted>` for a name that looks secret, else the value with the settings it holds
/// redacted as a line's are (`{"password": …}`, `api_key=…`, `--api-key …`).
pub fn env_value_kept<'a>(name: &str, value: &'a str) -> Cow<'a, str> {
    if is_secret_name(name) && !value.is_empty() {
        return Cow::Borrowed(REDACTED);
    }
    text(value)
}

/// A listed family's name that names a location is left out, unless it looks secret (then it
/// is recorded as `<redacted>`: the run says it was set, not to what).
fn names_location_unless_secret(name: &str) -> bool {
    names_location(name) && !is_secret_name(name)
}

/// An environment-style `NAME=value` word: `NAME` is `[A-Za-z_][A-Za-z0-9_]*`.
fn env_assignment(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    let mut chars = name.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() || first == '_')
        .then_some(())
        .filter(|_| chars.all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(|_| (name, value))
}

/// A command line with every secret value replaced by `<redacted>`.
pub fn args<S: AsRef<str>>(args: &[S]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for a in args {
        let a = a.as_ref();
        if hide_next && !a.starts_with("--") {
            hide_next = false;
            out.push(REDACTED.to_string());
            continue;
        }
        hide_next = false;
        if a.starts_with('-') && a.len() > 1 {
            match a.split_once('=') {
                Some((flag, v)) if is_secret_name(flag) && !v.is_empty() => {
                    out.push(format!("{flag}={REDACTED}"))
                }
                Some(_) => out.push(text(a).into_owned()),
                None => {
                    hide_next = is_secret_name(a);
                    out.push(a.to_string());
                }
            }
            continue;
        }
        match env_assignment(a) {
            Some((name, v)) if is_secret_name(name) && !v.is_empty() => {
                out.push(format!("{name}={REDACTED}"))
            }
            // A word may hold settings of its own (`Authorization: Bearer …`, a JSON config).
            _ => out.push(text(a).into_owned()),
        }
    }
    out
}

/// A command line as `/proc/self/cmdline` holds it (arguments separated by NUL), redacted as
/// [`args`] does.
pub fn cmdline(cmdline: &str) -> String {
    let words: Vec<&str> = cmdline.split('\0').collect();
    args(&words).join("\0")
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// [`text`] of a line that was cut short: its last word, which may be the start of a token too
/// short now for its shape to be told, is dropped first.
pub fn cut_text(line: &str) -> Cow<'_, str> {
    let keep = line
        .rfind([' ', '\t', ',', '\'', '"', '=', ':', '(', '[', '{'])
        .map_or(0, |i| i + 1);
    text(&line[..keep])
}

/// `line` with every secret replaced by [`REDACTED`] (see the module's rules).
pub fn text(line: &str) -> Cow<'_, str> {
    let b = line.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if !is_key_byte(b[i]) || (i > 0 && is_key_byte(b[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_key_byte(b[i]) {
            i += 1;
        }
        let key_end = i;
        let key = &line[start..key_end];
        if !is_secret_name(key) {
            continue;
        }
        // An optional closing quote of a quoted key, spaces, then '=' or ':' (or, for a
        // `--flag`, a space and the next word).
        let mut k = key_end;
        if matches!(b.get(k), Some(b'\'' | b'"')) {
            k += 1;
        }
        while b.get(k) == Some(&b' ') {
            k += 1;
        }
        let (from, to, end) = if matches!(b.get(k), Some(b'=' | b':')) {
            k += 1;
            while b.get(k) == Some(&b' ') {
                k += 1;
            }
            value_span(b, k)
        } else if key.starts_with("--")
            && k > key_end
            && k < b.len()
            && !line[k..].starts_with("--")
        {
            let to = b[k..]
                .iter()
                .position(|&c| {
                    c.is_ascii_whitespace() || matches!(c, b'\'' | b'"' | b',' | b')' | b']' | b'}')
                })
                .map_or(b.len(), |p| k + p);
            (k, to, to)
        } else {
            continue;
        };
        let value = &line[from..to];
        if !value.is_empty() && !matches!(value, "None" | "null" | "NULL") {
            out.push_str(&line[copied..from]);
            out.push_str(REDACTED);
            copied = to;
        }
        i = end.max(key_end);
    }
    if copied == 0 {
        return shapes(line);
    }
    out.push_str(&line[copied..]);
    Cow::Owned(shapes(&out).into_owned())
}

/// The value starting at `at`: `(replace_from, replace_to, end)`. A quoted value keeps its
/// quotes (an unclosed one, in a cut line, runs to the end); a bare value ends at a `,`, `)`,
/// `]`, `}` or `>` outside brackets and quotes, its trailing spaces kept.
fn value_span(b: &[u8], at: usize) -> (usize, usize, usize) {
    if let Some(&q) = b.get(at).filter(|q| **q == b'\'' || **q == b'"') {
        let mut i = at + 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                c if c == q => return (at + 1, i, i + 1),
                _ => i += 1,
            }
        }
        return (at + 1, b.len(), b.len());
    }
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    let mut i = at;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 1;
            } else if c == q {
                quote = None;
            }
        } else {
            match c {
                b'\'' | b'"' => quote = Some(c),
                b'(' | b'[' | b'{' | b'<' => depth += 1,
                b')' | b']' | b'}' | b'>' if depth > 0 => depth -= 1,
                b',' | b')' | b']' | b'}' | b'>' if depth == 0 => break,
                _ => {}
            }
        }
        i += 1;
    }
    let end = i.min(b.len());
    let mut to = end;
    while to > at && b[to - 1] == b' ' {
        to -= 1;
    }
    (at, to, end)
}

/// Secret shapes anywhere in `s`: token-shaped values and URL passwords.
pub fn shapes(s: &str) -> Cow<'_, str> {
    let b = s.as_bytes();
    let mut out = String::new();
    let mut copied = 0;
    let mut i = 0;
    let tok = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
    while i < b.len() {
        let boundary = i == 0 || !tok(b[i - 1]);
        let prefix = [&b"hf_"[..], b"sk-", b"ghp_", b"github_pat_"]
            .into_iter()
            .find(|p| boundary && b[i..].starts_with(p));
        if let Some(p) = prefix {
            let mut j = i + p.len();
            while j < b.len() && tok(b[j]) {
                j += 1;
            }
            if j - i - p.len() >= 20 {
                out.push_str(&s[copied..i]);
                out.push_str(REDACTED);
                copied = j;
            }
            i = j;
            continue;
        }
        if b[i..].starts_with(b"://") {
            let from = i + 3;
            let mut j = from;
            let mut colon = None;
            while j < b.len() && !matches!(b[j], b'/' | b'@' | b'\'' | b'"' | b' ' | b',') {
                if b[j] == b':' && colon.is_none() {
                    colon = Some(j);
                }
                j += 1;
            }
            if let (Some(c), Some(b'@')) = (colon, b.get(j)) {
                if c + 1 < j {
                    out.push_str(&s[copied..c + 1]);
                    out.push_str(REDACTED);
                    copied = j;
                }
            }
            i = j.max(from);
            continue;
        }
        i += 1;
    }
    if copied == 0 {
        return Cow::Borrowed(s);
    }
    out.push_str(&s[copied..]);
    Cow::Owned(out)
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
