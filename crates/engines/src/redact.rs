//! What never reaches a journal: secrets in the command line, the environment and the
//! settings lines an engine prints.
//!
//! The rules (also in docs/journal.md):
//! - a name *looks secret* when, upper-cased with `-` and `.` read as `_`, it is `KEY`,
//!   `TOKEN`, `SECRET`, `PASSWORD`, `APIKEY` or `API_KEY`, ends with `_KEY`, `_TOKEN`,
//!   `_SECRET` or `APIKEY`, or contains `PASSWORD`, `PASSWD`, `SECRET` or `CREDENTIAL`;
//! - command line: the value of a flag whose name looks secret is replaced by `<redacted>`,
//!   written `--flag value` (the next word, unless it is itself a `--flag`) or `--flag=value`;
//!   so is the value of an environment-style `NAME=value` word whose name looks secret;
//! - environment: a value is recorded only for a name on the allow-list (the exact names in
//!   [`ENV_EXACT`], and names starting with one of [`ENV_PREFIXES`] that neither look secret
//!   nor name a location: `URL`, `URI`, `HOST`, `ENDPOINT`, `ADDR`, `AUTH`, `COOKIE`), and a
//!   name of those families that looks secret is recorded with the value `<redacted>`;
//! - text (settings lines such as SGLang's `server_args=ServerArgs(...)` or vLLM's
//!   `non-default args: {...}`, and every log line a journal keeps): the value after a
//!   secret-looking key followed by `=` or `:` (or after a `--flag` and a space) is replaced,
//!   keeping its quotes or brackets (`api_key='<redacted>'`); `None`, `null` and empty
//!   values stay as they are (they hold nothing).

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

/// Families of settings whose values are recorded unless the name looks secret or names a
/// location.
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
    matches!(
        n,
        "KEY" | "TOKEN" | "SECRET" | "PASSWORD" | "APIKEY" | "API_KEY"
    ) || n.ends_with("_KEY")
        || n.ends_with("_TOKEN")
        || n.ends_with("_SECRET")
        || n.ends_with("APIKEY")
        || ["PASSWORD", "PASSWD", "SECRET", "CREDENTIAL"]
            .iter()
            .any(|w| n.contains(w))
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
    if ENV_EXACT.contains(&name) {
        return Some(Cow::Borrowed(value));
    }
    if !ENV_PREFIXES.iter().any(|p| name.starts_with(p)) {
        return None;
    }
    if is_secret_name(name) {
        return Some(Cow::Borrowed(REDACTED));
    }
    if names_location(name) {
        return None;
    }
    Some(Cow::Borrowed(value))
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
pub fn redact_args<S: AsRef<str>>(args: &[S]) -> Vec<String> {
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
                Some((flag, _)) if is_secret_name(flag) => out.push(format!("{flag}={REDACTED}")),
                Some(_) => out.push(a.to_string()),
                None => {
                    hide_next = is_secret_name(a);
                    out.push(a.to_string());
                }
            }
            continue;
        }
        match env_assignment(a) {
            Some((name, _)) if is_secret_name(name) => out.push(format!("{name}={REDACTED}")),
            _ => out.push(a.to_string()),
        }
    }
    out
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.'
}

/// A settings line with the value of every secret-looking `key=value` / `key: value` (keys
/// bare or quoted) replaced by `<redacted>`.
pub fn redact_text(line: &str) -> Cow<'_, str> {
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
        let key = &line[start..i];
        if !is_secret_name(key) {
            continue;
        }
        // An optional closing quote of a quoted key, spaces, then '=' or ':' (or, for a
        // `--flag`, the next word).
        let mut j = i;
        if j < b.len() && (b[j] == b'\'' || b[j] == b'"') {
            j += 1;
        }
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        if j < b.len() && (b[j] == b'=' || b[j] == b':') {
            j += 1;
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
        } else if !(key.starts_with("--") && j > i && j < b.len() && !line[j..].starts_with("--")) {
            continue;
        }
        let Some((from, to)) = value_span(b, j) else {
            continue;
        };
        let value = &line[from..to];
        if value.is_empty() || matches!(value, "None" | "null" | "NULL" | "''" | "\"\"") {
            i = to;
            continue;
        }
        out.push_str(&line[copied..from]);
        out.push_str(REDACTED);
        copied = to;
        i = to;
    }
    if copied == 0 {
        return Cow::Borrowed(line);
    }
    out.push_str(&line[copied..]);
    Cow::Owned(out)
}

