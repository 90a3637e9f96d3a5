//! Line prefixes: what comes before the message, and which rank it names.
//!
//! Owns [`RankTag`] and the prefix stripper. Understands SGLang's `[2025-06-01 12:00:00.123 DP0
//! TP3] ` (and the 2024 `[gpu_id=N] `), vLLM's `(VllmWorker rank=0 pid=12) INFO 05-30 06:39:59
//! [file.py:12] ` in its several eras, docker-compose `2025-11-24 13:54:38.398 | ` columns, bare
//! `HH:MM:SS  INFO [file:line] ` formats and ANSI colour codes anywhere among them. It only ever
//! consumes recognised tokens from the front, so a message is never eaten; it never allocates and
//! never panics.

/// The ranks a line's prefix names; all `None` when it names none (e.g. `--tp 1`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RankTag {
    /// SGLang `DP{n}`, vLLM `_DP{n}`.
    pub dp: Option<u32>,
    /// SGLang `PP{n}`, vLLM `_PP{n}`.
    pub pp: Option<u32>,
    /// SGLang `TP{n}`, vLLM `_TP{n}`.
    pub tp: Option<u32>,
    /// SGLang `EP{n}`, vLLM `_EP{n}`.
    pub ep: Option<u32>,
    /// SGLang `ATTN_TP{n}` (not printed by the releases read; accepted if it appears).
    pub attn_tp: Option<u32>,
    /// SGLang `ATTN_CP{n}`.
    pub attn_cp: Option<u32>,
    /// SGLang `MOE_DP{n}`.
    pub moe_dp: Option<u32>,
    /// vLLM `_PCP{n}`.
    pub pcp: Option<u32>,
    /// vLLM `_DCP{n}`.
    pub dcp: Option<u32>,
    /// SGLang 2024 `[gpu_id=N]`.
    pub gpu_id: Option<u32>,
    /// vLLM `(VllmWorker rank=N …)`: the global worker rank.
    pub worker_rank: Option<u32>,
    /// vLLM `(… pid=N)`: the process that printed the line.
    pub pid: Option<u32>,
}

impl RankTag {
    /// True when the prefix named no rank and no process.
    pub fn is_empty(&self) -> bool {
        *self == RankTag::default()
    }

    fn set(&mut self, dim: &str, rank: u32) -> bool {
        let slot = match dim {
            "DP" => &mut self.dp,
            "PP" => &mut self.pp,
            "TP" => &mut self.tp,
            "EP" => &mut self.ep,
            "ATTN_TP" => &mut self.attn_tp,
            "ATTN_CP" => &mut self.attn_cp,
            "MOE_DP" => &mut self.moe_dp,
            "PCP" => &mut self.pcp,
            "DCP" => &mut self.dcp,
            _ => return false,
        };
        *slot = Some(rank);
        true
    }
}

/// A message with its prefix removed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stripped<'a> {
    pub msg: &'a str,
    pub rank: RankTag,
}

const LEVELS: [&str; 7] = [
    "DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "TRACE",
];

/// How many prefix tokens are consumed at most (bounds the work on hostile input).
const MAX_TOKENS: usize = 16;

/// Removes every recognised prefix token from the front of `line`, then surrounding whitespace
/// and trailing ANSI codes from the message.
pub(crate) fn strip(line: &str) -> Stripped<'_> {
    let mut rank = RankTag::default();
    let mut rest = line;
    let mut level_seen = false;
    for _ in 0..MAX_TOKENS {
        let trimmed = skip_blank(rest);
        let b = trimmed.as_bytes();
        let used = match b.first() {
            Some(b'[') => sglang_bracket(trimmed, &mut rank)
                .or_else(|| gpu_id(trimmed, &mut rank))
                .or_else(|| bracket_fileline(b, level_seen)),
            Some(b'(') => vllm_process(trimmed, &mut rank),
            Some(b'|') => (b.get(1) == Some(&b' ')).then_some(2),
            Some(c) if c.is_ascii_digit() => timestamp(b),
            Some(c) if c.is_ascii_uppercase() => level(b)
                .inspect(|_| level_seen = true)
                .or_else(|| bare_fileline(b, level_seen)),
            Some(c) if c.is_ascii_lowercase() || *c == b'_' => bare_fileline(b, level_seen),
            _ => None,
        };
        match used.and_then(|n| trimmed.get(n..)) {
            Some(next) => rest = next,
            None => {
                rest = trimmed;
                break;
            }
        }
    }
    Stripped {
        msg: trim_message(rest),
        rank,
    }
}

