//! SGLang's server settings as a run or a log recorded them: the `server_args=ServerArgs(...)`
//! line SGLang prints at startup (a Python `repr`), and the `sglang.launch_server` / `sglang
//! serve` flags of a command line (a journal header's `cmdline`, NUL-separated).
//!
//! Both become one [`ServerArgs`] map keyed by the `ServerArgs` field name (`tp_size`,
//! `mem_fraction_static`, …) so the rest of `size` reads settings without caring where they came
//! from. Tolerant by design: a line cut short (pasted logs often are) keeps every complete
//! `key=value` pair and drops the last, possibly truncated one; values that are not simple
//! literals are kept as text.

use std::collections::BTreeMap;

/// One Python literal from the repr (or a flag's text).
#[derive(Debug, Clone, PartialEq)]
pub enum PyValue {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// Anything else (lists, dicts, enum reprs, a flag's raw text), as written.
    Other(String),
}

impl PyValue {
    fn text(&self) -> Option<&str> {
        match self {
            PyValue::Str(s) | PyValue::Other(s) => Some(s.as_str()),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            PyValue::Int(i) => Some(*i as f64),
            PyValue::Float(f) => Some(*f),
            _ => self.text()?.trim().parse().ok(),
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            PyValue::Int(i) => Some(*i),
            _ => self.text()?.trim().parse().ok(),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            PyValue::Bool(b) => Some(*b),
            PyValue::Int(i) => Some(*i != 0),
            _ => match self.text()?.trim() {
                "True" | "true" | "1" => Some(true),
                "False" | "false" | "0" => Some(false),
                _ => None,
            },
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        self.text()
    }
}

/// Settings by `ServerArgs` field name, and where they were read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerArgs {
    pub values: BTreeMap<String, PyValue>,
    /// "server_args line of FILE", "sglang.launch_server command line (pid N)".
    pub origin: String,
    /// The repr line was cut before its closing parenthesis.
    pub truncated: bool,
    /// Keys filled from another source ([`ServerArgs::fill_from`]) and where they were read.
    pub key_origins: BTreeMap<String, String>,
}

impl ServerArgs {
    /// The value of `key`, `None` when absent or Python `None`.
    pub fn get(&self, key: &str) -> Option<&PyValue> {
        self.values.get(key).filter(|v| **v != PyValue::None)
    }
    pub fn f64(&self, key: &str) -> Option<f64> {
        self.get(key)?.as_f64()
    }
    pub fn i64(&self, key: &str) -> Option<i64> {
        self.get(key)?.as_i64()
    }
    pub fn u64(&self, key: &str) -> Option<u64> {
        u64::try_from(self.i64(key)?).ok()
    }
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.get(key)?.as_bool()
    }
    pub fn str(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }
    /// Adds the pairs of `other` that this map lacks, remembering where each came from. A key
    /// present as Python `None` stays: the engine printed what it resolved.
    pub fn fill_from(&mut self, other: &ServerArgs) {
        for (k, v) in &other.values {
            if !self.values.contains_key(k) {
                self.values.insert(k.clone(), v.clone());
                self.key_origins
                    .insert(k.clone(), other.origin_of(k).to_string());
            }
        }
    }
    /// Where `key` was read: this map's origin, or the source that filled it.
    pub fn origin_of(&self, key: &str) -> &str {
        self.key_origins.get(key).unwrap_or(&self.origin)
    }
}

const MARKER: &str = "server_args=ServerArgs(";

/// Parses the `server_args=ServerArgs(...)` repr on `line`, if the line has one.
pub fn from_log_line(line: &str, origin: &str) -> Option<ServerArgs> {
    let start = line.find(MARKER)? + MARKER.len();
    let (values, truncated) = parse_repr(&line[start..]);
    Some(ServerArgs {
        values,
        origin: origin.to_string(),
        truncated,
        key_origins: BTreeMap::new(),
    })
}

/// `key=value, key=value, …)` → pairs; the flag says the closing parenthesis was never reached.
fn parse_repr(body: &str) -> (BTreeMap<String, PyValue>, bool) {
    let mut items: Vec<&str> = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut item_start = 0;
    let mut closed = false;
    for (i, c) in body.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' if depth > 0 => depth -= 1,
            ')' => {
                items.push(&body[item_start..i]);
                closed = true;
                break;
            }
            ',' if depth == 0 => {
                items.push(&body[item_start..i]);
                item_start = i + 1;
            }
            _ => {}
        }
    }
    // Unclosed: the text after the last comma may be cut anywhere and was never pushed.
    let mut values = BTreeMap::new();
    for item in items {
        let Some((key, value)) = item.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        values.insert(key.to_string(), literal(value.trim()));
    }
    (values, !closed)
}

