//! Text from a journal (stage names, module paths, command lines, log lines) made safe to
//! print on a terminal: a program names its stages and a server's log lines carry request
//! content, so either can hold ESC sequences that retitle or clear the terminal, a `\r` that
//! overwrites what was printed, or bidi controls that show text reordered ("Trojan Source").
//!
//! Each such character is shown as an escape instead: `\t`, `\n`, `\r`, `\xNN` for the other
//! C0 controls and DEL, `\u{NN}` for C1 controls, bidi controls and the Unicode line and
//! paragraph separators (U+2028, U+2029: a line break to some terminals and viewers).
//! Backslashes are left as they are, so escaping twice changes nothing and paths stay
//! readable; a name that holds the four characters `\x1b` reads like one that holds ESC, and
//! `--json` tells them apart.
//! Everything else, CJK, accents and emoji included, is shown as it is.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` acts on a terminal or reorders what it shows instead of being shown.
fn dangerous(c: char) -> bool {
    matches!(
        c,
        '\0'..='\x1f'
            | '\x7f'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// `s` with every dangerous character escaped; `s` itself (no copy) when it holds none.
pub fn escaped(s: &str) -> Cow<'_, str> {
    let Some(first) = s.find(dangerous) else {
        return Cow::Borrowed(s);
    };
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str(&s[..first]);
    for c in s[first..].chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if !dangerous(c) => out.push(c),
            c if c.is_ascii() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(s: &str) -> String {
        match escaped(s) {
            Cow::Owned(o) => o,
            Cow::Borrowed(b) => panic!("{b:?} came back unescaped"),
        }
    }

    #[test]
    fn clean_text_comes_back_borrowed_whatever_its_script() {
        for s in [
            "",
            "weight_load",
            "/usr/lib/libtorch_cuda.so",
            "C:\\models\\x1b",
            "モデル読み込み",
            "café naïve",
            "ok 🚀👩‍🔬",
            "\u{a0}non-breaking",
        ] {
            assert!(matches!(escaped(s), Cow::Borrowed(b) if b == s), "{s:?}");
        }
    }

    #[test]
    fn c0_controls_and_del_are_shown_as_escapes() {
        assert_eq!(owned("a\tb\nc\rd"), "a\\tb\\nc\\rd");
        assert_eq!(
            owned("\x1b]0;PWNED\x07\x1b[2J"),
            "\\x1b]0;PWNED\\x07\\x1b[2J"
        );
        assert_eq!(
            owned("\0\x01\x08\x0b\x0c\x1f\x7f"),
            "\\x00\\x01\\x08\\x0b\\x0c\\x1f\\x7f"
        );
        assert_eq!(owned("ok\rspoofed"), "ok\\rspoofed");
    }

    #[test]
    fn c1_controls_are_shown_as_escapes() {
        assert_eq!(
            owned("\u{80}x\u{85}\u{9b}2J\u{9f}"),
            "\\u{80}x\\u{85}\\u{9b}2J\\u{9f}"
        );
    }

    #[test]
    fn bidi_controls_are_shown_as_escapes() {
        let all = "\u{202a}\u{202b}\u{202c}\u{202d}\u{202e}\u{2066}\u{2067}\u{2068}\u{2069}\u{200e}\u{200f}\u{61c}";
        assert_eq!(
            owned(all),
            "\\u{202a}\\u{202b}\\u{202c}\\u{202d}\\u{202e}\\u{2066}\\u{2067}\\u{2068}\\u{2069}\\u{200e}\\u{200f}\\u{61c}"
        );
        assert_eq!(owned("stage\u{202e}gnp.exe"), "stage\\u{202e}gnp.exe");
    }

    #[test]
    fn unicode_line_and_paragraph_separators_are_shown_as_escapes() {
        assert_eq!(
            owned("line\u{2028}forged\u{2029}para"),
            "line\\u{2028}forged\\u{2029}para"
        );
    }

    #[test]
    fn ordinary_text_around_an_escape_is_kept() {
        assert_eq!(owned("読み込み\x1b[31mé🚀"), "読み込み\\x1b[31mé🚀");
        // Characters beside the escaped ranges (ZWJ joins emoji) are ordinary text.
        assert!(matches!(
            escaped("\u{a0}\u{61b}\u{200d}\u{2027}\u{206a}"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn escaping_twice_changes_nothing() {
        let once = owned("a\x1b\u{202e}\r\\b");
        assert!(matches!(escaped(&once), Cow::Borrowed(b) if b == once));
    }
}