/// Skips spaces, tabs and ANSI escape sequences.
pub(crate) fn skip_blank(mut s: &str) -> &str {
    loop {
        let t = s.trim_start_matches([' ', '\t']);
        match ansi_len(t.as_bytes()) {
            Some(n) => s = t.get(n..).unwrap_or(""),
            None => return t,
        }
    }
}

/// Trims whitespace and ANSI escape sequences from both ends of a message.
fn trim_message(s: &str) -> &str {
    let mut s = skip_blank(s);
    loop {
        let t = s.trim_end();
        // A trailing "ESC [ params final" sequence.
        let b = t.as_bytes();
        let cut = b
            .iter()
            .rposition(|&c| c == 0x1b)
            .filter(|&p| ansi_len(b.get(p..).unwrap_or(&[])) == Some(b.len() - p));
        match cut.and_then(|p| t.get(..p)) {
            Some(shorter) => s = shorter,
            None => return t,
        }
    }
}

/// Length of a CSI escape sequence (`ESC [ params final`) at the start of `b`.
fn ansi_len(b: &[u8]) -> Option<usize> {
    if b.first() != Some(&0x1b) || b.get(1) != Some(&b'[') {
        return None;
    }
    let params = b
        .get(2..)?
        .iter()
        .take(32)
        .take_while(|c| c.is_ascii_digit() || **c == b';' || **c == b'?')
        .count();
    let fin = *b.get(2 + params)?;
    (0x40..=0x7e).contains(&fin).then_some(3 + params)
}

/// Number of ASCII digits at the start of `b`, at most `max`.
fn ndigits(b: &[u8], max: usize) -> usize {
    b.iter()
        .take(max)
        .take_while(|c| c.is_ascii_digit())
        .count()
}

/// Checks `b` against a shape where `d` is an ASCII digit and any other byte is literal.
fn shape(b: &[u8], pattern: &[u8]) -> bool {
    b.len() >= pattern.len()
        && b.iter().zip(pattern).all(|(c, p)| match p {
            b'd' => c.is_ascii_digit(),
            p => c == p,
        })
}

/// `.123` / `,123` fractional seconds (1 to 9 digits), optionally followed by `Z`.
fn fraction(b: &[u8]) -> usize {
    let mut n = 0;
    if matches!(b.first(), Some(b'.') | Some(b',')) {
        let d = ndigits(b.get(1..).unwrap_or(&[]), 9);
        if d > 0 {
            n = 1 + d;
        }
    }
    if b.get(n) == Some(&b'Z') {
        n += 1;
    }
    n
}

/// A bare timestamp followed by whitespace: `YYYY-MM-DD HH:MM:SS(.f)`, `MM-DD HH:MM:SS(.f)`,
/// or `HH:MM:SS(.f)` (an optional `-SS` range as in `22:12:17-18` is accepted too).
fn timestamp(b: &[u8]) -> Option<usize> {
    let base = if shape(b, b"dddd-dd-dd dd:dd:dd") {
        19
    } else if shape(b, b"dd-dd dd:dd:dd") {
        14
    } else if shape(b, b"dd:dd:dd") {
        8
    } else {
        return None;
    };
    let mut n = base + fraction(b.get(base..).unwrap_or(&[]));
    if shape(b.get(n..).unwrap_or(&[]), b"-dd ") {
        n += 3;
    }
    ends_token(b.get(n)).then_some(n)
}

/// A prefix token ends at whitespace or at an ANSI escape.
fn ends_token(next: Option<&u8>) -> bool {
    matches!(next, Some(b' ') | Some(b'\t') | Some(0x1b))
}

/// SGLang: `[YYYY-MM-DD HH:MM:SS(.mmm)( TAGn)*] `.
fn sglang_bracket(s: &str, rank: &mut RankTag) -> Option<usize> {
    let b = s.as_bytes();
    if !shape(b.get(1..)?, b"dddd-dd-dd dd:dd:dd") {
        return None;
    }
    let mut i = 20 + fraction(b.get(20..)?);
    let mut tags = RankTag::default();
    while b.get(i) == Some(&b' ') {
        let name_len = b
            .get(i + 1..)?
            .iter()
            .take(16)
            .take_while(|c| c.is_ascii_uppercase() || **c == b'_')
            .count();
        let num_len = ndigits(b.get(i + 1 + name_len..)?, 9);
        if name_len == 0 || num_len == 0 {
            return None;
        }
        let name = s.get(i + 1..i + 1 + name_len)?;
        let num: u32 = s
            .get(i + 1 + name_len..i + 1 + name_len + num_len)?
            .parse()
            .ok()?;
        if !tags.set(name, num) {
            return None;
        }
        i += 1 + name_len + num_len;
    }
    if b.get(i) != Some(&b']') {
        return None;
    }
    *rank = merge(*rank, tags);
    Some(i + 1)
}

