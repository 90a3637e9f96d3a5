//! Rule files: stage boundaries for engines this crate does not know.
//!
//! Owns the rule-file grammar, shared by the offline parser and the shim. One rule a line:
//!
//! ```text
//! # comment (a line whose first non-blank character is '#')
//! weight_load     Loading checkpoint shards
//! kv_pool         "Allocated KV cache "        # quoted: keeps spaces; \" \\ \t escapes
//! serving         Server is ready
//! ```
//!
//! A stage name (`[a-z][a-z0-9_]*`, at most 64 bytes), then spaces or tabs, then a literal
//! substring: the rest of the line with surrounding blanks trimmed, or a double-quoted string
//! (after which only a `#` comment may follow). A line matches a rule when it contains the
//! literal; the first matching rule wins. No regex, no dependencies; parsing errors name the line.

use std::fmt;

/// One rule: lines containing `literal` start `stage`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Stage name (snake_case).
    pub stage: String,
    /// Literal substring to look for.
    pub literal: String,
    /// 1-based line number in the rule file.
    pub line: usize,
}

/// A parse error in a rule file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rule file line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for RuleError {}

/// An ordered list of rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    rules: Vec<Rule>,
}

impl Rules {
    /// Parses a rule file.
    pub fn parse(text: &str) -> Result<Rules, RuleError> {
        let mut rules = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |message: String| RuleError { line, message };
            let body = raw.trim_end_matches('\r').trim_start_matches([' ', '\t']);
            if body.is_empty() || body.starts_with('#') {
                continue;
            }
            let split = body.find([' ', '\t']).unwrap_or(body.len());
            let (stage, rest) = body.split_at(split);
            check_stage(stage).map_err(err)?;
            let rest = rest.trim_matches([' ', '\t']);
            if rest.is_empty() {
                return Err(err(format!(
                    "stage `{stage}` has no literal; expected `{stage} <spaces> text to find`"
                )));
            }
            let literal = if rest.starts_with('"') {
                quoted(rest).map_err(err)?
            } else {
                rest.to_string()
            };
            if literal.is_empty() {
                return Err(err("empty literal \"\" would match every line".to_string()));
            }
            rules.push(Rule {
                stage: stage.to_string(),
                literal,
                line,
            });
        }
        Ok(Rules { rules })
    }

    /// The stage of the first rule whose literal `line` contains.
    pub fn classify(&self, line: &str) -> Option<&str> {
        self.rules
            .iter()
            .find(|r| line.contains(r.literal.as_str()))
            .map(|r| r.stage.as_str())
    }

    /// The rules, in file order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True when there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

fn check_stage(stage: &str) -> Result<(), String> {
    let b = stage.as_bytes();
    let ok = b.first().is_some_and(u8::is_ascii_lowercase)
        && b.len() <= 64
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_');
    if ok {
        Ok(())
    } else {
        // The warning quotes the file, which may hold anything (a token pasted by mistake).
        Err(format!(
            "bad stage name `{}`; expected snake_case ([a-z][a-z0-9_]*, at most 64 bytes)",
            crate::redact::text(stage)
        ))
    }
}

/// Reads `"…"` with `\"`, `\\`, `\t` escapes; only a `#` comment may follow it.
fn quoted(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                let tail = s.get(i + 1..).unwrap_or("").trim_start_matches([' ', '\t']);
                if !(tail.is_empty() || tail.starts_with('#')) {
                    let tail = crate::redact::text(tail);
                    return Err(format!("unexpected `{tail}` after the closing quote"));
                }
                return Ok(out);
            }
            '\\' => match chars.next().map(|(_, e)| e) {
                Some('"') => out.push('"'),
                Some('\\') => out.push('\\'),
                Some('t') => out.push('\t'),
                Some(e) => return Err(format!("unknown escape `\\{e}`; use \\\" \\\\ or \\t")),
                None => return Err("unterminated escape at end of line".to_string()),
            },
            c => out.push(c),
        }
    }
    Err("missing closing `\"`".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_classifies() {
        let text = "# rules for tgi\r\n\
                    \n\
                    weight_load\tLoading checkpoint shards\n\
                    kv_pool   \"Allocated KV cache \"  # trailing space kept\n\
                    serving  Connected #1\n";
        let r = Rules::parse(text).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r.rules()[1].literal, "Allocated KV cache ");
        assert_eq!(r.rules()[1].line, 4);
        assert_eq!(r.rules()[2].literal, "Connected #1");
        assert_eq!(
            r.classify("x Loading checkpoint shards: 50%"),
            Some("weight_load")
        );
        assert_eq!(r.classify("Allocated KV cache of 3 GiB"), Some("kv_pool"));
        assert_eq!(r.classify("Allocated KV cache"), None);
        assert_eq!(r.classify(""), None);
        assert!(Rules::parse("").unwrap().is_empty());
    }

    #[test]
    fn first_rule_wins_and_escapes() {
        let r = Rules::parse("a_1 \"say \\\"hi\\\"\\t\\\\\"\nb x\n").unwrap();
        assert_eq!(r.rules()[0].literal, "say \"hi\"\t\\");
        assert_eq!(r.classify("x say \"hi\"\t\\"), Some("a_1"));
    }

    #[test]
    fn errors_name_the_line() {
        let e = Rules::parse("ok x\nBad x\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e
            .to_string()
            .starts_with("rule file line 2: bad stage name `Bad`"));
        assert_eq!(Rules::parse("kv_pool\n").unwrap_err().line, 1);
        assert_eq!(Rules::parse("kv_pool   \t \n").unwrap_err().line, 1);
        assert!(Rules::parse("s \"\"").is_err());
        assert!(Rules::parse("s \"abc").is_err());
        assert!(Rules::parse("s \"abc\" def").is_err());
        assert!(Rules::parse("s \"a\\q\"").is_err());
        assert!(Rules::parse("s \"a\\").is_err());
        assert!(Rules::parse("é x").is_err());
        assert!(Rules::parse("9x x").is_err());
    }
}
