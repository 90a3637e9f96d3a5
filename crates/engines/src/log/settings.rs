//! Engine settings lines: what the engine resolved at startup, kept by the journal as records of
//! their own (never stage changes), so that a run alone knows the settings its sizing used.
//!
//! Three lines are kept, found by [`detect`]:
//! - SGLang's `server_args=ServerArgs(model_path='…', mem_fraction_static=0.905, …)`, the
//!   dataclass repr (3–11 KiB in 0.4.x–0.5.x);
//! - vLLM's `non-default args: {'model': '…', 'gpu_memory_utilization': 0.5, …}`;
//! - vLLM's engine config, `Initializing a V1 LLM engine (v0.26.0) with config: model='…', …`
//!   (older: `Initializing an LLM engine (v0.6.3) …`, `Initializing a V0 LLM engine (v0.7.2) …`).
//!
//! Before a line is written, [`crate::redact::text`] replaces secrets (values of `api_key`,
//! `admin_api_key`, `hf_token`, `*_token`, `*secret*`, `*password*`, … and token-shaped or
//! credential-bearing values anywhere) by `<redacted>`; [`model_path`] names the model folder, which the tap writes
//! as a [`SettingsKind::ModelPath`] record of its own.
//!
//! Size: a line is kept up to [`MAX_LINE`] bytes and written as [`encode`]d parts of at most
//! [`PART_BYTES`] (the journal keeps 8 KiB of text per record). Past [`MAX_LINE`] the line is cut
//! at a character boundary and its last part says `cut`; a reader ([`Assembler`]) returns it
//! with `cut` set, and the settings parsers keep only the complete `key=value` pairs before it.
//!
//! Record text: `<kind> <part>/<parts>[ cut]\n<text of that part>`.

/// Bytes of one settings line kept (64 KiB; SGLang's longest `server_args` seen is ~11 KiB).
pub const MAX_LINE: usize = 64 * 1024;
/// Text bytes per record (below the journal's 8 KiB text bound, with room for the part header).
pub const PART_BYTES: usize = 7 * 1024;
/// The markers are looked for in the first bytes of a line only (prefixes are short).
const MARKER_WINDOW: usize = 1024;
/// What a secret is replaced by.
pub use crate::redact::REDACTED;

/// Which settings record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SettingsKind {
    /// SGLang's `server_args=ServerArgs(...)` line.
    SglangServerArgs,
    /// vLLM's `non-default args: {...}` line.
    VllmNonDefaultArgs,
    /// vLLM's `Initializing a … LLM engine (v…) with config: …` line.
    VllmEngineConfig,
    /// The model folder one of the lines names (absolute when the tap could resolve it).
    ModelPath,
}

impl SettingsKind {
    /// Every kind.
    pub const ALL: [SettingsKind; 4] = [
        SettingsKind::SglangServerArgs,
        SettingsKind::VllmNonDefaultArgs,
        SettingsKind::VllmEngineConfig,
        SettingsKind::ModelPath,
    ];

    /// The word in the record header.
    pub fn name(self) -> &'static str {
        match self {
            SettingsKind::SglangServerArgs => "sglang_server_args",
            SettingsKind::VllmNonDefaultArgs => "vllm_non_default_args",
            SettingsKind::VllmEngineConfig => "vllm_engine_config",
            SettingsKind::ModelPath => "model_path",
        }
    }

    /// The kind named `s`.
    pub fn from_name(s: &str) -> Option<SettingsKind> {
        SettingsKind::ALL.into_iter().find(|k| k.name() == s)
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The settings line `line` is (its marker within the first KiB), if any. Partial lines work
/// as soon as the marker has arrived.
pub fn detect(line: &[u8]) -> Option<SettingsKind> {
    let head = &line[..line.len().min(MARKER_WINDOW)];
    if find(head, b"server_args=ServerArgs(").is_some() {
        return Some(SettingsKind::SglangServerArgs);
    }
    if find(head, b"non-default args: {").is_some() {
        return Some(SettingsKind::VllmNonDefaultArgs);
    }
    let engine = find(head, b" LLM engine (v")?;
    let before = &head[..engine];
    let opening = before.ends_with(b"Initializing an")
        || before.ends_with(b"Initializing a V1")
        || before.ends_with(b"Initializing a V0");
    (opening && find(&head[engine..], b") with config: ").is_some())
        .then_some(SettingsKind::VllmEngineConfig)
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// The quoted string after `key` + `sep` (`model_path=`, `'model': `), unescaped: the first
/// occurrence whose key is not the tail of a longer name.
fn quoted_after(line: &str, key: &str, sep: &str) -> Option<String> {
    let b = line.as_bytes();
    let pat = format!("{key}{sep}");
    let mut from = 0;
    while let Some(off) = line[from..].find(&pat) {
        let at = from + off;
        from = at + 1;
        let pre = key.as_bytes().first().copied().unwrap_or(b'x');
        if at > 0 && is_key_byte(b[at - 1]) && is_key_byte(pre) {
            continue;
        }
        let v = at + pat.len();
        let q = *b.get(v)?;
        if q != b'\'' && q != b'"' {
            return None;
        }
        let mut text = String::new();
        let mut chars = line[v + 1..].chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => text.push(chars.next()?),
                c if c as u32 == q as u32 => return Some(text),
                c => text.push(c),
            }
        }
        return None; // unclosed: the line was cut inside the path
    }
    None
}