/// SGLang 2024: `[gpu_id=N] `.
fn gpu_id(s: &str, rank: &mut RankTag) -> Option<usize> {
    let rest = s.strip_prefix("[gpu_id=")?;
    let n = ndigits(rest.as_bytes(), 9);
    if n == 0 || rest.as_bytes().get(n) != Some(&b']') {
        return None;
    }
    rank.gpu_id = rest.get(..n)?.parse().ok();
    Some("[gpu_id=".len() + n + 1)
}

/// vLLM: `(name pid=N) ` where the name may hold `rank=N` and `_DP0_PP1_TP2…` tags.
fn vllm_process(s: &str, rank: &mut RankTag) -> Option<usize> {
    let close = s.as_bytes().iter().take(96).position(|&c| c == b')')?;
    let inside = s.get(1..close)?;
    let (name, pid) = inside.rsplit_once(" pid=")?;
    if name.contains('(') {
        return None;
    }
    rank.pid = Some(pid.parse().ok()?);
    for word in name.split(' ') {
        if let Some(r) = word.strip_prefix("rank=") {
            rank.worker_rank = r.parse().ok();
        }
        for part in word.split('_').skip(1) {
            let split = part
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(part.len());
            if let (Some(dim), Some(num)) = (part.get(..split), part.get(split..)) {
                if let Ok(n) = num.parse() {
                    rank.set(dim, n);
                }
            }
        }
    }
    Some(close + 1)
}

/// A log level word followed by whitespace.
fn level(b: &[u8]) -> Option<usize> {
    LEVELS.iter().find_map(|l| {
        let n = l.len();
        (b.get(..n) == Some(l.as_bytes()) && ends_token(b.get(n))).then_some(n)
    })
}

/// vLLM: `[file.py:123] ` (only after a level word, so `[BCG]` and friends are kept).
fn bracket_fileline(b: &[u8], level_seen: bool) -> Option<usize> {
    if !level_seen {
        return None;
    }
    let close = b.iter().take(128).position(|&c| c == b']')?;
    fileline(b.get(1..close)?).then_some(close + 1)
}

/// vLLM 0.7: `file.py:123] ` without the opening bracket (only after a level word).
fn bare_fileline(b: &[u8], level_seen: bool) -> Option<usize> {
    if !level_seen {
        return None;
    }
    let close = b.iter().take(128).position(|&c| c == b']')?;
    fileline(b.get(..close)?).then_some(close + 1)
}

/// `name:digits` with no whitespace in the name; ANSI colour codes inside are ignored.
fn fileline(b: &[u8]) -> bool {
    let mut i = 0;
    let mut name_len = 0usize;
    let mut digits_after_colon: Option<usize> = None;
    while let Some(&c) = b.get(i) {
        if let Some(n) = ansi_len(b.get(i..).unwrap_or(&[])) {
            i += n;
            continue;
        }
        match c {
            b':' => {
                if let Some(d) = digits_after_colon {
                    name_len += 1 + d;
                }
                digits_after_colon = Some(0);
            }
            c if c.is_ascii_whitespace() => return false,
            c if c.is_ascii_digit() && digits_after_colon.is_some() => {
                digits_after_colon = digits_after_colon.map(|d| d + 1);
            }
            _ => {
                name_len += 1 + digits_after_colon.take().unwrap_or(0);
            }
        }
        i += 1;
    }
    name_len > 0 && digits_after_colon.is_some_and(|d| d > 0)
}

fn merge(a: RankTag, b: RankTag) -> RankTag {
    RankTag {
        dp: b.dp.or(a.dp),
        pp: b.pp.or(a.pp),
        tp: b.tp.or(a.tp),
        ep: b.ep.or(a.ep),
        attn_tp: b.attn_tp.or(a.attn_tp),
        attn_cp: b.attn_cp.or(a.attn_cp),
        moe_dp: b.moe_dp.or(a.moe_dp),
        pcp: b.pcp.or(a.pcp),
        dcp: b.dcp.or(a.dcp),
        gpu_id: b.gpu_id.or(a.gpu_id),
        worker_rank: b.worker_rank.or(a.worker_rank),
        pid: b.pid.or(a.pid),
    }
}

