//! Text from a journal never reaches a terminal raw: a stage name, an engine log line, a module
//! path, a host and a command line holding ESC, BEL, CR and a bidi override are shown escaped
//! by `dump --text`, `report`, `diff` and `check` (stdout), and so is a file name quoted on
//! stderr; `report --json` keeps every string exactly as recorded.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::synth::{Synth, GIB, MIB};
use vramledger_format::Owner;

/// Retitles the terminal, clears it, overwrites the line and shows the rest reversed.
const STAGE: &str = "\x1b]0;PWNED\x07\x1b[2Jload\rspoofed\u{202e}gnp";
const STAGE_SHOWN: &str = "\\x1b]0;PWNED\\x07\\x1b[2Jload\\rspoofed\\u{202e}gnp";
const LINE: &str = "Load weight begin. \x1b[8mhidden";
const MODULE: &str = "/x/lib\x1b[31mred\u{202e}os.so";
const MODULE_SHOWN: &str = "lib\\x1b[31mred\\u{202e}os.so";
const HOST: &str = "node\x07\x1b[2J";
const HOST_SHOWN: &str = "node\\x07\\x1b[2J";
const CMDLINE: &str = "python\0-c\0\x1b]0;cmd\x07";
const CMDLINE_SHOWN: &str = "\\x1b]0;cmd\\x07";
/// A journal file whose name would retitle the terminal when quoted in a message.
const FILE: &str = "cut\x1b]0;file\x07\u{202e}.vlj";
const FILE_SHOWN: &str = "cut\\x1b]0;file\\x07\\u{202e}.vlj";

use support::cli;

fn dir(test: &str) -> PathBuf {
    support::fresh_dir("terminal", test)
}

/// A process whose stage, log line, module, host and command line are all hostile; its torch
/// allocation of `kv` bytes is made in that stage.
fn hostile(kv: u64) -> Synth {
    let mut s = Synth::on(4242, "r1", HOST, CMDLINE);
    s.module(1, MODULE);
    s.context(16 * GIB, 512 * MIB);
    let f0 = 16 * GIB - 512 * MIB;
    s.sample(f0);
    s.stage(STAGE, Some(LINE), f0);
    s.alloc(0x7f00_0000_0000, kv, Owner::Torch, 1);
    s.sample(f0 - kv);
    s.stage("serve", None, f0 - kv);
    s
}

/// `vramledger ARGS`: (exit code, stdout, stderr).
fn vl<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (i32, String, String) {
    let out = support::run_within(
        {
            let mut c = Command::new(cli());
            c.args(args);
            c
        },
        20,
    )
    .expect("vramledger hung");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    )
}

/// The first character of `s` that would act on a terminal or reorder its text (the layout's
/// own newlines aside).
fn raw(s: &str) -> Option<(usize, char)> {
    s.char_indices().find(|&(_, c)| {
        (c.is_control() && c != '\n')
            || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    })
}

fn assert_clean(what: &str, out: &str) {
    if let Some((at, c)) = raw(out) {
        panic!("{what}: raw {c:?} at byte {at} in:\n{}", out.escape_debug());
    }
}

fn assert_shows(what: &str, out: &str, shown: &str) {
    assert!(
        out.contains(shown),
        "{what}: no {shown:?} in:\n{}",
        out.escape_debug()
    );
}

/// Two runs, A with 1 GiB and B with 2 GiB in the hostile stage, and a cut-off copy of B
/// under a hostile file name (its damage is said on stderr, quoting the name).
fn runs(d: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (a, b, cut) = (d.join("a"), d.join("b"), d.join("cut"));
    for p in [&a, &b, &cut] {
        std::fs::create_dir_all(p).unwrap();
    }
    hostile(GIB).write(&a.join("p.vlj"));
    let bytes = hostile(2 * GIB).bytes;
    std::fs::write(b.join("p.vlj"), &bytes).unwrap();
    std::fs::write(cut.join(FILE), &bytes[..bytes.len() - 3]).unwrap();
    (a, b, cut)
}

#[test]
fn dump_text_shows_journal_text_escaped() {
    let d = dir("dump");
    let (a, _, cut) = runs(&d);
    let (rc, out, err) = vl(&[
        "dump".as_ref(),
        "--text".as_ref(),
        a.join("p.vlj").as_os_str(),
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_clean("dump --text", &out);
    for shown in [STAGE_SHOWN, MODULE_SHOWN, HOST_SHOWN, CMDLINE_SHOWN] {
        assert_shows("dump --text", &out, shown);
    }
    let (rc, _, err) = vl(&[
        "dump".as_ref(),
        "--text".as_ref(),
        cut.join(FILE).as_os_str(),
    ]);
    assert_eq!(rc, 2);
    assert_clean("dump stderr", &err);
    assert_shows("dump stderr", &err, FILE_SHOWN);
}

#[test]
fn report_text_shows_journal_text_escaped_and_json_keeps_it() {
    let d = dir("report");
    let (a, _, cut) = runs(&d);
    let (rc, out, err) = vl(&["report".as_ref(), a.as_os_str()]);
    assert_eq!(rc, 0, "{err}");
    assert_clean("report", &out);
    assert_clean("report stderr", &err);
    for shown in [STAGE_SHOWN, MODULE_SHOWN, HOST_SHOWN, CMDLINE_SHOWN] {
        assert_shows("report", &out, shown);
    }
    let (rc, out, err) = vl(&["report".as_ref(), cut.as_os_str()]);
    assert_eq!(rc, 2, "{err}");
    assert_clean("report of a cut journal", &out);
    assert_clean("report stderr", &err);
    assert_shows("report stderr", &err, FILE_SHOWN);

    let (rc, json, err) = vl(&["report".as_ref(), "--json".as_ref(), a.as_os_str()]);
    assert_eq!(rc, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let p = &v["processes"][0];
    assert_eq!(p["host"], HOST);
    let stages = p["devices"][0]["stages"].as_array().unwrap();
    assert!(
        stages.iter().any(|s| s["name"] == STAGE),
        "{}",
        json.escape_debug()
    );
    assert!(json.contains(&serde_json::to_string(MODULE.rsplit('/').next().unwrap()).unwrap()));
}

#[test]
fn diff_and_check_show_journal_text_escaped() {
    let d = dir("diff");
    let (a, b, cut) = runs(&d);
    let (rc, out, err) = vl(&["diff".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert_eq!(rc, 0, "{err}");
    assert_clean("diff", &out);
    assert_clean("diff stderr", &err);
    for shown in [STAGE_SHOWN, MODULE_SHOWN] {
        assert_shows("diff", &out, shown);
    }
    let (rc, out, err) = vl(&[
        "check".as_ref(),
        "--baseline".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
    ]);
    assert_eq!(rc, 1, "{err}");
    assert_clean("check", &out);
    assert_clean("check stderr", &err);
    assert_shows("check", &out, STAGE_SHOWN);
    // Damage in the run checked is said on stderr, the file name escaped.
    for verb in ["diff", "check"] {
        let args: Vec<&std::ffi::OsStr> = match verb {
            "diff" => vec!["diff".as_ref(), a.as_os_str(), cut.as_os_str()],
            _ => vec![
                "check".as_ref(),
                "--baseline".as_ref(),
                a.as_os_str(),
                cut.as_os_str(),
            ],
        };
        let (rc, out, err) = vl(&args);
        assert_eq!(rc, 2, "{verb}: {err}");
        assert_clean(verb, &out);
        assert_clean(verb, &err);
        assert_shows(verb, &err, FILE_SHOWN);
    }
}