/// The model folder (or hub id) a settings line names: `model_path=` (SGLang), `model=`
/// (vLLM engine config), `'model':` / `'model_tag':` (vLLM non-default args).
pub fn model_path(kind: SettingsKind, line: &str) -> Option<String> {
    let path = match kind {
        SettingsKind::SglangServerArgs => {
            let at = line.find("server_args=ServerArgs(")?;
            quoted_after(&line[at..], "model_path", "=")
        }
        SettingsKind::VllmEngineConfig => {
            let at = line.find(") with config: ")?;
            quoted_after(&line[at..], " model", "=")
        }
        SettingsKind::VllmNonDefaultArgs => {
            quoted_after(line, "'model'", ": ").or_else(|| quoted_after(line, "'model_tag'", ": "))
        }
        SettingsKind::ModelPath => Some(line.to_string()),
    }?;
    (!path.is_empty()).then_some(path)
}

fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The record texts for one settings line (already redacted): at most [`MAX_LINE`] bytes in
/// parts of at most [`PART_BYTES`], each with its header.
pub fn encode(kind: SettingsKind, line: &str) -> Vec<String> {
    encode_cut(kind, line, line.len() > MAX_LINE)
}

/// [`encode`] of a line that `cut` says was cut short (as printed: redaction changes lengths,
/// so the redacted line's cannot tell).
pub fn encode_cut(kind: SettingsKind, line: &str, cut: bool) -> Vec<String> {
    let cut = cut || line.len() > MAX_LINE;
    let kept = &line[..floor_char_boundary(line, MAX_LINE)];
    let mut chunks = Vec::new();
    let mut rest = kept;
    while !rest.is_empty() || chunks.is_empty() {
        let n = floor_char_boundary(rest, PART_BYTES);
        let n = if n == 0 { rest.len() } else { n };
        chunks.push(&rest[..n]);
        rest = &rest[n..];
    }
    let count = chunks.len();
    chunks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mark = if cut && i + 1 == count { " cut" } else { "" };
            format!("{} {}/{count}{mark}\n{c}", kind.name(), i + 1)
        })
        .collect()
}

/// One decoded part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part<'a> {
    pub kind: SettingsKind,
    /// 1-based.
    pub index: usize,
    pub count: usize,
    /// The line was longer than [`MAX_LINE`] (last part only).
    pub cut: bool,
    pub text: &'a str,
}

/// Reads one record text; `None` when it is not a settings part.
pub fn decode_part(record: &str) -> Option<Part<'_>> {
    let (head, text) = record.split_once('\n').unwrap_or((record, ""));
    let mut words = head.split(' ');
    let kind = SettingsKind::from_name(words.next()?)?;
    let (i, n) = words.next()?.split_once('/')?;
    let (index, count): (usize, usize) = (i.parse().ok()?, n.parse().ok()?);
    let cut = match words.next() {
        None => false,
        Some("cut") => true,
        Some(_) => return None,
    };
    (index >= 1 && index <= count && words.next().is_none()).then_some(Part {
        kind,
        index,
        count,
        cut,
        text,
    })
}

/// A settings line put back together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assembled {
    pub kind: SettingsKind,
    pub line: String,
    /// Longer than [`MAX_LINE`] when printed: only its start was kept.
    pub cut: bool,
    /// Parts were missing (a torn journal): what arrived, in order.
    pub incomplete: bool,
}

/// A line whose parts are still arriving.
#[derive(Debug)]
struct Pending {
    kind: SettingsKind,
    next: usize,
    count: usize,
    text: String,
    incomplete: bool,
}

impl Pending {
    fn done(self, cut: bool) -> Assembled {
        Assembled {
            kind: self.kind,
            line: self.text,
            cut,
            incomplete: self.incomplete,
        }
    }
}

/// Joins the parts of one journal's settings records, in journal order.
#[derive(Debug, Default)]
pub struct Assembler {
    pending: Option<Pending>,
}

impl Assembler {
    /// Takes one record text; returns the lines it completes. A line missing a part (a torn
    /// journal) comes out marked `incomplete` with what did arrive.
    pub fn push(&mut self, record: &str) -> Vec<Assembled> {
        let mut out = Vec::new();
        let Some(p) = decode_part(record) else {
            return out;
        };
        let continues = self
            .pending
            .as_ref()
            .is_some_and(|q| q.kind == p.kind && q.next == p.index && q.count == p.count);
        if !continues {
            out.extend(self.finish());
            self.pending = Some(Pending {
                kind: p.kind,
                next: p.index,
                count: p.count,
                text: String::new(),
                incomplete: p.index != 1,
            });
        }
        if let Some(q) = self.pending.as_mut() {
            q.text.push_str(p.text);
            q.next += 1;
        }
        if p.index == p.count {
            if let Some(q) = self.pending.take() {
                out.push(q.done(p.cut));
            }
        }
        out
    }

    /// The line still waiting for parts, if any (call at the end of a journal).
    pub fn finish(&mut self) -> Option<Assembled> {
        self.pending.take().map(|mut q| {
            q.incomplete = true;
            q.done(false)
        })
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