/// The value starting at `j`: inside its quotes or brackets when it has them, else up to
/// `,` `)` `}` `]` or white space.
fn value_span(b: &[u8], j: usize) -> Option<(usize, usize)> {
    if j >= b.len() {
        return None;
    }
    let q = b[j];
    if let Some(close) = match q {
        b'[' => Some(b']'),
        b'(' => Some(b')'),
        b'{' => Some(b'}'),
        _ => None,
    } {
        let mut depth = 0usize;
        for (k, &c) in b[j..].iter().enumerate() {
            if c == q {
                depth += 1;
            } else if c == close {
                depth -= 1;
                if depth == 0 {
                    return Some((j + 1, j + k));
                }
            }
        }
        return None;
    }
    if q == b'\'' || q == b'"' {
        let end = b[j + 1..].iter().position(|&c| c == q).map(|p| j + 1 + p)?;
        return Some((j + 1, end));
    }
    let end = b[j..]
        .iter()
        .position(|&c| matches!(c, b',' | b')' | b'}' | b']' | b' ' | b'\t'))
        .map_or(b.len(), |p| j + p);
    Some((j, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        for n in [
            "--api-key",
            "--token",
            "--password",
            "--hf-token",
            "--admin-api-key",
            "--ssl-keyfile-password",
            "HF_TOKEN",
            "VLLM_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "OPENAI_APIKEY",
            "db_password",
            "MY_SECRET",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "key",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "--max-num-batched-tokens",
            "--tokenizer",
            "--tokenizer-mode",
            "--skip-tokenizer-init",
            "--ssl-keyfile",
            "--model",
            "--mem-fraction-static",
            "PYTORCH_CUDA_ALLOC_CONF",
            "NCCL_IB_HCA",
            "--kv-cache-dtype",
            "--max-total-tokens",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn command_lines_keep_everything_but_secret_values() {
        let args = [
            "env",
            "HF_TOKEN=hf_abc",
            "PATH=/usr/bin",
            "python3",
            "-m",
            "sglang.launch_server",
            "--api-key",
            "sk-1",
            "--model",
            "m",
            "--token=t2",
            "--mem-fraction-static",
            "0.8",
            "--password",
            "--port",
            "30000",
            "--hf-token",
        ];
        assert_eq!(
            redact_args(&args),
            [
                "env",
                "HF_TOKEN=<redacted>",
                "PATH=/usr/bin",
                "python3",
                "-m",
                "sglang.launch_server",
                "--api-key",
                "<redacted>",
                "--model",
                "m",
                "--token=<redacted>",
                "--mem-fraction-static",
                "0.8",
                "--password",
                "--port",
                "30000",
                "--hf-token",
            ]
        );
        let none: [&str; 0] = [];
        assert!(redact_args(&none).is_empty());
        // A value that looks like a flag of one dash is still hidden.
        assert_eq!(
            redact_args(&["--api-key", "-x"]),
            ["--api-key", "<redacted>"]
        );
    }

    #[test]
    fn the_environment_is_an_allow_list() {
        let rec = |n: &str, v: &'static str| env_value(n, v).map(|c| c.into_owned());
        assert_eq!(
            rec("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
            Some("expandable_segments:True".into())
        );
        assert_eq!(rec("CUDA_VISIBLE_DEVICES", "0,1"), Some("0,1".into()));
        assert_eq!(rec("RANK", "3"), Some("3".into()));
        assert_eq!(rec("VLLM_API_KEY", "sk-live"), Some(REDACTED.into()));
        assert_eq!(rec("SGLANG_ADMIN_TOKEN", "x"), Some(REDACTED.into()));
        assert_eq!(rec("VLLM_HOST_IP", "10.0.0.1"), None);
        assert_eq!(rec("SGLANG_STORAGE_URL", "s3://u:p@h/b"), None);
        assert_eq!(rec("HF_TOKEN", "hf_x"), None);
        assert_eq!(rec("AWS_SECRET_ACCESS_KEY", "x"), None);
        assert_eq!(rec("HOME", "/root"), None);
        assert_eq!(rec("CUDA_HOME", "/usr/local/cuda"), None);
        assert_eq!(rec("NCCL_DEBUG", "INFO"), Some("INFO".into()));
    }

    #[test]
    fn settings_lines_lose_their_secrets_and_keep_their_shape() {
        let sglang = "server_args=ServerArgs(model_path='m', api_key='sk-123', admin_api_key=None, mem_fraction_static=0.8, hf_token=abc)";
        assert_eq!(
            redact_text(sglang),
            "server_args=ServerArgs(model_path='m', api_key='<redacted>', admin_api_key=None, mem_fraction_static=0.8, hf_token=<redacted>)"
        );
        let vllm = "non-default args: {'model': 'm', 'api_key': ['k1', 'k2'], \"hf_token\": \"t\", 'max_model_len': 4096}";
        assert_eq!(
            redact_text(vllm),
            "non-default args: {'model': 'm', 'api_key': [<redacted>], \"hf_token\": \"<redacted>\", 'max_model_len': 4096}"
        );
        let plain = "Load weight end. avail mem=63.57 GB, mem usage=15.11 GB.";
        assert!(matches!(redact_text(plain), Cow::Borrowed(_)));
        assert_eq!(redact_text("token_budget=8192"), "token_budget=8192");
        assert_eq!(redact_text("password="), "password=");
        assert_eq!(
            redact_text("x password:'unterminated"),
            "x password:'unterminated"
        );
        assert_eq!(
            redact_text("launch: python3 -m sglang --api-key sk-9 --port 1"),
            "launch: python3 -m sglang --api-key <redacted> --port 1"
        );
        assert_eq!(redact_text("--token --port 1"), "--token --port 1");
    }
}
