//! Secrets in the settings lines an engine prints (and in a command line or an environment
//! value): replaced by [`REDACTED`] before anything is written to a journal
//! ([`super::settings`] keeps the lines).

/// What a secret is replaced by.
pub const REDACTED: &str = "<redacted>";

/// A byte of a setting's name (`max_total_tokens`, `hf-token`, `a.b`).
pub(super) fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// Whether a setting named `key` holds a secret: a `token`, `secret`, `password`, … word in
/// it, or `key` after `api`, `access`, `private`, … (`api_key`, `admin_api_key`, `hf_token`,
/// `ssl_keyfile_password`). `max_total_tokens` or `tokenizer_path` are not secrets.
pub fn is_secret_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(['_', '-', '.'])
        .filter(|w| !w.is_empty())
        .collect();
    const SECRET_WORDS: &[&str] = &[
        "token",
        "secret",
        "secrets",
        "password",
        "passwd",
        "passphrase",
        "credential",
        "credentials",
        "apikey",
        "authorization",
        "cookie",
    ];
    const KEY_OWNERS: &[&str] = &[
        "api",
        "access",
        "private",
        "secret",
        "signing",
        "encryption",
    ];
    words.iter().any(|w| SECRET_WORDS.contains(w))
        || words
            .windows(2)
            .any(|p| KEY_OWNERS.contains(&p[0]) && (p[1] == "key" || p[1] == "keys"))
}

/// Where the value starting at `at` ends, and the part to replace: `(end, replace_from,
/// replace_to)`. A quoted value keeps its quotes; a bare value ends at a `,`, `)`, `]`, `}` or
/// `>` outside brackets and quotes.
fn value_span(b: &[u8], at: usize) -> (usize, usize, usize) {
    if let Some(&q) = b.get(at).filter(|q| **q == b'\'' || **q == b'"') {
        let mut i = at + 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                c if c == q => return (i + 1, at + 1, i),
                _ => i += 1,
            }
        }
        // Unclosed (a cut line): everything after the quote.
        return (b.len(), at + 1, b.len());
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
    // Trailing spaces stay (", " separators).
    let mut to = end;
    while to > at && b[to - 1] == b' ' {
        to -= 1;
    }
    (end, at, to)
}

/// `line` with every secret replaced by [`REDACTED`]: the values of secret-named keys in
/// `key=value`, `'key': value` and `"key": value` form (quoted values keep their quotes; `None`
/// and empty strings are kept), then Hugging Face / OpenAI-style tokens and the password part of
/// URLs anywhere.
pub fn redact(line: &str) -> String {
    let b = line.as_bytes();
    let mut out = String::with_capacity(line.len());
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
        let mut k = key_end;
        if start > 0 && matches!(b[start - 1], b'\'' | b'"') && b.get(k) == Some(&b[start - 1]) {
            k += 1;
        }
        while b.get(k) == Some(&b' ') {
            k += 1;
        }
        if !matches!(b.get(k), Some(b'=' | b':')) || !is_secret_key(&line[start..key_end]) {
            continue;
        }
        k += 1;
        while b.get(k) == Some(&b' ') {
            k += 1;
        }
        let (end, from, to) = value_span(b, k);
        let value = &line[from..to];
        if !value.is_empty() && value != "None" {
            out.push_str(&line[copied..from]);
            out.push_str(REDACTED);
            copied = to;
        }
        i = end.max(key_end);
    }
    out.push_str(&line[copied..]);
    redact_shapes(&out)
}

/// Token-shaped values (`hf_…`, `sk-…`, `ghp_…` of 20+ characters) and URL passwords
/// (`scheme://user:password@`) anywhere in `s`.
fn redact_shapes(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
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
    out.push_str(&s[copied..]);
    out
}

/// A command line (arguments separated by NUL, as `/proc/self/cmdline` holds it) with the value
/// of every secret-named flag (`--api-key X`, `--hf-token=X`, …) and every token-shaped argument
/// replaced by [`REDACTED`].
pub fn redact_cmdline(cmdline: &str) -> String {
    let args: Vec<&str> = cmdline.split('\0').collect();
    let mut out: Vec<String> = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for a in args {
        if hide_next && !a.starts_with("--") {
            out.push(REDACTED.to_string());
            hide_next = false;
            continue;
        }
        hide_next = false;
        let flag = a.strip_prefix("--").or_else(|| a.strip_prefix('-'));
        match flag.map(|f| f.split_once('=')) {
            Some(Some((name, v))) if is_secret_key(name) && !v.is_empty() => {
                out.push(format!("{}={REDACTED}", &a[..a.len() - v.len() - 1]));
            }
            Some(None) if is_secret_key(flag.unwrap_or("")) => {
                hide_next = true;
                out.push(a.to_string());
            }
            _ => out.push(redact_shapes(a)),
        }
    }
    out.join("\0")
}

/// The value of environment variable `key` as a journal may keep it: [`REDACTED`] when the
/// name says it holds a secret (`VLLM_API_KEY`, `HF_TOKEN`), else with token shapes redacted.
pub fn redact_env(key: &str, value: &str) -> String {
    if is_secret_key(key) && !value.is_empty() {
        REDACTED.to_string()
    } else {
        redact_shapes(value)
    }
}