/// One Python literal.
fn literal(text: &str) -> PyValue {
    match text {
        "None" => return PyValue::None,
        "True" => return PyValue::Bool(true),
        "False" => return PyValue::Bool(false),
        _ => {}
    }
    let quoted = |q: char| text.len() >= 2 && text.starts_with(q) && text.ends_with(q);
    if quoted('\'') || quoted('"') {
        return PyValue::Str(unescape(&text[1..text.len() - 1]));
    }
    if let Ok(i) = text.parse::<i64>() {
        return PyValue::Int(i);
    }
    let numeric = text
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'));
    if numeric {
        if let Ok(f) = text.parse::<f64>() {
            return PyValue::Float(f);
        }
    }
    PyValue::Other(text.to_string())
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// Flag spellings that name a differently called `ServerArgs` field.
const ALIASES: &[(&str, &str)] = &[
    ("tp", "tp_size"),
    ("tensor_parallel_size", "tp_size"),
    ("pp", "pp_size"),
    ("pipeline_parallel_size", "pp_size"),
    ("dp", "dp_size"),
    ("data_parallel_size", "dp_size"),
    ("ep", "ep_size"),
    ("model", "model_path"),
];

/// True for flags that never take a value.
fn is_switch(key: &str) -> bool {
    key.starts_with("enable_")
        || key.starts_with("disable_")
        || key.starts_with("skip_")
        || matches!(key, "trust_remote_code" | "is_embedding" | "log_requests")
}

/// The settings of an SGLang launch in `args` (`python -m sglang.launch_server --tp 2 …` or
/// `sglang serve …`); `None` when the command is not one.
pub fn from_cmdline(args: &[&str], origin: &str) -> Option<ServerArgs> {
    let at = args
        .iter()
        .position(|a| a.contains("sglang.launch_server") || a.ends_with("sglang/launch_server.py"));
    let at = at.or_else(|| {
        args.windows(2)
            .position(|w| w[0].ends_with("sglang") && w[1] == "serve")
            .map(|i| i + 1)
    })?;
    let mut values = BTreeMap::new();
    let mut i = at + 1;
    while i < args.len() {
        let Some(flag) = args[i].strip_prefix("--") else {
            i += 1;
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (flag, None),
        };
        let mut key = name.replace('-', "_");
        if let Some((_, to)) = ALIASES.iter().find(|(from, _)| *from == key) {
            key = to.to_string();
        }
        let value = match inline {
            Some(v) => PyValue::Other(v.to_string()),
            None if is_switch(&key) => PyValue::Bool(true),
            None => match args.get(i + 1) {
                Some(next) if !next.starts_with("--") => {
                    i += 1;
                    PyValue::Other(next.to_string())
                }
                _ => PyValue::Bool(true),
            },
        };
        values.insert(key, value);
        i += 1;
    }
    Some(ServerArgs {
        values,
        origin: origin.to_string(),
        truncated: false,
        key_origins: BTreeMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_literals_and_nesting() {
        let line =
            "[2026-02-26 16:30:34] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.5', \
                    context_length=None, mem_fraction_static=0.8260405859375, tp_size=8, \
                    trust_remote_code=True, piecewise_cuda_graph_tokens=[4, 8, 12], \
                    model_loader_extra_config='{}', json_model_override_args='{\"a\": 1}', \
                    load_format=<LoadFormat.AUTO: 'auto'>, chunked_prefill_size=-1)";
        let a = from_log_line(line, "log").unwrap();
        assert!(!a.truncated);
        assert_eq!(a.f64("mem_fraction_static"), Some(0.8260405859375));
        assert_eq!(a.u64("tp_size"), Some(8));
        assert_eq!(a.get("context_length"), None);
        assert!(a.values.contains_key("context_length"));
        assert_eq!(a.bool("trust_remote_code"), Some(true));
        assert_eq!(a.str("model_path"), Some("moonshotai/Kimi-K2.5"));
        assert_eq!(a.i64("chunked_prefill_size"), Some(-1));
        assert_eq!(a.str("json_model_override_args"), Some("{\"a\": 1}"));
        assert_eq!(
            a.get("piecewise_cuda_graph_tokens"),
            Some(&PyValue::Other("[4, 8, 12]".into()))
        );
        assert_eq!(
            a.get("load_format"),
            Some(&PyValue::Other("<LoadFormat.AUTO: 'auto'>".into()))
        );
    }

    #[test]
    fn a_cut_line_keeps_complete_pairs_only() {
        // Pasted logs cut the line anywhere: "max_running_requests=N" (from "None") is dropped.
        let line = "server_args=ServerArgs(mem_fraction_static=0.88, max_running_requests=N";
        let a = from_log_line(line, "log").unwrap();
        assert!(a.truncated);
        assert_eq!(a.f64("mem_fraction_static"), Some(0.88));
        assert!(!a.values.contains_key("max_running_requests"));
        assert!(from_log_line("no settings here", "log").is_none());
    }

    #[test]
    fn launch_flags() {
        let cmd = "python3|-m|sglang.launch_server|--model-path|/m/Llama|--tp|2|\
                   --mem-fraction-static=0.8|--enable-dp-attention|--dp|2|\
                   --chunked-prefill-size|-1|--trust-remote-code";
        let args: Vec<&str> = cmd.split('|').collect();
        let a = from_cmdline(&args, "cmd").unwrap();
        assert_eq!(a.str("model_path"), Some("/m/Llama"));
        assert_eq!(a.u64("tp_size"), Some(2));
        assert_eq!(a.u64("dp_size"), Some(2));
        assert_eq!(a.f64("mem_fraction_static"), Some(0.8));
        assert_eq!(a.bool("enable_dp_attention"), Some(true));
        assert_eq!(a.i64("chunked_prefill_size"), Some(-1));
        assert_eq!(a.bool("trust_remote_code"), Some(true));
        let serve: Vec<&str> = vec!["sglang", "serve", "--model-path", "x", "--tp", "8"];
        assert_eq!(from_cmdline(&serve, "c").unwrap().u64("tp_size"), Some(8));
        assert!(from_cmdline(&["python3", "train.py", "--tp", "2"], "c").is_none());
    }
}