/// Byte offsets (after the first byte) where an SGLang `[YYYY-…]` prefix starts inside `s`,
/// for lines where a progress bar swallowed the newline before a log line. At most `limit`.
pub(crate) fn embedded_sglang(s: &str, limit: usize) -> impl Iterator<Item = usize> + '_ {
    s.match_indices('[')
        .map(|(p, _)| p)
        .filter(|&p| p > 0)
        .filter(move |&p| {
            let mut scratch = RankTag::default();
            s.get(p..)
                .is_some_and(|t| sglang_bracket(t, &mut scratch).is_some())
        })
        .take(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sglang_prefixes() {
        let s = strip("[2025-07-02 07:41:58 DP3 TP3] Load weight end.");
        assert_eq!(s.msg, "Load weight end.");
        assert_eq!((s.rank.dp, s.rank.tp), (Some(3), Some(3)));
        let s = strip("[2025-07-02 07:41:58.123 PP1 ATTN_CP2 MOE_DP0 TP7 EP7] x\r\n");
        assert_eq!(s.msg, "x");
        let r = s.rank;
        assert_eq!(
            (r.pp, r.attn_cp, r.moe_dp, r.tp, r.ep),
            (Some(1), Some(2), Some(0), Some(7), Some(7))
        );
        let s = strip("[2025-07-14 05:48:43] Memory pool end.");
        assert!(s.rank.is_empty());
        assert_eq!(strip("[gpu_id=1] x").rank.gpu_id, Some(1));
        // Not prefixes: kept as message.
        assert_eq!(strip("[BCG] Capturing").msg, "[BCG] Capturing");
        assert_eq!(
            strip("[2025-07-02 07:41:58 XX] y").msg,
            "[2025-07-02 07:41:58 XX] y"
        );
        assert_eq!(
            strip("[2025-07-02 07:41:58 TP] y").msg,
            "[2025-07-02 07:41:58 TP] y"
        );
    }

    #[test]
    fn vllm_prefixes() {
        let s = strip("\x1b[1;36m(VllmWorker rank=2 pid=4242)\x1b[0;0m INFO 05-30 06:40:49 [model_runner.py:1115] Model loading took");
        assert_eq!(s.msg, "Model loading took");
        assert_eq!((s.rank.worker_rank, s.rank.pid), (Some(2), Some(4242)));
        let s = strip("(Worker_DP1_PP0_TP3 pid=9) INFO 05-30 06:40:49.123 [gpu_worker.py:1] m");
        assert_eq!(
            (s.rank.dp, s.rank.pp, s.rank.tp, s.msg),
            (Some(1), Some(0), Some(3), "m")
        );
        let s =
            strip("INFO 05-30 06:40:49 model_runner.py:1115] Loading model weights took 2.8884 GB");
        assert_eq!(s.msg, "Loading model weights took 2.8884 GB");
        let s =
            strip("2025-11-24 13:54:38.398 | INFO 11-23 22:54:43 [__init__.py:244] Automatically");
        assert_eq!(s.msg, "Automatically");
        let s = strip("22:07:58  INFO [model_runner.py:1115] Model loading");
        assert_eq!(s.msg, "Model loading");
        let s = strip("                               PyTorch activation");
        assert_eq!(s.msg, "PyTorch activation");
        assert_eq!(
            strip("INFO:     Started server").msg,
            "INFO:     Started server"
        );
        assert_eq!(
            strip("Load weight end. x \x1b[0m").msg,
            "Load weight end. x"
        );
    }

    #[test]
    fn hostile_prefixes_do_not_panic() {
        for s in [
            "[",
            "[2",
            "(",
            "( pid=)",
            "\x1b",
            "\x1b[",
            "\x1b[999999999999",
            "[2025-07-02 07:41:58 TP99999999999] x",
            "ééé[2025-07-02 07:41:58] x",
            "12:00:00",
            "INFO",
            "[gpu_id=",
            "|",
        ] {
            let _ = strip(s);
            let _ = embedded_sglang(s, 4).count();
        }
    }

    #[test]
    fn embedded() {
        let s = "  0%|   | 0/13 [00:00<?, ?it/s][2025-03-08 12:29:21 TP1] Capture";
        let found: Vec<usize> = embedded_sglang(s, 4).collect();
        assert_eq!(found.len(), 1);
        assert_eq!(strip(&s[found[0]..]).msg, "Capture");
    }
}
